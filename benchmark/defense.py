"""The public Defense API: what every built-in defense and every submission implements.

A defense is instantiated once per task (dataset x transformation x config) with
its config from the suite, then ``prepare(ctx)`` trains or loads its models
through ``ctx.model(spec)`` (the packaged zoo or the cache, keyed by config
hash), then the harness calls, per test example,

* ``predict(x, transformation, generator)`` on clean and attacked images, and
* ``certify(x, transformation, budgets, generator)`` if ``certified`` is True.

Randomness must come only from the ``generator`` passed in, so a fixed seed gives
the same table. Smoothing certificates count as proofs only when a mechanism the harness
verifies made them: ``parameter_smoothing`` (the harness draws integer noise on a grid of theta and
applies the registry's transformation to exact parameters; additive transformations) or ``pixel_smoothing`` (Gaussian pixel
noise, budgets converted through the registry's ``pixel_bounds``); the ``*_sampler`` forms
serve PREDICT. A defense has no other access to the harness, and never to the test
split (datasets refuse it while defense code runs; see docs/submitting.md).
"""
from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import Any, ClassVar

import torch

from benchmark.certify.certificate import ABSTAIN, Certificate
from benchmark.certify.mechanisms import parameter_sampler, parameter_smoothing, pixel_sampler, pixel_smoothing
from benchmark.context import Context
from benchmark.errors import BenchError
from benchmark.transformations.base import Transformation

__all__ = ["ABSTAIN", "Certificate", "ClassifierDefense", "Context", "Defense", "parameter_sampler",
           "parameter_smoothing", "pixel_sampler", "pixel_smoothing"]


class Defense(abc.ABC):
    """Base class of all defenses.

    Class attributes:
        name: registry name; table labels are ``name`` or ``name:variant``.
        certified: whether :meth:`certify` gives certificates.
        variants: certificate variants returned by :meth:`certify` ("" = the headline one).
        defaults: accepted config keys and their default values; unknown keys are an error.
        description, paper, code: shown by ``bench list defenses`` and in leaderboard entries.
    """

    name: ClassVar[str] = ""
    certified: ClassVar[bool] = False
    variants: ClassVar[tuple[str, ...]] = ("",)
    defaults: ClassVar[Mapping[str, Any]] = {}
    description: ClassVar[str] = ""
    paper: ClassVar[str] = ""
    code: ClassVar[str] = ""

    def __init__(self, **config: Any):
        unknown = set(config) - set(self.defaults)
        if unknown:
            raise BenchError(f"defense '{self.name}': unknown config key(s) {sorted(unknown)}; "
                             f"valid keys: {sorted(self.defaults) or 'none'}.")
        self.config: dict[str, Any] = {**self.defaults, **config}

    def supports(self, transformation: Transformation) -> bool:
        """Whether this defense handles ``transformation``; unsupported pairs show "--" in tables."""
        return True

    @abc.abstractmethod
    def prepare(self, ctx: Context) -> None:
        """Train or load models for ``ctx.dataset`` and ``ctx.transformation`` (via ``ctx.model``)."""

    @abc.abstractmethod
    def predict(self, x: torch.Tensor, transformation: Transformation, generator: torch.Generator) -> torch.Tensor:
        """Labels ``[B]`` (int64, ``ABSTAIN`` = -1) for images ``x [B,C,H,W]`` in [0,1]."""

    def certify(self, x: torch.Tensor, transformation: Transformation, budgets: list[float],
                generator: torch.Generator) -> list[Certificate]:
        """Certificates (one per variant) for one image ``x [1,C,H,W]``."""
        raise BenchError(f"defense '{self.name}' does not certify; set certified = True and implement certify().")

    def noisy_logits(self, x: torch.Tensor, transformation: Transformation,
                     generator: torch.Generator) -> torch.Tensor | None:
        """The attack surface: base-classifier logits ``[B, K]`` on ``x`` under ONE draw of the defense's noise.

        Must be differentiable in ``x`` (no ``torch.no_grad``). PGD+EoT averages the softmax of
        several calls to attack the *smoothed* classifier. Deterministic defenses return plain
        logits; ``None`` (the default) means "no gradient surface" and attacks fall back to
        gradient-free search.
        """
        return None

    def prepare_report(self) -> dict:
        """Facts about the prepared models worth recording with the run (e.g. surrogate fit)."""
        return {}

    def labels(self) -> list[str]:
        """Table labels of this defense's certificate variants."""
        return [self.name if not v else f"{self.name}:{v}" for v in self.variants]


class ClassifierDefense(Defense):
    """A defense whose prediction is one deterministic classifier ``self.model`` on ``self.device``
    (set both in ``prepare``): ``predict`` is its argmax and the attack surface is its plain logits."""

    model: torch.nn.Module
    device: str = "cpu"

    @torch.no_grad()
    def predict(self, x: torch.Tensor, transformation: Transformation, generator: torch.Generator) -> torch.Tensor:
        return self.model(x.to(self.device)).argmax(1).cpu()

    def noisy_logits(self, x: torch.Tensor, transformation: Transformation,
                     generator: torch.Generator) -> torch.Tensor:
        return self.model(x.to(self.device))
