"""Sound bounds of the geometric pose encoder's output over a box of input images (interval arithmetic).

Input: per cell k, elementwise image bounds lo_k <= y <= hi_k (from ``Transformation.pixel_bounds``
over a parameter cell). Output: bounds on the pose p(y) and on the canonical code c(y) (pose.py)
that hold for every image y in the box, hence for every real transformed image of the cell.

* intensity weights w = channel mean of y, clamped at 0, are monotone in y: [w(lo), w(hi)];
* every raw moment sum_i a_i w_i is linear in w: its exact range over the box takes w_i = hi_i where
  a_i >= 0 and lo_i elsewhere (and the reverse);
* central moments, the orientation's atan2 and the log radius follow by interval arithmetic
  (sound, if loose where quantities are correlated; cells are small);
* atan2(Y, X) over a box of (X, Y) not meeting the branch cut {X <= 0, Y = 0} is continuous, and its
  extremes over a rectangle that avoids the origin lie at the corners (the extreme rays through a
  convex polygon are supporting rays, which pass through vertices); otherwise the orientation is
  unbounded in (-90, 90] and the cell's bound is infinite (never certified);
* the canonical code samples y bilinearly at source coordinates that depend on the pose: over the
  pose interval the coordinates of each output pixel lie in a box (the registry's coordinate boxes,
  widened by its float32 slack), and a bilinear interpolation is a nonnegative combination of
  pixel values, so the code lies between the interpolation of lo minimised and of hi maximised
  over the box (exact ranges of a bilinear function over a box, bounds/bilinear.py);
* the canonical window is a 0/1 mask and the optional Gaussian blur of the code has a nonnegative
  kernel: both monotone, applied to both bounds.
"""
from __future__ import annotations

import math

import torch

from baselines.gsmooth.pose import LOG_R0, VERTICAL_WEIGHT, canonical_window
from baselines.gsmooth.surrogate import gaussian_smooth
from benchmark.api import (COORD_SLACK, VALUE_SLACK, bilinear_range_batched, rotation_coordinate_boxes,
                           scaling_coordinate_boxes)

Interval = tuple[torch.Tensor, torch.Tensor]


def _linear(wl: torch.Tensor, wh: torch.Tensor, coef: torch.Tensor) -> Interval:
    """Exact range of sum_i coef_i w_i over the box [wl, wh] (per leading index)."""
    pos = coef >= 0
    lo = torch.where(pos, coef * wl, coef * wh).sum((-2, -1))
    hi = torch.where(pos, coef * wh, coef * wl).sum((-2, -1))
    return lo, hi


def _mul(a: Interval, b: Interval) -> Interval:
    p = torch.stack([a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1]])
    return p.amin(0), p.amax(0)


def _div(a: Interval, b: Interval) -> Interval:
    """a / b for b > 0."""
    return _mul(a, (1 / b[1], 1 / b[0]))


def _sub(a: Interval, b: Interval) -> Interval:
    return a[0] - b[1], a[1] - b[0]


def _square(a: Interval) -> Interval:
    lo2, hi2 = a[0] ** 2, a[1] ** 2
    straddle = (a[0] <= 0) & (a[1] >= 0)
    return torch.where(straddle, torch.zeros_like(lo2), torch.minimum(lo2, hi2)), torch.maximum(lo2, hi2)


def _moments(lo: torch.Tensor, hi: torch.Tensor):
    """Weight bounds and the offset grids (u columns, v rows from the image centre), float64."""
    wl = lo.to(torch.float64).mean(1).clamp_min(0)
    wh = hi.to(torch.float64).mean(1).clamp_min(0)
    h, w = wl.shape[-2:]
    v = (torch.arange(h, dtype=torch.float64, device=wl.device) - (h - 1) / 2)[:, None].expand(h, w)
    u = (torch.arange(w, dtype=torch.float64, device=wl.device) - (w - 1) / 2)[None, :].expand(h, w)
    return wl, wh, u, v


def orientation_bounds(lo: torch.Tensor, hi: torch.Tensor) -> Interval:
    """Bounds (degrees) on pose.orientation over the image boxes [K,C,H,W]; (-90, 90] where unbounded."""
    wl, wh, u, v = _moments(lo, hi)
    m = _linear(wl, wh, torch.ones_like(u))
    m = (m[0].clamp_min(1e-8), m[1].clamp_min(1e-8))
    cu, cv = _div(_linear(wl, wh, u), m), _div(_linear(wl, wh, v), m)
    mu20 = _sub(_div(_linear(wl, wh, u * u), m), _square(cu))
    mu02 = _sub(_div(_linear(wl, wh, v * v), m), _square(cv))
    mu11 = _sub(_div(_linear(wl, wh, u * v), m), _mul(cu, cv))
    X = _sub(mu02, mu20)
    Y = (2 * mu11[0], 2 * mu11[1])
    corners = torch.stack([torch.atan2(y, x) for y in Y for x in X])
    lo_deg, hi_deg = torch.rad2deg(0.5 * corners.amin(0)), torch.rad2deg(0.5 * corners.amax(0))
    cut = (X[0] <= 0) & (Y[0] <= 0) & (Y[1] >= 0)  # the box meets the branch cut (or holds the origin)
    return torch.where(cut, torch.full_like(lo_deg, -90.0), lo_deg), torch.where(cut, torch.full_like(hi_deg, 90.0), hi_deg)


