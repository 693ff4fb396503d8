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
  convex polygon are supporting rays, which pass through vertices); a box that meets the cut but not the
  origin splits into its Y >= 0 and Y <= 0 halves, each continuous (the orientation near +90 and near -90:
  ``orientation_branches``), which the sliced certificate bounds against two references
  (``orientation_cell_distance``); a box holding the origin leaves the orientation unbounded in (-90, 90];
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


def _axis_moments(lo: torch.Tensor, hi: torch.Tensor) -> tuple[Interval, Interval]:
    """Bounds on (X, Y) = (mu02 - mu20, 2 mu11) over the image boxes: orientation = 1/2 atan2(Y, X)."""
    wl, wh, u, v = _moments(lo, hi)
    m = _linear(wl, wh, torch.ones_like(u))
    m = (m[0].clamp_min(1e-8), m[1].clamp_min(1e-8))
    cu, cv = _div(_linear(wl, wh, u), m), _div(_linear(wl, wh, v), m)
    mu20 = _sub(_div(_linear(wl, wh, u * u), m), _square(cu))
    mu02 = _sub(_div(_linear(wl, wh, v * v), m), _square(cv))
    mu11 = _sub(_div(_linear(wl, wh, u * v), m), _mul(cu, cv))
    return _sub(mu02, mu20), (2 * mu11[0], 2 * mu11[1])


def _half_angle_deg(Y: tuple, X: tuple) -> Interval:
    """1/2 atan2 in degrees over the corners of the box Y x X (its range where the box avoids the branch cut)."""
    corners = torch.stack([torch.atan2(y, x) for y in Y for x in X])
    return torch.rad2deg(0.5 * corners.amin(0)), torch.rad2deg(0.5 * corners.amax(0))


def orientation_branches(lo: torch.Tensor, hi: torch.Tensor) -> tuple[Interval, Interval, Interval, torch.Tensor]:
    """(whole, upper, lower, split) bounds (degrees) on pose.orientation over the image boxes [K,C,H,W].

    ``whole``: the orientation's range, (-90, 90] where the box of (X, Y) meets the branch cut {X <= 0, Y = 0}
    (the orientation wraps from +90 to -90 there: the canonical code turns by 180 degrees, a real jump of the
    encoder). ``split`` marks the boxes that meet the cut but not the origin (X < 0 throughout): every image of
    such a box has its orientation in ``upper`` = [1/2 min atan2 over X x [0, Y1], 90] (Y >= 0) or in ``lower``
    = [-90, 1/2 max atan2 over X x [Y0, 0]] (Y <= 0), both continuous pieces of the second and third quadrants,
    whose extremes lie at corners as above. Y = 0 itself is in both (atan2 gives +180 for +0 and -180 for -0).

    Floating point: the deployed encoder evaluates the moments in float64 (relative error ~1e-16 per term), so a
    box whose Y range passes within ``CUT_SLACK`` of 0 (relative to the moments' size) on the negative-X side is
    treated as meeting the cut: its computed orientation may land on either branch."""
    X, Y = _axis_moments(lo, hi)
    slack = CUT_SLACK * (1 + torch.maximum(X[0].abs(), X[1].abs()) + torch.maximum(Y[0].abs(), Y[1].abs()))
    whole = _half_angle_deg(Y, X)
    cut = (X[0] <= 0) & (Y[0] <= slack) & (Y[1] >= -slack)  # the box meets the branch cut (or holds the origin)
    split = cut & (X[1] < -slack)
    zero = torch.zeros_like(Y[0])
    up = _half_angle_deg((zero, Y[1].clamp_min(0)), X)[0]
    low = _half_angle_deg((Y[0].clamp_max(0), -zero), X)[1]
    full = torch.full_like(up, 90.0)
    whole = (torch.where(cut, -full, whole[0]), torch.where(cut, full, whole[1]))
    return whole, (torch.where(split, up, -full), full), (-full, torch.where(split, low, full)), split


def orientation_bounds(lo: torch.Tensor, hi: torch.Tensor) -> Interval:
    """Bounds (degrees) on pose.orientation over the image boxes [K,C,H,W]; (-90, 90] where unbounded."""
    return orientation_branches(lo, hi)[0]


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


def canonical_bounds(kind: str, lo: torch.Tensor, hi: torch.Tensor, content_blur: float,
                     pose: Interval | None = None) -> tuple[torch.Tensor, torch.Tensor, Interval]:
    """(code_lo, code_hi [K,C,H,W], pose interval [K]) of the pose encoder over image boxes (rotation, scaling);
    ``pose``: a proven interval of the pose to use instead of the box's (one branch of the orientation)."""
    h, w = lo.shape[-2:]
    if kind == "orientation":
        p = orientation_bounds(lo, hi) if pose is None else pose
        boxes = rotation_coordinate_boxes(h, w, -p[1], -p[0])  # the code is y rotated by -pose
    elif kind == "log_radius":
        p = log_radius_bounds(lo, hi) if pose is None else pose
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


