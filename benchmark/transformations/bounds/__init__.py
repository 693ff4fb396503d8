"""Sound per-pixel bounds of a transformation over a box of parameters (``Transformation.pixel_bounds``).

One module per family: ``geometric`` (rotation, scaling, and the rotational / zoom blurs built
from them; exact bilinear range over source-coordinate boxes), ``kernels`` (defocus and motion
blur: kernel-weight intervals), ``fourier`` (Gaussian blur), ``piecewise`` (translation and
pixelate: finitely many evaluations), ``photometric`` (brightness, contrast+brightness).

Every family computes the bound of the exact-arithmetic transformation in float64 and widens it
by an explicit bound on the round-off of the real ``apply`` in IEEE float32 (which also covers
float64 evaluation of the same image). The helpers here are shared by all families: input
checks, the float32 hull of a parameter box (``apply`` rounds theta to the image dtype, so a
parameter just inside a box may be evaluated just outside it), and the outward cast of the
float64 bounds to the image dtype.
"""
from __future__ import annotations

import torch


#: unit round-off of IEEE float32 (half an ulp of 1): |fl(a op b) - a op b| <= U32 |a op b|.
U32 = 2.0 ** -24


def gamma(n: int) -> float:
    """Higham's gamma_n = n u / (1 - n u) for float32: the relative error bound of a sum or dot
    product of n terms (any summation order, with or without FMA)."""
    return n * U32 / (1 - n * U32)


def as_float32(v: float) -> float:
    """``v`` rounded to the nearest float32 value (as a Python float)."""
    return float(torch.tensor(v, dtype=torch.float32))


def next_float32(v: float, up: bool = True) -> float:
    """The float32 value right after (``up``) or before the float32 value ``v``."""
    return float(torch.nextafter(torch.tensor(v, dtype=torch.float32),
                                 torch.tensor(float("inf") if up else -float("inf"))))


def float32_hull(lo: torch.Tensor, hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The smallest box with float32 endpoints containing ``[lo, hi]`` (float64 in and out).

    Rounding to nearest is monotone, so every theta in ``[lo, hi]`` rounds into this box: bounds over
    it hold for ``apply`` whether it sees theta in float64 or rounded to float32.
    """
    lo32, hi32 = lo.to(torch.float32), hi.to(torch.float32)
    lo32 = torch.where(lo32.double() > lo, torch.nextafter(lo32, torch.tensor(-float("inf"))), lo32)
    hi32 = torch.where(hi32.double() < hi, torch.nextafter(hi32, torch.tensor(float("inf"))), hi32)
    return lo32.double(), hi32.double()


def cast_outward(lo: torch.Tensor, hi: torch.Tensor, dtype: torch.dtype,
                 device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Cast float64 bounds to ``dtype`` rounding ``lo`` down and ``hi`` up, so they stay sound."""
    lo_c, hi_c = lo.to(dtype), hi.to(dtype)
    if dtype != torch.float64:
        lo_c = torch.where(lo_c.double() > lo, torch.nextafter(lo_c, torch.tensor(-float("inf"), dtype=dtype)), lo_c)
        hi_c = torch.where(hi_c.double() < hi, torch.nextafter(hi_c, torch.tensor(float("inf"), dtype=dtype)), hi_c)
    return lo_c.to(device), hi_c.to(device)
