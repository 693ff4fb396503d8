"""The general smoothing radius R = 1/2 * integral_{p_B}^{p_A} dp / Phi(p) (Yang et al. 2020; GSmooth Theorem 1).

For a noise density g = exp(-psi), Phi(p) is the largest expected directional derivative of psi on the
top-p tail (GSmooth eq. 2). For the symmetric one-dimensional families used in the ablations it has a
closed form, and the integral reproduces the classical radii, which the tests check:

* Gaussian N(0, s^2): Phi(p) = phi(Phi_N^-1(p)) / s          -> R = s/2 (Phi^-1(p_A) - Phi^-1(p_B))
* uniform U[-l, l]:   Phi(p) = 1 / (2 l)                      -> R = l (p_A - p_B)
* Laplace(b) (two-sided exponential): Phi(p) = min(p, 1-p)/b  -> R = -b ln(2 - 2 p_A) when p_B = 1 - p_A

The integral is evaluated numerically (scipy's adaptive quadrature), so a new family only needs its Phi.
"""
from __future__ import annotations

import math
from collections.abc import Callable

from scipy.integrate import quad
from scipy.stats import norm

from benchmark.errors import BenchError, unknown_name

_EPS = 1e-15


def phi_function(distribution: str, scale: float) -> Callable[[float], float]:
    """Phi(p) of a symmetric 1-D smoothing distribution with the given scale."""
    if not scale > 0:
        raise BenchError(f"smoothing scale must be positive, got {scale}.")
    if distribution == "gaussian":
        return lambda p: float(norm.pdf(norm.ppf(p))) / scale
    if distribution == "uniform":
        return lambda p: 1.0 / (2.0 * scale)
    if distribution == "laplace":
        return lambda p: min(p, 1.0 - p) / scale
    raise unknown_name("smoothing distribution", distribution, ["gaussian", "uniform", "laplace"])


def general_radius(p_a: float, p_b: float | None, distribution: str, scale: float) -> float:
    """R = 1/2 * integral_{p_B}^{p_A} dp / Phi(p); p_B = 1 - p_A when None. Non-positive = not certified."""
    p_b = 1.0 - p_a if p_b is None else p_b
    if p_a <= p_b:
        return 0.0
    lo, hi = max(p_b, _EPS), min(p_a, 1.0 - _EPS)
    phi = phi_function(distribution, scale)
    # split at 1/2 where the Laplace Phi has its kink, for an accurate quadrature
    pts = [lo, *([0.5] if lo < 0.5 < hi else []), hi]
    total = sum(quad(lambda p: 1.0 / phi(p), a, b, limit=200)[0] for a, b in zip(pts, pts[1:]))
    return 0.5 * total if math.isfinite(total) else math.inf
