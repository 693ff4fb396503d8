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

    defense_defaults = {"gsmooth": {"sigma1": 5.0}}

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

    def _pixel_bounds(self, x: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """View k is the rotation by t_k * theta, t_k = linspace(-1, 1, views): as theta ranges over
        [lo, hi], its angle ranges exactly over the interval between t_k lo and t_k hi (linear in theta),
        so the rotation bounds over that interval hold for view k at every theta in the box (their
        COORD_SLACK also covers the float32 rounding of t_k and of the product, < 1e-5 px). Every view
        lies in its bounds for the same theta, hence the mean of the views between the means of the
        bounds, widened by the float32 round-off of the mean (view_mean_bounds)."""
        from benchmark.transformations.bounds.geometric import rotation_bounds, view_mean_bounds

        t = torch.linspace(-1.0, 1.0, self.views, dtype=torch.float64)
        ends = torch.stack([lo[:, :1] * t, hi[:, :1] * t])  # [2, N, views]
        v_lo, v_hi = rotation_bounds(x, ends.amin(0).flatten(), ends.amax(0).flatten())
        shape = (lo.shape[0], self.views, *x.shape[1:])
        return view_mean_bounds(v_lo.view(shape), v_hi.view(shape))


@dataclass(frozen=True)
class ZoomBlur(Transformation):
    """Zoom blur (as in CIFAR-10-C): mean of ``x`` and ``views`` (8) zooms about the
    centre with factors ``1 + z*t``, ``t = linspace(1/views, 1, views)``; ``z`` in [0, 1].
    ``z = 0`` is the identity up to interpolation round-off (~1e-6)."""

    defense_defaults = {"gsmooth": {"sigma1": 0.1}}

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

    def _pixel_bounds(self, x: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """View k is the zoom by 1 + z t_k, t_k = linspace(1/views, 1, views) > 0: as z ranges over
        [lo, hi] its scaling parameter ranges exactly over [t_k lo, t_k hi], so the scaling bounds over
        that interval hold for view k at every z in the box (COORD_SLACK covers the float32 rounding of
        t_k and of the factor). With x itself as one more (exact) term, the mean lies between the means
        of the bounds, widened by the float32 round-off of the sum and division (view_mean_bounds)."""
        from benchmark.transformations.bounds.geometric import scaling_bounds, view_mean_bounds

        t = torch.linspace(1.0 / self.views, 1.0, self.views, dtype=torch.float64)
        v_lo, v_hi = scaling_bounds(x, (lo[:, :1] * t).flatten(), (hi[:, :1] * t).flatten())
        shape = (lo.shape[0], self.views, *x.shape[1:])
        return view_mean_bounds(v_lo.view(shape), v_hi.view(shape), extra=x[0])


ROTATIONAL_BLUR = RotationalBlur()
ZOOM_BLUR = ZoomBlur()
