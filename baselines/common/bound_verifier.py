"""The shared code of the deterministic verifiers (semanify, interval, deepg): outward sub-interval search
with a bound-propagation margin check on the suite's CNN (benchmark.api's verification tools).

A verifier supports a transformation that has sound pixel bounds or an exact linear layer, whose threat
model is continuous (not ``integer``: the ``enumeration`` defense checks finite ones exactly), and for which
sub-interval counts exist: the transformation's suggested ``verifier`` settings (``defaults_for``) or the
suite's ``splits``.
"""
from __future__ import annotations

import time
from typing import ClassVar

import torch

from baselines.common.verifier_model import verifier_spec
from benchmark.api import (BenchError, Certificate, ClassifierDefense, Context, Method, Transformation, cnn_layers,
                           margin_bounds, margin_layers, ring_edges, verify_outward)

#: a box verifies iff every margin lower bound exceeds this: bounds are exact-arithmetic float64
#: bounds, the real network runs in float32 (round-off on the logits is ~1e-6 here).
MARGIN_TOL = 1e-4


class BoundVerifier(ClassifierDefense):
    """Shared code of the CROWN and IBP verifiers; subclasses set ``name`` and ``method``."""

    certified = True
    method: ClassVar[Method] = "crown"
    #: multiplies the transformation's suggested ``verifier`` splits (sub-intervals per side, per coordinate, of
    #: [0, largest budget], each bisected ``refine`` more times where it fails). IBP loosens much faster with
    #: the box width than CROWN and is several times cheaper per box, so it gets twice as many (measured on 25
    #: digits test images, rotation up to 20 degrees: CROWN certifies the same with 10 sub-intervals + 1
    #: bisection as with 40 uniform ones, at a third of the cost).
    split_factor: ClassVar[int] = 1
    defaults = {"splits": None, "refine": 1, "boxes_per_call": 64, "pieces": 1}

    def supports(self, transformation: Transformation) -> bool:
        t = transformation
        tuned = "splits" in t.defaults_for("verifier") or self.config["splits"] is not None
        return tuned and not t.integer and (t.has_linear_layer or t.has_pixel_bounds)

    def prepare(self, ctx: Context) -> None:
        self.model = ctx.model(verifier_spec(ctx))
        self.layers = cnn_layers(self.model, tuple(ctx.dataset.spec.shape))  # float64 copies on the CPU
        self.device = ctx.device
        suggested = ctx.transformation.defaults_for("verifier").get("splits")
        splits = self.config["splits"] or (self.split_factor * int(suggested) if suggested else 1)
        if int(splits) < 1:
            raise BenchError(f"defense '{self.name}': splits must be a positive integer, got {splits}.")
        self.splits = int(splits)


    def box_checker(self, x: torch.Tensor, t: Transformation, label: int, verified: list | None = None):
        """``check(lo, hi) -> bool [N]``: whether the margin of ``label`` is positive over each parameter box.

        Every box that verifies is appended to ``verified`` as ``[lo, hi, min margin bound]`` (the
        certificate's proof, re-checked by ``bench verify-entry``)."""
        layers = margin_layers(self.layers, label)
        pieces = int(self.config["pieces"])

        def check(lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
            margin = margin_bounds(self.method, layers, t, x, lo, hi, pieces, MARGIN_TOL).amin(dim=1)
            ok = margin > MARGIN_TOL
            if verified is not None:
                verified.extend([a, b, m] for a, b, m, o in zip(lo.tolist(), hi.tolist(), margin.tolist(), ok.tolist())
                                if o)
            return ok
        return check

    def certify(self, x: torch.Tensor, transformation: Transformation, budgets: list[float],
                generator: torch.Generator) -> list[Certificate]:
        t = transformation
        start = time.perf_counter()
        x = x.detach().cpu()
        pred = int(self.predict(x, t, generator)[0])
        positive = [float(b) for b in budgets if b > 0]
        stats = {"deterministic": True, "method": self.method, "splits": self.splits, "refine": int(self.config["refine"]),
                 "margin_tol": MARGIN_TOL,
                 "boxes_per_call": self.config["boxes_per_call"]}
        if not positive:
            return [Certificate(pred, 0.0, {float(b): True for b in budgets}, {**stats, "seconds": 0.0})]
        edges = ring_edges(positive, self.splits)
        verified: list = []
        res = verify_outward(self.box_checker(x, t, pred, verified), edges, t.dim, t.low, t.high,
                             int(self.config["boxes_per_call"]), int(self.config["refine"]))
        certified = {float(b): b <= res.extent + 1e-12 for b in budgets}
        stats.update({
            "width": float(max(positive)) / self.splits, "n_subintervals": res.boxes_total,
            "n_checked": res.boxes_checked, "n_bounded": res.boxes_bounded, "bound_calls": res.calls,
            "rings_verified": res.rings_verified,
            "rings_total": res.rings_total, "extent": res.extent, "failed_box": res.failed_box,
            "edges": edges.tolist(), "pieces": int(self.config["pieces"]),
            "verified_boxes": [v for v in verified if _inside(v, res.extent)], "seconds": time.perf_counter() - start,
        })
        return [Certificate(pred, res.extent, certified, stats)]


def _inside(box: list, extent: float) -> bool:
    """Whether the recorded box ``[lo, hi, margin]`` lies in the certified l-infinity ball of radius ``extent``."""
    return max(max(abs(v) for v in box[0]), max(abs(v) for v in box[1])) <= extent + 1e-12


