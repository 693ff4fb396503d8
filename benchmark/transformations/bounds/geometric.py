"""Bounds of rotation and scaling (and the blurs averaging them) over a parameter interval.

Both registry transformations (benchmark/transformations/geometric.py) sample the source image
bilinearly with zero padding at coordinates that are an exact affine function of the output
pixel position (checked against the real transformation in tests/test_semanify_perturbations.py):

* rotation by angle a (kornia ``rotate``, ``align_corners=True``, centre c = ((W-1)/2, (H-1)/2)):
  output pixel (row i, column j), with dx = j - c_x, dy = i - c_y, reads the source at
  u = c_x + cos(a) dx - sin(a) dy,  v = c_y + sin(a) dx + cos(a) dy;
* scaling by factor s = 1 + theta (``affine_grid``/``grid_sample`` with ``align_corners=False``,
  so normalised coordinates are proportional to offsets from the same centre):
  u = c_x + dx / s,  v = c_y + dy / s.

Per parameter interval we compute the exact range of u and of v separately (a box containing the
source curve), widen it by ``COORD_SLACK`` pixels to cover the float32 round-off of the real
transformation's coordinate computation (including theta rounded to float32), then take the exact
range of the bilinear interpolation over that box (see bilinear.py) and widen values by
``VALUE_SLACK``. The slacks are sized for float32 whatever dtype the bounds are computed in.
"""
from __future__ import annotations

import math

import torch

from benchmark.transformations.bounds import gamma
from benchmark.transformations.bounds.bilinear import bilinear_range, values_per_image

#: pixels added on each side of a source-coordinate box: covers float32 round-off in the real
#: transformation (its coordinates differ from exact ones by ~1e-5 px on 28x28 images).
COORD_SLACK = 1e-3
#: intensity added on each side of a pixel bound: float32 round-off of the interpolation itself.
VALUE_SLACK = 1e-5
#: at most this many bilinear evaluations per chunk of boxes (bounds memory on wide boxes).
_CHUNK = 1 << 22

Boxes = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def _offsets(h: int, w: int, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, float, float]:
    """Offsets (dx, dy) of every output pixel from the image centre, each ``[H*W]`` with ``like``'s dtype
    and device, and the centre."""
    cx, cy = (w - 1) / 2, (h - 1) / 2
    kw = {"dtype": like.dtype, "device": like.device}
    i, j = torch.meshgrid(torch.arange(h, **kw), torch.arange(w, **kw), indexing="ij")
    return (j - cx).flatten(), (i - cy).flatten(), cx, cy


