"""Float32 terms of GSmooth's proven supremum bounds: what the deployed pipeline adds to the exact path.

The proven bounds (certificates.py) are computed in float64 on the exact transformation. Three things
differ in what runs, each bounded here or beside the bound it affects:
* the parameter: ``Transformation.apply`` rounds theta to the image's dtype, |fl32(t) - t| <= U32 |t|,
  so a budget-b region is evaluated as a region scaled by at most 1 + 2 U32 (``REGION_SCALE``; the
  interval bounds use the float32 hull of their cells instead);
* the transformed image: the registry rounds its result to float32 (``photometric_input_deviation``
  here; blur_bound.py for the Gaussian blur; the interval bounds' pixel bounds include it already);
* the encoder's output: the analytic encoders compute in float64 and round once to float32
  (surrogate.ANALYTIC_PRECISION), |fl32(z) - z| <= U32 |z| per coordinate (``output_rounding``).
The noisy code z + eta is not formed in float32: CERTIFY and PREDICT put the float32 code on the lattice of
benchmark/certify/code_noise.py, whose rule pays that grid. The output rounding above stays, because the
lattice quantises the float32 code the encoder returns (the bounded function is its float64 form).
Mahalanobis norms of code-channel vectors use ||v||_{Sigma^-1} <= ||v||_2 / sigma2 (Sigma >= sigma2^2 I);
pose-channel shifts use ||A1 delta||_{Sigma^-1} <= sum_j |delta_j| ||A1 e_j||_{Sigma^-1}.
"""
from __future__ import annotations

import math

import torch

from baselines.gsmooth.pose import S0
from baselines.gsmooth.semantic_noise import SemanticNoise
from benchmark.api import EXP_REL, U32

#: a region scaled by this contains every parameter of the region rounded to float32
REGION_SCALE = 1 + 2 * U32


def output_rounding(z0_norm: float, bound: float, noise: SemanticNoise, sigma2: float) -> float:
    """Mahalanobis bound on rounding both F2(x) and F2(tau(xi, x)) to float32, given ||F2(x)||_2 and a
    bound on their distance: ||z - z0||_2 <= sqrt(lambda_max(Sigma)) ||z - z0||_{Sigma^-1}."""
    if not math.isfinite(bound):
        return 0.0
    a = noise.A.to(torch.float64)
    lam = noise.sigma2 ** 2 + noise.sigma1 ** 2 * float(torch.linalg.eigvalsh(a.T @ a)[-1])
    return U32 * (2 * z0_norm + math.sqrt(lam) * bound) / sigma2


def photometric_input_deviation(kind: str, x: torch.Tensor, vertices: torch.Tensor, per_unit: list[float],
                                sigma2: float) -> float:
    """dev(xi) + dev(0) (Sigma^-1 units): the photometric pose encoder (pose.canonical) on the float32
    image y = tau(theta, x) + e against the exact path, for every theta in the convex hull of ``vertices``.

    Per pixel |e_i| <= rel |y*_i| (the registry's own round-off bound, bounds/photometric.py, doubled
    there), and |y*_i| = e^k |x_i + b| is largest at a vertex (convex in b, increasing in k).
    * brightness (code y - mean y, pose mean y): the code moves by ||e - mean e||_2 <= ||e||_2, the pose
      by |mean e| <= ||e||_1 / N;
    * contrast+brightness (code S0 (y - m)/s, pose (log s, S0 m / s), s the unbiased std): with
      eps2 = ||e||_2, |s - s*| <= eps2 / sqrt(N - 1) and s >= s_lo = e^{k_min} std(x) - eps2 / sqrt(N - 1),
      the code moves by at most 2 S0 eps2 / s_lo, log s by eps2 / (sqrt(N - 1) s_lo) and S0 m / s by
      S0 (eps1 / (N s_lo) + |m*| eps2 / (sqrt(N - 1) s_lo^2)).
    z0 = F2(x) is computed from x itself (no rounding of the input): dev(0) = 0.
    """
    x64 = x.detach().to("cpu", torch.float64).flatten()
    n = x64.numel()
    v = vertices.to(torch.float64) * REGION_SCALE
    if kind == "mean":
        rel = 2 * U32
        top = (x64[None].abs() + v[:, :1].abs()).amax(0)  # max over vertices of |x + b|
        eps2, eps1 = rel * float(top.norm()), rel * float(top.sum())
        return math.hypot(eps2 / sigma2, eps1 / n * per_unit[0])
    if kind == "mean_std":
        rel = 2 * (EXP_REL + 2 * U32)
        k, b = v[:, 0], v[:, 1]
        top = (torch.exp(k)[:, None] * (x64[None] + b[:, None]).abs()).amax(0)
        eps2, eps1 = rel * float(top.norm()), rel * float(top.sum())
        s_lo = math.exp(float(k.min())) * float(x64.std()) - eps2 / math.sqrt(n - 1)
        if s_lo <= 1e-6:  # the encoder's clamp could engage: not proven
            return math.inf
        m_top = float((torch.exp(k) * (x64.mean() + b).abs()).max())
        code = 2 * S0 * eps2 / s_lo
        log_s = eps2 / (math.sqrt(n - 1) * s_lo)
        shift = S0 * (eps1 / (n * s_lo) + m_top * eps2 / (math.sqrt(n - 1) * s_lo ** 2))
        return math.hypot(code / sigma2, log_s * per_unit[0] + shift * per_unit[1])
    raise ValueError(f"no photometric rounding bound for {kind!r}")
