"""Bounds of the soft-kernel blurs (defocus disk, horizontal motion line) over a parameter interval.

Both kernels (kernel_blur.py) give tap j, at distance d_j from the centre, the weight
g_j(r) = clamp(r + 0.5 - d_j, 0, 1) (r = disk radius, or half the line length) and normalise,
w_j = g_j / sum_i g_i. Over r in [r_lo, r_hi]:

1. g_j is nondecreasing in r, so g_j in [g_j(r_lo), g_j(r_hi)] (widened by ``delta`` for the float32
   round-off of r + 0.5 - d_j, and clamped to [0, 1] as apply clamps);
2. w_j = g_j / (g_j + S_-j) with S_-j = sum of the other taps is increasing in g_j and decreasing in
   S_-j, so w_j in [gl_j / (gl_j + Sh_-j), gh_j / (gh_j + Sl_-j)] (the centre tap keeps every
   denominator >= 0.5);
3. the blurred pixel is sum_j w_j x_j over the reflect-padded neighbourhood (x >= 0), with
   w in that box and sum_j w_j = 1: its min / max over this set is a fractional knapsack, solved
   exactly by starting from wl and giving the remaining mass 1 - sum wl to the smallest (largest)
   neighbours first, up to wh - wl each (never looser than sum wl x <= blur <= sum wh x);
4. float32: the float weights are g_j / sum g times (1 + e_j), and the convolution sums n
   nonnegative products, so the result is sum_j w_j x_j (1 + t_j) with exact normalised w_j in the
   box of step 2 and |t_j| <= gamma_{2n+4} (n taps that can be nonzero: sum of the taps, division,
   products and sum in any order; additions of exact zeros are exact, so taps whose weight is 0 do
   not count); hence it lies within (1 -+ gamma_{2n+4}) of the knapsack bounds.

Taps outside the bound's tap set have r + 0.5 - d <= -delta for every r in the interval, so their
float32 weight is exactly 0 (in any batch, whatever its kernel size), and zero terms are exact.
The neighbourhoods use the registry's own reflect padding.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from benchmark.transformations.bounds import U32, gamma


def disk_distances(h: int) -> torch.Tensor:
    """Tap distances ``[2h+1, 2h+1]`` of the defocus disk."""
    off = torch.arange(-h, h + 1, dtype=torch.float64)
    return torch.sqrt(off[:, None] ** 2 + off[None, :] ** 2)


def line_distances(h: int) -> torch.Tensor:
    """Tap distances ``[1, 2h+1]`` of the horizontal motion line."""
    return torch.arange(-h, h + 1, dtype=torch.float64).abs()[None, :]


def knapsack_bounds(patches: torch.Tensor, w_lo: torch.Tensor,
                    w_hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact min and max ``[N, C, P]`` of sum_j w_j patches[c, j, p] over w in [w_lo, w_hi] (``[N, n]``)
    with sum_j w_j = 1, for nonnegative ``patches [C, n, P]``; boxes are done in chunks to cap memory."""
    c, n, p = patches.shape
    step = max(1, (1 << 22) // (c * n * p))
    lows, highs = [], []
    for s in range(0, len(w_lo), step):
        lo, hi = w_lo[s:s + step], w_hi[s:s + step]
        base = torch.einsum("kn,cnp->kcp", lo, patches)
        budget = (1 - lo.sum(1)).clamp_min(0.0).view(-1, 1, 1, 1)
        cap = hi - lo

        def fill(order: torch.Tensor) -> torch.Tensor:
            room = cap[:, order]  # [N, C, n, P]: capacities in the order of the neighbours' values
            mass = torch.minimum(room, (budget - (room.cumsum(2) - room)).clamp_min(0.0))
            return (mass * patches.gather(1, order)[None]).sum(2)

        order = patches.argsort(dim=1)
        lows.append(base + fill(order))
        highs.append(base + fill(order.flip(1)))
    return torch.cat(lows), torch.cat(highs)


def soft_kernel_bounds(x: torch.Tensor, r_lo: torch.Tensor, r_hi: torch.Tensor,
                       distances: Callable[[int], torch.Tensor], limit: int, _half_width: Callable,
                       reflect_pad: Callable) -> tuple[torch.Tensor, torch.Tensor]:
    """Bounds ``[N,C,H,W]`` of the normalised soft-kernel blur of ``x [1,C,H,W]`` for every extent r in
    ``[r_lo[n], r_hi[n]]`` (float64, already the float32 hull); ``limit`` caps the half-width as apply does."""

    # float32 error of r + 0.5 - d: u (r + 0.5) + u d + u |r + 0.5 - d| <= 2u (r + 0.5 + d); doubled, with d
    # up to the largest distance any batch kernel can have (sqrt(2) limit)
    delta = (4 * U32 * (r_hi + 1 + math.sqrt(2) * limit)).view(-1, 1, 1)
    d = distances(_half_width(float((r_hi + delta.flatten()).max()), limit))
    g_lo = (r_lo.view(-1, 1, 1) + 0.5 - d - delta).clamp(0.0, 1.0).flatten(1)
    g_hi = (r_hi.view(-1, 1, 1) + 0.5 - d + delta).clamp(0.0, 1.0).flatten(1)
    s_lo, s_hi = g_lo.sum(1, keepdim=True), g_hi.sum(1, keepdim=True)
    w_lo = g_lo / (g_lo + (s_hi - g_hi))
    w_hi = g_hi / (g_hi + (s_lo - g_lo))
    _, c, h, w = x.shape
    patches = F.unfold(reflect_pad(x, *d.shape), d.shape).view(c, d.numel(), h * w)
    lo, hi = knapsack_bounds(patches, w_lo, w_hi)
    # n = taps that can be nonzero in this box: zero weights and products with them are exact
    rho = torch.tensor([gamma(2 * int(n) + 4) for n in (g_hi > 0).sum(1)], dtype=lo.dtype).view(-1, 1, 1)
    return (lo * (1 - rho)).view(-1, c, h, w), (hi * (1 + rho)).view(-1, c, h, w)
