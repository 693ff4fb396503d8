"""The ``tss`` defense: smoothing over the transformation parameter for additive transformations.

Supported here (certified exactly, because our implementations compose exactly):
* gaussian_blur: parameter = kernel variance (px^2), Fourier-domain blur with a
  periodic boundary so blur(a) o blur(b) = blur(a + b); exponential smoothing by
  default (uniform and folded Gaussian selectable); radius in variance units.
* translation: integer cyclic shifts (wrap-around padding, which TSS's code calls
  "reflection"); Gaussian noise on (dx, dy) rounded to whole pixels; l2 radius in px.
  Because the attack shift d is an integer, round(d + e) = d + round(e), so this is
  exact Gaussian smoothing of theta -> f(shift(x, round(theta))).
* brightness: x + b without clipping; Gaussian noise on b; radius in intensity units.
Every other transformation is reported as unsupported ("--").
"""
from __future__ import annotations

import torch

from baselines.tss.noise import ParameterNoise
from benchmark.certify.certificate import Certificate
from benchmark.certify.smoothing import certify, predict
from benchmark.defense import Context, Defense
from benchmark.errors import BenchError
from benchmark.models.recipes import classifier_spec
from benchmark.transformations.base import Transformation

#: default smoothing per supported transformation: (distribution, scale)
DEFAULT_NOISE = {
    "gaussian_blur": ("exponential", 2.0),
    "translation": ("gaussian", 3.0),
    "brightness": ("gaussian", 0.3),
}


class TSS(Defense):
    """Transformation-specific smoothing (TSS) for additive transformations."""

    name = "tss"
    certified = True
    defaults = {"smoothing": None, "scale": None}
    description = "transformation-specific smoothing over the parameter (TSS, Li et al. 2021)"
    paper = "https://arxiv.org/abs/2002.12398"

    def supports(self, transformation: Transformation) -> bool:
        return transformation.name in DEFAULT_NOISE

    def noise_for(self, t: Transformation, image_shape: tuple[int, ...]) -> ParameterNoise:
        kind, scale = DEFAULT_NOISE[t.name]
        kind = self.config["smoothing"] or kind
        scale = float(self.config["scale"] or scale)
        if t.name == "translation":
            if kind != "gaussian":
                raise BenchError(f"tss/translation supports only gaussian smoothing, got '{kind}'.")
            h, w = image_shape[-2:]
            return ParameterNoise("gaussian", scale, dim=2, integer=True, period=(w, h))
        if t.name == "brightness" and kind != "gaussian":
            raise BenchError(f"tss/brightness supports only gaussian smoothing (two-sided parameter), got '{kind}'.")
        return ParameterNoise(kind, scale, dim=t.dim)

    def prepare(self, ctx: Context) -> None:
        t = ctx.transformation
        self.noise = self.noise_for(t, ctx.dataset.spec.shape)
        self.smoothing = ctx.smoothing
        self.num_classes = ctx.dataset.spec.num_classes
        self.device = ctx.device
        noise = self.noise

        def augment(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
            return t.apply(x, noise.sample(len(x), gen))

        desc = {"name": "tss-parameter-noise", "transformation": t.name, "noise": noise.describe()}
        self.model = ctx.model(classifier_spec(ctx, f"tss/{t.name}", desc, augment))

    def _sampler(self, x: torch.Tensor, t: Transformation):
        x = x.to(self.device)

        @torch.no_grad()
        def sample_labels(k: int, gen: torch.Generator) -> torch.Tensor:
            theta = self.noise.sample(k, gen).to(self.device)
            return self.model(t.apply(x.expand(k, -1, -1, -1), theta)).argmax(1)

        return sample_labels

    def noisy_logits(self, x: torch.Tensor, transformation: Transformation,
                     generator: torch.Generator) -> torch.Tensor:
        """One parameter-noise draw per image through the transformation (differentiable in x)."""
        theta = self.noise.sample(len(x), generator).to(self.device)
        return self.model(transformation.apply(x.to(self.device), theta))

    def certify(self, x: torch.Tensor, transformation: Transformation, budgets: list[float],
                generator: torch.Generator) -> list[Certificate]:
        res = certify(self._sampler(x, transformation), self.num_classes, self.smoothing, generator)
        radius = self.noise.radius(res.p_a_lower)
        stats = {**res.stats(), "noise": self.noise.describe()}
        return [Certificate.from_radius(res.prediction, radius, budgets, stats)]

    def predict(self, x: torch.Tensor, transformation: Transformation, generator: torch.Generator) -> torch.Tensor:
        out = [predict(self._sampler(xi[None], transformation), self.num_classes, self.smoothing, generator)[0]
               for xi in x]
        return torch.tensor(out, dtype=torch.int64)
