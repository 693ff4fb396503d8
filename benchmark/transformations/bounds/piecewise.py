"""Bounds of transformations that a finite set of evaluations pins down: translation, pixelate.

* Translation: output pixel (i, j) at shift (dx, dy) is the bilinear interpolation of the periodic
  image at (j - dx, i - dy) (bilinear blend of the four neighbouring integer rolls). It is
  continuous and bilinear on every unit cell of (dx, dy), and a bilinear function on a rectangle
  takes its extremes at the corners, so over a box its min and max are attained on the grid
  {box edges, integers between} x {same for dy}: exact, from finitely many shifts.
* Pixelate: the output depends on p only through the integer sides s(p), which are monotone in p;
  the box holds finitely many sides, and min/max over their outputs is exact.

Both evaluate the registry's own code in float64 at the grid points (after the float32 hull of
the box, since apply rounds theta to float32) and add the float32 round-off of apply.
"""
from __future__ import annotations

from collections.abc import Callable

import math

import torch

from benchmark.transformations.bounds import U32, float32_hull, gamma

#: float32 round-off of a fractional shift: per axis fl(fl(1-w) a + fl(w b)) is within 3u max|a,b|
#: of the exact blend; two axes (the second on perturbed inputs) stay within 7u; 16u with margin.
TRANSLATION_SLACK = 16 * U32


def _cell_corners(a: float, b: float) -> torch.Tensor:
    """{a, b} and the integers strictly between them, sorted (float64)."""
    first, stop = math.floor(a) + 1, math.ceil(b)
    inner = torch.arange(first, max(first, stop), dtype=torch.float64)
    return torch.cat([torch.tensor([a], dtype=torch.float64), inner,
                      torch.tensor([b], dtype=torch.float64)]).unique()


def translation_bounds(x: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor,
                       cyclic_shift: Callable) -> tuple[torch.Tensor, torch.Tensor]:
    """Bounds ``[N,C,H,W]`` of ``cyclic_shift(x, dx, dy)`` (the registry's, passed in) over boxes ``lo, hi [N, 2]``."""

    h_lo, h_hi = float32_hull(lo, hi)
    out_lo, out_hi = [], []
    for k in range(len(lo)):
        grid = torch.cartesian_prod(_cell_corners(float(h_lo[k, 0]), float(h_hi[k, 0])),
                                    _cell_corners(float(h_lo[k, 1]), float(h_hi[k, 1])))
        imgs = cyclic_shift(x.expand(len(grid), -1, -1, -1), grid[:, 0], grid[:, 1])
        # a single integer shift is a bit-exact roll in any dtype: no round-off
        exact = bool((h_lo[k] == h_hi[k]).all() and (h_lo[k] == torch.round(h_lo[k])).all())
        slack = 0.0 if exact else TRANSLATION_SLACK
        out_lo.append(imgs.amin(0) - slack)
        out_hi.append(imgs.amax(0) + slack)
    return torch.stack(out_lo), torch.stack(out_hi)


def pixelate_sizes(h: int, w: int, p_lo: float, p_hi: float, _side: Callable) -> list[tuple[int, int]]:
    """Every output size (sH, sW) pixelate can use for p in [p_lo, p_hi] (a superset when H != W).

    The sides are computed by the registry's own ``_side`` at the endpoints: it is a composition of
    monotone float operations, so s(p) lies between s(p_hi) and s(p_lo). For square images both
    sides are the same function of p.
    """

    rows = range(_side(p_hi, h), _side(p_lo, h) + 1)
    cols = range(_side(p_hi, w), _side(p_lo, w) + 1)
    if h == w:
        return [(s, s) for s in rows]
    return [(a, b) for a in rows for b in cols]


def pixelate_bounds(x: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor, _side: Callable,
                    pixelate_to: Callable) -> tuple[torch.Tensor, torch.Tensor]:
    """Bounds ``[N,C,H,W]`` of pixelate over intervals ``lo, hi [N]`` of p: min/max over the outputs of
    every possible size. A float32 output pixel is the mean of a pooling window of n <= (ceil(H/sH)+1)
    (ceil(W/sW)+1) pixels in [0,1], off the exact mean by at most gamma_{n+3} (sum, two divisions);
    nearest upsampling copies values, and the identity size copies x exactly."""

    h, w = x.shape[-2:]
    h_lo, h_hi = float32_hull(lo, hi)
    out_lo, out_hi = [], []
    for k in range(len(lo)):
        sizes = pixelate_sizes(h, w, float(h_lo[k]), float(h_hi[k]), _side)
        imgs = torch.cat([pixelate_to(x, size) for size in sizes])
        slack = torch.tensor([0.0 if size == (h, w) else gamma(((h + size[0] - 1) // size[0] + 1)
                                                              * ((w + size[1] - 1) // size[1] + 1) + 3)
                              for size in sizes], dtype=x.dtype).view(-1, 1, 1, 1)
        out_lo.append((imgs - slack).amin(0))
        out_hi.append((imgs + slack).amax(0))
    return torch.stack(out_lo), torch.stack(out_hi)
