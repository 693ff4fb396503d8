"""Bounds of brightness (x + b) and contrast+brightness (exp(k)(x + b)) over a parameter box.

Neither transformation clips (see photometric.py), so the bounds are those of the formulas.
"""
from __future__ import annotations

import torch

from benchmark.transformations.bounds import U32, float32_hull

#: relative error of float32 exp (torch's vectorised expf is within 1 ulp; 4 ulp assumed).
EXP_REL = 8 * U32


def brightness_bounds(x: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x + b is increasing in b: the box's endpoints (after the float32 hull, since apply rounds b)
    bound it exactly; one float32 addition adds at most U32 |x + b|."""
    b_lo, b_hi = float32_hull(lo, hi)
    p_lo = x + b_lo.view(-1, 1, 1, 1)
    p_hi = x + b_hi.view(-1, 1, 1, 1)
    slack = 2 * U32 * torch.maximum(p_lo.abs(), p_hi.abs())
    return p_lo - slack, p_hi + slack


def contrast_brightness_bounds(x: torch.Tensor, lo: torch.Tensor,
                               hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """exp(k)(x + b) = u (x + b) with u = exp(k) > 0 increasing in k: a bilinear function of (u, b), so
    over the box [exp(k_lo), exp(k_hi)] x [b_lo, b_hi] its extremes are at the four corners.

    The float32 result fl(fl(exp(k)) fl(x + b)) is within (EXP_REL + 2 U32 + small) of the exact
    value relatively; the slack is 2 (EXP_REL + 2 U32) times the largest corner magnitude.
    """
    h_lo, h_hi = float32_hull(lo, hi)
    u = torch.stack([torch.exp(h_lo[:, 0]), torch.exp(h_hi[:, 0])])  # [2, N]
    b = torch.stack([h_lo[:, 1], h_hi[:, 1]])
    corners = torch.stack([u[i].view(-1, 1, 1, 1) * (x + b[j].view(-1, 1, 1, 1)) for i in (0, 1) for j in (0, 1)])
    p_lo, p_hi = corners.amin(0), corners.amax(0)
    slack = 2 * (EXP_REL + 2 * U32) * corners.abs().amax(0)
    return p_lo - slack, p_hi + slack


# Exact linear perturbation layers (Semanify-NN's; the verifiers reach them through Transformation.linear_layer): for brightness and contrast+brightness: exact linear maps over a parameter box.
#
# * brightness x + b is linear in b: the layer is ``image = A z + c`` with z = b, A = 1, c = x.
# * contrast+brightness exp(k)(x + b) is bilinear in (exp(k), b). With u = exp(k) and w = u b the
#   image is u x + w, exactly linear in z = (u, w). For a box of (k, b) the reachable (u, w) lie in
#   the box [exp(k_lo), exp(k_hi)] x [min, max of u b over the four corners] (u b is bilinear in
#   (u, b), so its extremes over the (u, b) box are at corners). Bounding over that (u, w) box is a
#   sound linear relaxation that keeps every pixel tied to the same two variables, so CROWN sees
#   the correlation between pixels instead of independent pixel intervals.
#
# Each layer returns (A ``[P, m']``, c ``[P]``, z_lo ``[N, m']``, z_hi ``[N, m']``) in float64.


def brightness_layer(x: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor):
    """Linear layer for x + b with b in ``[lo[n], hi[n]]`` (``lo, hi [N, 1]``)."""
    flat = x.reshape(-1).to(torch.float64)
    a = torch.ones(flat.numel(), 1, dtype=torch.float64)
    return a, flat, lo.to(torch.float64), hi.to(torch.float64)


def contrast_brightness_layer(x: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor):
    """Linear layer for exp(k)(x + b) over boxes ``lo, hi [N, 2]`` of (k, b), in variables (u, w)."""
    flat = x.reshape(-1).to(torch.float64)
    lo, hi = lo.to(torch.float64), hi.to(torch.float64)
    u_lo, u_hi = torch.exp(lo[:, 0]), torch.exp(hi[:, 0])
    corners = torch.stack([u_lo * lo[:, 1], u_lo * hi[:, 1], u_hi * lo[:, 1], u_hi * hi[:, 1]])
    a = torch.stack([flat, torch.ones_like(flat)], dim=1)
    z_lo = torch.stack([u_lo, corners.amin(0)], dim=1)
    z_hi = torch.stack([u_hi, corners.amax(0)], dim=1)
    return a, torch.zeros_like(flat), z_lo, z_hi
