"""Sound bounds on the interpolation error of SPT smoothing: for one smoothing parameter beta,
``sup_{|gamma| <= B} ||P(T(T(x, gamma), beta)) - P(T(x, beta + gamma))||_2`` (benchmark/certify/spt_rule.py).

Which bound applies follows from the transformation's capabilities (``method``), never its name:

* integer threat models (``Transformation.integer``; the registry's cyclic shift): for integer gamma,
  ``shift(shift(x, gamma), beta) = shift(x, beta + gamma)`` in exact arithmetic (rolls commute and
  ``floor(beta + gamma) = floor(beta) + gamma``), so the error is float32 round-off only. It is bounded by
  enumerating every integer gamma of the ball (finitely many, so the maximum is exact) for each beta.
* a 1-D parameter that composes by sum with a proven Lipschitz bound in theta
  (``Transformation.parameter_lipschitz``; the registry's rotation: kornia, bilinear, zero padding):
  a Lipschitz grid in gamma, as TSS bounds its slice errors
  (baselines/tss/slicing.py). ``e(gamma) = ||P(A_beta T(x, gamma)) - P(T(x, beta + gamma))||`` with
  ``A_beta`` the (linear, entrywise non-negative) bilinear rotation by beta and P a 0/1 mask, so
  ``|e(g) - e(g')| <= (||A_beta||_2 L_full + L_mask) |g - g'|``, where L_full / L_mask bound
  ``||d/dtheta (mask *) T(x, theta)||`` over ``|theta| <= B`` (L_full: T(x, gamma)) and over
  ``|theta| <= B + max |beta|`` (L_mask: T(x, beta + gamma)) and ``||A_beta||_2 <= sqrt(max row sum * max column sum)`` (Schur's
  test for a non-negative matrix; row sums = ``A_beta 1``, column sums = ``A_beta^T 1`` by autograd). On a
  cell [l, r] an L-Lipschitz e is at most ``(e(l) + e(r)) / 2 + L (r - l) / 2``; the cells cover [-B, B].
  All differences are taken in float64 after float32 evaluation of T (the real transformation's dtype);
  ``FLOAT32_ALLOWANCE`` covers the round-off of the queried images (as in TSS).
Cells are refined (halved) where their bound exceeds the target E while no evaluated point does, up to a
depth (a refined level evaluates only the new midpoints; ``evaluated_points`` in the record counts every grid
point a level's bound used): a beta "passes" only with a proven sup <= E, so counting failures over-counts the true ones.
"""
from __future__ import annotations

import math

import torch

from benchmark.api import FLOAT32_ALLOWANCE, BenchError, Transformation

#: relative margin on the Schur bound of ||A_beta||_2 (float32 row / column sums)
NORM_MARGIN = 1e-4


def method(t: Transformation) -> str | None:
    """How the interpolation error of ``t`` is bounded: "enumeration" (integer threat model, additive, finitely
    many parameters), "lipschitz_grid" (1-D, composes by sum, a proven Lipschitz bound), or None (unsupported)."""
    if t.integer and t.kind == "additive" and t.enumerable:
        return "enumeration"
    if t.dim == 1 and t.composition == "sum" and t.has_parameter_lipschitz:
        return "lipschitz_grid"
    return None


