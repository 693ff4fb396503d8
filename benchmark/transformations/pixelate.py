"""Pixelation: area-average down to an ``s x s`` grid, then nearest upsampling back.

``theta = (p,)`` with ``p`` in [0, 0.9]; the side is
``s = max(1, round((1 - p) * H))`` (and likewise for the width), rounding halves up.
Every ``p`` with ``s == H`` (in particular ``p = 0``) returns the input unchanged.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from benchmark.errors import BenchError
from benchmark.transformations.base import Kind, Norm, Transformation
from benchmark.transformations.bounds import as_float32, next_float32


def _side(p: float, n: int) -> int:
    return max(1, math.floor((1.0 - p) * n + 0.5))


def pixelate_to(x: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """Area-average ``x [B,C,H,W]`` down to ``size``, then nearest-upsample back (a copy at full size)."""
    H, W = x.shape[-2:]
    if size == (H, W):
        return x.clone()
    return F.interpolate(F.adaptive_avg_pool2d(x, size), size=(H, W), mode="nearest")


@dataclass(frozen=True)
class Pixelate(Transformation):
    """Pixelation strength ``theta = (p,)``, ``p`` in [0, 0.9]; side ``max(1, round((1-p)*H))``.

    Samples of a batch with different sides are processed in groups of equal side.
    """

    defense_defaults = {"gsmooth": {"sigma1": 0.2}}

    name: str = "pixelate"
    dim: int = 1
    kind: Kind = "non_resolvable"
    norm: Norm = "l2"
    units: str = "fraction of resolution removed"
    low: tuple[float, ...] = (0.0,)
    high: tuple[float, ...] = (0.9,)
    one_sided: bool = True
    # The output is piecewise constant in p (it depends on p only through the integer
    # side s), so gradients in theta are zero almost everywhere: parameter-space attacks
    # must fall back to gradient-free search (grid / random) for pixelate.
    differentiable: bool = False
    description: str = "area-average down to s x s, nearest upsample back; s=round((1-p)H)"

    def _apply(self, x: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
        H, W = x.shape[-2:]
        sizes = [(_side(p, H), _side(p, W)) for p in theta[:, 0].detach().double().cpu().tolist()]
        out = x.clone()
        for size in sorted(set(sizes)):
            if size == (H, W):
                continue  # identity
            idx = torch.tensor([i for i, s in enumerate(sizes) if s == size], device=x.device)
            out[idx] = pixelate_to(x[idx], size)
        return out

    def _pixel_bounds(self, x: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Finitely many outputs: the output depends on p only through the sides s(p) (monotone in p,
        computed from theta rounded to float32), so the sides between s(hi) and s(lo) are all the box
        can produce; min/max over their outputs, plus the float32 round-off of the pooling means, is a
        bound (exact but for that round-off). See bounds/piecewise.py."""
        from benchmark.transformations.bounds.piecewise import pixelate_bounds

        return pixelate_bounds(x, lo[:, 0], hi[:, 0], _side, pixelate_to)

    def _enumerate(self, budget: float, image_shape: tuple[int, int] | None) -> torch.Tensor:
        """One parameter per distinct output: the output depends on p only through the side s(p)."""
        if image_shape is None:
            raise BenchError("pixelate: enumerating its outputs needs the image size (pass image_shape).")
        h, w = image_shape
        if h != w:
            raise BenchError(f"pixelate: enumerating its outputs needs square images, got {h} x {w}.")
        return pixelate_representatives(budget, h)

    def _output_intervals(self, budget: float, image_shape: tuple[int, int]) -> list[tuple[float, float]]:
        """The float32 parameters of [0, budget] by side: s(p) is non-increasing in p, so each side's float32
        parameters form one interval."""
        h, w = image_shape
        if h != w:
            raise BenchError(f"pixelate: its output intervals need square images, got {h} x {w}.")
        return pixelate_intervals(budget, h)


def pixelate_representatives(budget: float, size: int) -> torch.Tensor:
    """One parameter per distinct output of pixelate on [0, budget] for H = W = ``size``.

    The output depends on p only through the side s(p) = max(1, floor((1 - p) H + 0.5)), and
    s(p) = s exactly for p in (1 - (s + 1/2)/H, 1 - (s - 1/2)/H]; we return the midpoint of each
    such interval intersected with [0, budget].
    """
    reps = []
    s_hi = max(1, math.floor(size + 0.5))
    s_lo = max(1, math.floor((1 - budget) * size + 0.5))
    for s in range(s_hi, s_lo - 1, -1):
        lo = max(0.0, 1 - (s + 0.5) / size)
        hi = min(budget, 1 - (s - 0.5) / size)
        if hi >= lo:
            reps.append((lo + hi) / 2)
    return torch.tensor(reps, dtype=torch.float32)[:, None]


def pixelate_intervals(budget: float, size: int) -> list[tuple[float, float]]:
    """The float32 parameters of [0, budget] cut by the side ``_side(p, size)`` they give (p as ``apply`` reads
    it: a float32 value): ``[(lo, hi), ...]`` of float32 values, contiguous (each ``lo`` the float32 after the
    previous ``hi``), the last ``hi`` the largest float32 with the side of ``float32(budget)``.

    Found by search, not by formula, so that the ends are exactly where the rounding in ``_side`` puts them:
    s(p) is non-increasing in p (a composition of monotone float operations), so a side's float32 parameters
    are one interval, and its upper end is found by stepping float32 values up from below the real end
    1 - (s - 1/2) / size."""
    if not 0 <= budget <= 1:
        raise BenchError(f"pixelate: output intervals need a budget in [0, 1], got {budget}.")
    top = as_float32(budget)
    out, lo = [], 0.0
    while True:
        s = _side(lo, size)
        hi = min(as_float32(1 - (s - 0.5) / size), 1.0)
        while hi > lo and _side(hi, size) != s:  # the float32 estimate may sit just past the end
            hi = next_float32(hi, up=False)
        while hi < 1.0 and _side(next_float32(hi, up=True), size) == s:
            hi = next_float32(hi, up=True)
        out.append((lo, hi))
        if hi >= top or hi >= 1.0:
            return out
        lo = next_float32(hi, up=True)


PIXELATE = Pixelate()
