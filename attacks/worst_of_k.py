"""Worst-of-k random search: the region's extreme points plus random parameters, all on the real transformation."""
from __future__ import annotations

import torch

from attacks.base import AttackResult, ParameterAttack
from benchmark.api import Transformation


class WorstOfK(ParameterAttack):
    """Evaluate the boundary points of the budget region and ``k`` uniform random parameters inside it.

    Gradient-free, so it applies to every transformation (also piecewise-constant ones such as pixelate).
    Settings: ``k`` random parameters (default: the profile's ``attack_k``).
    """

    name = "worst_of_k"
    defaults = {"k": 10}
    from_profile = {"k": "attack_k"}

    @property
    def k(self) -> int:
        return int(self.settings["k"])

    def candidates(self, transformation: Transformation, budget: float, generator: torch.Generator) -> torch.Tensor:
        ext = transformation.extremes(budget)
        rnd = transformation.sample(self.k, budget, generator)
        return torch.cat([ext, rnd])

    def run(self, defense, x: torch.Tensor, y: int, transformation: Transformation, budget: float,
            generator: torch.Generator) -> AttackResult:
        return self.evaluate(defense, x, y, transformation, self.candidates(transformation, budget, generator), generator)
