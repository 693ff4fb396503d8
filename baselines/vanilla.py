"""Vanilla: a standard classifier trained without the transformation or any noise (the paper's "Vanilla")."""
from __future__ import annotations

from benchmark.api import ClassifierDefense, Context, classifier_spec


class Vanilla(ClassifierDefense):
    """Undefended baseline: clean accuracy and accuracy under attack, no certificate."""

    name = "vanilla"
    certified = False
    description = "standard classifier, no noise or transformation in training (paper: Vanilla)"

    def prepare(self, ctx: Context) -> None:
        self.model = ctx.model(classifier_spec(ctx, "vanilla", {"name": "none"}, None))
        self.device = ctx.device

