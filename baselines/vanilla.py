"""Vanilla: a standard classifier trained without the transformation or any noise (the paper's "Vanilla")."""
from __future__ import annotations

import torch

from benchmark.defense import Context, Defense
from benchmark.models.recipes import classifier_spec
from benchmark.transformations.base import Transformation


class Vanilla(Defense):
    """Undefended baseline: clean accuracy and accuracy under attack, no certificate."""

    name = "vanilla"
    certified = False
    description = "standard classifier, no noise or transformation in training (paper: Vanilla)"

    def prepare(self, ctx: Context) -> None:
        self.model = ctx.model(classifier_spec(ctx, "vanilla", {"name": "none"}, None))
        self.device = ctx.device

    @torch.no_grad()
    def predict(self, x: torch.Tensor, transformation: Transformation, generator: torch.Generator) -> torch.Tensor:
        return self.model(x.to(self.device)).argmax(1).cpu()

    def noisy_logits(self, x: torch.Tensor, transformation: Transformation,
                     generator: torch.Generator) -> torch.Tensor:
        return self.model(x.to(self.device))
