"""GSmooth's two certificates for one example, given p_A bounds and the encoder paths.

``sound`` (the headline number; derivation in semantic_noise.py):
the real transformation moves the classifier's input from z0 = F2(x) to
F2(tau(xi, x)); the smoothed prediction cannot change while
d(xi) = ||F2(tau(xi, x)) - F2(x)||_{Sigma^-1} < margin, margin = Phi^-1(p_A lower)
(two-class: (Phi^-1(p_A) - Phi^-1(p_B)) / 2). A budget is certified when an *upper bound*
on sup_xi d(xi) over the region is below the margin: exact where the region has finitely
many distinct images (integer translation, pixelate), else the maximum over a cover plus a
Lipschitz slack L * covering_radius. That is exact arithmetic; the noise CERTIFY draws is the lattice
code noise (benchmark/certify/code_noise.py), whose rule ``code_noise.required_margin`` adds the grid's
cost and the noise table's error to the bound before comparing (the defense records both).

``paper`` (Corollary 1 of the paper): R = margin / M*, with
M* = max over the region of sqrt(1/s1^2 + ||dF2(y_xi)/dxi - A1||_2^2 / s2^2) along the
*surrogate* path y_xi = H(A1 xi + b1 + F2(x)). It certifies the surrogate transformation,
not the real one, and is reported as ``gsmooth:paper``.

How the supremum is bounded is recorded with every bound (``SupBound.method``):
* ``exact``: the region has finitely many distinct images (integer translation, pixelate); all
  are evaluated;
* ``closed-form``: the encoder makes F2(tau(xi, x)) - F2(x) an exact linear function of xi
  (photometric pose encoders, pose.py), so d is a norm of a linear map, convex, and its supremum
  over the (convex, polygonal) region is attained at a vertex: the vertices are evaluated in float64;
* ``interval``: the transformation's sound per-pixel bounds over parameter cells
  (``Transformation.pixel_bounds``) are pushed through a linear monotone encoder (lowpass), which
  bounds the code over each cell; cells that fail are bisected;
* ``estimated``: a cover maximum plus a Lipschitz slack whose constant is an *estimate* (the
  larger of the Jacobian norms at the cover points and the finite-difference slopes between
  neighbouring points, times a safety factor). Not a proof: certificates relying on it are
  reported separately (``gsmooth:estimated``) and never in the headline ``gsmooth`` column.
Every proven bound adds ``FLOAT_SLACK`` for the float64 round-off of its own evaluation; the float32
round-off of the deployed pipeline (the transformed image, the encoder's output) is bounded explicitly
and added by the defense (suprema.py, rounding.py, blur_bound.py).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch
from scipy.stats import norm

from baselines.gsmooth.regions import Cover
from baselines.gsmooth.semantic_noise import SemanticNoise
from benchmark.api import threshold_rule

# theta [k, m] (float64; a path casts to its model's dtype) -> codes [k, n] (flattened)
Path = Callable[[torch.Tensor], torch.Tensor]

#: added to every proven bound (Sigma^-1 units): the float64 round-off of evaluating the bound itself
#: (~1e-12 here; generous). The deployed float32 pipeline's round-off is bounded explicitly (rounding.py).
FLOAT_SLACK = 1e-3


def margin(p_a_lower: float, p_b_upper: float | None = None) -> float:
    """Phi^-1(p_A) (single-class) or (Phi^-1(p_A) - Phi^-1(p_B)) / 2; <= 0 means nothing is certified."""
    if p_b_upper is None:
        return threshold_rule.margin(p_a_lower)
    p_a = min(max(p_a_lower, 0.0), 1 - 1e-15)
    p_b = min(max(p_b_upper, 1e-15), 1.0)
    return float((norm.ppf(p_a) - norm.ppf(p_b)) / 2)


#: autograd nodes of the ops on GSmooth's paths that torch (2.14) differentiates in reverse mode only, without a
#: forward-mode derivative (rotation, scaling and the zoom / rotational blurs resample through ``grid_sample``).
#: A path through one takes finite differences (tests/baselines/gsmooth/test_gsmooth_certificates.py checks this
#: set against ``torch.func.jvp`` on every transformation's paths).
NO_FORWARD_AD = frozenset({"GridSampler2DBackward0", "GridSampler3DBackward0"})


def _graph_nodes(y: torch.Tensor) -> set[str]:
    """Names of the autograd nodes ``y`` was computed through."""
    seen, names, todo = set(), set(), [y.grad_fn]
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        names.add(node.name())
        todo.extend(nxt for nxt, _ in node.next_functions)
    return names


def jacobian_columns(fn: Path, theta: torch.Tensor, fd_step: float = 1e-4) -> torch.Tensor:
    """d fn / d theta at each row of ``theta [k, m]`` -> ``[k, n, m]``, one Jacobian-vector product per column.

    ``fn`` must act row-wise (row i of the output depends only on row i of the input), which holds
    for batched transformations and encoders in eval mode. The products are exact (by AD) where every op
    of the path has a forward-mode derivative in torch, and central finite differences with step
    ``fd_step`` where one has not (``NO_FORWARD_AD``: ``grid_sample``, used by rotation and zoom).

    The exact products come from reverse mode twice (the double-backward trick: J v = d/du <J^T u, v>), not
    from ``torch.func.jvp``: forward mode runs binary ops with a Python scalar through torch's Python
    references, whose first call imports ``torch._dynamo`` with sympy and triton (+120 MB resident per
    worker, the run's largest process). Both are exact derivatives; they differ by float32 round-off.
    """
    theta = theta.detach().requires_grad_(True)
    with torch.enable_grad():
        y = fn(theta)
    zeros = torch.zeros(*y.reshape(theta.shape[0], -1).shape, theta.shape[1], dtype=y.dtype, device=y.device)
    if not y.requires_grad:  # no derivative flows from theta (forward mode's tangents would be zero)
        return zeros
    units = [torch.zeros_like(theta).index_fill_(1, torch.tensor([j], device=theta.device), 1.0) for j in range(theta.shape[1])]
    if NO_FORWARD_AD & _graph_nodes(y):
        with torch.no_grad():
            return torch.stack([((fn(theta + fd_step * e) - fn(theta - fd_step * e)) / (2 * fd_step))
                                .reshape(theta.shape[0], -1) for e in units], -1)
    u = torch.zeros_like(y, requires_grad=True)
    (vjp,) = torch.autograd.grad(y, theta, u, create_graph=True, allow_unused=True)  # J^T u, linear in u
    if vjp is None or not vjp.requires_grad:  # theta does not reach y through differentiable ops
        return zeros
    cols = []
    for j, e in enumerate(units):
        (jv,) = torch.autograd.grad(vjp, u, e, retain_graph=j + 1 < len(units), allow_unused=True)
        cols.append(zeros[..., j] if jv is None else jv.reshape(theta.shape[0], -1))
    return torch.stack(cols, -1).detach()


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
    method: str = "estimated"  # exact | closed-form | interval | estimated (see the module docstring)

    @property
    def proven(self) -> bool:
        return self.method != "estimated"

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
        slack = FLOAT_SLACK if exact else lip * rho
        out[b] = SupBound(grid_max + slack, grid_max, slack, 0.0 if exact else lip, int(keep.sum()), exact,
                          method="exact" if exact else "estimated")
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


def vertex_sup(real_path: Path, z0: torch.Tensor, noise: SemanticNoise, vertices: dict[float, torch.Tensor]) -> dict[float, SupBound]:
    """Closed-form bound when xi -> F2(tau(xi, x)) - F2(x) is exactly linear: the max over each region's vertices.

    ``vertices[b]`` are the vertices of budget b's (convex, polygonal) region; ``real_path`` and
    ``z0`` must be float64 evaluations of the same encoder (see the module docstring).
    """
    out = {}
    for b, pts in vertices.items():
        with torch.no_grad():
            d = noise.mahalanobis(real_path(pts.to(torch.float64)) - z0.reshape(1, -1))
        top = float(d.max())
        out[b] = SupBound(top + FLOAT_SLACK, top, FLOAT_SLACK, 0.0, len(pts), True, method="closed-form")
    return out


def refine_cells(cell_bound: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], c_lo: torch.Tensor,
                 c_hi: torch.Tensor, threshold: float, refinements: int = 3,
                 point_value: Callable[[torch.Tensor], torch.Tensor] | None = None,
                 values: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(cells' lower ends, upper ends, bounds) after bounding the cells [c_lo, c_hi] (1-D, float64) and bisecting
    those whose bound reaches ``threshold`` up to ``refinements`` times, except where ``point_value`` (d at the
    cell's midpoint) already reaches it (see :func:`interval_sup`). The cells still cover the cells given.
    ``values``: the cells' bounds already computed by ``cell_bound`` (a second pass at a lower threshold)."""
    def bound(a: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return cell_bound(a[:, None], c[:, None]).to(torch.float64)

    vals = bound(c_lo, c_hi) if values is None else values
    hopeless = torch.zeros_like(vals, dtype=torch.bool)
    for _ in range(refinements):
        bad = (vals >= threshold) & ~hopeless
        if point_value is not None and bad.any():
            mids = (c_lo[bad] + c_hi[bad]) / 2
            idx = bad.nonzero().flatten()
            hopeless[idx[point_value(mids[:, None]).to(torch.float64) >= threshold]] = True
            bad &= ~hopeless
        if not bad.any():
            break
        keep, b_lo, b_hi = ~bad, c_lo[bad], c_hi[bad]
        mid = (b_lo + b_hi) / 2
        halves_lo, halves_hi = torch.cat([b_lo, mid]), torch.cat([mid, b_hi])
        vals = torch.cat([vals[keep], bound(halves_lo, halves_hi)])  # both halves of every bad cell, one call
        c_lo, c_hi = torch.cat([c_lo[keep], halves_lo]), torch.cat([c_hi[keep], halves_hi])
        hopeless = torch.cat([hopeless[keep], torch.zeros(len(halves_lo), dtype=torch.bool)])
    return c_lo, c_hi, vals


def interval_sup(cell_bound: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], lo: float, budgets: list[float],
                 cells: int, threshold: float, refinements: int = 3,
                 point_value: Callable[[torch.Tensor], torch.Tensor] | None = None,
                 mirrored: bool = False) -> dict[float, SupBound]:
    """Proven bound on sup d over [lo, b] for each budget b (one parameter), from a bound per cell.

    ``cell_bound(theta_lo, theta_hi)`` ([K, 1] each) returns sound upper bounds [K] on d(xi) for every
    xi in each cell (e.g. :func:`code_cell_bound`, or pose_bounds.pose_cell_distance). Budgets are cell
    boundaries, so each budget's region is exactly a union of cells. Cells whose bound reaches
    ``threshold`` are bisected up to ``refinements`` times (smaller cells, tighter boxes), except those
    where ``point_value`` (d at the cell's midpoint, if given) already reaches it: no bound below the
    threshold exists there, so refining them is wasted work.

    ``mirrored`` (with ``lo = 0``): the region of b is [-b, b], covered by the cells of [0, b] and their
    mirror images (each cell of [-b, 0] is exactly the negation of one of [0, b]). Both sides are bounded,
    refined and point-checked in the same calls: the same cells and bounds as two one-sided calls, in one
    call per round instead of four (a call of the pose bounds costs ~10-15 ms besides 1-2 ms per cell; the
    pose bounds of a rotation took ~4 % less time).
    """
    edges = sorted({float(lo), *[float(b) for b in budgets]})
    per = max(1, cells // max(len(edges) - 1, 1))
    parts = [torch.linspace(a, c, per + 1, dtype=torch.float64) for a, c in zip(edges[:-1], edges[1:])]
    c_lo, c_hi = torch.cat([e[:-1] for e in parts]), torch.cat([e[1:] for e in parts])
    if mirrored:
        if float(lo) != 0.0:
            raise ValueError(f"interval_sup: a mirrored region needs lo = 0, got {lo}.")
        c_lo, c_hi = torch.cat([c_lo, -c_hi]), torch.cat([c_hi, -c_lo])

    c_lo, c_hi, vals = refine_cells(cell_bound, c_lo, c_hi, threshold, refinements, point_value)
    out = {}
    for b in budgets:
        keep = c_hi <= float(b) + 1e-12
        if mirrored:
            keep &= c_lo >= -float(b) - 1e-12
        top = float(vals[keep].max()) if keep.any() else 0.0
        out[b] = SupBound(top + FLOAT_SLACK, top, FLOAT_SLACK, 0.0, int(keep.sum()), False, method="interval")
    return out


def code_cell_bound(code_bounds: Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]],
                    z0: torch.Tensor, sigma2: float) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """Cell bound for an encoder whose parameter channels do not move (lowpass): from sound bounds
    ``[K, n]`` on the code over each cell, ||F2(tau(xi, x)) - z0||_{Sigma^-1} <= ||max(|hi - z0|, |lo - z0|)||_2
    / sigma2, since ``z0`` and the bounds cover only the code channels, where Sigma = sigma2^2 I. ``z0`` is one
    reference code ``[n]`` or one per cell ``[K, n]`` (the sliced certificate's endpoints)."""
    z0 = (z0.reshape(1, -1) if z0.dim() == 1 else z0).to(torch.float64)

    def bound(theta_lo: torch.Tensor, theta_hi: torch.Tensor) -> torch.Tensor:
        blo, bhi = code_bounds(theta_lo, theta_hi)
        dev = torch.maximum((bhi.to(torch.float64) - z0).abs(), (z0 - blo.to(torch.float64)).abs())
        return dev.norm(dim=1) / sigma2

    return bound
