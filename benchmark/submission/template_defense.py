"""A complete defense in one file: the template for submissions (copy it with ``bench template``).

``BrightnessSmoothing`` certifies robustness to brightness shifts x -> x + b by Gaussian smoothing
over b (the offset composes additively, so this is exact randomized smoothing in the parameter):
the base classifier is trained on x + b with b ~ N(0, sigma^2), CERTIFY gives a lower bound p_A on
the top-class probability, and the certified l2 radius over b is sigma * Phi^-1(p_A).

The noise is drawn and applied by the harness's ``parameter_smoothing`` helper, so the harness can
verify the certificate end to end and ranks it. It stays a proof in floating point: the helper draws integer
noise K from fair bits and hands the classifier ``Q (canonical(x) + K)``, the image's grid point (Q = 2**-8)
shifted by K grid steps, exact in float32, so a brightened image's samples are exact lattice translates of the
clean ones (``benchmark/certify/parameter_lattice.py``); the radius pays the grid and the noise table's error.
For a transformation that does not compose additively use ``pixel_smoothing`` (Gaussian pixel noise; budgets
converted through the registry's pixel bounds).
Certificates from other mechanisms are listed as unverified and not ranked.

To make your own: rename the class and ``name``, change ``supports``, ``prepare`` (train/load your
models through ``ctx.model``), ``predict``, ``certify`` and ``noisy_logits``. Draw randomness only
from the ``generator`` arguments. Then:

    bench run --suite semantic --defense my_defense.py:BrightnessSmoothing --transformation brightness
    bench submit my_defense.py:BrightnessSmoothing --suite semantic
"""
from __future__ import annotations

import torch

from benchmark.api import (Certificate, Context, Defense, Transformation, classifier_spec, parameter_sampler,
                           parameter_smoothing, predict)


class BrightnessSmoothing(Defense):
    """Gaussian smoothing over the brightness offset (a minimal, sound example)."""

    name = "brightness_smoothing"
    certified = True
    defaults = {"sigma": 0.3}
    description = "template: Gaussian smoothing over the brightness offset"
    paper = ""
    code = ""

    def supports(self, transformation: Transformation) -> bool:
        # ask the transformation what it can do, never its name: Gaussian smoothing over the parameter is exact
        # for an additive (theta adds under composition), two-sided, continuous 1-D parameter (brightness here)
        t = transformation
        return t.kind == "additive" and t.dim == 1 and not t.one_sided and not t.integer

    def prepare(self, ctx: Context) -> None:
        self.sigma = float(self.config["sigma"])
        self.smoothing = ctx.smoothing
        self.num_classes = ctx.dataset.spec.num_classes
        self.device = ctx.device
        sigma = self.sigma

        def augment(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
            # the brightness shift x + b, b ~ N(0, sigma^2): for another transformation train on its own noise
            # (ctx.transformation.apply) and say so in the description below
            return x + sigma * torch.randn(len(x), 1, 1, 1, generator=gen)

        # the checkpoint is keyed by this description: change it when the training changes
        spec = classifier_spec(ctx, f"{self.name}/sigma{sigma}", {"name": "brightness-noise", "sigma": sigma}, augment)
        self.model = ctx.model(spec)

    def _classify(self, images: torch.Tensor) -> torch.Tensor:
        return self.model(images.to(self.device))

    def predict(self, x: torch.Tensor, transformation: Transformation, generator: torch.Generator) -> torch.Tensor:
        labels = [predict(parameter_sampler(self._classify, xi[None], transformation, "gaussian", self.sigma),
                          self.num_classes, self.smoothing, generator)[0] for xi in x]
        return torch.tensor(labels, dtype=torch.int64)

    def certify(self, x: torch.Tensor, transformation: Transformation, budgets: list[float],
                generator: torch.Generator) -> list[Certificate]:
        # the harness draws b = Q K (K a rounded N(0, (sigma/Q)^2) from fair bits) from the generator, applies it
        # exactly and records the mechanism, the noise record, the raw counts and the radius rule, so `bench submit`
        # can recompute and verify the certificate (under `certify: sequential` it stops sampling once every
        # budget is decided)
        return [parameter_smoothing(self._classify, x, transformation, budgets, generator, self.smoothing,
                                    self.num_classes, distribution="gaussian", scale=self.sigma)]

    def noisy_logits(self, x: torch.Tensor, transformation: Transformation,
                     generator: torch.Generator) -> torch.Tensor:
        b = self.sigma * torch.randn(len(x), 1, generator=generator)
        # float noise for the attacks' gradients (differentiable); certificates use parameter_smoothing's grid noise
        return self.model(transformation.apply(x.to(self.device), b.to(self.device)))
