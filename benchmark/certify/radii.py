"""Certified radii of smoothed classifiers for the smoothing distributions we use.

Each function maps a lower bound p_A on the top-class probability (and, where
the two-class form is used, an upper bound p_B on the runner-up) to the radius
of the region of parameter shifts delta for which the smoothed prediction
provably stays the same. A non-positive result means "not certified"; callers
treat it as radius 0. Each is derived by the Neyman-Pearson argument for the
distribution and is tested against a numerical Neyman-Pearson computation.
"""
from __future__ import annotations

import math
from collections.abc import Callable

from scipy.special import ndtri

# Phi^{-1} is clipped here: p_A = 1 would give an infinite radius, which a
# finite Monte-Carlo sample can never justify (the Clopper-Pearson bound is < 1
# anyway, this only guards against round-off).
_P_MAX = 1.0 - 1e-15


def _ppf(p: float) -> float:
    """Phi^-1 of the clipped ``p``: ``ndtri``, the function ``norm.ppf`` evaluates (bit for bit, sign of zero
    included), without its per-call argument handling, which was an eighth of replaying a TSS entry."""
    return float(ndtri(min(max(p, 0.0), _P_MAX)))


def gaussian_radius(p_a: float, sigma: float, p_b: float | None = None) -> float:
    """Isotropic Gaussian N(0, sigma^2 I) smoothing, l2 radius (Cohen et al. 2019).

    Single-class form sigma * Phi^-1(p_A) when p_b is None, otherwise
    sigma/2 * (Phi^-1(p_A) - Phi^-1(p_B)).
    """
    if p_b is None:
        return sigma * _ppf(p_a)
    return sigma / 2 * (_ppf(p_a) - _ppf(p_b))


def uniform_radius(p_a: float, lam: float) -> float:
    """Uniform U[0, lam] smoothing of a one-sided additive parameter: lam * (p_A - 1/2)."""
    return lam * (p_a - 0.5)


def exponential_radius(p_a: float, lam: float) -> float:
    """Exponential smoothing with mean lam of a one-sided additive parameter: -lam * ln(2 - 2 p_A)."""
    if p_a <= 0.5:
        return 0.0
    if p_a >= 1.0:
        return math.inf
    return -lam * math.log(2.0 - 2.0 * p_a)


def folded_gaussian_radius(p_a: float, sigma: float) -> float:
    """Folded Gaussian |N(0, sigma^2)| smoothing of a one-sided parameter.

    sigma * (Phi^-1(1/2 + p_A/2) - Phi^-1(3/4)).
    """
    return sigma * (_ppf(0.5 + p_a / 2) - _ppf(0.75))


RADIUS_FUNCTIONS = {
    "gaussian": gaussian_radius,
    "uniform": uniform_radius,
    "exponential": exponential_radius,
    "folded_gaussian": folded_gaussian_radius,
}


def radius_threshold(radius: Callable[[float], float], budget: float, iters: int = 64) -> float:
    """The decision threshold on p_A of a budget: ``p_A_lower > tau`` iff ``radius(p_A_lower) > budget``.

    For a radius non-decreasing in p_A with radius(1/2) <= 0, tau = sup{p : radius(p) <= budget}, found by
    bisection on [1/2, 1] (to float round-off; 1 when no p_A < 1 reaches the budget). Thresholds only tell
    the sequential CERTIFY when a decision is known; certificates still compare radius(p_A_lower) with b.
    """
    lo, hi = 0.5, _P_MAX
    if budget < 0 or not radius(lo) <= budget:
        return lo
    if not radius(hi) > budget:
        return 1.0
    for _ in range(iters):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if radius(mid) > budget else (mid, hi)
    return lo
