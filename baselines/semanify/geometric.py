"""Perturbation layers for rotation and scaling: sound per-pixel bounds over a parameter sub-interval.

Both registry transformations (benchmark/transformations/geometric.py) sample the source image
bilinearly with zero padding at coordinates that are an exact affine function of the output
pixel position (checked against the real transformation in tests/test_semanify_perturbations.py):

* rotation by angle a (kornia ``rotate``, ``align_corners=True``, centre c = ((W-1)/2, (H-1)/2)):
  output pixel (row i, column j), with dx = j - c_x, dy = i - c_y, reads the source at
  u = c_x + cos(a) dx - sin(a) dy,  v = c_y + sin(a) dx + cos(a) dy;
* scaling by factor s = 1 + theta (``affine_grid``/``grid_sample`` with ``align_corners=False``,
  so normalised coordinates are proportional to offsets from the same centre):
  u = c_x + dx / s,  v = c_y + dy / s.

Per sub-interval of the parameter we compute the exact range of u and of v separately
(a box containing the source curve), widen it by ``COORD_SLACK`` pixels to cover the float32
round-off of the real transformation's coordinate computation, then take the exact range of the
bilinear interpolation over that box (see bilinear.py) and widen values by ``VALUE_SLACK``.
"""
from __future__ import annotations

import math

import torch

from baselines.semanify.bilinear import bilinear_range

#: pixels added on each side of a source-coordinate box: covers float32 round-off in the real
#: transformation (its coordinates differ from exact ones by ~1e-5 px on 28x28 images).
COORD_SLACK = 1e-3
#: intensity added on each side of a pixel bound: float32 round-off of the interpolation itself.
VALUE_SLACK = 1e-5


def _offsets(h: int, w: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, float, float]:
    """Offsets (dx, dy) of every output pixel from the image centre, each ``[H*W]``, and the centre."""
    cx, cy = (w - 1) / 2, (h - 1) / 2
    i, j = torch.meshgrid(torch.arange(h, dtype=dtype), torch.arange(w, dtype=dtype), indexing="ij")
    return (j - cx).flatten(), (i - cy).flatten(), cx, cy


def _cos_combination_range(p: torch.Tensor, q: torch.Tensor, a_lo: torch.Tensor,
                           a_hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact range of g(a) = p cos(a) - q sin(a) = R cos(a + phi) over [a_lo, a_hi] (radians).

    ``p, q [P]`` per pixel, ``a_lo, a_hi [N]`` per sub-interval; returns ``[N, P]``. The extremes are
    at the endpoints or where a + phi is a multiple of pi (value +R or -R) inside the interval.
    """
    r = torch.sqrt(p * p + q * q)
    phi = torch.atan2(q, p)
    lo_ang = a_lo[:, None] + phi[None]
    hi_ang = a_hi[:, None] + phi[None]
    g_lo = r * torch.cos(lo_ang)
    g_hi = r * torch.cos(hi_ang)
    lo = torch.minimum(g_lo, g_hi)
    hi = torch.maximum(g_lo, g_hi)
    k_first = torch.ceil(lo_ang / math.pi)
    k_last = torch.floor(hi_ang / math.pi)
    for offset in (0, 1, 2):  # intervals shorter than 2 pi contain at most two multiples of pi
        k = k_first + offset
        inside = k <= k_last
        even = torch.remainder(k, 2) == 0
        hi = torch.where(inside & even, r.expand_as(hi), hi)
        lo = torch.where(inside & ~even, (-r).expand_as(lo), lo)
    return lo, hi


def rotation_coordinate_boxes(h: int, w: int, deg_lo: torch.Tensor, deg_hi: torch.Tensor):
    """Source-coordinate boxes ``(u_lo, u_hi, v_lo, v_hi)``, each ``[N, H*W]``, for angles in
    ``[deg_lo, deg_hi]`` degrees (``[N]`` each), before slack."""
    dx, dy, cx, cy = _offsets(h, w, deg_lo.dtype)
    a_lo, a_hi = torch.deg2rad(deg_lo), torch.deg2rad(deg_hi)
    if bool(((a_hi - a_lo) >= math.pi).any()):
        raise ValueError("rotation sub-intervals must be shorter than 180 degrees")
    gu_lo, gu_hi = _cos_combination_range(dx, dy, a_lo, a_hi)  # dx cos a - dy sin a
    gv_lo, gv_hi = _cos_combination_range(dy, -dx, a_lo, a_hi)  # dy cos a + dx sin a
    return cx + gu_lo, cx + gu_hi, cy + gv_lo, cy + gv_hi


def scaling_coordinate_boxes(h: int, w: int, theta_lo: torch.Tensor, theta_hi: torch.Tensor):
    """Source-coordinate boxes for zoom factors ``1 + theta`` in ``[1 + theta_lo, 1 + theta_hi]``
    (factors > 0): u = c_x + dx / s is monotone in 1/s, so the endpoints give the range."""
    dx, dy, cx, cy = _offsets(h, w, theta_lo.dtype)
    if bool((1 + theta_lo <= 0).any()):
        raise ValueError("scaling factors must be positive")
    inv = torch.stack([1 / (1 + theta_lo), 1 / (1 + theta_hi)])[:, :, None]  # [2, N, 1]
    u, v = cx + dx * inv, cy + dy * inv
    return u.amin(0), u.amax(0), v.amin(0), v.amax(0)


def pixel_bounds(img: torch.Tensor, boxes) -> tuple[torch.Tensor, torch.Tensor]:
    """Sound per-pixel bounds ``[N, H*W]`` of the bilinear resampling of ``img [H, W]`` over
    source-coordinate boxes (each ``[N, H*W]``), including both slacks."""
    u_lo, u_hi, v_lo, v_hi = boxes
    lo, hi = bilinear_range(img, u_lo - COORD_SLACK, u_hi + COORD_SLACK, v_lo - COORD_SLACK, v_hi + COORD_SLACK)
    return lo - VALUE_SLACK, hi + VALUE_SLACK


def geometric_pixel_bounds(name: str, x: torch.Tensor, lo: torch.Tensor,
                           hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-pixel bounds ``[N, C*H*W]`` of transformation ``name`` (rotation or scaling) applied to
    ``x [1, C, H, W]`` for every parameter in ``[lo[n], hi[n]]`` (``[N]`` each)."""
    _, c, h, w = x.shape
    lo, hi = lo.to(torch.float64), hi.to(torch.float64)
    if name == "rotation":
        boxes = rotation_coordinate_boxes(h, w, lo, hi)
    elif name == "scaling":
        boxes = scaling_coordinate_boxes(h, w, lo, hi)
    else:
        raise ValueError(f"no geometric perturbation layer for '{name}'")
    img = x[0].to(torch.float64)
    parts = [pixel_bounds(img[ch], boxes) for ch in range(c)]
    return torch.cat([p[0] for p in parts], dim=1), torch.cat([p[1] for p in parts], dim=1)
