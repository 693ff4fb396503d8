"""The distribution of GSmooth's transformation noise theta (for the paper's Fig. 3 ablation).

The headline GSmooth draws theta ~ N(0, sigma1^2) and certifies with the joint Mahalanobis argument
(certificates.py). For a non-Gaussian theta (uniform or Laplace, i.e. two-sided exponential, of the
same variance sigma1^2; one-dimensional parameters only) the joint noise A1 theta + theta' is no
longer Gaussian, and we certify in two steps (derived here, sound for the real transformation):

Let v = F2(tau(xi, x)) - F2(x) be the real shift in the semantic layer and split it as
v = A1 a + w with a = xi (the resolvable part) and w = v - A1 xi (the residual). Write
F(a, w) = P[f(H(F2(x) + A1 (theta + a) + theta' + w)) = A].
1. Gaussian step in w (a = 0): w -> F(0, w) is Gaussian smoothing (theta' ~ N(0, sigma2^2 I)) of a
   [0,1]-valued function, so Phi^-1(F(0, w)) >= Phi^-1(p_A) - ||w|| / sigma2 (Salman et al. 2019).
2. theta step in a (w fixed): a -> F(a, w) is D-smoothing of a [0,1]-valued function of theta, so by
   Neyman-Pearson it stays above 1/2 while |a| < R_D(F(0, w)), R_D the single-class radius of D,
   computed by the general formula R = 1/2 integral dp / Phi(p) (benchmark/certify/general_radius.py).
Hence the prediction is certified on the budget region when R_D(Phi(margin - S_b)) > b, with S_b an
upper bound on sup_xi ||w(xi)|| / sigma2 over the region (grid plus Lipschitz slack, as for the
Mahalanobis sup) and b the largest |xi|. For Gaussian D this is weaker than the joint certificate.
"""
from __future__ import annotations

import math

import torch
from scipy.stats import norm

from benchmark.api import general_radius

#: name -> scale of the distribution with variance sigma1^2 (as a multiple of sigma1)
THETA_NOISES = {"gaussian": 1.0, "uniform": math.sqrt(3.0), "laplace": 1.0 / math.sqrt(2.0)}


def margin_to_p(m: float) -> float:
    """Phi(m): the probability lower bound that a margin m in standard-normal units stands for."""
    return float(norm.cdf(m))


class ThetaNoise:
    """theta ~ D(0, sigma1^2): Gaussian N(0, s^2), uniform U[-sqrt3 s, sqrt3 s] or Laplace(s / sqrt2)."""

    def __init__(self, kind: str, sigma1: float):
        if kind not in THETA_NOISES:
            raise ValueError(f"theta noise must be one of {list(THETA_NOISES)}, got {kind!r}")
        self.kind, self.sigma1 = kind, float(sigma1)
        self.scale = THETA_NOISES[kind] * self.sigma1
        self._required: dict[float, float] = {}

    def sample(self, k: int, m: int, generator: torch.Generator) -> torch.Tensor:
        """``k`` draws of theta [k, m] (float32) from ``generator``."""
        if self.kind == "gaussian":
            return torch.randn(k, m, generator=generator) * self.sigma1
        u = torch.rand(k, m, generator=generator, dtype=torch.float64)
        if self.kind == "uniform":
            return ((2 * u - 1) * self.scale).float()
        # Laplace by the inverse CDF: u - 1/2 in (-1/2, 1/2)
        c = u - 0.5
        return (-self.scale * torch.sign(c) * torch.log1p(-(2 * c.abs()).clamp_max(1 - 1e-16))).float()

    def radius(self, p_a: float) -> float:
        """Single-class radius of D for a probability lower bound ``p_a`` (0 if p_a <= 1/2)."""
        if p_a <= 0.5:
            return 0.0
        return general_radius(p_a, None, self.kind, self.scale)

    def required_margin(self, budget: float, tol: float = 1e-10) -> float:
        """The smallest margin m (up to ``tol``, rounded up: conservative) with R_D(Phi(m)) > ``budget``."""
        if budget not in self._required:
            lo, hi = 0.0, 1.0
            while self.radius(margin_to_p(hi)) <= budget and hi < 40:
                lo, hi = hi, 2 * hi
            while hi - lo > tol:
                mid = (lo + hi) / 2
                lo, hi = (lo, mid) if self.radius(margin_to_p(mid)) > budget else (mid, hi)
            self._required[budget] = hi
        return self._required[budget]

    def describe(self) -> dict:
        return {"kind": self.kind, "sigma1": self.sigma1, "scale": self.scale}