def wrap(t: Transformation, theta: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """Smoothing parameters mapped into the transformation's domain without changing the image: modulo the
    parameter's period into [-p/2, p/2) (angles into [-180, 180), shifts into [-W/2, W/2) x [-H/2, H/2))."""
    period = t.period(shape)
    if period is None:
        raise BenchError(f"spt/{t.name}: the smoothing parameter cannot be wrapped into the domain (no period).")
    p = torch.tensor(period, dtype=theta.dtype, device=theta.device)
    return torch.remainder(theta + p / 2, p) - p / 2


def _operator_norms(t: Transformation, betas: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """Upper bounds on ||A_beta||_2 for each beta (Schur test; see the module docstring)."""
    ones = torch.ones(len(betas), *shape, requires_grad=True)
    out = t.apply(ones, wrap(t, betas, shape))
    row = out.detach().flatten(1).amax(1).double()
    (col,) = torch.autograd.grad(out.sum(), ones)
    colmax = col.flatten(1).amax(1).double()
    return torch.sqrt(row.clamp_min(0) * colmax.clamp_min(0)) * (1 + NORM_MARGIN)


def _errors(t: Transformation, x: torch.Tensor, mask: torch.Tensor, beta: torch.Tensor,
            gammas: torch.Tensor, block: int = 2048) -> torch.Tensor:
    """e(gamma) for every (beta_k, gamma_j): ``[K, J]`` float64, images evaluated as the defense does, about
    ``block`` images per call. The J images T(x, gamma_j) are stacked as the channels of one picture, so each
    beta's composed transformations take one call with one sampling grid (per-call and per-grid work was most
    of the cost of 28 x 28 images); a registry transformation treats channels alike, so these are the same
    images bit for bit (tests/baselines/test_spt.py compares them with one pair per call)."""
    j, shape = len(gammas), x.shape[1:]
    inner = t.apply(x.expand(j, *shape), gammas)  # T(x, gamma_j)  [J, C, H, W]
    stacked = inner.reshape(1, j * shape[0], *shape[1:])
    weight = mask.double()
    out = torch.empty(len(beta), j, dtype=torch.float64)
    step = max(1, block // j)
    for s in range(0, len(beta), step):
        b = beta[s:s + step]  # [G, dim]
        g = len(b)
        composed = t.apply(stacked.expand(g, -1, -1, -1), wrap(t, b, shape)).view(g, j, *shape)
        sums = (b[:, None, :] + gammas[None]).reshape(g * j, -1)
        direct = t.apply(x.expand(g * j, *shape), wrap(t, sums, shape)).view(g, j, *shape)
        diff = composed.double()
        diff -= direct  # in float64 (the float32 operand is widened exactly); in place: this was a third of the cost
        diff *= weight
        out[s:s + g] = diff.flatten(2).norm(dim=2)
    return out


def enumerated_errors(t: Transformation, x: torch.Tensor, mask: torch.Tensor, betas: torch.Tensor,
                       budget: float) -> torch.Tensor:
    """Exact max over the integer parameters of the ball, per beta ``[K]`` (plus the float32 allowance)."""
    gammas = t.enumerate(budget, x.shape).to(x.dtype)
    return _errors(t, x, mask, betas, gammas).amax(1) + FLOAT32_ALLOWANCE


def _refined_errors(t: Transformation, x1: torch.Tensor, mask: torch.Tensor, betas: torch.Tensor,
                    todo: torch.Tensor, grid: torch.Tensor, coarse: torch.Tensor | None,
                    coarse_errs: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor:
    """e at every point of ``grid`` for the betas ``todo``: ``[len(todo), len(grid)]``. A refined grid holds the
    coarser one at its even positions (checked bit for bit, not assumed), whose errors ``coarse_errs`` (rows of
    ``todo``) are reused; only the midpoints are evaluated. e(beta, gamma) of one pair does not depend on the
    other pairs of its batch, so the values are the same as evaluating the whole grid."""
    if coarse is None or len(grid) != 2 * len(coarse) - 1 or not torch.equal(grid[::2], coarse):
        return _errors(t, x1, mask, betas[todo], grid[:, None].to(dtype))
    errs = torch.empty(len(todo), len(grid), dtype=torch.float64)
    errs[:, ::2] = coarse_errs
    errs[:, 1::2] = _errors(t, x1, mask, betas[todo], grid[1::2, None].to(dtype))
    return errs


def lipschitz_sup(t: Transformation, x: torch.Tensor, mask: torch.Tensor, betas: torch.Tensor, budget: float,
                 cells: int, target: float, depth: int = 2) -> tuple[torch.Tensor, dict]:
    """Proven upper bounds on sup_{|gamma| <= budget} e(gamma), per beta ``[K]`` (float64), refined where
    they exceed ``target`` (see the module docstring); plus facts for the record."""
    if cells < 1:
        raise BenchError(f"spt cells must be >= 1, got {cells}.")
    shape = x.shape[1:]
    x1 = x[:1]
    l_full = t.parameter_lipschitz(x1, budget, torch.ones(1, 1, *shape[-2:], dtype=torch.float64))
    l_mask = t.parameter_lipschitz(x1, budget + (float(betas.abs().max()) if len(betas) else 0.0), mask)
    lips = _operator_norms(t, betas, shape) * l_full + l_mask  # [K]
    target = target - FLOAT32_ALLOWANCE  # decisions on the bound before the allowance is added
    sup = torch.full((len(betas),), math.inf, dtype=torch.float64)
    hopeless = torch.zeros(len(betas), dtype=torch.bool)  # an evaluated point already exceeds the target
    todo = torch.arange(len(betas))
    evaluated = 0
    grid, errs = None, None
    for level in range(depth + 1):
        n_cells = cells * 2 ** level
        finer = torch.linspace(-budget, budget, n_cells + 1, dtype=torch.float64)
        errs = _refined_errors(t, x1, mask, betas, todo, finer, grid, errs, x.dtype)  # [k, n_cells+1]
        grid = finer
        evaluated += errs.numel()
        width = 2 * budget / n_cells
        bound = ((errs[:, 1:] + errs[:, :-1]) / 2 + lips[todo, None] * width / 2).amax(1)
        sup[todo] = torch.minimum(sup[todo], bound)  # every level's bound is sound: keep the best
        hopeless[todo] |= errs.amax(1) > target
        keep = (sup[todo] > target) & ~hopeless[todo]
        todo, errs = todo[keep], errs[keep]
        if len(todo) == 0:
            break
    info = {"lipschitz_full": l_full, "lipschitz_mask": l_mask, "cells": cells, "depth": depth,
            "evaluated_points": evaluated, "operator_norm_max": float((lips - l_mask).max() / l_full) if l_full else 0.0}
    return sup + FLOAT32_ALLOWANCE, info


def sup_errors(t: Transformation, x: torch.Tensor, mask: torch.Tensor, betas: torch.Tensor, budget: float,
               cells: int, target: float) -> tuple[torch.Tensor, dict]:
    """Proven per-beta sup of the interpolation error over the attack region of ``budget``."""
    if budget <= 0:
        return torch.zeros(len(betas), dtype=torch.float64), {}
    how = method(t)
    if how == "enumeration":
        return enumerated_errors(t, x, mask, betas, budget), {"method": "enumeration"}
    if how == "lipschitz_grid":
        sup, info = lipschitz_sup(t, x, mask, betas, budget, cells, target)
        return sup, {"method": "lipschitz_grid", **info}
    raise BenchError(f"spt/{t.name}: no bound on its interpolation error (needs an integer threat model or a "
                     "1-D parameter that composes by sum with a Lipschitz bound).")


def failures(sups: torch.Tensor, error: float) -> int:
    """How many betas lack a proof that their sup is <= E."""
    return int((~(sups <= error)).sum())
