"""Code that several built-in defenses share, beneath them: the smoothing-classifier mix-in
(``noisy_classifier``), the deterministic verifiers' shared defense (``bound_verifier``) and their model
(``verifier_model``). Like the defenses, it imports only the face, ``benchmark.api``."""
