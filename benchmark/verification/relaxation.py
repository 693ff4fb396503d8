"""DeepG-style linear relaxation of a transformed image in its parameters, per parameter box.

For every pixel p and box [lo, hi] of theta we build lower and upper linear functions
    k . (theta - c) + off_lo  <=  T(x, theta)_p  <=  k . (theta - c) + off_hi,   c = box centre,
as DeepG does (Balunovic et al. 2019): a slope from the transformation itself (the secant across the
box per coordinate, evaluated with the real ``apply``), then offsets made sound by an interval
argument instead of sampling: the box is cut into ``pieces`` sub-boxes per coordinate and on each
sub-box the registry's sound pixel bounds (``Transformation.pixel_bounds``: exact bilinear range
plus float32 round-off) bound T, while the linear part's exact range is known, so
    off_lo = min over sub-boxes of (pixel lower bound - max of k . (theta - c)),
and likewise off_hi. The slope only affects tightness, never soundness. Brightness and
contrast+brightness are linear in (b) and in (u, w) = (exp(k), exp(k) b) (semanify's perturbation
layers), so their functions are exact up to a float32 round-off slack.
"""
from __future__ import annotations

import itertools

import torch

from benchmark.transformations.base import Transformation

#: widening of every offset: float64 round-off of the offset arithmetic itself (values are O(1)).
OFFSET_SLACK = 1e-9
#: relative widening of the exact photometric maps for the float32 round-off of the real transformation
#: (the registry's bounds use 2 (8 + 2) 2^-24 ~ 1.2e-6 for contrast+brightness; we take more).
PHOTOMETRIC_REL = 1e-5

Relaxation = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def sub_boxes(lo: torch.Tensor, hi: torch.Tensor, pieces: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Each box ``[N, m]`` cut into ``pieces`` equal parts per coordinate: ``[N, pieces^m, m]`` each."""
    n, m = lo.shape
    cuts = lo[:, :, None] + (hi - lo)[:, :, None] * torch.linspace(0, 1, pieces + 1, dtype=lo.dtype)  # [N, m, G+1]
    combos = torch.tensor(list(itertools.product(range(pieces), repeat=m)))  # [G^m, m]
    dims = torch.arange(m)
    s_lo = cuts[:, dims, combos]  # [N, G^m, m]
    s_hi = cuts[:, dims, combos + 1]
    return s_lo, s_hi


def secant_slopes(t: Transformation, x64: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
    """Per-pixel slope ``[N, m, *image]``: (T(c + r e_i) - T(c - r e_i)) / (2 r) per coordinate i (0 if r = 0)."""
    n, m = lo.shape
    c, r = (lo + hi) / 2, (hi - lo) / 2
    slopes = []
    for i in range(m):
        plus, minus = c.clone(), c.clone()
        plus[:, i] += r[:, i]
        minus[:, i] -= r[:, i]
        with torch.no_grad():
            imgs = t.apply(x64.expand(2 * n, -1, -1, -1), torch.cat([plus, minus]))
        width = (2 * r[:, i]).view(-1, 1, 1, 1)
        slopes.append(torch.where(width > 0, (imgs[:n] - imgs[n:]) / width.clamp(min=1e-300), 0.0))
    return torch.stack(slopes, 1)


def pixel_box(t: Transformation, x: torch.Tensor, lo: torch.Tensor,
              hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The registry's sound pixel bounds ``[N, C, H, W]`` of ``t`` applied to ``x`` over each parameter box."""
    return t.pixel_bounds(x.detach().to("cpu", torch.float64), lo, hi)


def geometric_relaxation(t: Transformation, x: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor,
                         pieces: int) -> Relaxation:
    """(sym_lo, sym_hi ``[N, m+1, C, H, W]``, z_lo, z_hi ``[N, m]``, box_lo, box_hi ``[N, C, H, W]``):
    linear functions of z = theta over the boxes, and the registry's pixel bounds over each whole box."""
    x64 = x.detach().to("cpu", torch.float64)
    n, m = lo.shape
    box_lo, box_hi = pixel_box(t, x, lo, hi)
    k = secant_slopes(t, x64, lo, hi)  # [N, m, C, H, W]
    s_lo, s_hi = sub_boxes(lo, hi, pieces)  # [N, G, m]
    g = s_lo.shape[1]
    p_lo, p_hi = t.pixel_bounds(x64, s_lo.reshape(-1, m), s_hi.reshape(-1, m))
    p_lo, p_hi = p_lo.view(n, g, *x.shape[1:]), p_hi.view(n, g, *x.shape[1:])
    c = (lo + hi) / 2
    view = (n, g, m) + (1,) * (x.dim() - 1)
    a = (s_lo - c[:, None]).view(view) * k[:, None]  # [N, G, m, C, H, W]: k_i (theta_i - c_i) at the two ends
    b = (s_hi - c[:, None]).view(view) * k[:, None]
    lin_max = torch.maximum(a, b).sum(2)
    lin_min = torch.minimum(a, b).sum(2)
    off_lo = (p_lo - lin_max).amin(1) - OFFSET_SLACK
    off_hi = (p_hi - lin_min).amax(1) + OFFSET_SLACK
    shift = (k * c.view(n, m, *(1,) * (x.dim() - 1))).sum(1)  # k . c
    sym_lo = torch.cat([k, (off_lo - shift)[:, None]], 1)
    sym_hi = torch.cat([k, (off_hi - shift)[:, None]], 1)
    return sym_lo, sym_hi, lo, hi, box_lo, box_hi


def photometric_relaxation(t: Transformation, x: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> Relaxation:
    """The transformation's exact linear perturbation layer (``Transformation.linear_layer``; variables z: b,
    or (u, w)), widened for float32."""
    x64 = x.detach().to("cpu", torch.float64)
    a, c0, z_lo, z_hi = t.linear_layer(x64, lo, hi)  # image = a z + c0, a [P, m']
    box_lo, box_hi = t.pixel_bounds(x64, lo, hi)
    n, shape = len(lo), x.shape[1:]
    slack = PHOTOMETRIC_REL * torch.maximum(box_lo.abs(), box_hi.abs()) + OFFSET_SLACK
    coef = a.T.reshape(1, a.shape[1], *shape).expand(n, -1, *shape)
    sym_lo = torch.cat([coef, (c0.view(1, *shape) - slack)[:, None]], 1)
    sym_hi = torch.cat([coef, (c0.view(1, *shape) + slack)[:, None]], 1)
    return sym_lo, sym_hi, z_lo, z_hi, box_lo, box_hi


def image_relaxation(t: Transformation, x: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor,
                     pieces: int) -> Relaxation:
    """The relaxation of ``t`` applied to ``x [1, C, H, W]`` over the parameter boxes ``lo, hi [N, m]``."""
    if t.has_linear_layer:
        return photometric_relaxation(t, x, lo, hi)
    return geometric_relaxation(t, x, lo, hi, pieces)
