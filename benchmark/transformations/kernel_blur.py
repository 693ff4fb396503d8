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
    if kh == 1 and kw == 1:
        return x * kernels.view(B, 1, 1, 1).to(x.dtype)
    xp = reflect_pad(x, kh, kw)
    weight = kernels.to(x.dtype)[:, None].expand(B, C, kh, kw).reshape(B * C, 1, kh, kw)
    out = F.conv2d(xp.reshape(1, B * C, H + 2 * ph, W + 2 * pw), weight, groups=B * C)
    return out.view(B, C, H, W)


def reflect_pad(x: torch.Tensor, kh: int, kw: int) -> torch.Tensor:
    """``x [B,C,H,W]`` reflect-padded by half an odd ``kh x kw`` kernel on each side (the blurs' border rule)."""
    H, W = x.shape[-2:]
    ph, pw = kh // 2, kw // 2
    if ph >= H or pw >= W:
        raise BenchError(f"kernel {kh}x{kw} too large for reflect padding of {H}x{W} images")
    return F.pad(x, (pw, pw, ph, ph), mode="reflect") if (ph or pw) else x


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

    defense_defaults = {"gsmooth": {"sigma1": 1.0}}

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

    def _pixel_bounds(self, x: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Kernel-weight intervals: each unnormalised weight clamp(r + 0.5 - d, 0, 1) is nondecreasing in
        r, each normalised weight g_j / (g_j + S_-j) is monotone in g_j and S_-j, so it lies in an
        interval [wl, wh] for every r in the box. As x >= 0 and the weights sum to 1, the pixel lies
        between the min and max of sum w x over {wl <= w <= wh, sum w = 1} (a fractional knapsack,
        solved exactly; never looser than sum wl x and sum wh x), widened by the float32 round-off of
        weights, normalisation and convolution. See bounds/kernels.py."""
        from benchmark.transformations.bounds import float32_hull
        from benchmark.transformations.bounds.kernels import disk_distances, soft_kernel_bounds

        r_lo, r_hi = float32_hull(lo[:, 0], hi[:, 0])
        return soft_kernel_bounds(x, r_lo, r_hi, disk_distances, min(x.shape[-2:]) - 1, _half_width, reflect_pad)


@dataclass(frozen=True)
class MotionBlur(Transformation):
    """Horizontal motion blur of length ``theta = (L,)`` px, L in [0, 12].

    A horizontal line kernel centred on the pixel with soft ends by coverage, normalised;
    ``L = 0`` (indeed every ``L <= 1``) is the identity. Reflect padding.
    """

    defense_defaults = {"gsmooth": {"sigma1": 2.0}}

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

    def _pixel_bounds(self, x: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Kernel-weight intervals, as for defocus blur with extent L/2 (exact in floating point) and
        tap distances |j| along the row; see bounds/kernels.py."""
        from benchmark.transformations.bounds import float32_hull
        from benchmark.transformations.bounds.kernels import line_distances, soft_kernel_bounds

        l_lo, l_hi = float32_hull(lo[:, 0], hi[:, 0])
        return soft_kernel_bounds(x, l_lo / 2, l_hi / 2, line_distances, x.shape[-1] - 1, _half_width, reflect_pad)


DEFOCUS_BLUR = DefocusBlur()
MOTION_BLUR = MotionBlur()
