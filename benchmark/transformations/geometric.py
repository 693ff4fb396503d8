"""Geometric transformations about the image centre: rotation and scaling.

Both use bilinear interpolation with zero padding outside the image and are
differentiable in ``theta`` (almost everywhere: bilinear interpolation is
piecewise linear in the sampling coordinates). kornia is imported lazily, only
when a rotation is actually computed.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from benchmark.transformations.base import Kind, Norm, Transformation


def rotate_images(x: torch.Tensor, angle_deg: torch.Tensor) -> torch.Tensor:
    """Rotate ``x [B,C,H,W]`` by ``angle_deg [B]`` degrees counter-clockwise (as displayed,
    rows going down) about the image centre ``((W-1)/2, (H-1)/2)``; bilinear, zero padding.

    Differentiable in ``x`` and ``angle_deg`` (kornia builds the rotation matrix with
    differentiable ops). Angle 0 reproduces ``x`` up to ~1e-6 interpolation round-off.
    """
    from kornia.geometry.transform import rotate  # lazy: keep `import benchmark.transformations` light

    return rotate(x, angle_deg.to(x.dtype), mode="bilinear", padding_mode="zeros", align_corners=True)


def zoom_images(x: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """Zoom ``x [B,C,H,W]`` by per-sample ``factor [B]`` (>1 enlarges the content) about the
    image centre; bilinear, zero padding (only reached when ``factor < 1``).

    Output pixel at normalised position ``p`` samples the input at ``p / factor``
    (``align_corners=False``, so normalised coordinates are proportional to pixel
    offsets from the centre). Differentiable in ``x`` and ``factor``.
    """
    B = x.shape[0]
    inv = 1.0 / factor.to(x.dtype)
    zero = torch.zeros_like(inv)
    mat = torch.stack(
        [torch.stack([inv, zero, zero], dim=-1), torch.stack([zero, inv, zero], dim=-1)], dim=1
    )  # [B, 2, 3]
    grid = F.affine_grid(mat, [B, *x.shape[1:]], align_corners=False)
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)


@dataclass(frozen=True)
class Rotation(Transformation):
    """Rotation by ``theta = (angle,)`` degrees in [-180, 180], counter-clockwise positive
    (as the image is displayed), about the image centre; bilinear, zero padding (the
    corners that rotate in from outside are black)."""

    name: str = "rotation"
    dim: int = 1
    kind: Kind = "resolvable"
    norm: Norm = "l2"
    units: str = "degrees (counter-clockwise)"
    low: tuple[float, ...] = (-180.0,)
    high: tuple[float, ...] = (180.0,)
    one_sided: bool = False
    differentiable: bool = True
    description: str = "rotation about the centre, bilinear, zero padding"

    def _apply(self, x: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
        return rotate_images(x, theta[:, 0])

    def _pixel_bounds(self, x: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Output pixel (i, j) is the bilinear interpolant f of x (zero outside) at the source point
        (u, v)(a) = c + R(a) (j - c_x, i - c_y). Over an angle interval, u and v each range over an
        exactly computed interval (R cos(a + phi): endpoints or +-R where a + phi crosses a multiple
        of pi), so (u, v) stays in their product box. f is bilinear on every unit cell, so its min and
        max over a box are attained on the grid {box edges, integers between} (exact range). The box
        is widened by COORD_SLACK px (float32 coordinate and angle round-off of kornia's rotate,
        ~1e-5 px) and values by VALUE_SLACK (float32 interpolation round-off). See bounds/geometric.py.
        """
        from benchmark.transformations.bounds.geometric import rotation_bounds

        return rotation_bounds(x, lo[:, 0], hi[:, 0])


@dataclass(frozen=True)
class Scaling(Transformation):
    """Zoom about the image centre by factor ``1 + theta`` with ``theta`` in [-0.5, 1.0]
    (factor in [0.5, 2]; positive theta enlarges the content, negative shrinks it and
    pads with zeros); bilinear."""

    name: str = "scaling"
    dim: int = 1
    kind: Kind = "resolvable"
    norm: Norm = "l2"
    units: str = "scale factor minus 1"
    low: tuple[float, ...] = (-0.5,)
    high: tuple[float, ...] = (1.0,)
    one_sided: bool = False
    differentiable: bool = True
    description: str = "zoom about the centre by factor 1+theta, bilinear, zero padding"

    def _apply(self, x: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
        return zoom_images(x, 1.0 + theta[:, 0])

    def _pixel_bounds(self, x: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Output pixel (i, j) is the bilinear interpolant of x at u = c_x + (j - c_x)/s,
        v = c_y + (i - c_y)/s, s = 1 + theta > 0: both are monotone in 1/s, so the interval's endpoints
        give their exact ranges, and the exact bilinear range over that box (widened by COORD_SLACK px,
        values by VALUE_SLACK for float32 round-off) bounds the pixel, as for rotation.
        """
        from benchmark.transformations.bounds.geometric import scaling_bounds

        return scaling_bounds(x, lo[:, 0], hi[:, 0])


ROTATION = Rotation()
SCALING = Scaling()
