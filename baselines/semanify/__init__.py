"""Deterministic verification baselines (methods.md section 4): Semanify-NN-style CROWN, IBP, enumeration."""
