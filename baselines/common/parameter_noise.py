"""Smoothing distributions over a transformation's parameter, with their certified radii (TSS, Li et al. 2021).

For an *additive* transformation T(T(x, a), b) = T(x, a + b), smoothing the
parameter with noise e gives g(T(x, d)) = E f(T(x, d + e)): plain randomized
smoothing of the function theta -> f(T(x, theta)), certified by the radius of
the noise distribution (benchmark.certify.radii).

``ParameterNoise.sample`` draws float64 noise cast to float32: TSS's training augmentation and the attacks'
gradients use it. Certificates and PREDICT draw the grid noise of ``benchmark.certify.parameter_lattice``
instead (integer noise from fair bits, exact parameters; see baselines/tss/defense.py), whose radius pays
the grid and the noise table's error; ``ParameterNoise.radius`` is the exact-arithmetic rule.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from benchmark.api import BenchError, radii


@dataclass(frozen=True)
class ParameterNoise:
    """A smoothing distribution on an m-dimensional parameter.

    Attributes:
        kind: gaussian (isotropic, l2 radius), exponential / uniform / folded_gaussian
            (one-sided, for a non-negative parameter such as blur variance).
        scale: sigma for gaussian/folded_gaussian, the mean lambda for exponential,
            the width lambda for uniform.
        dim: parameter dimension.
        integer: round samples to integers (translation by whole pixels).
        period: for integer cyclic parameters, reduce samples modulo these periods into
            [-p/2, p/2) (an exact identity for cyclic shifts, keeps samples in the domain).
    """

    kind: str
    scale: float
    dim: int = 1
    integer: bool = False
    period: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.kind not in radii.RADIUS_FUNCTIONS:
            raise BenchError(f"unknown smoothing distribution '{self.kind}'; valid: {sorted(radii.RADIUS_FUNCTIONS)}.")
        if not self.scale > 0:
            raise BenchError(f"smoothing scale must be positive, got {self.scale}.")
        if self.kind != "gaussian" and self.dim != 1:
            raise BenchError(f"'{self.kind}' smoothing is one-dimensional; use gaussian for m={self.dim}.")

    def sample(self, k: int, generator: torch.Generator) -> torch.Tensor:
        """``k`` noise draws ``[k, dim]`` (float32): training and attack gradients only (no certificate)."""
        shape = (k, self.dim)
        if self.kind == "gaussian":
            e = torch.randn(shape, generator=generator, dtype=torch.float64) * self.scale
        elif self.kind == "folded_gaussian":
            e = (torch.randn(shape, generator=generator, dtype=torch.float64) * self.scale).abs()
        elif self.kind == "exponential":
            u = torch.rand(shape, generator=generator, dtype=torch.float64)
            e = -self.scale * torch.log1p(-u)
        else:  # uniform on [0, scale]
            e = torch.rand(shape, generator=generator, dtype=torch.float64) * self.scale
        if self.integer:
            e = torch.round(e)
            if self.period is not None:
                p = torch.tensor(self.period, dtype=e.dtype)
                e = torch.remainder(e + p // 2, p) - p // 2
        return e.float()

    def radius(self, p_a_lower: float) -> float:
        """The exact-arithmetic radius (parameter units) for a lower bound p_A; <= 0 means none (certificates
        use ``parameter_lattice.radius``, which pays the grid and the table)."""
        r = radii.RADIUS_FUNCTIONS[self.kind](p_a_lower, self.scale)
        return r if not math.isnan(r) else 0.0

    def describe(self) -> dict:
        return {"kind": self.kind, "scale": self.scale, "dim": self.dim, "integer": self.integer,
                "period": list(self.period) if self.period else None}
