"""The slice rule of TSS-style interval certification, shared by the defense that issues it
(``baselines/tss``) and the audit that recomputes it.

The budget interval [-B, B] is cut into ``slices`` slices of width w = 2B / slices; each endpoint i (at
theta = -B + i w) is smoothed on its own and certified iff ``sigma Phi^-1(p_A lower)`` exceeds the endpoint's
interpolation bound M_i. A certified endpoint covers half a slice on each side, so the claim is the
contiguous run of certified endpoints around the centre: in each direction ``k w + w/2`` for k certified
neighbours (capped at B), and the smaller of the two directions.
"""
from __future__ import annotations

from collections.abc import Mapping

from scipy.stats import norm

from benchmark.certify.threshold_rule import margin


def endpoint_radius(p_a_lower: float, sigma: float) -> float:
    """The endpoint's certified l2 radius ``sigma Phi^-1(p_A lower)`` (0 when p_A lower <= 1/2)."""
    return sigma * margin(p_a_lower) if p_a_lower > 0.5 else 0.0


def endpoint_certified(p_a_lower: float, sigma: float, bound: float) -> bool:
    """An endpoint is certified iff its radius strictly exceeds its interpolation bound."""
    return p_a_lower > 0.5 and endpoint_radius(p_a_lower, sigma) > bound


def endpoint_threshold(bound: float, sigma: float) -> float:
    """The p_A threshold equivalent to ``endpoint_certified`` (tells the sequential rule when to stop)."""
    return float(norm.cdf(bound / sigma))


def coverage(ok: Mapping[int, bool], centre: int, width: float, limit: float) -> float:
    """Extent of the contiguous run of certified endpoints around ``centre`` (the smaller direction), capped at
    ``limit``; 0 when the centre is not certified or there is a single endpoint (no budget)."""
    if not ok.get(centre) or not width:
        return 0.0
    extents = []
    for step in (1, -1):
        k = 0
        while ok.get(centre + (k + 1) * step):
            k += 1
        extents.append(min(k * width + width / 2, limit))
    return min(extents)