def log_radius_bounds(lo: torch.Tensor, hi: torch.Tensor) -> Interval:
    """Bounds on pose.log_radius over the image boxes [K,C,H,W]."""
    wl, wh, u, v = _moments(lo, hi)
    m = _linear(wl, wh, torch.ones_like(u))
    m = (m[0].clamp_min(1e-8), m[1].clamp_min(1e-8))
    r2 = _div(_linear(wl, wh, u * u + VERTICAL_WEIGHT * v * v), m)
    return 0.5 * torch.log(r2[0].clamp_min(1e-8)), 0.5 * torch.log(r2[1].clamp_min(1e-8))


def _resample_box(lo: torch.Tensor, hi: torch.Tensor, boxes) -> tuple[torch.Tensor, torch.Tensor]:
    """Bounds [K,C,H,W] of bilinear resampling of any image in [lo, hi] at any point of the coordinate boxes."""
    k, c, h, w = lo.shape
    u_lo, u_hi, v_lo, v_hi = (b - COORD_SLACK if i % 2 == 0 else b + COORD_SLACK for i, b in enumerate(boxes))
    out_lo, out_hi = [], []
    for ch in range(c):
        mn, _ = bilinear_range_batched(lo[:, ch].to(torch.float64), u_lo, u_hi, v_lo, v_hi)
        _, mx = bilinear_range_batched(hi[:, ch].to(torch.float64), u_lo, u_hi, v_lo, v_hi)
        out_lo.append(mn.view(k, h, w))
        out_hi.append(mx.view(k, h, w))
    return torch.stack(out_lo, 1) - VALUE_SLACK, torch.stack(out_hi, 1) + VALUE_SLACK


def canonical_bounds(kind: str, lo: torch.Tensor, hi: torch.Tensor,
                     content_blur: float) -> tuple[torch.Tensor, torch.Tensor, Interval]:
    """(code_lo, code_hi [K,C,H,W], pose interval [K]) of the pose encoder over image boxes (rotation, scaling)."""
    h, w = lo.shape[-2:]
    if kind == "orientation":
        p = orientation_bounds(lo, hi)
        boxes = rotation_coordinate_boxes(h, w, -p[1], -p[0])  # the code is y rotated by -pose
    elif kind == "log_radius":
        p = log_radius_bounds(lo, hi)
        f_lo, f_hi = torch.exp(LOG_R0 - p[1]), torch.exp(LOG_R0 - p[0])  # zoom factor exp(LOG_R0 - pose)
        boxes = scaling_coordinate_boxes(h, w, f_lo - 1, f_hi - 1)
    else:
        raise ValueError(f"no interval bounds for the pose of {kind!r}")
    c_lo, c_hi = _resample_box(lo, hi, boxes)
    window = canonical_window(kind, h, w, dtype=c_lo.dtype, device=c_lo.device)
    c_lo, c_hi = c_lo * window, c_hi * window  # a 0/1 mask: monotone
    if content_blur > 0:
        c_lo, c_hi = gaussian_smooth(c_lo, content_blur), gaussian_smooth(c_hi, content_blur)
    return c_lo, c_hi, p


def pose_cell_distance(kind: str, x: torch.Tensor, pixel_bounds, content_blur: float, c0: torch.Tensor,
                       p0: torch.Tensor, param_norm, sigma2: float):
    """A function (theta_lo, theta_hi) [K,1] -> [K] upper bounds on ||F2(tau(xi, x)) - F2(x)||_{Sigma^-1}
    over each cell: the code part ||.||_2 / sigma2 (Sigma = sigma2^2 I on the code channels) and the
    parameter part ``param_norm(|pose - p0|)`` (monotone in the pose shift), combined in quadrature
    because Sigma is block diagonal (A1 lives on the parameter channels only)."""
    c0 = c0.to(torch.float64)

    def bound(theta_lo: torch.Tensor, theta_hi: torch.Tensor) -> torch.Tensor:
        lo, hi = pixel_bounds(x, theta_lo, theta_hi)
        c_lo, c_hi, p = canonical_bounds(kind, lo, hi, content_blur)
        dev = torch.maximum((c_hi - c0).abs(), (c0 - c_lo).abs()).flatten(1)
        shift = torch.maximum((p[1] - p0).abs(), (p0 - p[0]).abs())
        d2 = (dev.norm(dim=1) / sigma2) ** 2 + param_norm(shift) ** 2
        return torch.where(torch.isfinite(d2), d2.sqrt(), torch.full_like(d2, math.inf))

    return bound
