"""Bilinear interpolation with zero padding, and its exact range over a box of source coordinates.

``grid_sample(mode="bilinear", padding_mode="zeros")`` reads an image as the continuous function
f(u, v) = sum of the four neighbouring pixel values weighted by (1-|u-j|)(1-|v-i|), with pixels
outside the image equal to 0. f is bilinear on every unit cell [j, j+1] x [i, i+1], and a bilinear
function on a rectangle attains its minimum and maximum at the rectangle's corners (it is linear
along every axis-parallel line). So over a box [u_lo, u_hi] x [v_lo, v_hi] the range of f is
exactly the min/max of f over the grid {u_lo, u_hi, integers in between} x {v_lo, v_hi, integers
in between}. This is sound and tighter than interval arithmetic on the interpolation weights.
"""
from __future__ import annotations

import math

import torch


def bilinear_at(img: torch.Tensor, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """f(u, v) for one image ``img [H, W]`` at column coordinates ``u`` and row coordinates ``v``
    (any equal shapes, pixel units, pixel centres at integers), zero outside the image."""
    return _bilinear_padded(torch.nn.functional.pad(img, (1, 1, 1, 1)).flatten(), *img.shape, u, v, 0)


def _bilinear_padded(pad: torch.Tensor, H: int, W: int, u: torch.Tensor, v: torch.Tensor, base) -> torch.Tensor:
    """f(u, v) read from zero-padded images flattened into ``pad``; image k starts at ``base`` (int or
    a tensor broadcastable to ``u``). ``u`` and ``v`` broadcast against each other: the per-axis work
    (clamp, floor, weights) runs on their own shapes, and only the gathers and the final blend on the
    broadcast shape (elementwise ops commute with broadcasting, so the values are bit-identical to
    passing expanded grids, at a fraction of the cost for the corner grids of ``bilinear_range*``)."""
    # one zero border suffices: f is 0 at and beyond one pixel outside the image, so coordinates
    # are clamped to [-1, W] (resp. [-1, H]) and cells to those whose corners exist in the padding
    u = u.clamp(-1.0, float(W))
    v = v.clamp(-1.0, float(H))
    u0 = torch.floor(u).clamp(-1.0, float(W - 1))
    v0 = torch.floor(v).clamp(-1.0, float(H - 1))
    fu, fv = u - u0, v - v0  # in [0, 1]
    gu, gv = 1 - fu, 1 - fv
    c0 = u0.long() + 1  # column in the padded image; its right neighbour is c0 + 1 <= W + 1
    r0 = v0.long() + 1
    top = (base + r0 * (W + 2)) + c0
    bottom = top + (W + 2)
    return (gv * (gu * pad[top] + fu * pad[top + 1])
            + fv * (gu * pad[bottom] + fu * pad[bottom + 1]))


#: corner values evaluated at once by ``bilinear_range_batched`` (a few tensors of this many float64 / int64
#: entries, about 32 MB each). Wide boxes (GSmooth's pose bounds at a 50 degree rotation move pixels by up to
#: 20 px) otherwise build [K, P, Ku*Kv] tensors of several GB in one go (3.0 GB peak measured on one image).
MAX_CORNER_VALUES = 4_000_000


def bilinear_range_batched(imgs: torch.Tensor, u_lo: torch.Tensor, u_hi: torch.Tensor, v_lo: torch.Tensor,
                           v_hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact min and max of image k's f over the boxes of row k: ``imgs [K, H, W]``, boxes ``[K, P]``.

    Rows are evaluated in groups of at most ``MAX_CORNER_VALUES`` corner values. The result does not depend
    on the grouping: a group's corner grid holds every integer inside each of its boxes, and its padding
    repeats a box's own end points, so each box's min and max are over the same values."""
    k = imgs.shape[0]
    if k == 0 or u_lo.numel() == 0:
        return _range_batched(imgs, u_lo, u_hi, v_lo, v_hi)
    per_row = (u_lo.numel() // k) * (_axis_points(u_lo, u_hi) * _axis_points(v_lo, v_hi))
    rows = max(1, MAX_CORNER_VALUES // max(per_row, 1))
    if rows >= k:
        return _range_batched(imgs, u_lo, u_hi, v_lo, v_hi)
    parts = [_range_batched(imgs[i:i + rows], u_lo[i:i + rows], u_hi[i:i + rows], v_lo[i:i + rows],
                            v_hi[i:i + rows]) for i in range(0, k, rows)]
    return torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])


def _axis_points(lo: torch.Tensor, hi: torch.Tensor) -> int:
    """Points per box along one axis in ``_corner_grid`` over all of ``lo``/``hi``."""
    return _inner_points(lo, hi) + 2


def _inner_points(lo: torch.Tensor, hi: torch.Tensor) -> int:
    """How many integers any box (lo, hi) can hold at most: the inner points of ``_corner_grid``."""
    return max(1, math.ceil(float((hi - lo).max()))) if lo.numel() else 1


def _range_batched(imgs: torch.Tensor, u_lo: torch.Tensor, u_hi: torch.Tensor, v_lo: torch.Tensor,
                   v_hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    k, H, W = imgs.shape
    pad = torch.nn.functional.pad(imgs, (1, 1, 1, 1)).flatten()
    cu, cv = _corner_grid(u_lo, u_hi), _corner_grid(v_lo, v_hi)  # [K, P, Ku], [K, P, Kv]
    base = (torch.arange(k, device=imgs.device) * (H + 2) * (W + 2)).view(k, 1, 1, 1)
    vals = _bilinear_padded(pad, H, W, cu[..., :, None], cv[..., None, :], base).flatten(-2)  # [K, P, Ku*Kv]
    return vals.amin(-1), vals.amax(-1)


def _corner_grid(lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
    """Per box, the coordinates {lo, hi, integers in (lo, hi)} along one axis, shape ``[..., K]``
    (padded with repeats of ``lo``/``hi`` so every box has the same K)."""
    k = _inner_points(lo, hi)  # (lo, hi) holds <= k integers
    steps = torch.arange(1, k + 1, dtype=lo.dtype, device=lo.device)
    inner = torch.floor(lo)[..., None] + steps  # the integers just above lo
    inner = torch.minimum(torch.maximum(inner, lo[..., None]), hi[..., None])
    return torch.cat([lo[..., None], inner, hi[..., None]], dim=-1)


def bilinear_range(img: torch.Tensor, u_lo: torch.Tensor, u_hi: torch.Tensor, v_lo: torch.Tensor,
                   v_hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact min and max of f over the boxes ``[u_lo, u_hi] x [v_lo, v_hi]`` (elementwise, any shape)."""
    cu = _corner_grid(u_lo, u_hi)  # [..., Ku]
    cv = _corner_grid(v_lo, v_hi)  # [..., Kv]
    vals = bilinear_at(img, cu[..., :, None], cv[..., None, :]).flatten(-2)
    return vals.amin(-1), vals.amax(-1)
