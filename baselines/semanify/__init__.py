"""Deterministic verification baselines (README, "Defenses"): Semanify-NN-style CROWN, IBP, enumeration."""
