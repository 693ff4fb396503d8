"""The radius rule of a Monte-Carlo certificate, shared by the defenses that issue it and the audit that
recomputes it: the radius is ``RADIUS_FUNCTIONS[distribution](p_A lower, scale)`` (0 when abstained or not
positive) and budget ``b`` is certified iff the radius exceeds ``b``."""
from __future__ import annotations

import math

from benchmark.certify.radii import RADIUS_FUNCTIONS


def record(distribution: str, scale: float) -> dict:
    """The ``stats['radius_rule']`` entry that lets the audit recompute the radius from ``p_a_lower``."""
    return {"distribution": distribution, "scale": scale}


def radius(rule: dict, p_a_lower: float, abstained: bool) -> float:
    """The certified radius of ``rule`` at ``p_a_lower``: never negative or NaN, 0 when abstained."""
    if abstained:
        return 0.0
    r = RADIUS_FUNCTIONS[rule["distribution"]](p_a_lower, float(rule["scale"]))
    return r if r > 0 and not math.isnan(r) else 0.0
