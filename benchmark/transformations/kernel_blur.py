"""Blurs with a per-sample convolution kernel: defocus (disk) and horizontal motion.

Kernels are built from "soft" pixel weights that are piecewise linear in the
parameter, so the blurs are continuous and differentiable almost everywhere in
``theta``. The kernel size of a batch is set by its largest parameter; samples
with smaller parameters get zero weights at the outer taps, so a sample gives
the same result alone or in a batch.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from benchmark.errors import BenchError
from benchmark.transformations.base import Kind, Norm, Transformation


def conv_per_sample(x: torch.Tensor, kernels: torch.Tensor) -> torch.Tensor:
    """Filter each image of ``x [B,C,H,W]`` with its own kernel ``kernels [B,kh,kw]``.

    Odd kernel sizes, centred; reflect padding at the borders; the same kernel for all
    channels of a sample. Implemented as one grouped ``conv2d`` with a ``[B*C,1,kh,kw]``
    weight. ``conv2d`` is a cross-correlation: the kernels used here are symmetric, so
    this equals convolution. Differentiable in ``x`` and ``kernels``.
    """
    B, C, H, W = x.shape
    kh, kw = kernels.shape[-2:]
    ph, pw = kh // 2, kw // 2
    if ph >= H or pw >= W:
        raise BenchError(f"kernel {kh}x{kw} too large for reflect padding of {H}x{W} images")
    if kh == 1 and kw == 1:
        return x * kernels.view(B, 1, 1, 1).to(x.dtype)
    xp = F.pad(x, (pw, pw, ph, ph), mode="reflect") if (ph or pw) else x
    weight = kernels.to(x.dtype)[:, None].expand(B, C, kh, kw).reshape(B * C, 1, kh, kw)
    out = F.conv2d(xp.reshape(1, B * C, H + 2 * ph, W + 2 * pw), weight, groups=B * C)
    return out.view(B, C, H, W)


def _half_width(extent: float, limit: int) -> int:
    """Largest integer offset ``j`` with ``extent + 0.5 - j > 0`` (>= 0), capped at ``limit``."""
    return max(0, min(limit, math.ceil(extent + 0.5) - 1))


def disk_kernels(radius: torch.Tensor, limit: int) -> torch.Tensor:
    """Soft disk kernels ``[B,k,k]``: weight ``clamp(r + 0.5 - dist, 0, 1)``, normalised.

    ``r = 0`` (indeed any ``r <= 0.5``) gives the one-hot identity kernel.
    """
    h = _half_width(float(radius.detach().max()), limit)
    off = torch.arange(-h, h + 1, dtype=radius.dtype, device=radius.device)
    dist = torch.sqrt(off[:, None] ** 2 + off[None, :] ** 2)
    w = torch.clamp(radius.view(-1, 1, 1) + 0.5 - dist, 0.0, 1.0)
    return w / w.sum(dim=(-2, -1), keepdim=True)


def line_kernels(length: torch.Tensor, limit: int) -> torch.Tensor:
    """Horizontal soft line kernels ``[B,1,k]`` of length ``L`` centred on the pixel.

    Pixel ``j`` gets the length of ``[-L/2, L/2]`` inside its footprint
    ``[j-0.5, j+0.5]`` (coverage), i.e. ``clamp(L/2 + 0.5 - |j|, 0, 1)`` for the soft
    ends (the centre tap uses the same formula, which is 1 once ``L >= 1``); normalised.
    ``L <= 1`` stays inside the centre pixel and gives the identity.
    """
    h = _half_width(float(length.detach().max()) / 2, limit)
    off = torch.arange(-h, h + 1, dtype=length.dtype, device=length.device).abs()
    w = torch.clamp(length.view(-1, 1, 1) / 2 + 0.5 - off, 0.0, 1.0)
    return w / w.sum(dim=(-2, -1), keepdim=True)


@dataclass(frozen=True)
class DefocusBlur(Transformation):
    """Defocus blur: normalised soft disk of radius ``theta = (r,)`` px, r in [0, 8].

    Pixel weight ``clamp(r + 0.5 - dist, 0, 1)``; ``r = 0`` is exactly the identity
    (and so is every ``r <= 0.5``: the gradient in ``r`` is zero there). Reflect padding.
    """

    name: str = "defocus_blur"
    dim: int = 1
    kind: Kind = "non_resolvable"
    norm: Norm = "l2"
    units: str = "disk radius (px)"
    low: tuple[float, ...] = (0.0,)
    high: tuple[float, ...] = (8.0,)
    one_sided: bool = True
    differentiable: bool = True
    description: str = "defocus blur with a soft disk kernel of radius r (reflect padding)"

    def _apply(self, x: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
        limit = min(x.shape[-2:]) - 1
        return conv_per_sample(x, disk_kernels(theta[:, 0], limit))


@dataclass(frozen=True)
class MotionBlur(Transformation):
    """Horizontal motion blur of length ``theta = (L,)`` px, L in [0, 12].

    A horizontal line kernel centred on the pixel with soft ends by coverage, normalised;
    ``L = 0`` (indeed every ``L <= 1``) is the identity. Reflect padding.
    """

    name: str = "motion_blur"
    dim: int = 1
    kind: Kind = "non_resolvable"
    norm: Norm = "l2"
    units: str = "blur length (px, horizontal)"
    low: tuple[float, ...] = (0.0,)
    high: tuple[float, ...] = (12.0,)
    one_sided: bool = True
    differentiable: bool = True
    description: str = "horizontal motion blur with a soft line kernel of length L (reflect padding)"

    def _apply(self, x: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
        limit = x.shape[-1] - 1
        return conv_per_sample(x, line_kernels(theta[:, 0], limit))


DEFOCUS_BLUR = DefocusBlur()
MOTION_BLUR = MotionBlur()
