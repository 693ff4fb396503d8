"""Common base of parameter-space attacks: find a parameter in the budget region that breaks a defense."""
from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from benchmark.api import BenchError, Transformation, predict_log


@dataclass
class AttackResult:
    """Outcome for one image and one budget.

    robust: every evaluated parameter kept the correct, non-abstained prediction.
    theta: the parameter that broke the defense (or the last one evaluated).
    queries: how many transformed images were evaluated with the defense's predict().
    confident_wrong: some parameter gave a *confident* wrong label (not an abstention).
        A sound certificate for the true class makes this (almost) impossible, so the
        harness uses it for the certified-vs-empirical consistency check; an abstention
        of a finite-sample PREDICT near the decision boundary is not a contradiction.
    fallback: name of the attack actually run when this one does not apply (e.g. PGD on a
        transformation without gradients in theta, or a defense without an attack surface);
        None when the attack ran as itself.
    info: attack-specific facts worth keeping in the row (why it fell back, rounding, losses).
    predict: the sequential PREDICT records of the evaluated parameters, in order (empty for defenses
        without a Monte-Carlo PREDICT), replayed by ``benchmark.audit.predict_replay``.
    """

    robust: bool
    theta: list[float]
    queries: int
    confident_wrong: bool = False
    fallback: str | None = None
    info: dict = field(default_factory=dict)
    predict: list[dict] = field(default_factory=list)


class ParameterAttack(abc.ABC):
    """An attack over the transformation parameter inside the budget region (real transformation).

    Class attributes:
        name: registry name (``attacks.attack_names()``).
        defaults: accepted settings and their default values; unknown settings are an error.
        from_profile: settings whose default comes from a field of the suite profile
            (setting -> profile field), e.g. worst-of-k's ``k`` from ``attack_k``.
    """

    name: ClassVar[str] = ""
    defaults: ClassVar[Mapping[str, Any]] = {}
    from_profile: ClassVar[Mapping[str, str]] = {}

    def __init__(self, **settings: Any):
        unknown = set(settings) - set(self.defaults)
        if unknown:
            raise BenchError(f"attack '{self.name}': unknown setting(s) {sorted(unknown)}; "
                             f"valid settings: {sorted(self.defaults) or 'none'}.")
        self.settings: dict[str, Any] = {**self.defaults, **settings}

    @abc.abstractmethod
    def run(self, defense, x: torch.Tensor, y: int, transformation: Transformation, budget: float,
            generator: torch.Generator) -> AttackResult:
        """Attack one image ``x [1,C,H,W]`` with label ``y`` within ``budget``."""

    def run_budgets(self, defense, x: torch.Tensor, y: int, transformation: Transformation, budgets: list[float],
                    generator: torch.Generator) -> list[AttackResult]:
        """One result per budget (same as :meth:`run` at each); attacks that can share work across
        budgets (PGD optimises all budgets in one batch) override this."""
        return [self.run(defense, x, y, transformation, b, generator) for b in budgets]

    @staticmethod
    def evaluate(defense, x: torch.Tensor, y: int, transformation: Transformation, thetas: torch.Tensor,
                 generator: torch.Generator, chunk: int = 64, known: dict[tuple[float, ...], int] | None = None
                 ) -> AttackResult:
        """Apply the real transformation at each ``theta`` and ask the defense's own predict (abstain = wrong).

        Stops at the first chunk containing a confident wrong label. ``known``: labels of this image at
        parameters judged before, reused and extended (only for a deterministic predict); ``queries`` counts
        the points judged either way.
        """
        queries, first_fail = 0, None
        with predict_log.collect() as records:
            for i in range(0, len(thetas), chunk):
                th = thetas[i:i + chunk]
                pred = _labels(defense, x, transformation, th, generator, known)
                queries += len(th)
                confident = ((pred != y) & (pred != -1)).nonzero()
                if len(confident):
                    return AttackResult(False, th[int(confident[0])].tolist(), queries, confident_wrong=True,
                                        predict=records)
                wrong = (pred != y).nonzero()
                if len(wrong) and first_fail is None:
                    first_fail = th[int(wrong[0])].tolist()
        if first_fail is not None:
            return AttackResult(False, first_fail, queries, predict=records)
        return AttackResult(True, thetas[-1].tolist() if len(thetas) else [], queries, predict=records)


def _labels(defense, x: torch.Tensor, transformation: Transformation, th: torch.Tensor, generator: torch.Generator,
            known: dict[tuple[float, ...], int] | None) -> torch.Tensor:
    """The defense's predictions at the parameters ``th``; with ``known``, only the new ones are computed."""
    if known is None:
        return defense.predict(_images(x, transformation, th), transformation, generator)
    keys = [tuple(row) for row in th.tolist()]
    new = [j for j, key in enumerate(keys) if key not in known]
    pred = defense.predict(_images(x, transformation, th[new]), transformation, generator) if new else None
    for j, label in zip(new, [] if pred is None else pred.tolist()):
        known[keys[j]] = label
    return torch.tensor([known[key] for key in keys])


def _images(x: torch.Tensor, transformation: Transformation, th: torch.Tensor) -> torch.Tensor:
    """``x`` transformed by each parameter row of ``th`` (no gradient: the attack only judges them)."""
    with torch.no_grad():
        return transformation.apply(x.expand(len(th), -1, -1, -1), th.to(x.dtype))
