"""Deterministic verification shared by the verifier defenses and the audit that re-checks their proofs: CNN
bound propagation (IBP, CROWN, DeepG-style linear relaxations) and the outward sub-interval search."""
