"""Photometric transformations: brightness shift and contrast+brightness.

Neither transformation clips its output to [0, 1]; see the class docstrings.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from benchmark.transformations.base import Kind, Norm, Transformation


@dataclass(frozen=True)
class Brightness(Transformation):
    """Brightness shift ``x -> x + b`` with ``theta = (b,)``, ``b`` in [-1, 1].

    The output is deliberately NOT clipped to [0, 1]: clipping would break the
    additivity ``apply(apply(x, b1), b2) == apply(x, b1 + b2)`` on which
    additive-parameter certificates rely. Models see values slightly outside
    [0, 1]; this is the usual convention in the semantic-smoothing literature.
    """

    composition = "sum"
    pixel_offset = True
    defense_defaults = {"tss": {"smoothing": "gaussian", "scale": 0.3}, "gsmooth": {"sigma1": 0.15, "pose": "mean"},
                        "verifier": {"splits": 3}}

    name: str = "brightness"
    dim: int = 1
    kind: Kind = "additive"
    norm: Norm = "l2"
    units: str = "intensity offset (image range is [0,1])"
    # wide: Gaussian smoothing noise on b is added on top of the attack and must stay in the domain
    low: tuple[float, ...] = (-10.0,)
    high: tuple[float, ...] = (10.0,)
    one_sided: bool = False
    differentiable: bool = True
    description: str = "additive brightness shift x+b (no clipping, so shifts compose exactly)"

    def _apply(self, x: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
        return x + theta[:, 0].view(-1, 1, 1, 1)

    def _pixel_bounds(self, x: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Monotone: x + b is increasing in b, so b_lo and b_hi give exact bounds (no clipping), widened
        by one float32 rounding of the sum; see bounds/photometric.py."""
        from benchmark.transformations.bounds.photometric import brightness_bounds

        return brightness_bounds(x, lo[:, 0], hi[:, 0])

    def _linear_layer(self, x: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor):
        """x + b is linear in z = b: A = 1, c = x (see bounds/photometric.py)."""
        from benchmark.transformations.bounds.photometric import brightness_layer

        return brightness_layer(x, lo, hi)


@dataclass(frozen=True)
class ContrastBrightness(Transformation):
    """Contrast and brightness ``x -> exp(k) * (x + b)`` with ``theta = (k, b)``.

    ``k`` in [-1, 1] is the log contrast factor, ``b`` in [-1, 1] the brightness
    offset (applied before the contrast scaling). Budgets are stated in the
    l-infinity norm over ``(k, b)``. No clipping, for the same reason as
    :class:`Brightness`: the family stays closed under composition
    (``exp(k2)*(exp(k1)*(x+b1)+b2) = exp(k1+k2)*(x + b1 + b2*exp(-k1))``),
    which makes it resolvable.
    """

    composition = "scale_shift"
    defense_defaults = {"tss": {"scale": 0.2}, "gsmooth": {"sigma1": 0.1, "pose": "mean_std"},
                        "verifier": {"splits": 2}}

    name: str = "contrast_brightness"
    dim: int = 2
    kind: Kind = "resolvable"
    norm: Norm = "linf"
    units: str = "(log contrast factor, intensity offset)"
    low: tuple[float, ...] = (-1.0, -1.0)
    high: tuple[float, ...] = (1.0, 1.0)
    one_sided: bool = False
    differentiable: bool = True
    description: str = "contrast and brightness exp(k)*(x+b) (no clipping)"

    def _apply(self, x: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
        k = theta[:, 0].view(-1, 1, 1, 1)
        b = theta[:, 1].view(-1, 1, 1, 1)
        return torch.exp(k) * (x + b)

    def _pixel_bounds(self, x: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Corners: exp(k)(x + b) is bilinear in (exp(k), b) and exp is increasing, so over a (k, b) box
        each pixel's extremes are among the four corners (no clipping), widened by the float32
        round-off of exp, sum and product; see bounds/photometric.py."""
        from benchmark.transformations.bounds.photometric import contrast_brightness_bounds

        return contrast_brightness_bounds(x, lo, hi)

    def _linear_layer(self, x: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor):
        """exp(k)(x + b) is exactly linear in z = (exp(k), exp(k) b) (see bounds/photometric.py)."""
        from benchmark.transformations.bounds.photometric import contrast_brightness_layer

        return contrast_brightness_layer(x, lo, hi)


BRIGHTNESS = Brightness()
CONTRAST_BRIGHTNESS = ContrastBrightness()
