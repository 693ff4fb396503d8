"""Splitting a parameter budget into sub-intervals and verifying them outward from 0.

Per coordinate the positive side [0, B] (B = the largest budget) is cut at multiples of B / splits
and at every budget, giving edges 0 = e_0 < e_1 < ... < e_n = B; the negative side mirrors it.
Ring r is the set of boxes whose largest index over the coordinates is r, so rings 1..r tile the
l-infinity ball of radius e_r (for one parameter: the interval [-e_r, e_r]). Rings are checked in
order and the first ring with a box that fails to verify stops the search: the verified extent is
the outer edge of the last fully verified ring, and a budget b is certified iff b <= extent.
A box that fails may first be bisected (every coordinate halved, ``refine`` times at most): it
verifies iff all its children do, which spends fine sub-intervals only where they are needed.
"""
from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch


def ring_edges(budgets: list[float], splits: int) -> torch.Tensor:
    """Edges ``[n+1]`` (float64) of the positive side: multiples of max(budgets)/splits and every budget."""
    top = max(budgets)
    grid = {round(top * k / splits, 12) for k in range(splits + 1)}
    grid |= {round(float(b), 12) for b in budgets if b > 0}
    return torch.tensor(sorted(grid), dtype=torch.float64)


def ring_boxes(edges: torch.Tensor, r: int, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Boxes ``lo, hi [k, dim]`` of ring ``r`` (1-based): every coordinate's interval index is at most r
    and at least one coordinate's is exactly r."""
    def interval(s: int) -> tuple[float, float]:
        a, b = float(edges[abs(s) - 1]), float(edges[abs(s)])
        return (a, b) if s > 0 else (-b, -a)

    idx = [s for s in range(-r, r + 1) if s != 0]
    combos = [c for c in itertools.product(idx, repeat=dim) if max(abs(s) for s in c) == r]
    ivs = [[interval(s) for s in c] for c in combos]
    lo = torch.tensor([[iv[0] for iv in row] for row in ivs], dtype=torch.float64)
    hi = torch.tensor([[iv[1] for iv in row] for row in ivs], dtype=torch.float64)
    return lo, hi


def bisect(lo: torch.Tensor, hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The 2^dim halves of every box: ``[k, dim]`` -> ``[k * 2^dim, dim]`` (children of box i are consecutive)."""
    k, dim = lo.shape
    mid = (lo + hi) / 2
    c_lo, c_hi = [], []
    for upper in itertools.product((False, True), repeat=dim):
        up = torch.tensor(upper)
        c_lo.append(torch.where(up, mid, lo))
        c_hi.append(torch.where(up, hi, mid))
    return torch.stack(c_lo, 1).reshape(-1, dim), torch.stack(c_hi, 1).reshape(-1, dim)


def refining(check: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], depth: int,
             counter: list[int]) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """``check`` that bisects failing boxes up to ``depth`` times; ``counter[0]`` counts bounded boxes."""
    def run(lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
        ok = check(lo, hi).clone()
        counter[0] += len(lo)
        bad = ~ok
        if depth > 0 and bad.any():
            c_lo, c_hi = bisect(lo[bad], hi[bad])
            children = refining(check, depth - 1, counter)(c_lo, c_hi)
            ok[bad] = children.view(int(bad.sum()), -1).all(dim=1)
        return ok
    return run


@dataclass
class OutwardResult:
    """What the outward search found: the verified extent and how much work it took."""

    extent: float
    rings_verified: int
    rings_total: int
    boxes_checked: int
    boxes_total: int
    boxes_bounded: int
    calls: int
    seconds: float
    failed_box: list[list[float]] | None = None
    per_ring: list[bool] = field(default_factory=list)


def verify_outward(check: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], edges: torch.Tensor, dim: int,
                   low: tuple[float, ...], high: tuple[float, ...], boxes_per_call: int = 64,
                   refine: int = 0) -> OutwardResult:
    """Verify rings 1, 2, ... with ``check(lo, hi) -> bool [k]`` until the first failing ring.

    Boxes are clipped to the parameter domain ``[low, high]``; a box outside the domain holds no
    parameter and counts as verified. Several rings are bounded in one ``check`` call (up to about
    ``boxes_per_call`` boxes) to amortise the per-call cost; rings after a failure are discarded.
    ``boxes_checked`` counts sub-intervals of the plan, ``boxes_bounded`` every box bounded including
    bisection children.
    """
    start = time.perf_counter()
    counter = [0]
    check = refining(check, refine, counter)
    n = len(edges) - 1
    rings = [ring_boxes(edges, r, dim) for r in range(1, n + 1)]
    dlo = torch.tensor(low, dtype=torch.float64)
    dhi = torch.tensor(high, dtype=torch.float64)
    total = sum(len(lo) for lo, _ in rings)
    checked = calls = 0
    per_ring: list[bool] = []
    r = 0
    while r < n:
        group, size = [r], len(rings[r][0])
        while group[-1] + 1 < n and size + len(rings[group[-1] + 1][0]) <= boxes_per_call:
            group.append(group[-1] + 1)
            size += len(rings[group[-1]][0])
        lo = torch.cat([rings[g][0] for g in group])
        hi = torch.cat([rings[g][1] for g in group])
        lo_c, hi_c = torch.maximum(lo, dlo), torch.minimum(hi, dhi)
        empty = (lo_c > hi_c).any(dim=1)
        ok = torch.ones(len(lo), dtype=torch.bool)
        if (~empty).any():
            ok[~empty] = check(lo_c[~empty], hi_c[~empty]).cpu()
        checked += len(lo)
        calls += 1
        offset = 0
        for g in group:
            k = len(rings[g][0])
            ring_ok = bool(ok[offset:offset + k].all())
            per_ring.append(ring_ok)
            if not ring_ok:
                bad = offset + int((~ok[offset:offset + k]).nonzero()[0])
                return OutwardResult(float(edges[g]), g, n, checked, total, counter[0], calls,
                                     time.perf_counter() - start, [lo_c[bad].tolist(), hi_c[bad].tolist()], per_ring)
            offset += k
        r = group[-1] + 1
    return OutwardResult(float(edges[n]), n, n, checked, total, counter[0], calls, time.perf_counter() - start, None,
                         per_ring)