def _code_distance(kind: str, lo: torch.Tensor, hi: torch.Tensor, content_blur: float, c0: torch.Tensor,
                   p0: torch.Tensor, param_norm, sigma2: float, pose: Interval | None = None) -> torch.Tensor:
    """[K] upper bounds on ||F2(y) - (c0, p0)||_{Sigma^-1} over the image boxes [lo, hi] (pose_cell_distance)."""
    c_lo, c_hi, p = canonical_bounds(kind, lo, hi, content_blur, pose)
    c0 = c0.to(torch.float64)
    dev = torch.maximum((c_hi - c0).abs(), (c0 - c_lo).abs()).flatten(1)
    shift = torch.maximum((p[1] - p0).abs(), (p0 - p[0]).abs())
    d2 = (dev.norm(dim=1) / sigma2) ** 2 + param_norm(shift) ** 2
    return torch.where(torch.isfinite(d2), d2.sqrt(), torch.full_like(d2, math.inf))


def pose_cell_distance(kind: str, x: torch.Tensor, pixel_bounds, content_blur: float, c0: torch.Tensor,
                       p0: torch.Tensor, param_norm, sigma2: float):
    """A function (theta_lo, theta_hi) [K,1] -> [K] upper bounds on ||F2(tau(xi, x)) - F2(x)||_{Sigma^-1}
    over each cell: the code part ||.||_2 / sigma2 (Sigma = sigma2^2 I on the code channels) and the
    parameter part ``param_norm(|pose - p0|)`` (monotone in the pose shift), combined in quadrature
    because Sigma is block diagonal (A1 lives on the parameter channels only)."""
    def bound(theta_lo: torch.Tensor, theta_hi: torch.Tensor) -> torch.Tensor:
        lo, hi = pixel_bounds(x, theta_lo, theta_hi)
        return _code_distance(kind, lo, hi, content_blur, c0, p0, param_norm, sigma2)

    return bound


def orientation_cell_distance(x: torch.Tensor, pixel_bounds, content_blur: float, own: tuple, other: tuple,
                              upper: tuple, lower: tuple, param_norm, sigma2: float, cutoff: float):
    """A function (theta_lo, theta_hi) [K,1] -> (d, d_other, split, d_upper, d_lower) [K] each, for rotation's pose
    encoder; every reference is a pair (codes [K,C,H,W], poses [K]), one per cell:

    * ``d``: pose_cell_distance against ``own`` (very large where the cell's orientation wraps);
    * where ``d`` reaches ``cutoff``: ``d_other``, the same against ``other`` (the neighbouring endpoint, which may
      sit on the same branch of the orientation as the cell where ``own`` does not), and, where the cell's
      orientation box is ``split`` (orientation_branches: it meets the branch cut, not the origin), ``d_upper``
      bounding the distance to ``upper`` over the cell's parameters whose image lies on the upper branch
      (orientation near +90) and ``d_lower`` the distance to ``lower`` over those on the lower branch (near -90);
      infinite elsewhere. Every parameter of a split cell is on one branch (or both), so its code lies within
      d_upper of the upper reference or within d_lower of the lower one: the sliced certificate holds such a cell
      when both references' endpoints are certified against these distances."""
    def bound(theta_lo: torch.Tensor, theta_hi: torch.Tensor):
        lo, hi = pixel_bounds(x, theta_lo, theta_hi)
        d = _code_distance("orientation", lo, hi, content_blur, *own, param_norm, sigma2)
        _, up, low, split = orientation_branches(lo, hi)
        far = d >= cutoff
        split = split & far
        d_other, d_up, d_low = (torch.full_like(d, math.inf) for _ in range(3))
        for out, pose, (c0, p0), where in ((d_other, None, other, far), (d_up, up, upper, split),
                                           (d_low, low, lower, split)):
            k = where.nonzero().flatten()
            if len(k):
                out[k] = _code_distance("orientation", lo[k], hi[k], content_blur, c0[k], p0[k], param_norm, sigma2,
                                        None if pose is None else (pose[0][k], pose[1][k]))
        return d, d_other, split, d_up, d_low

    return bound


#: relative size (to the second moments) within which a box's Y range counts as meeting the branch cut
CUT_SLACK = 1e-9
