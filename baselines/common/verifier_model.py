"""The classifier of the deterministic verifiers.

``verifier_spec``: what semanify, interval, deepg and enumeration verify, the suite's CNN trained as
the ``vanilla`` defense (same ModelSpec, so the same checkpoint): the table then compares every
defense on one architecture. Bound propagation on it: baselines/deepg/.
"""
from __future__ import annotations

from benchmark.api import Context, ModelSpec, classifier_spec


def verifier_spec(ctx: Context) -> ModelSpec:
    """The suite's CNN as trained for the ``vanilla`` defense (identical spec, hence the same zoo model)."""
    return classifier_spec(ctx, "vanilla", {"name": "none"}, None)
