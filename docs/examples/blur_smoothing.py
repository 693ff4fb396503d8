"""A sound blur certificate with a per-budget ``threshold_rule``, on the packaged vanilla checkpoint.

``BlurSmoothing`` smooths over the Gaussian blur's kernel variance: the base classifier sees
blur(x, a + e) with e ~ Exponential(mean lam). The registry's ``gaussian_blur`` is an exact circular FFT
blur, so variances add (blur(blur(x, a), e) = blur(x, a + e)) and smoothing over e is randomized
smoothing of a one-sided additive parameter: with p_A the smoothed top-class probability, every
variance a < -lam * ln(2 - 2 p_A) keeps the prediction (TSS, Li et al. 2021). Each budget b is then
certified iff p_A_lower exceeds the threshold tau_b at which that radius reaches b, and the certificate
records those thresholds (``threshold_rule``) so ``bench submit`` recomputes every flag.

It needs no training: ``prepare`` reuses the packaged vanilla classifier (the zoo entry every
built-in verifier uses) through ``classifier_spec(ctx, "vanilla", {"name": "none"}, None)``.

    bench submit docs/examples/blur_smoothing.py:BlurSmoothing --suite semantic --transformation gaussian_blur
"""
from __future__ import annotations

import torch

from benchmark.certify.certificate import Certificate
from benchmark.certify.radii import exponential_radius, radius_threshold
from benchmark.certify.smoothing import certify, predict
from benchmark.defense import Context, Defense
from benchmark.models.recipes import classifier_spec
from benchmark.transformations.base import Transformation


class BlurSmoothing(Defense):
    """Exponential smoothing over the blur variance of the packaged vanilla classifier."""

    name = "blur_smoothing"
    certified = True
    defaults = {"lam": 2.0}
    description = "example: exponential smoothing over the Gaussian blur variance (per-budget thresholds)"

    def supports(self, transformation: Transformation) -> bool:
        return transformation.name == "gaussian_blur"  # the default supports() accepts every transformation

    def prepare(self, ctx: Context) -> None:
        self.lam = float(self.config["lam"])
        self.smoothing, self.num_classes, self.device = ctx.smoothing, ctx.dataset.spec.num_classes, ctx.device
        self.model = ctx.model(classifier_spec(ctx, "vanilla", {"name": "none"}, None))  # packaged, no training

    def _variances(self, k: int, gen: torch.Generator) -> torch.Tensor:
        return -self.lam * torch.log1p(-torch.rand(k, 1, generator=gen))  # Exponential(mean lam), [k, 1]

    def _sampler(self, x: torch.Tensor, t: Transformation):
        @torch.no_grad()
        def sample_labels(k: int, gen: torch.Generator) -> torch.Tensor:
            blurred = t.apply(x.expand(k, -1, -1, -1), self._variances(k, gen))
            return self.model(blurred.to(self.device)).argmax(1)

        return sample_labels

    def predict(self, x: torch.Tensor, transformation: Transformation, generator: torch.Generator) -> torch.Tensor:
        labels = [predict(self._sampler(xi[None], transformation), self.num_classes, self.smoothing, generator)[0]
                  for xi in x]
        return torch.tensor(labels, dtype=torch.int64)

    def certify(self, x: torch.Tensor, transformation: Transformation, budgets: list[float],
                generator: torch.Generator) -> list[Certificate]:
        # budgets include 0 (the clean image): its threshold is 1/2, i.e. certified iff not abstaining
        need = {float(b): radius_threshold(lambda p: exponential_radius(p, self.lam), float(b)) for b in budgets}
        res = certify(self._sampler(x, transformation), self.num_classes, self.smoothing, generator,
                      thresholds=list(need.values()))
        flags = {b: res.prediction != -1 and res.p_a_lower > tau for b, tau in need.items()}
        rule = {"statistic": "p_a_lower", "required": {repr(b): tau for b, tau in need.items()}}
        return [Certificate(res.prediction, None, flags, {**res.stats(), "threshold_rule": rule})]

    def noisy_logits(self, x: torch.Tensor, transformation: Transformation,
                     generator: torch.Generator) -> torch.Tensor:
        # one draw of the smoothing noise per image; differentiable in x (the attacks' PGD + EoT surface)
        return self.model(transformation.apply(x, self._variances(len(x), generator)).to(self.device))
