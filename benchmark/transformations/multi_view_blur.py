"""Blurs that average several geometric views: rotational blur and zoom blur.

Both are means of bilinear rotations/zooms about the image centre (see
:mod:`benchmark.transformations.geometric`) and are differentiable in ``theta``.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from benchmark.transformations.base import Kind, Norm, Transformation
from benchmark.transformations.geometric import rotate_images, zoom_images


@dataclass(frozen=True)
class RotationalBlur(Transformation):
    """Rotational blur: mean of ``views`` (16) rotations at ``linspace(-theta, theta, views)``
    degrees about the centre, ``theta`` in [0, 90]; bilinear, zero padding. ``theta = 0``
    is the identity up to interpolation round-off (~1e-6)."""

    name: str = "rotational_blur"
    dim: int = 1
    kind: Kind = "non_resolvable"
    norm: Norm = "l2"
    units: str = "max rotation angle (degrees)"
    low: tuple[float, ...] = (0.0,)
    high: tuple[float, ...] = (90.0,)
    one_sided: bool = True
    differentiable: bool = True
    description: str = "mean of 16 rotations in [-theta, theta] degrees about the centre"
    views: int = 16

    def _apply(self, x: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
        B, K = x.shape[0], self.views
        t = torch.linspace(-1.0, 1.0, K, dtype=x.dtype, device=x.device)
        angles = (theta[:, :1] * t[None, :]).reshape(B * K)  # sample-major
        xr = x.repeat_interleave(K, dim=0)
        return rotate_images(xr, angles).view(B, K, *x.shape[1:]).mean(dim=1)


@dataclass(frozen=True)
class ZoomBlur(Transformation):
    """Zoom blur (as in CIFAR-10-C): mean of ``x`` and ``views`` (8) zooms about the
    centre with factors ``1 + z*t``, ``t = linspace(1/views, 1, views)``; ``z`` in [0, 1].
    ``z = 0`` is the identity up to interpolation round-off (~1e-6)."""

    name: str = "zoom_blur"
    dim: int = 1
    kind: Kind = "non_resolvable"
    norm: Norm = "l2"
    units: str = "max zoom factor minus 1"
    low: tuple[float, ...] = (0.0,)
    high: tuple[float, ...] = (1.0,)
    one_sided: bool = True
    differentiable: bool = True
    description: str = "mean of x and 8 zooms with factors up to 1+z about the centre"
    views: int = 8

    def _apply(self, x: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
        B, K = x.shape[0], self.views
        t = torch.linspace(1.0 / K, 1.0, K, dtype=x.dtype, device=x.device)
        factors = (1.0 + theta[:, :1] * t[None, :]).reshape(B * K)
        zoomed = zoom_images(x.repeat_interleave(K, dim=0), factors).view(B, K, *x.shape[1:])
        return (x + zoomed.sum(dim=1)) / (K + 1)


ROTATIONAL_BLUR = RotationalBlur()
ZOOM_BLUR = ZoomBlur()
