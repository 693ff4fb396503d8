"""Common base of parameter-space attacks: find a parameter in the budget region that breaks a defense."""
from __future__ import annotations

import abc
from dataclasses import dataclass

import torch

from benchmark.transformations.base import Transformation


@dataclass
class AttackResult:
    """Outcome for one image and one budget.

    robust: every evaluated parameter kept the correct, non-abstained prediction.
    theta: the parameter that broke the defense (or the last one evaluated).
    queries: how many transformed images were evaluated.
    """

    robust: bool
    theta: list[float]
    queries: int


class ParameterAttack(abc.ABC):
    """An attack over the transformation parameter inside the budget region (real transformation)."""

    name: str = ""

    @abc.abstractmethod
    def run(self, defense, x: torch.Tensor, y: int, transformation: Transformation, budget: float,
            generator: torch.Generator) -> AttackResult:
        """Attack one image ``x [1,C,H,W]`` with label ``y`` within ``budget``."""

    @staticmethod
    def evaluate(defense, x: torch.Tensor, y: int, transformation: Transformation, thetas: torch.Tensor,
                 generator: torch.Generator, chunk: int = 64) -> AttackResult:
        """Apply the real transformation at each ``theta`` and ask the defense's own predict (abstain = wrong).

        Stops at the first chunk containing a failure.
        """
        queries = 0
        for i in range(0, len(thetas), chunk):
            th = thetas[i:i + chunk]
            imgs = transformation.apply(x.expand(len(th), -1, -1, -1), th.to(x.dtype))
            pred = defense.predict(imgs, transformation, generator)
            queries += len(th)
            wrong = (pred != y).nonzero()
            if len(wrong):
                return AttackResult(False, th[int(wrong[0])].tolist(), queries)
        return AttackResult(True, thetas[-1].tolist() if len(thetas) else [], queries)
