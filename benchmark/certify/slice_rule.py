"""The slice rule of TSS-style interval certification, shared by the defense that issues it
(``baselines/tss``) and the audit that recomputes it.

The budget interval [-B, B] is cut into ``slices`` slices of width w = 2B / slices; each endpoint i (at
theta = -B + i w) is smoothed on its own and certified iff ``sigma Phi^-1(p_A lower)`` exceeds the endpoint's
interpolation bound M_i. A certified endpoint covers half a slice on each side, so the claim is the
contiguous run of certified endpoints around the centre: in each direction ``k w + w/2`` for k certified
neighbours (capped at B), and the smaller of the two directions.

Floating point (``grid_dim``): an endpoint smoothed with the harness's lattice pixel noise
(``benchmark.certify.lattice_noise``: the endpoint image and every attacked image quantised to the grid Q,
integer noise from fair bits, exact float32 samples) is certified iff ``Phi^-1(p_A lower)`` exceeds
``lattice_noise.required_margin(M_i, sigma, d)``: the interpolation bound M_i plus ``sqrt(d) Q`` for the two
quantisations, with the noise table's error paid on both sides. ``grid_dim=None`` is the exact-arithmetic
rule of records made before the lattice noise (version 1), kept so that they can be replayed.
"""
from __future__ import annotations

from collections.abc import Mapping

from scipy.stats import norm

from benchmark.certify import lattice_noise
from benchmark.certify.threshold_rule import margin


def endpoint_radius(p_a_lower: float, sigma: float) -> float:
    """The endpoint's certified l2 radius ``sigma Phi^-1(p_A lower)`` (0 when p_A lower <= 1/2)."""
    return sigma * margin(p_a_lower) if p_a_lower > 0.5 else 0.0


def endpoint_certified(p_a_lower: float, sigma: float, bound: float, grid_dim: int | None = None) -> bool:
    """An endpoint is certified iff its radius strictly exceeds its interpolation bound (``grid_dim``: the
    number of pixels of the lattice noise, whose grid and table error the bound then pays; see above)."""
    if grid_dim is None:
        return p_a_lower > 0.5 and endpoint_radius(p_a_lower, sigma) > bound
    return p_a_lower > 0.5 and margin(p_a_lower) > lattice_noise.required_margin(bound, sigma, grid_dim)


def endpoint_threshold(bound: float, sigma: float, grid_dim: int | None = None) -> float:
    """The p_A threshold equivalent to ``endpoint_certified`` (tells the sequential rule when to stop)."""
    if grid_dim is None:
        return float(norm.cdf(bound / sigma))
    return min(1.0, float(norm.cdf(lattice_noise.required_margin(bound, sigma, grid_dim))))


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
