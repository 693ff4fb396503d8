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
