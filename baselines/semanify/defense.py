"""The ``semanify`` (CROWN) and ``interval`` (IBP) defenses: deterministic verification of a plain classifier.

Semanify-NN-style (Mohapatra et al. 2020): a semantic perturbation layer maps a parameter
sub-interval to a set of images (an exact linear map for brightness and contrast+brightness,
sound per-pixel bounds for rotation and scaling), bound propagation bounds the margin of the
clean prediction against every other class over that set, and the budget range is verified
outward from 0 in sub-intervals (bisected where they fail) until the first failure (subintervals.py).
Config: ``splits`` sub-intervals per side of [0, largest budget] (per coordinate), ``refine``
bisections of a failing sub-interval, ``boxes_per_call`` boxes per bound-propagation call; all are
recorded in the certificate stats with the number of sub-intervals and boxes bounded.

Supported: brightness, contrast_brightness, rotation, scaling. Not supported ("--"): the blur
families and pixelate (no perturbation layer), and translation: the threat model is integer
shifts, a finite set, and bounding a single shifted image is just evaluating it, so the exact
``enumeration`` defense is the verifier for translation (a "semanify" row would repeat it).
"""
from __future__ import annotations

import time
from typing import ClassVar

import torch

from baselines.deepg.network import cnn_layers, margin_layers
from baselines.deepg.verifier import Method, margin_bounds
from baselines.semanify.network import verifier_spec
from baselines.semanify.subintervals import ring_edges, verify_outward
from benchmark.certify.certificate import Certificate
from benchmark.defense import ClassifierDefense, Context
from benchmark.errors import BenchError
from benchmark.transformations.base import Transformation

#: default number of sub-intervals per side (per coordinate) of [0, largest budget], each bisected
#: once more where it fails (``refine``); suites set their own with the config keys. IBP loosens
#: much faster with the box width than CROWN and is several times cheaper per box, so it gets twice
#: as many (measured on 25 digits test images, rotation up to 20 degrees: CROWN certifies the same
#: with 10 sub-intervals + 1 bisection as with 40 uniform ones, at a third of the cost).
DEFAULT_SPLITS = {"brightness": 3, "contrast_brightness": 2, "rotation": 10, "scaling": 10}
#: a box verifies iff every margin lower bound exceeds this: bounds are exact-arithmetic float64
#: bounds, the real network runs in float32 (round-off on the logits is ~1e-6 here).
MARGIN_TOL = 1e-4


class BoundVerifier(ClassifierDefense):
    """Shared code of the CROWN and IBP verifiers; subclasses set ``name`` and ``method``."""

    certified = True
    method: ClassVar[Method] = "crown"
    default_splits: ClassVar[dict[str, int]] = DEFAULT_SPLITS
    defaults = {"splits": None, "refine": 1, "boxes_per_call": 64, "pieces": 1}

    def supports(self, transformation: Transformation) -> bool:
        return transformation.name in self.default_splits

    def prepare(self, ctx: Context) -> None:
        self.model = ctx.model(verifier_spec(ctx))
        self.layers = cnn_layers(self.model, tuple(ctx.dataset.spec.shape))  # float64 copies on the CPU
        self.device = ctx.device
        name = ctx.transformation.name
        splits = self.config["splits"] or self.default_splits.get(name, 1)
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


class Semanify(BoundVerifier):
    """Semanify-NN-style verification with CROWN (linear bound propagation)."""

    name = "semanify"
    method = "crown"
    description = ("deterministic verification: semantic perturbation layer + CROWN, outward sub-intervals "
                   "(Semanify-NN style)")
    paper = "https://arxiv.org/abs/1912.09533"


class Interval(BoundVerifier):
    """The same verifier with interval bound propagation (IBP): the Semanify-NN "Interval" variant."""

    name = "interval"
    method = "ibp"
    default_splits = {t: 2 * k for t, k in DEFAULT_SPLITS.items()}
    description = "deterministic verification: semantic perturbation layer + interval bound propagation (IBP)"
    paper = "https://arxiv.org/abs/1912.09533"
