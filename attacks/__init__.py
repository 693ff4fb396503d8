"""Attacks in transformation-parameter space (worst-of-k, grid) used by the harness."""
