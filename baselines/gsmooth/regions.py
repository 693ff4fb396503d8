"""Finite covers of a budget region in parameter space, for bounding a supremum by a grid.

A cover is a set of parameters such that every parameter of the region lies
within ``covering_radius`` (Euclidean) of one of them. With an L-Lipschitz
function, sup over the region <= max over the cover + L * covering_radius.
Where the transformation takes finitely many values on the region (integer
translation, pixelate), the cover is exact (covering_radius 0, ``exact``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from benchmark.api import Transformation


@dataclass
class Cover:
    points: torch.Tensor  # [k, m]
    covering_radius: float
    exact: bool = False


def cover(t: Transformation, budget: float, resolution: int = 33, image_size: int = 28,
          continuous: bool = False) -> Cover:
    """A cover of the attack region of ``t`` at ``budget`` (see the module docstring).

    ``continuous`` ignores finiteness (for quantities defined on the continuous parameter, such as
    the paper's M* along the surrogate path).
    """
    if t.enumerable and not continuous:
        return Cover(t.enumerate(budget, (image_size, image_size)), 0.0, exact=True)
    m = t.dim
    if m == 1:
        lo = 0.0 if t.one_sided else -budget
        pts = torch.linspace(lo, budget, resolution)[:, None]
        return Cover(t.clip(pts), (budget - lo) / (2 * (resolution - 1)))
    # m >= 2: a regular grid with spacing h over the box [-b, b]^m; for an l2 ball keep the grid
    # points within b + h*sqrt(m)/2 (a superset of what is needed: sup over a superset is an upper bound)
    k = max(3, int(round(resolution ** (1 / m) * 2)) | 1)
    ax = torch.linspace(0.0 if t.one_sided else -budget, budget, k)
    pts = torch.cartesian_prod(*[ax] * m).reshape(-1, m)
    h = float(ax[1] - ax[0])
    rho = h * math.sqrt(m) / 2
    if t.norm == "l2":
        pts = pts[pts.norm(dim=1) <= budget + rho + 1e-9]
    return Cover(t.clip(pts), rho)


def region_vertices(t: Transformation, budget: float) -> torch.Tensor:
    """Vertices ``[k, m]`` (float64) of the budget region of a transformation whose region is a polytope:
    an interval ([0, b] one-sided, else [-b, b]) or, for m >= 2, the l-infinity box; clipped to the domain
    (the intersection of two boxes is a box, whose vertices are the clipped vertices)."""
    m = t.dim
    if m > 1 and t.norm != "linf":
        raise ValueError(f"{t.name}: an l2 ball has no finite vertex set")
    lo = 0.0 if t.one_sided else -budget
    ax = torch.tensor([lo, budget], dtype=torch.float64)
    return t.clip(torch.cartesian_prod(*[ax] * m).reshape(-1, m))
