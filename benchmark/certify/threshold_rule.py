"""The per-budget threshold rule of a Monte-Carlo certificate, shared by the defenses that issue it (GSmooth,
TSS on contrast+brightness, SPT) and the audit that recomputes it: budget ``b`` is certified iff the
prediction is not an abstention and the recorded statistic (``p_a_lower`` or its ``margin``
Phi^-1(p_A lower)) is strictly above ``required[repr(b)]``; budget 0 iff the prediction is not an abstention."""
from __future__ import annotations

from benchmark.certify.radii import gaussian_radius

STATISTICS = ("p_a_lower", "margin")


def margin(p_a_lower: float) -> float:
    """Phi^-1(p_A lower), clipped like every radius function (the ``margin`` statistic)."""
    return gaussian_radius(p_a_lower, 1.0)


def record(statistic: str, required: dict[str, float]) -> dict:
    """The ``stats['threshold_rule']`` entry: ``required`` maps ``repr(float(b))`` to the threshold."""
    if statistic not in STATISTICS:
        raise ValueError(f"threshold statistic must be one of {STATISTICS}, got {statistic!r}")
    return {"statistic": statistic, "required": dict(required)}


def value(rule: dict, p_a_lower: float) -> float:
    """The statistic the rule compares with its thresholds."""
    return p_a_lower if rule["statistic"] == "p_a_lower" else margin(p_a_lower)


def certified(rule: dict, p_a_lower: float, abstained: bool, budget: float) -> bool:
    """Whether ``rule`` certifies ``budget`` (its threshold must be recorded for every positive budget)."""
    if abstained:
        return False
    if budget == 0:
        return True
    return value(rule, p_a_lower) > rule["required"][repr(float(budget))]
