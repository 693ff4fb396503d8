"""Built-in defenses, written against the face of the harness (benchmark/api.py); each package is independent
of the others, and what they share lives beneath them in ``baselines.common``."""
