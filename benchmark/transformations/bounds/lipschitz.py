"""Lipschitz bounds in theta of bilinear resampling: what slice certificates pay between sample points.

``theta -> m * T(x, theta)`` for a resampling T (rotation, scaling): output pixel p is the bilinear
interpolant of the zero-padded image at a source point s_p(theta). Bilinear interpolation is piecewise
bilinear in s with ``|grad_s I| <= G = sqrt(max|dx|^2 + max|dy|^2)`` (largest horizontal / vertical
neighbour differences, zero padding included), so
``||d/dtheta (m * T(x, theta))||_2 <= sqrt(sum_channels G_ch^2 * sum_p m_p^2 |ds_p/dtheta|^2)``.
Each transformation supplies ``|ds_p/dtheta|^2`` (its source-point speed); all arithmetic is float64.
"""
from __future__ import annotations

import math

import torch

from benchmark.errors import BenchError

#: added to a slice bound computed in float64: the float32 round-off of T(x, theta) between the bound's float64
#: images and the queried ones (round-off ~1e-7 per pixel; an l2 distance over a few thousand pixels stays far below)
FLOAT32_ALLOWANCE = 1e-4


def _radius2(h: int, w: int) -> torch.Tensor:
    """Squared distance of every pixel to the centre ((W-1)/2, (H-1)/2), float64 [H, W]."""
    yy, xx = torch.meshgrid(torch.arange(h, dtype=torch.float64), torch.arange(w, dtype=torch.float64), indexing="ij")
    return (yy - (h - 1) / 2) ** 2 + (xx - (w - 1) / 2) ** 2


def rotation_speed2(h: int, w: int) -> torch.Tensor:
    """Rotation: the source point of pixel p moves at ``|p - c| * pi/180`` px per degree (squared, [H, W])."""
    return _radius2(h, w) * (math.pi / 180) ** 2


def scaling_speed2(h: int, w: int, budget: float) -> torch.Tensor:
    """Scaling by 1 + theta: the source point moves at most ``|p - c| / (1 - B)^2`` px per unit of theta over
    ``|theta| <= B`` (squared, [H, W])."""
    f_min = 1.0 - budget
    if f_min <= 0:
        raise BenchError(f"scaling budget {budget} reaches factor <= 0; use budgets below 1.")
    return _radius2(h, w) / f_min**4


def interpolation_lipschitz(x: torch.Tensor, speed2: torch.Tensor, mask: torch.Tensor) -> float:
    """The bound of the module docstring for one image ``x [1,C,H,W]`` and mask ``[1,1,H,W]`` (float64)."""
    xp = torch.nn.functional.pad(x.to(torch.float64), (1, 1, 1, 1))
    dx = (xp[..., :, 1:] - xp[..., :, :-1]).abs().amax(dim=(-2, -1))  # [1,C]
    dy = (xp[..., 1:, :] - xp[..., :-1, :]).abs().amax(dim=(-2, -1))
    g2 = (dx**2 + dy**2).sum()
    return float(torch.sqrt(g2 * (mask[0, 0].to(torch.float64) ** 2 * speed2).sum()))
