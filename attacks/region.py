"""The attack region of a budget: the norm ball (or its non-negative part), intersected with the domain.

Shared by the parameter-space attacks so that all of them search exactly the same set:

* two-sided transformations: ``{theta : ||theta||_norm <= budget}``;
* one-sided transformations (blur strength, zoom ...): the same ball restricted to ``theta >= 0``;
* both intersected with the parameter domain ``[low, high]``;
* integer threat models (``Transformation.integer``; translation: the certificates of cyclic-shift
  smoothing hold for integer shifts) only contain the integer points of that set.
"""
from __future__ import annotations

import math

import torch

from benchmark.api import BenchError, Transformation

#: relative tolerance of membership tests (float32 rounding of a projected point)
TOL = 1e-5


def is_integer(transformation: Transformation) -> bool:
    """Whether the threat model is integer parameters (the transformation's ``integer`` capability)."""
    return bool(transformation.integer)


def _check_origin(t: Transformation) -> None:
    # Clipping after the ball projection stays inside the ball only if the domain contains the
    # identity theta = 0 (each coordinate then moves towards 0); every registered transformation does.
    if any(lo > 0 or hi < 0 for lo, hi in zip(t.low, t.high)):
        raise BenchError(f"{t.name}: the parameter domain {list(t.low)}..{list(t.high)} does not contain 0, "
                         "so the budget ball around the identity is undefined for parameter-space attacks.")


def project(theta: torch.Tensor, t: Transformation, budget: float | torch.Tensor) -> torch.Tensor:
    """Map ``theta [B,m]`` into the (continuous) attack region: ball projection, then the domain clip.

    ``budget`` is a number or one radius per row (``[B, 1]``).

    For the l-infinity ball this is the exact Euclidean projection onto ball x domain; for the l2
    ball it is the exact ball projection followed by the domain clip, which keeps the point in the
    ball because the domain contains 0 (a feasible point, not always the nearest one).
    """
    _check_origin(t)
    if t.one_sided:
        theta = theta.clamp_min(0)
    if t.norm == "linf" or t.dim == 1:
        budget = torch.as_tensor(budget, dtype=theta.dtype)
        theta = torch.maximum(torch.minimum(theta, budget), -budget)
    else:
        n = theta.norm(dim=-1, keepdim=True)
        theta = theta * (budget / n.clamp_min(1e-30)).clamp(max=1.0)
    return t.clip(theta)


def contains(theta: torch.Tensor, t: Transformation, budget: float) -> torch.Tensor:
    """Boolean ``[B]``: whether each ``theta [B,m]`` lies in the attack region (integer points if integer)."""
    theta = theta.double()
    tol = TOL * max(1.0, budget)
    lo = torch.tensor(t.low, dtype=theta.dtype)
    hi = torch.tensor(t.high, dtype=theta.dtype)
    ok = (t.norm_of(theta) <= budget + tol) & ((theta >= lo - tol) & (theta <= hi + tol)).all(-1)
    if t.one_sided:
        ok &= (theta >= -tol).all(-1)
    if is_integer(t):
        ok &= (theta == theta.round()).all(-1)
    return ok


def integer_points(t: Transformation, budget: float) -> torch.Tensor:
    """All integer parameters of the attack region, ``[k, m]`` float (the whole threat model of translation)."""
    if t.enumerable:
        pts = t.enumerate(budget)
    else:
        r = int(math.floor(budget + 1e-9))
        ax = torch.arange(-r, r + 1, dtype=torch.float32)
        pts = torch.cartesian_prod(*[ax] * t.dim).reshape(-1, t.dim)
    return pts[contains(pts, t, budget)]


def snap_integer(theta: torch.Tensor, t: Transformation, budget: float) -> torch.Tensor:
    """Round each ``theta [B,m]`` to the nearest integer point of the region (not just coordinate rounding,
    which can leave the l2 ball: (0.7, 0.7) rounds to (1, 1), of norm 1.41 > 1)."""
    pts = integer_points(t, budget)
    d = torch.cdist(theta.float(), pts)
    return pts[d.argmin(dim=1)]


def unique_rows(theta: torch.Tensor) -> torch.Tensor:
    """Distinct rows in their first-seen order (candidates evaluated once)."""
    seen, keep = set(), []
    for i, row in enumerate(theta.tolist()):
        key = tuple(row)
        if key not in seen:
            seen.add(key)
            keep.append(i)
    return theta[keep]
