"""Gaussian blur implemented exactly in the Fourier domain.

The parameter is the kernel VARIANCE ``alpha`` (px^2), not the standard
deviation: Gaussian variances add under convolution, so with variance as the
parameter the family is additive.

The blur multiplies the 2-D DFT of each channel by the transfer function
``exp(-2 pi^2 alpha (fx^2 + fy^2))`` (``fx``, ``fy`` in cycles/pixel from
``torch.fft.fftfreq``), i.e. a Gaussian convolution with periodic (circular)
boundary conditions. Because transfer functions multiply,
``blur(blur(x, a), b) == blur(x, a + b)`` holds exactly up to float rounding.
This exact composition is the reason for the Fourier implementation: the TSS
certificate for additive transformations assumes it, and a spatial kernel with
truncation and border padding would only satisfy it approximately.

The blur is computed in float64 and rounded once to the image's dtype, whatever that dtype
is: a float32 image is then within one float32 rounding (plus a float64 FFT error ~1e-15) of
the exact blur, pixel by pixel. A float32 FFT would add an error spread over the whole
spectrum, which swamps the weak high frequencies of a blurred image and has no tight bound;
GSmooth's proven Gaussian-blur bound (baselines/gsmooth/blur_bound.py) rests on this.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from benchmark.transformations.base import Kind, Norm, Transformation


def fourier_gaussian_blur(x: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """Circular Gaussian blur of ``x [B,C,H,W]`` with per-sample variance ``alpha [B]``.

    Differentiable in ``x`` and ``alpha``; keeps dtype and device (computed in float64, rounded once:
    see the module docstring).
    """
    H, W = x.shape[-2:]
    x64 = x.to(torch.float64)
    fy = torch.fft.fftfreq(H, dtype=torch.float64, device=x.device)
    fx = torch.fft.rfftfreq(W, dtype=torch.float64, device=x.device)
    f2 = fy[:, None] ** 2 + fx[None, :] ** 2  # [H, W//2+1]
    transfer = torch.exp(-2.0 * math.pi**2 * alpha.to(torch.float64).view(-1, 1, 1, 1) * f2)
    spec = torch.fft.rfft2(x64, dim=(-2, -1))
    return torch.fft.irfft2(spec * transfer, s=(H, W), dim=(-2, -1)).to(x.dtype)


@dataclass(frozen=True)
class GaussianBlur(Transformation):
    """Gaussian blur with ``theta = (alpha,)``, alpha = kernel variance in px^2, in [0, 1000].

    Periodic boundary (see module docstring); composes exactly:
    ``apply(apply(x, a), b) == apply(x, a + b)``.
    """

    composition = "sum"
    defense_defaults = {"tss": {"smoothing": "exponential", "scale": 2.0},
                        "gsmooth": {"sigma1": 2.0, "pose": "spectral_slope"}}

    name: str = "gaussian_blur"
    dim: int = 1
    kind: Kind = "additive"
    norm: Norm = "l2"
    units: str = "kernel variance (px^2)"
    low: tuple[float, ...] = (0.0,)
    high: tuple[float, ...] = (1000.0,)  # large: TSS adds exponential noise on top of the attack
    one_sided: bool = True
    differentiable: bool = True
    description: str = "Gaussian blur by kernel variance, exact FFT (circular) so variances add"
    revision: int = 1  # 1: computed in float64 and rounded once (was float32 FFTs)

    def _apply(self, x: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
        return fourier_gaussian_blur(x, theta[:, 0])

    def _pixel_bounds(self, x: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Kernel-weight intervals: the blur is a circular convolution with a kernel that is a sum of
        cosine terms, each monotone in alpha, so every kernel tap lies between termwise bounds from the
        interval's endpoints; as x >= 0, convolving x with the lower / upper tap bounds bounds the
        pixel (taps may be negative: no sign is needed). Widened by the one rounding to the image's
        dtype and a float64 FFT round-off bound (see bounds/fourier.py)."""
        from benchmark.transformations.bounds.fourier import gaussian_blur_bounds

        return gaussian_blur_bounds(x, lo[:, 0], hi[:, 0])


GAUSSIAN_BLUR = GaussianBlur()