def _cos_combination_range(p: torch.Tensor, q: torch.Tensor, a_lo: torch.Tensor,
                           a_hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact range of g(a) = p cos(a) - q sin(a) = R cos(a + phi) over [a_lo, a_hi] (radians).

    ``p, q [P]`` per pixel, ``a_lo, a_hi [N]`` per interval; returns ``[N, P]``. The extremes are
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
    for offset in (0, 1, 2):  # intervals shorter than 3 pi contain at most three multiples of pi
        k = k_first + offset
        inside = k <= k_last
        even = torch.remainder(k, 2) == 0
        hi = torch.where(inside & even, r.expand_as(hi), hi)
        lo = torch.where(inside & ~even, (-r).expand_as(lo), lo)
    return lo, hi


def rotation_coordinate_boxes(h: int, w: int, deg_lo: torch.Tensor, deg_hi: torch.Tensor) -> Boxes:
    """Source-coordinate boxes ``(u_lo, u_hi, v_lo, v_hi)``, each ``[N, H*W]``, for angles in
    ``[deg_lo, deg_hi]`` degrees (``[N]`` each, shorter than 540 degrees), before slack."""
    dx, dy, cx, cy = _offsets(h, w, deg_lo)
    a_lo, a_hi = torch.deg2rad(deg_lo), torch.deg2rad(deg_hi)
    if bool(((a_hi - a_lo) >= 3 * math.pi).any()):  # the loop below handles up to three multiples of pi
        raise ValueError("rotation intervals must be shorter than 540 degrees")
    gu_lo, gu_hi = _cos_combination_range(dx, dy, a_lo, a_hi)  # dx cos a - dy sin a
    gv_lo, gv_hi = _cos_combination_range(dy, -dx, a_lo, a_hi)  # dy cos a + dx sin a
    return cx + gu_lo, cx + gu_hi, cy + gv_lo, cy + gv_hi


def scaling_coordinate_boxes(h: int, w: int, theta_lo: torch.Tensor, theta_hi: torch.Tensor) -> Boxes:
    """Source-coordinate boxes for zoom factors ``1 + theta`` in ``[1 + theta_lo, 1 + theta_hi]``
    (factors > 0): u = c_x + dx / s is monotone in 1/s, so the endpoints give the range."""
    dx, dy, cx, cy = _offsets(h, w, theta_lo)
    if bool((1 + theta_lo <= 0).any()):
        raise ValueError("scaling factors must be positive")
    inv = torch.stack([1 / (1 + theta_lo), 1 / (1 + theta_hi)])[:, :, None]  # [2, N, 1]
    u, v = cx + dx * inv, cy + dy * inv
    return u.amin(0), u.amax(0), v.amin(0), v.amax(0)


def resample_bounds(x: torch.Tensor, boxes: Boxes) -> tuple[torch.Tensor, torch.Tensor]:
    """Sound bounds ``[N,C,H,W]`` of the bilinear resampling (zero padding) of ``x [1,C,H,W]`` at
    every source point of the coordinate boxes (each ``[N, H*W]``), including both slacks.

    Boxes are bounded in chunks to cap memory; min and max are exact, so chunking changes nothing.
    """
    _, c, h, w = x.shape
    u_lo, u_hi, v_lo, v_hi = boxes
    u_lo, u_hi, v_lo, v_hi = u_lo - COORD_SLACK, u_hi + COORD_SLACK, v_lo - COORD_SLACK, v_hi + COORD_SLACK
    n = u_lo.shape[0]
    width = max(float((u_hi - u_lo).max()), float((v_hi - v_lo).max())) if n else 0.0
    step = max(1, _CHUNK // values_per_image((h, w), h * w, math.ceil(width) + 2, math.ceil(width) + 2))
    lo, hi = [], []
    for s in range(0, n, step):
        part = [b[s:s + step] for b in (u_lo, u_hi, v_lo, v_hi)]
        ranges = [bilinear_range(x[0, ch], *part) for ch in range(c)]
        lo.append(torch.stack([r[0] for r in ranges], dim=1))
        hi.append(torch.stack([r[1] for r in ranges], dim=1))
    shape = (n, c, h, w)
    return torch.cat(lo).view(shape) - VALUE_SLACK, torch.cat(hi).view(shape) + VALUE_SLACK


def rotation_bounds(x: torch.Tensor, deg_lo: torch.Tensor, deg_hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Bounds ``[N,C,H,W]`` of ``rotate_images(x, a)`` for every angle a in ``[deg_lo[n], deg_hi[n]]``."""
    return resample_bounds(x, rotation_coordinate_boxes(x.shape[2], x.shape[3], deg_lo, deg_hi))


def scaling_bounds(x: torch.Tensor, theta_lo: torch.Tensor, theta_hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Bounds ``[N,C,H,W]`` of ``zoom_images(x, 1 + t)`` for every t in ``[theta_lo[n], theta_hi[n]]``."""
    return resample_bounds(x, scaling_coordinate_boxes(x.shape[2], x.shape[3], theta_lo, theta_hi))


def view_mean_bounds(view_lo: torch.Tensor, view_hi: torch.Tensor,
                     extra: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Bounds of the float32 mean of V views (plus an optional exact ``extra`` image counted as one
    more view) from per-view bounds ``[N,V,C,H,W]``.

    For every theta each view lies in its own bounds, so the exact mean lies between the means of
    the bounds. The float32 sum of n terms is off by at most gamma_{n-1} * sum|term| and the division
    (or multiplication by 1/n) by two more roundings, so the computed mean is within
    gamma_{n+2} * max|term| of the exact one, and max|term| <= max(|lo|, |hi|, |extra|).
    """
    lo, hi = view_lo.sum(1), view_hi.sum(1)
    n = view_lo.shape[1]
    big = torch.maximum(view_lo.abs().amax(1), view_hi.abs().amax(1))
    if extra is not None:
        lo, hi, n, big = lo + extra, hi + extra, n + 1, torch.maximum(big, extra.abs())
    slack = gamma(n + 2) * big
    return lo / n - slack, hi / n + slack
