"""Bounds of the Fourier (circular) Gaussian blur over an interval of the variance alpha.

The blur multiplies the DFT of each channel by T_f(alpha) = exp(-2 pi^2 alpha r_f), r_f = fy^2 + fx^2
on the ``fftfreq`` grid. Grouping the frequencies by their value of r (r_f = r_{-f}, so each group is
Hermitian-symmetric), the output is exactly
    out(alpha) = sum_g B_g a_g(alpha),   a_g(alpha) = exp(-2 pi^2 alpha r_g),
where B_g = irfft2(X * 1[r = r_g]) is the real image made of x's own frequencies of radius r_g
(sum_g B_g = x). So:

1. every term B_g(i, j) a_g(alpha) is monotone in alpha (a_g is nonincreasing, B_g(i, j) has a fixed
   sign), hence lies between its values at the interval's endpoints, and each pixel lies between the
   sums of the termwise minima and maxima. No sign of x or of the kernel is needed, and grouping by
   r keeps the cancellations within a group exact; the bound is tight as the interval shrinks.
2. round-off of the real apply, which computes in float64 and rounds once to the image's dtype
   (gaussian_blur.py): (a) the float64 FFTs: for an FFT of n points,
   ||fl(FFT y) - FFT y||_2 <= eps ||FFT y||_2 with eps = log2(n) * eta, eta ~ 6.7u for radix-2
   Cooley-Tukey (Higham, Accuracy and Stability, Thm 24.2); we take eta = 8u for the library's
   mixed-radix FFT. T itself is off by at most ~11u absolutely (rounded argument, exp). So a
   channel's float64 output is off by at most (2 eps + 12u) ||x_c||_2 in l2, hence per pixel,
   with u = 2^-53; doubled for margin. This part rests on that FFT error model (an assumption about
   torch's FFT backend, checked by the tests), not on a proof about its code, but it is ~1e-14 of
   ||x||; (b) the one rounding to float32: |fl(v) - v| <= U32 |v| (round to nearest), and
   |v| <= max(|lo|, |hi|) + (a); doubled for margin.
"""
from __future__ import annotations

import math

import torch

from benchmark.transformations.bounds import U32, float32_hull

#: unit round-off of IEEE float64
U64 = 2.0 ** -53


def radius_components(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(B [G, C, H, W], r [G])``: x split into the real images of its frequencies of equal r = fy^2 + fx^2."""
    h, w = x.shape[-2:]
    r = torch.fft.fftfreq(h, dtype=torch.float64)[:, None] ** 2 + torch.fft.rfftfreq(w, dtype=torch.float64)[None, :] ** 2
    radii, group = torch.unique(r, return_inverse=True)  # r is exact for the same (|my|, |mx|): equal bits
    masks = (group[None] == torch.arange(len(radii))[:, None, None]).to(torch.float64)  # [G, H, W//2+1]
    spec = torch.fft.rfft2(x[0])  # [C, H, W//2+1]
    return torch.fft.irfft2(spec[None] * masks[:, None], s=(h, w)), radii


def fft_slack(h: int, w: int, unit: float = U64) -> float:
    """Per-pixel round-off of a Fourier blur computed with unit round-off ``unit``, per unit of
    ||x_c||_2 (module docstring, step 2a); also an l2 bound on a channel's error."""
    eps = 8 * unit * math.log2(h * w)
    return 2 * (2 * eps + 12 * unit)


def gaussian_blur_bounds(x: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Bounds ``[N,C,H,W]`` of the Fourier Gaussian blur of ``x [1,C,H,W]`` for every variance in
    ``[lo[n], hi[n]]`` (``[N]`` each)."""
    a_lo, a_hi = float32_hull(lo, hi)
    comps, radii = radius_components(x)
    flat = comps.flatten(1)  # [G, C*H*W]
    pos, neg = flat.clamp_min(0.0), (-flat).clamp_min(0.0)
    big = torch.exp(-2 * math.pi ** 2 * a_lo[:, None] * radii)  # a_g at a_lo (the larger), [N, G]
    small = torch.exp(-2 * math.pi ** 2 * a_hi[:, None] * radii)
    p_lo = (small @ pos - big @ neg).view(-1, *x.shape[1:])
    p_hi = (big @ pos - small @ neg).view(-1, *x.shape[1:])
    # 1e-12: the float64 FFTs and products computing the bound itself (error ~1e-15 here)
    fft64 = fft_slack(*x.shape[-2:]) * x.flatten(2).norm(dim=2)[..., None, None] + 1e-12
    slack = 2 * U32 * (torch.maximum(p_lo.abs(), p_hi.abs()) + fft64) + fft64
    return p_lo - slack, p_hi + slack
