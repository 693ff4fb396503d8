"""The ``enumeration`` defense (VeriVis-style, Pei et al. 2017): exact verification over a finite parameter set.

For a transformation whose threat model is integer parameters (``Transformation.integer``; in the
registry, translation's cyclic shifts), the attack region of a budget is the finite set of integer
points of the ball (``Transformation.enumerate``). Evaluating the classifier on every one of them on
the real transformation decides robustness exactly: a budget is certified iff every parameter with
norm <= budget keeps the clean prediction.
"""
from __future__ import annotations

import time

import torch

from baselines.common.verifier_model import verifier_spec
from benchmark.api import Certificate, ClassifierDefense, Context, Transformation


class Enumeration(ClassifierDefense):
    """Exact certificates by evaluating every integer parameter in the budget ball."""

    name = "enumeration"
    certified = True
    description = "exact verification by enumerating every integer shift in the budget ball (VeriVis style)"
    paper = "https://arxiv.org/abs/1712.01785"

    def supports(self, transformation: Transformation) -> bool:
        return transformation.integer and transformation.enumerable

    def prepare(self, ctx: Context) -> None:
        self.model = ctx.model(verifier_spec(ctx))
        self.device = ctx.device


    @torch.no_grad()
    def certify(self, x: torch.Tensor, transformation: Transformation, budgets: list[float],
                generator: torch.Generator) -> list[Certificate]:
        start = time.perf_counter()
        pred = int(self.predict(x, transformation, generator)[0])
        shifts = transformation.enumerate(max(budgets), x.shape)
        images = transformation.apply(x.to(self.device).expand(len(shifts), -1, -1, -1), shifts.to(self.device))
        same = self.model(images).argmax(1).cpu() == pred
        norms = transformation.norm_of(shifts)
        fail_norm = float(norms[~same].min()) if (~same).any() else float("inf")
        certified = {float(b): float(b) < fail_norm - 1e-9 for b in budgets}
        verified = norms[norms < fail_norm - 1e-9]
        extent = float(verified.max()) if len(verified) else 0.0
        stats = {"deterministic": True, "n_enumerated": len(shifts), "n_same": int(same.sum()),
                 "first_failure_norm": None if fail_norm == float("inf") else fail_norm,
                 "extent": extent, "seconds": time.perf_counter() - start}
        # VeriVis: the radius is the norm of the first misclassified shift (certified for budgets below it); when
        # no shift fails it is the largest budget, the whole ball enumerated (never infinite: nothing beyond it
        # was checked)
        radius = fail_norm if fail_norm != float("inf") else float(max(budgets))
        return [Certificate(pred, radius, certified, stats)]
