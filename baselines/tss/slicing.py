"""Slice certification of rotation and scaling by pixel-space smoothing (TSS, Li et al. 2021, sec. 5).

What is certified, exactly: the registry's ``rotation`` (kornia ``rotate``, bilinear,
``align_corners=True``, zero padding, about ((W-1)/2, (H-1)/2)) and ``scaling``
(``grid_sample`` zoom by 1 + theta, bilinear, ``align_corners=False``, zero padding,
same centre), applied to the clean test image. The smoothed classifier is
``g(z) = argmax_c P(f(m * z + eps) = c)``, ``eps ~ N(0, sigma^2 I)``, where ``m`` is a
circular 0/1 mask (pixels farther than min(H-1, W-1)/2 from the centre are zeroed)
for rotation and ``m = 1`` for scaling. g is Gaussian smoothing of z -> f(m * z), so
it keeps its prediction while ``||m * (z' - z)||_2 < sigma Phi^-1(pA_lower)`` (Cohen).

Procedure for budgets up to B: endpoints theta_i = -B + i w (w = 2B/N, N even, so 0
is an endpoint). Every theta in [-B, B] lies within w/2 of an endpoint; write
``e_i(theta) = ||m * (T(x, theta) - T(x, theta_i))||_2`` and M_i >= sup e_i over
[theta_i - w/2, theta_i + w/2] (clipped to [-B, B]). With CERTIFY at each endpoint
for the class chosen at theta = 0, at level alpha/(N+1) (Bonferroni over all N+1
endpoints, so all bounds hold together with probability >= 1 - alpha),
``R_i = sigma Phi^-1(pA_lower_i) > M_i`` proves g(T(x, theta)) = c on endpoint i's
neighbourhood. The certified radius is the extent of the contiguous run of such
endpoints around 0 (the smaller of the two directions); evaluation stops outward at
the first failure (the union bound already covers every endpoint).

The bound M_i: sample e_i at K/2 sub-slice points on each half-slice (K sub-slices
per slice, spacing d = w/K). e_i is L-Lipschitz when theta -> m * T(x, theta) is,
and an L-Lipschitz function on [l, r] is at most (e(l) + e(r))/2 + L d/2 there.
L (per image): bilinear interpolation of the zero-padded image is piecewise bilinear
in the source point s with ``|grad_s I| <= G = sqrt(max|dx|^2 + max|dy|^2)`` (largest
horizontal / vertical neighbour differences, zero padding included); the source
point of output pixel p moves at ``|p - c| * pi/180`` per degree (rotation) or at
most ``|p - c| / (1 - B)^2`` per unit of theta (scaling, factor 1 + theta >= 1 - B).
So ``L = sqrt(sum_channels G_ch^2 * sum_p m_p |dsrc_p/dtheta|^2)``: the transformation's
``parameter_lipschitz`` (benchmark/transformations/bounds/lipschitz.py). All image
arithmetic for M is in float64; ``FLOAT32_ALLOWANCE`` is added to every M_i to cover the
float32 evaluation of the endpoint and attacked images (round-off ~1e-7 per pixel).

Sequential rule (``certify: sequential``): every endpoint is tested at the full alpha (its own
anytime-valid sequential test, benchmark/certify/sequential.py) instead of alpha/(N+1), in the fixed
order 0, +1, -1, +2, -2, ..., stopping at the first endpoint that fails (``chain_coverage``). Validity:
the claim "certified on [-cov, cov]" is made only when every endpoint inside it passed, so the claims are
nested. Call endpoint i false when p_i <= Phi(M_i / sigma) (a threshold fixed by x before any sample),
and let i* be a false endpoint closest to the centre. Any false claim has a coverage that reaches i*,
so i* passed; its test, on fresh samples, passes with probability <= alpha whether or not the walk
reaches it. Hence P(some false claim) <= alpha, with no split over the endpoints (fixed-sequence testing
of nested hypotheses; Maurer, Hothorn & Lehmacher 1995). Walking on past a failure could not enlarge the
coverage, so the walk stops there: the cost is the endpoints up to the first failure, each stopping
as soon as its own decision is known.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from benchmark.api import FLOAT32_ALLOWANCE, BenchError, Transformation, centre_out_order, slice_rule

def chain_coverage(n_ends: int, width: float, budget: float, endpoint_ok: Callable[[int], bool]) -> float:
    """Coverage after a passed centre: walk ``centre_out_order`` (without the centre) until the first failing
    endpoint; with m symmetric pairs passed the region [-(m + 1/2) w, (m + 1/2) w] is certified (capped at B)."""
    return chain_coverage_grouped(n_ends, width, budget, lambda idx: [endpoint_ok(idx[0])], 1)


def chain_coverage_grouped(n_ends: int, width: float, budget: float,
                           group_ok: Callable[[list[int]], list[bool]], group: int) -> float:
    """``chain_coverage`` testing ``group`` endpoints of the walk at a time (one batch of samples for all):
    ``group_ok(indices)`` judges them in walk order and may stop at the first failure (a shorter list). The
    claim is the same prefix of passed endpoints as one at a time, so validity is unchanged; endpoints after
    a failure in the same group are drawn for nothing (on an example that fails anyway). The claim itself is
    ``benchmark.certify.slice_rule.coverage`` of the judged endpoints, the closed form the audit uses."""
    if group < 1:
        raise BenchError(f"group must be >= 1, got {group}.")
    order = centre_out_order(n_ends)
    return slice_rule.coverage(slice_rule.walk(order, group_ok, group), order[0], width, budget)


@dataclass
class SliceGrid:
    """Endpoints of N slices over [-B, B] and the per-endpoint interpolation bounds M_i."""

    endpoints: torch.Tensor  # [N+1] float64
    bound: torch.Tensor  # [N+1] M_i
    lipschitz: float
    subslices: int

    @property
    def slices(self) -> int:
        return len(self.endpoints) - 1

    @property
    def centre(self) -> int:
        return self.slices // 2


def slice_grid(x: torch.Tensor, t: Transformation, budget: float, slices: int, subslices: int,
               mask: torch.Tensor, chunk: int = 4096) -> SliceGrid:
    """Endpoints and sound bounds M_i for image x [1,C,H,W] (see the module docstring)."""
    if slices < 2 or slices % 2:
        raise BenchError(f"tss slices must be an even number >= 2 (so 0 is an endpoint), got {slices}.")
    if subslices < 2 or subslices % 2:
        raise BenchError(f"tss subslices must be an even number >= 2 (so slice midpoints are sampled), got {subslices}.")
    x = x.to(torch.float64)
    mask = mask.to(x.device)
    w = 2 * budget / slices
    ends = torch.linspace(-budget, budget, slices + 1, dtype=torch.float64)
    lip = t.parameter_lipschitz(x, budget, mask)
    half = subslices // 2
    # all sub-slice points: slice i, offset j = 0..K -> theta_i + j w/K
    offs = torch.arange(subslices + 1, dtype=torch.float64) * (w / subslices)
    thetas = (ends[:-1, None] + offs[None]).reshape(-1)  # [N*(K+1)]
    errs_left = torch.empty(slices, half + 1, dtype=torch.float64)  # distance to the slice's left endpoint
    errs_right = torch.empty(slices, half + 1, dtype=torch.float64)  # ... and to its right endpoint
    per = subslices + 1
    step = max(1, chunk // per)
    for s0 in range(0, slices, step):
        s1 = min(slices, s0 + step)
        th = thetas[s0 * per:s1 * per].to(x.device)
        imgs = mask * t.apply(x.expand(len(th), -1, -1, -1), th[:, None])
        imgs = imgs.reshape(s1 - s0, per, *x.shape[1:])
        d_left = (imgs[:, :half + 1] - imgs[:, :1]).flatten(2).norm(dim=2)
        d_right = (imgs[:, half:] - imgs[:, -1:]).flatten(2).norm(dim=2)
        errs_left[s0:s1] = d_left.cpu()
        errs_right[s0:s1] = d_right.cpu()
    slack = lip * (w / subslices) / 2

    def half_bound(e: torch.Tensor) -> torch.Tensor:  # [S, half+1] -> [S]
        return ((e[:, 1:] + e[:, :-1]) / 2).amax(dim=1) + slack

    right_of = half_bound(errs_left)  # endpoint i's bound over (theta_i, theta_i + w/2], i = 0..N-1
    left_of = half_bound(errs_right)  # endpoint i+1's bound over [theta_{i+1} - w/2, theta_{i+1})
    bound = torch.zeros(slices + 1, dtype=torch.float64)
    bound[:-1] = right_of
    bound[1:] = torch.maximum(bound[1:], left_of)
    return SliceGrid(ends, bound + FLOAT32_ALLOWANCE, lip, subslices)
