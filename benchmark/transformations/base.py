"""The transformation contract shared by every defense and attack.

A transformation maps a batch of images ``x [B,C,H,W]`` in [0,1] and per-sample
parameters ``theta [B,m]`` to transformed images. ``apply`` is differentiable in
``x`` and (where stated) in ``theta`` so that parameter-space attacks and
surrogate fitting can use gradients.
"""
from __future__ import annotations

import abc
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import torch

from benchmark.errors import BenchError
from benchmark.transformations.bounds import cast_outward

Kind = Literal["additive", "resolvable", "non_resolvable"]
Norm = Literal["l2", "linf"]
#: how two parameters compose, ``apply(apply(x, a), b) ~ apply(x, compose(a, b))``: "sum" (theta adds: additive
#: transformations, and rotation's angles), "product" (factors 1 + theta multiply: scaling), "scale_shift"
#: (``(k, b)`` of ``exp(k)(x + b)``: contrast+brightness), "none" (no closed form).
Composition = Literal["sum", "product", "scale_shift", "none"]
#: the mask a pixel-space smoothing certificate applies before its noise: "circular" keeps the inscribed disk
#: (rotation never samples the zero padding there), "none" keeps every pixel
PixelMask = Literal["none", "circular"]


@dataclass(frozen=True)
class Transformation(abc.ABC):
    """Base class of registry entries; subclasses implement :meth:`_apply`.

    Attributes:
        name: registry name.
        dim: parameter dimension m.
        kind: additive (composes by adding parameters), resolvable, non_resolvable.
        norm: the norm in which budgets/radii over ``theta`` are stated.
        units: human-readable units of ``theta``.
        low, high: per-coordinate parameter domain (inclusive).
        one_sided: the attack range is ``[0, budget]`` (blur strength, zoom ...)
            rather than the ball ``|theta| <= budget``.
        differentiable: whether ``apply`` has useful gradients in ``theta``
            (piecewise-constant transformations such as pixelate do not).
        description: one line for ``bench list transformations``.
        revision: bumped when ``apply``'s numbers change (e.g. its precision); models trained on the
            transformation record it, so their config hash changes and the zoo is retrained.
    """

    #: Capabilities that defenses and the audit ask for (never a transformation's name); a subclass states
    #: its own. ``integer``: the threat model is the integer points of the region (finitely many parameters).
    integer: ClassVar[bool] = False
    composition: ClassVar[Composition] = "none"
    pixel_mask: ClassVar[PixelMask] = "none"
    #: ``apply(x, theta) = x + theta`` in one float32 addition per pixel (brightness): the image shows the
    #: parameter in every pixel, so a parameter-smoothing defense can read its grid point back from the image
    #: (benchmark/certify/parameter_lattice.py, the reference-pixel route)
    pixel_offset: ClassVar[bool] = False
    #: suggested settings per defense (its registry name, or "verifier" for the bound-propagation
    #: verifiers), used where a suite gives none; a defense that needs tuned settings supports a
    #: transformation only when these (or the suite's) exist. Suites override them per transformation.
    defense_defaults: ClassVar[Mapping[str, Mapping[str, Any]]] = {}

    name: str = ""
    dim: int = 1
    kind: Kind = "non_resolvable"
    norm: Norm = "l2"
    units: str = ""
    low: tuple[float, ...] = (0.0,)
    high: tuple[float, ...] = (1.0,)
    one_sided: bool = False
    differentiable: bool = True
    description: str = ""
    revision: int = 0
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    # ----------------------------------------------------------------- API
    def apply(self, x: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
        """Transform ``x [B,C,H,W]`` with per-sample ``theta [B,m]`` (validated)."""
        theta = self.check_theta(x, theta)
        return self._apply(x, theta)

    @abc.abstractmethod
    def _apply(self, x: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
        """The transformation itself, on validated inputs (each registry entry implements it)."""

    def sample(self, n: int, budget: float, generator: torch.Generator) -> torch.Tensor:
        """Draw ``n`` parameters uniformly from the attack region of radius ``budget``.

        The region is ``[0, budget]`` for one-sided transformations, otherwise the
        ``norm`` ball of radius ``budget``; it is intersected with the domain.
        Returns a CPU float tensor ``[n, dim]``.
        """
        m = self.dim
        if self.one_sided:
            u = torch.rand(n, m, generator=generator, dtype=torch.float64)
            if self.norm == "l2" and m > 1:
                theta = _uniform_l2_ball(n, m, budget, generator).abs()
            else:
                theta = u * budget
        elif self.norm == "linf" or m == 1:
            theta = (2 * torch.rand(n, m, generator=generator, dtype=torch.float64) - 1) * budget
        else:
            theta = _uniform_l2_ball(n, m, budget, generator)
        return self.clip(theta).float()

    def extremes(self, budget: float) -> torch.Tensor:
        """Deterministic boundary points of the attack region (for grid/worst-of-k)."""
        m = self.dim
        if m == 1:
            pts = [[budget]] if self.one_sided else [[-budget], [budget]]
        else:
            eye = torch.eye(m, dtype=torch.float64) * budget
            pts = eye.tolist() if self.one_sided else torch.cat([eye, -eye]).tolist()
        return self.clip(torch.tensor(pts, dtype=torch.float64)).float()

    def clip(self, theta: torch.Tensor) -> torch.Tensor:
        """Clamp parameters into the domain."""
        lo = torch.tensor(self.low, dtype=theta.dtype, device=theta.device)
        hi = torch.tensor(self.high, dtype=theta.dtype, device=theta.device)
        return torch.maximum(torch.minimum(theta, hi), lo)

    def norm_of(self, theta: torch.Tensor) -> torch.Tensor:
        """Size of ``theta [B,m]`` in this transformation's budget norm."""
        if self.norm == "linf":
            return theta.abs().amax(dim=-1)
        return theta.norm(dim=-1)

    def identity(self, batch: int = 1) -> torch.Tensor:
        """Parameters that leave images unchanged."""
        return torch.zeros(batch, self.dim)

    # -------------------------------------------------------- pixel bounds
    @property
    def has_pixel_bounds(self) -> bool:
        """Whether :meth:`pixel_bounds` is available: some class implements ``_pixel_bounds``, and no
        subclass of it has replaced ``_apply`` since (a bound of one apply says nothing about another)."""
        return self._implements("_pixel_bounds")

    def pixel_bounds(self, x: torch.Tensor, theta_lo: torch.Tensor,
                     theta_hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Sound elementwise bounds ``lo <= apply(x, theta) <= hi`` for EVERY theta with
        ``theta_lo <= theta <= theta_hi``.

        ``x [1,C,H,W]`` in [0,1] (one image); ``theta_lo, theta_hi [K,m]`` (K parameter boxes inside
        the domain); returns ``lo, hi [K,C,H,W]`` in the dtype and on the device of ``x``. The bounds
        include the round-off of the real ``apply`` in IEEE float32 and float64 (on CUDA, TF32
        convolutions must be off), and are rounded outward when cast to the dtype of ``x``. The
        subclass's ``_pixel_bounds`` docstring says why its bound is sound.
        """
        if not self.has_pixel_bounds:
            raise BenchError(f"{self.name}: no sound per-pixel bounds are implemented for this "
                             "transformation (check has_pixel_bounds first).")
        x64, lo, hi = self._check_box(x, theta_lo, theta_hi)
        with torch.no_grad():
            p_lo, p_hi = self._pixel_bounds(x64, lo, hi)
        return cast_outward(p_lo, p_hi, x.dtype, x.device)

    def _check_box(self, x: torch.Tensor, theta_lo: torch.Tensor,
                       theta_hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Validate ``pixel_bounds`` inputs; return ``x`` [1,C,H,W] and the boxes [K,m], all float64 on the CPU."""
        check_images(x, f"{self.name}: pixel_bounds image")
        if x.shape[0] != 1 or x.dtype not in (torch.float32, torch.float64):
            raise BenchError(f"{self.name}: pixel_bounds takes one float32/float64 image [1,C,H,W], "
                             f"got {tuple(x.shape)} {x.dtype}; call it per image.")
        lo = torch.as_tensor(theta_lo).detach().to("cpu", torch.float64)
        hi = torch.as_tensor(theta_hi).detach().to("cpu", torch.float64)
        if lo.ndim != 2 or lo.shape != hi.shape or lo.shape[1] != self.dim:
            raise BenchError(f"{self.name}: theta_lo and theta_hi must both have shape [K,{self.dim}], "
                             f"got {tuple(lo.shape)} and {tuple(hi.shape)}.")
        dom_lo = torch.tensor(self.low, dtype=torch.float64)
        dom_hi = torch.tensor(self.high, dtype=torch.float64)
        tol = 1e-6  # as in Transformation.check_theta
        bad = ~(torch.isfinite(lo) & torch.isfinite(hi)) | (lo > hi) | (lo < dom_lo - tol) | (hi > dom_hi + tol)
        if bad.any():
            k = int(bad.any(dim=1).nonzero()[0])
            raise BenchError(f"{self.name}: parameter box [{lo[k].tolist()}, {hi[k].tolist()}] is empty or leaves the "
                             f"domain [{list(self.low)}, {list(self.high)}] ({self.units}); clip it with .clip(theta).")
        return x.detach().to("cpu", torch.float64), lo, hi

    def _pixel_bounds(self, x: torch.Tensor, lo: torch.Tensor,
                      hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """float64 bounds ``[K,C,H,W]`` for ``x [1,C,H,W]`` (float64, CPU) over boxes ``lo, hi [K,m]``
        (validated, float64); subclasses that can bound their output implement it."""
        raise BenchError(f"{self.name}: no sound per-pixel bounds are implemented for this transformation.")

    # ------------------------------------------------------- capabilities
    def defaults_for(self, defense: str) -> dict[str, Any]:
        """The suggested settings of ``defense`` for this transformation (empty: none suggested)."""
        return dict(self.defense_defaults.get(defense, {}))

    def _implements(self, method: str) -> bool:
        """Some class implements ``method`` and no subclass of it has replaced ``_apply`` since (a proof about
        one ``apply`` says nothing about another)."""
        mro = type(self).__mro__
        owner = next(c for c in mro if method in vars(c))
        return owner is not Transformation and mro.index(owner) <= next(
            i for i, c in enumerate(mro) if "_apply" in vars(c))

    @property
    def enumerable(self) -> bool:
        """Whether :meth:`enumerate` lists every distinct output of a budget region (a finite threat model)."""
        return self._implements("_enumerate")

    def enumerate(self, budget: float, image_shape: tuple[int, ...] | None = None) -> torch.Tensor:
        """Parameters ``[k, m]`` (float32) with one per distinct output over the attack region of ``budget``
        on images of ``image_shape`` (``[..., H, W]``; an ``integer`` threat model needs none): checking each
        of them checks the whole region exactly."""
        if not self.enumerable:
            raise BenchError(f"{self.name}: its parameters cannot be enumerated (check enumerable first).")
        shape = None if image_shape is None else tuple(int(n) for n in image_shape[-2:])
        return self._enumerate(float(budget), shape)

    def _enumerate(self, budget: float, image_shape: tuple[int, int] | None) -> torch.Tensor:
        raise BenchError(f"{self.name}: its parameters cannot be enumerated.")

    @property
    def has_output_intervals(self) -> bool:
        """Whether :meth:`output_intervals` is available (a one-sided 1-D parameter whose output is piecewise
        constant in it)."""
        return self._implements("_output_intervals")

    def output_intervals(self, budget: float, image_shape: tuple[int, ...]) -> list[tuple[float, float]]:
        """The float32 parameters of ``[0, budget]`` cut into the intervals on which the output is constant:
        ``[(lo, hi), ...]`` in increasing order, ``lo`` and ``hi`` float32 values, the first ``lo`` 0, each next
        ``lo`` the float32 right after the previous ``hi``, the last ``hi`` at or above ``float32(budget)``.
        Every float32 parameter of an interval gives the same output (sliced certificates smooth once per
        interval: baselines/gsmooth/sliced.py)."""
        if not self.has_output_intervals:
            raise BenchError(f"{self.name}: its output is not piecewise constant in a 1-D parameter "
                             "(check has_output_intervals first).")
        return self._output_intervals(float(budget), tuple(int(n) for n in image_shape[-2:]))

    def _output_intervals(self, budget: float, image_shape: tuple[int, int]) -> list[tuple[float, float]]:
        raise BenchError(f"{self.name}: no output intervals are implemented.")

    def period(self, image_shape: tuple[int, ...]) -> tuple[float, ...] | None:
        """Per-coordinate parameter period (theta and theta + period give the same image), or None."""
        return None

    def support_mask(self, h: int, w: int) -> torch.Tensor:
        """``[1,1,H,W]`` float64 0/1 mask of :attr:`pixel_mask` (pixel-space smoothing applies it before noise)."""
        if self.pixel_mask == "circular":
            yy, xx = torch.meshgrid(torch.arange(h, dtype=torch.float64), torch.arange(w, dtype=torch.float64),
                                    indexing="ij")
            r = torch.sqrt((yy - (h - 1) / 2) ** 2 + (xx - (w - 1) / 2) ** 2)
            return (r <= min(h - 1, w - 1) / 2 + 1e-9).to(torch.float64)[None, None]
        return torch.ones(1, 1, h, w, dtype=torch.float64)

    @property
    def has_parameter_lipschitz(self) -> bool:
        """Whether :meth:`parameter_lipschitz` is available (a 1-D parameter with a proven Lipschitz bound)."""
        return self._implements("_parameter_lipschitz")

    def parameter_lipschitz(self, x: torch.Tensor, budget: float, mask: torch.Tensor) -> float:
        """Upper bound on ``||d/dtheta (mask * apply(x, theta))||_2`` over ``|theta| <= budget`` for one image
        ``x [1,C,H,W]`` (float64 arithmetic): what slice certificates pay between their sample points."""
        if not self.has_parameter_lipschitz:
            raise BenchError(f"{self.name}: no Lipschitz bound in theta is implemented "
                             "(check has_parameter_lipschitz first).")
        return self._parameter_lipschitz(x.detach().to("cpu", torch.float64), float(budget),
                                         mask.detach().to("cpu", torch.float64))

    def _parameter_lipschitz(self, x: torch.Tensor, budget: float, mask: torch.Tensor) -> float:
        raise BenchError(f"{self.name}: no Lipschitz bound in theta is implemented.")

    @property
    def has_linear_layer(self) -> bool:
        """Whether :meth:`linear_layer` is available (the output is exactly linear in some variables z)."""
        return self._implements("_linear_layer")

    def linear_layer(self, x: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Exact linear perturbation layer over parameter boxes ``lo, hi [N, m]``: ``(A [P, m'], c [P],
        z_lo [N, m'], z_hi [N, m'])`` in float64 with ``apply(x, theta).flatten() = A z + c`` for some z in the
        box ``[z_lo[n], z_hi[n]]`` whenever theta lies in box n (in exact arithmetic; callers widen for float32)."""
        if not self.has_linear_layer:
            raise BenchError(f"{self.name}: no exact linear layer is implemented (check has_linear_layer first).")
        return self._linear_layer(x, lo, hi)

    def _linear_layer(self, x: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor):
        raise BenchError(f"{self.name}: no exact linear layer is implemented.")

    # ---------------------------------------------------------- validation
    def check_theta(self, x: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
        """Validate shapes and domain; one clear error otherwise."""
        if x.ndim != 4:
            raise BenchError(
                f"{self.name}: images must have shape [B,C,H,W], got {tuple(x.shape)}; "
                "add a batch dimension with x.unsqueeze(0)."
            )
        theta = torch.as_tensor(theta, dtype=x.dtype, device=x.device)
        if theta.ndim == 1 and self.dim == 1 and theta.shape[0] == x.shape[0]:
            theta = theta[:, None]
        if theta.ndim == 1 and theta.shape[0] == self.dim:
            theta = theta.expand(x.shape[0], self.dim)
        if theta.shape != (x.shape[0], self.dim):
            raise BenchError(
                f"{self.name}: theta must have shape [B,{self.dim}] with B={x.shape[0]}, "
                f"got {tuple(theta.shape)}."
            )
        lo = torch.tensor(self.low, dtype=theta.dtype, device=theta.device)
        hi = torch.tensor(self.high, dtype=theta.dtype, device=theta.device)
        tol = 1e-6
        bad = (theta.detach() < lo - tol) | (theta.detach() > hi + tol) | ~torch.isfinite(theta.detach())
        if bad.any():
            v = theta.detach()[bad.any(dim=1)][0].tolist()
            raise BenchError(
                f"{self.name}: parameter {v} is outside the domain "
                f"[{list(self.low)}, {list(self.high)}] ({self.units}); clip it with .clip(theta)."
            )
        return theta

    def describe(self) -> dict:
        """A row for ``bench list transformations``."""
        dom = ", ".join(f"[{lo:g}, {hi:g}]" for lo, hi in zip(self.low, self.high))
        return {
            "name": self.name,
            "m": self.dim,
            "kind": self.kind,
            "norm": self.norm + (" (one-sided)" if self.one_sided else ""),
            "units": self.units,
            "domain": dom,
            "grad in theta": "yes" if self.differentiable else "no (piecewise constant)",
            "description": self.description,
        }


def _uniform_l2_ball(n: int, m: int, radius: float, generator: torch.Generator) -> torch.Tensor:
    """Uniform samples from the m-dimensional l2 ball (direction x radius^(1/m))."""
    d = torch.randn(n, m, generator=generator, dtype=torch.float64)
    d = d / d.norm(dim=1, keepdim=True).clamp_min(1e-12)
    r = torch.rand(n, 1, generator=generator, dtype=torch.float64) ** (1.0 / m)
    return d * r * radius


def check_images(x: torch.Tensor, name: str = "images") -> None:
    """Images entering the harness must be [B,C,H,W] floats in [0,1]."""
    if not torch.is_tensor(x) or x.ndim != 4:
        shape = tuple(x.shape) if torch.is_tensor(x) else type(x).__name__
        raise BenchError(f"{name} must be a float tensor [B,C,H,W], got {shape}.")
    if not x.is_floating_point():
        raise BenchError(f"{name} must be floats in [0,1], got dtype {x.dtype}; divide uint8 images by 255.")
    lo, hi = float(x.min()), float(x.max())
    if lo < -1e-6 or hi > 1 + 1e-6 or math.isnan(lo):
        raise BenchError(f"{name} must lie in [0,1], got range [{lo:.3g}, {hi:.3g}]; normalisation belongs in the model.")
