"""GSmooth's two certificates for one example, given p_A bounds and the encoder paths.

``sound`` (the headline number; derivation in semantic_noise.py and methods.md section 3):
the real transformation moves the classifier's input from z0 = F2(x) to
F2(tau(xi, x)); the smoothed prediction cannot change while
d(xi) = ||F2(tau(xi, x)) - F2(x)||_{Sigma^-1} < margin, margin = Phi^-1(p_A lower)
(two-class: (Phi^-1(p_A) - Phi^-1(p_B)) / 2). A budget is certified when an *upper bound*
on sup_xi d(xi) over the region is below the margin: exact where the region has finitely
many distinct images (integer translation, pixelate), else the maximum over a cover plus a
Lipschitz slack L * covering_radius.

``paper`` (Corollary 1 of the paper): R = margin / M*, with
M* = max over the region of sqrt(1/s1^2 + ||dF2(y_xi)/dxi - A1||_2^2 / s2^2) along the
*surrogate* path y_xi = H(A1 xi + b1 + F2(x)). It certifies the surrogate transformation,
not the real one, and is reported as ``gsmooth:paper``.

The Lipschitz constants are *estimates*: the larger of the Jacobian norms at the cover
points (forward-mode, exact for small m) and the finite-difference slopes between
neighbouring cover points, times a safety factor. They are recorded with every certificate.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch
from scipy.stats import norm

from baselines.gsmooth.regions import Cover
from baselines.gsmooth.semantic_noise import SemanticNoise
from benchmark.quiet import no_jit_script_deprecation

# theta [k, m] (float64; a path casts to its model's dtype) -> codes [k, n] (flattened)
Path = Callable[[torch.Tensor], torch.Tensor]


def margin(p_a_lower: float, p_b_upper: float | None = None) -> float:
    """Phi^-1(p_A) (single-class) or (Phi^-1(p_A) - Phi^-1(p_B)) / 2; <= 0 means nothing is certified."""
    p_a = min(max(p_a_lower, 0.0), 1 - 1e-15)
    if p_b_upper is None:
        return float(norm.ppf(p_a))
    p_b = min(max(p_b_upper, 1e-15), 1.0)
    return float((norm.ppf(p_a) - norm.ppf(p_b)) / 2)


def jacobian_columns(fn: Path, theta: torch.Tensor, fd_step: float = 1e-4) -> torch.Tensor:
    """d fn / d theta at each row of ``theta [k, m]`` -> ``[k, n, m]`` by m forward-mode JVPs.

    ``fn`` must act row-wise (row i of the output depends only on row i of the input), which holds
    for batched transformations and encoders in eval mode. Where an op has no forward-mode
    derivative in torch (``grid_sample``, used by rotation and zoom), central finite differences
    with step ``fd_step`` are used instead (the JVP test checks both agree on smooth paths).
    """
    cols = []
    for j in range(theta.shape[1]):
        e = torch.zeros_like(theta)
        e[:, j] = 1
        try:
            with no_jit_script_deprecation():  # torch scripts its JVP decompositions on first use
                _, jv = torch.func.jvp(fn, (theta,), (e,))
        except (NotImplementedError, RuntimeError) as exc:
            if "forward AD" not in str(exc) and "forward-mode" not in str(exc) and "jvp" not in str(exc).lower():
                raise
            with torch.no_grad():
                jv = (fn(theta + fd_step * e) - fn(theta - fd_step * e)) / (2 * fd_step)
        cols.append(jv.reshape(theta.shape[0], -1))
    return torch.stack(cols, -1)


def spectral_norms(mats: torch.Tensor) -> torch.Tensor:
    """Largest singular value of each ``[n, m]`` matrix in ``[k, n, m]`` (via the m x m Gram matrix)."""
    gram = mats.transpose(1, 2).to(torch.float64) @ mats.to(torch.float64)
    return torch.linalg.eigvalsh(gram)[:, -1].clamp_min(0).sqrt()


def neighbour_slopes(points: torch.Tensor, values: torch.Tensor, radius: float) -> float:
    """Largest |value_i - value_j| / |p_i - p_j| over pairs of cover points at most 2.01 * radius apart."""
    if len(points) < 2 or radius <= 0:
        return 0.0
    p = points.to(torch.float64)
    dist = torch.cdist(p, p)
    near = (dist > 0) & (dist <= 2.01 * radius * (1 + 1e-9) * max(1.0, p.shape[1] ** 0.5))
    if not near.any():
        return 0.0
    dv = (values[:, None] - values[None, :]).abs().to(torch.float64)
    return float((dv[near] / dist[near]).max())


@dataclass
class SupBound:
    """An upper bound on a supremum over a region: grid maximum + Lipschitz slack (0 when exact).

    With ``early_exit`` the grid maximum alone already reached the caller's threshold (so the
    certificate fails whatever the slack); the slack was not computed and ``value`` is the grid maximum.
    """

    value: float
    grid_max: float
    slack: float
    lipschitz: float
    points: int
    exact: bool
    early_exit: bool = False

    def to_json(self) -> dict:
        return asdict(self)


def _subset_bounds(points: torch.Tensor, values: torch.Tensor, lip: float, rho: float, exact: bool,
                   budgets: list[float], norm_fn: Callable[[torch.Tensor], torch.Tensor]) -> dict[float, SupBound]:
    """Per budget b: max of ``values`` over cover points with norm <= b + rho, plus lip * rho.

    Every parameter xi with ||xi|| <= b has a cover point q with ||q - xi|| <= rho, hence
    ||q|| <= b + rho (also for the l-infinity norm, which is at most the l2 distance): the subset
    still covers the smaller region, so one evaluation of the largest cover serves every budget.
    """
    norms = norm_fn(points.to(torch.float64))
    out = {}
    for b in budgets:
        keep = norms <= b + rho + 1e-9
        grid_max = float(values[keep].max()) if keep.any() else 0.0
        slack = 0.0 if exact else lip * rho
        out[b] = SupBound(grid_max + slack, grid_max, slack, 0.0 if exact else lip, int(keep.sum()), exact)
    return out


def _l2(points: torch.Tensor) -> torch.Tensor:
    return points.norm(dim=-1)


def sup_distances(real_path: Path, z0: torch.Tensor, noise: SemanticNoise, cov: Cover, budgets: list[float],
                  norm_fn: Callable[[torch.Tensor], torch.Tensor] = _l2, safety: float = 2.0,
                  differentiable: bool = True, fd_step: float | None = None,
                  threshold: float | None = None) -> dict[float, SupBound]:
    """Upper bounds on sup ||real_path(xi) - z0||_{Sigma^-1} over the region of each budget (sound certificate).

    ``cov`` covers the largest budget's region; see :func:`_subset_bounds` for the smaller ones.
    If every budget's grid maximum is already >= ``threshold`` (the margin), no certificate can
    succeed and the Jacobians (most of the cost) are skipped.
    """
    pts = cov.points.to(torch.float64)
    with torch.no_grad():
        z = real_path(pts).reshape(len(pts), -1)
    d = noise.mahalanobis(z - z0.reshape(1, -1))
    if threshold is not None and not cov.exact:
        grid = _subset_bounds(cov.points, d, 0.0, cov.covering_radius, True, budgets, norm_fn)
        if all(g.grid_max >= threshold for g in grid.values()):
            return {b: SupBound(g.grid_max, g.grid_max, 0.0, 0.0, g.points, False, True) for b, g in grid.items()}
    lip = 0.0
    if not cov.exact:
        lip = neighbour_slopes(cov.points, d, cov.covering_radius)
        if differentiable:
            step = fd_step or max(cov.covering_radius / 10, 1e-6)
            J = jacobian_columns(real_path, pts.clone(), fd_step=step)  # [k, n, m]
            W = noise.whiten(J.transpose(1, 2)).transpose(1, 2)  # Sigma^{-1/2} J
            lip = max(lip, float(spectral_norms(W).max()))
        lip *= safety
    return _subset_bounds(cov.points, d, lip, cov.covering_radius, cov.exact, budgets, norm_fn)


def sup_distance(real_path: Path, z0: torch.Tensor, noise: SemanticNoise, cov: Cover,
                 safety: float = 2.0, differentiable: bool = True, fd_step: float | None = None) -> SupBound:
    """Upper bound on sup over the whole covered region of ||real_path(xi) - z0||_{Sigma^-1}."""
    return sup_distances(real_path, z0, noise, cov, [float("inf")], safety=safety, differentiable=differentiable,
                         fd_step=fd_step)[float("inf")]


def paper_mstars(surrogate_path: Path, A: torch.Tensor, sigma1: float, sigma2: float, cov: Cover,
                 budgets: list[float], norm_fn: Callable[[torch.Tensor], torch.Tensor] = _l2,
                 safety: float = 2.0) -> dict[float, SupBound]:
    """Upper bounds on M* of Corollary 1 over each budget's region, along the surrogate path."""
    J = jacobian_columns(surrogate_path, cov.points.to(torch.float64))  # [k, n, m]
    resid = spectral_norms(J - A.to(J.dtype)[None])
    M = (1 / sigma1 ** 2 + resid ** 2 / sigma2 ** 2).sqrt()
    lip = safety * neighbour_slopes(cov.points, M, cov.covering_radius)
    return _subset_bounds(cov.points, M, lip, cov.covering_radius, False, budgets, norm_fn)


def paper_mstar(surrogate_path: Path, A: torch.Tensor, sigma1: float, sigma2: float, cov: Cover,
                safety: float = 2.0) -> SupBound:
    """Upper bound on M* over the whole covered region."""
    return paper_mstars(surrogate_path, A, sigma1, sigma2, cov, [float("inf")], safety=safety)[float("inf")]
