"""The radius rule of a Monte-Carlo certificate, shared by the defenses that issue it and the audit that
recomputes it: the radius is ``RADIUS_FUNCTIONS[distribution](p_A lower, scale)`` (0 when abstained or not
positive) and budget ``b`` is certified iff the radius exceeds ``b``.

Floating point: a certificate whose parameter noise was drawn on a grid from fair bits records
``stats['parameter_noise']`` (version 2, ``benchmark.certify.parameter_lattice``); its radius is that module's
rule, which pays the grid and the noise table's error. Without the record (version 1: float64 draws cast to
float32) the exact-arithmetic rule above replays it.
"""
from __future__ import annotations

import math

from benchmark.certify import parameter_lattice
from benchmark.certify.radii import RADIUS_FUNCTIONS


def record(distribution: str, scale: float) -> dict:
    """The ``stats['radius_rule']`` entry that lets the audit recompute the radius from ``p_a_lower``."""
    return {"distribution": distribution, "scale": scale}


def radius(rule: dict, p_a_lower: float, abstained: bool, noise: dict | None = None) -> float:
    """The certified radius of ``rule`` at ``p_a_lower``: never negative or NaN, 0 when abstained; ``noise``: the
    certificate's ``parameter_noise`` record (None: version 1, exact-arithmetic rule)."""
    if abstained:
        return 0.0
    if noise is not None:
        return parameter_lattice.radius(rule["distribution"], float(rule["scale"]), p_a_lower, noise)
    r = RADIUS_FUNCTIONS[rule["distribution"]](p_a_lower, float(rule["scale"]))
    return r if r > 0 and not math.isnan(r) else 0.0
