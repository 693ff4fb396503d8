"""Cyclic (wrap-around) translation.

Convention: ``theta = (dx, dy)`` in pixels; positive ``dx`` moves the content
right (towards larger column index, +W), positive ``dy`` moves it down (+H).
For integer shifts the result equals ``torch.roll(x, (dy, dx), dims=(2, 3))``
bit for bit, so integer shifts compose exactly. A non-integer shift is the
bilinear blend of the four neighbouring integer rolls; it is separable, so
``shift(a)`` then ``shift(b)`` equals ``shift(a + b)`` only for integer ``a`` or
``b`` (in general composition of fractional shifts adds some smoothing). The
result is continuous and piecewise linear in ``theta`` (kinks at integers), so
its gradient in ``theta`` is defined almost everywhere.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from benchmark.transformations.base import Kind, Norm, Transformation


def _roll_per_sample(x: torch.Tensor, shift: torch.Tensor, dim: int) -> torch.Tensor:
    """``torch.roll`` along ``dim`` (2 or 3) with an integer shift per sample ``shift [B]``."""
    n = x.shape[dim]
    pos = torch.arange(n, device=x.device)
    src = torch.remainder(pos[None, :] - shift.long()[:, None], n)  # [B, n]
    if dim == 3:
        idx = src[:, None, None, :].expand_as(x)
    else:
        idx = src[:, None, :, None].expand_as(x)
    return torch.gather(x, dim, idx)


def _shift_axis(x: torch.Tensor, d: torch.Tensor, dim: int) -> torch.Tensor:
    """Fractional cyclic shift along one axis: linear blend of the two nearest integer rolls."""
    base = torch.floor(d.detach())
    w = (d - base).view(-1, 1, 1, 1)  # in [0, 1); carries the gradient in d
    # For integer d, w == 0 and 1*a + 0*b == a exactly, so the roll is bit-exact while
    # the (one-sided) derivative in d, roll(base+1) - roll(base), is still available.
    return (1 - w) * _roll_per_sample(x, base, dim) + w * _roll_per_sample(x, base + 1, dim)


def cyclic_shift(x: torch.Tensor, dx: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    """Shift ``x [B,C,H,W]`` cyclically by per-sample ``dx [B]`` (right) and ``dy [B]`` (down)."""
    return _shift_axis(_shift_axis(x, dx, 3), dy, 2)


@dataclass(frozen=True)
class Translation(Transformation):
    """Cyclic translation ``theta = (dx, dy)`` px in [-16, 16]^2, +dx right, +dy down.

    Integer shifts equal ``torch.roll`` exactly; fractional shifts use bilinear
    interpolation between integer rolls (piecewise differentiable in theta).
    """

    integer = True  # the threat model: integer shifts (see sample)
    composition = "sum"
    defense_defaults = {"tss": {"smoothing": "gaussian", "scale": 3.0}, "gsmooth": {"sigma1": 1.5, "pose": "centroid"},
                        "spt": {"sigma_gamma": 3.0, "sigma_delta": 0.25, "error": 1e-3, "kappa": 1.0}}

    name: str = "translation"
    dim: int = 2
    kind: Kind = "additive"
    norm: Norm = "l2"
    units: str = "pixels (dx right, dy down)"
    low: tuple[float, ...] = (-16.0, -16.0)
    high: tuple[float, ...] = (16.0, 16.0)
    one_sided: bool = False
    differentiable: bool = True
    description: str = "cyclic (wrap-around) translation, bilinear between integer shifts"

    def _apply(self, x: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
        return cyclic_shift(x, theta[:, 0], theta[:, 1])

    def _pixel_bounds(self, x: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Finitely many evaluations: each output pixel is continuous in (dx, dy) and bilinear on every
        integer cell (blend of the four neighbouring rolls), so over a box its extremes lie on the grid
        {box edges, integers between} per axis; min/max over those shifts is exact, plus the float32
        round-off of a fractional blend (none for a single integer shift). See bounds/piecewise.py."""
        from benchmark.transformations.bounds.piecewise import translation_bounds

        return translation_bounds(x, lo, hi, cyclic_shift)

    # The threat model is integer shifts (as in TSS and VeriVis): the certificates
    # of cyclic-shift smoothing hold exactly for integer shifts, so the attack
    # region is the set of integer points of the l2 ball, and samplers draw from it.
    def sample(self, n: int, budget: float, generator: torch.Generator) -> torch.Tensor:
        """``n`` integer shifts drawn uniformly from the integer points of the l2 ball."""
        pts = integer_ball(budget)
        idx = torch.randint(len(pts), (n,), generator=generator)
        return pts[idx]

    def _enumerate(self, budget: float, image_shape: tuple[int, int] | None) -> torch.Tensor:
        """Every integer shift of the l2 ball (the threat model is finite)."""
        return integer_ball(budget)

    def period(self, image_shape: tuple[int, ...]) -> tuple[float, ...]:
        """Cyclic: a shift by the image's width (dx) or height (dy) is the identity."""
        h, w = image_shape[-2:]
        return (int(w), int(h))  # whole pixels (recorded as such in noise descriptions)

    def extremes(self, budget: float) -> torch.Tensor:
        """The integer points of largest norm in the ball (all of them, a few dozen at most)."""
        pts = integer_ball(budget)
        norms = pts.norm(dim=1)
        return pts[norms >= norms.max() - 1e-9]


def integer_ball(budget: float) -> torch.Tensor:
    """All integer shifts ``(dx, dy)`` with ``sqrt(dx^2 + dy^2) <= budget``, as floats ``[k, 2]``."""
    r = int(budget)
    ax = torch.arange(-r, r + 1, dtype=torch.float32)
    grid = torch.cartesian_prod(ax, ax)
    return grid[grid.norm(dim=1) <= budget + 1e-9]


TRANSLATION = Translation()
