"""Perturbation layers for rotation and scaling: sound per-pixel bounds over a parameter sub-interval.

The bounds are the registry's own (``Transformation.pixel_bounds``, implemented in
:mod:`benchmark.transformations.bounds.geometric`: exact bilinear range over source-coordinate
boxes widened by COORD_SLACK, values by VALUE_SLACK). They are computed here in float64 from the
float32 image; their slacks are sized for float32, so they also hold for the float32 images the
network sees.
"""
from __future__ import annotations

import torch

from benchmark.transformations import get_transformation
from benchmark.transformations.bounds.geometric import (  # noqa: F401  (re-exported for callers)
    COORD_SLACK,
    VALUE_SLACK,
    rotation_coordinate_boxes,
    scaling_coordinate_boxes,
)


def geometric_pixel_bounds(name: str, x: torch.Tensor, lo: torch.Tensor,
                           hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-pixel bounds ``[N, C*H*W]`` (float64) of transformation ``name`` (rotation or scaling)
    applied to ``x [1, C, H, W]`` for every parameter in ``[lo[n], hi[n]]`` (``[N]`` each)."""
    if name not in ("rotation", "scaling"):
        raise ValueError(f"no geometric perturbation layer for '{name}'")
    t = get_transformation(name)
    p_lo, p_hi = t.pixel_bounds(x.to(torch.float64), lo.to(torch.float64)[:, None], hi.to(torch.float64)[:, None])
    return p_lo.flatten(1), p_hi.flatten(1)
