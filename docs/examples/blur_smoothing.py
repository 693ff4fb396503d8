"""Sound, harness-verified certificates for a blur and for a geometric transformation, on the packaged
vanilla checkpoint (no training).

* ``BlurSmoothing`` smooths over the Gaussian blur's kernel variance with the harness's
  ``parameter_smoothing``: the harness draws e = Q K from the generator (K = floor(E / Q), E ~ Exponential(mean
  lam), from fair bits on the grid Q = 2**-12 of lam, rounded to a power of two) and the base classifier sees
  blur(x, e), e exact in float32. The registry's ``gaussian_blur`` is an exact circular FFT blur, so variances
  add (blur(blur(x, a), e) = blur(x, a + e)) and this is randomized smoothing of a one-sided additive
  parameter: every variance a up to -lam ln(2 - 2 p_A), less the grid and the table's error, keeps the
  prediction of the parameter-space smoothed classifier (TSS, Li et al. 2021; ``parameter_lattice``'s
  ``nearest`` route: PREDICT at a blurred image composes two rounded blurs, a gap the certificate does not cover).
* ``PixelSmoothing`` adds Gaussian pixel noise with the harness's ``pixel_smoothing``, which certifies
  *any* transformation with sound ``pixel_bounds`` (rotation, scaling, the blurs, ...): budget b is
  certified iff the l2 pixel radius sigma Phi^-1(p_A) exceeds the largest l2 distance between x and an image
  of b's region, which the harness bounds from ``pixel_bounds``. Its certificate carries a per-budget
  ``threshold_rule`` (one required margin per budget) that ``bench submit`` recomputes.

Both record a ``mechanism`` the checker re-derives from the test image, so their entries are ranked;
a hand-written radius rule would be listed as unverified (§).

    bench submit docs/examples/blur_smoothing.py:BlurSmoothing --suite semantic --transformation gaussian_blur
    bench submit docs/examples/blur_smoothing.py:PixelSmoothing --suite semantic --transformation rotation
"""
from __future__ import annotations

import abc

import torch

from benchmark.certify.certificate import Certificate
from benchmark.certify.mechanisms import parameter_sampler, parameter_smoothing, pixel_sampler, pixel_smoothing
from benchmark.certify.smoothing import predict
from benchmark.defense import Context, Defense
from benchmark.recipes import classifier_spec
from benchmark.transformations.base import Transformation


class _OnVanilla(Defense):
    """Shared: the packaged vanilla classifier (the zoo entry every built-in verifier uses) and PREDICT."""

    certified = True

    def prepare(self, ctx: Context) -> None:
        self.smoothing, self.num_classes, self.device = ctx.smoothing, ctx.dataset.spec.num_classes, ctx.device
        self.model = ctx.model(classifier_spec(ctx, "vanilla", {"name": "none"}, None)).eval()  # packaged

    @abc.abstractmethod
    def _sampler(self, x: torch.Tensor, t: Transformation):
        """``sample_labels(k, generator)`` of the smoothed classifier at ``x`` (each example's mechanism)."""

    def predict(self, x: torch.Tensor, transformation: Transformation, generator: torch.Generator) -> torch.Tensor:
        labels = [predict(self._sampler(xi[None], transformation), self.num_classes, self.smoothing, generator)[0]
                  for xi in x]
        return torch.tensor(labels, dtype=torch.int64)


class BlurSmoothing(_OnVanilla):
    """Exponential smoothing over the Gaussian blur variance (harness-drawn parameter noise)."""

    name = "blur_smoothing"
    defaults = {"lam": 2.0}
    description = "example: exponential smoothing over the Gaussian blur variance (parameter_smoothing)"

    def supports(self, transformation: Transformation) -> bool:
        return transformation.name == "gaussian_blur"  # the default supports() accepts every transformation

    def _sampler(self, x: torch.Tensor, t: Transformation):
        return parameter_sampler(self.model, x.to(self.device), t, "exponential", float(self.config["lam"]))

    def certify(self, x: torch.Tensor, transformation: Transformation, budgets: list[float],
                generator: torch.Generator) -> list[Certificate]:
        # budgets include 0 (the clean image): certified there iff CERTIFY does not abstain
        return [parameter_smoothing(self.model, x.to(self.device), transformation, budgets, generator,
                                    self.smoothing, self.num_classes, distribution="exponential",
                                    scale=float(self.config["lam"]))]

    def noisy_logits(self, x: torch.Tensor, transformation: Transformation,
                     generator: torch.Generator) -> torch.Tensor:
        # one draw of the smoothing noise per image; differentiable in x (the attacks' PGD + EoT surface)
        lam = float(self.config["lam"])
        e = -lam * torch.log1p(-torch.rand(len(x), 1, generator=generator, dtype=torch.float64))
        return self.model(transformation._apply(x.to(self.device), e.to(self.device, x.dtype)))


class PixelSmoothing(_OnVanilla):
    """Gaussian pixel noise; per-budget certificates on any transformation with pixel bounds."""

    name = "pixel_smoothing"
    defaults = {"sigma": 0.25}
    description = "example: Gaussian pixel noise with budgets converted by the registry's pixel_bounds"

    def supports(self, transformation: Transformation) -> bool:
        return transformation.has_pixel_bounds

    def _sampler(self, x: torch.Tensor, t: Transformation):
        return pixel_sampler(self.model, x.to(self.device), float(self.config["sigma"]))

    def certify(self, x: torch.Tensor, transformation: Transformation, budgets: list[float],
                generator: torch.Generator) -> list[Certificate]:
        return [pixel_smoothing(self.model, x.to(self.device), transformation, budgets, generator, self.smoothing,
                                self.num_classes, sigma=float(self.config["sigma"]))]

    def noisy_logits(self, x: torch.Tensor, transformation: Transformation,
                     generator: torch.Generator) -> torch.Tensor:
        noise = float(self.config["sigma"]) * torch.randn(x.shape, generator=generator)
        return self.model(x.to(self.device) + noise.to(self.device, x.dtype))
