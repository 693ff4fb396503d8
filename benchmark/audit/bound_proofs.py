"""Re-verification of a deterministic bound-propagation certificate from its recorded proof.

A semanify / interval / deepg certificate records ``verified_boxes`` ([lo, hi, margin] per parameter
box) with its ``method`` and ``pieces``. ``proof_problems`` re-checks it from the row and the model
alone: the boxes must cover the certified l-infinity ball of radius ``extent`` (within the parameter
domain), and the margin bound recomputed on every box must exceed the tolerance and not be below the
recorded one up to ``RECORDED_RTOL`` (a removed box or an inflated margin is caught).
"""
from __future__ import annotations

import itertools

import torch
from torch import nn

from benchmark.verification.network import cnn_layers, margin_layers
from benchmark.verification.margins import margin_bounds
from benchmark.transformations.base import Transformation

#: how far (relative) a recomputed margin bound may fall below the recorded one: another CPU rounds the
#: float32 parts of the pipeline (the image and its pixel bounds) differently and bound propagation
#: amplifies it (a committed deepg margin 0.910594 recomputes as 0.910537 on an AVX-512 Xeon: 6e-5).
#: Soundness rests on the recomputed bound exceeding ``margin_tol``, checked separately; this only
#: catches edited (inflated) records.
RECORDED_RTOL = 1e-3


def uncovered(boxes: list[tuple[list[float], list[float]]], extent: float, low, high) -> list[float] | None:
    """A point of ``[-extent, extent]^m`` (clipped to ``[low, high]``) inside no box, or None if covered.
    Exact for axis-aligned boxes: the coordinates of all box edges cut the region into cells, and a
    cell is covered iff its centre is (a box holds a cell entirely or misses its interior)."""
    m = len(low)
    lo_r = [max(-extent, float(low[i])) for i in range(m)]
    hi_r = [min(extent, float(high[i])) for i in range(m)]
    cuts = [sorted({lo_r[i], hi_r[i], *[c for b in boxes for c in (b[0][i], b[1][i]) if lo_r[i] < c < hi_r[i]]})
            for i in range(m)]
    for cell in itertools.product(*[range(len(c) - 1) for c in cuts]):
        centre = [(cuts[i][k] + cuts[i][k + 1]) / 2 for i, k in enumerate(cell)]
        if not any(all(b[0][i] <= centre[i] <= b[1][i] for i in range(m)) for b in boxes):
            return centre
    return None


def proof_problems(stats: dict, model: nn.Module, x: torch.Tensor, t: Transformation, label: int) -> list[str]:
    """Problems found re-verifying the certificate ``stats`` (empty = verified)."""
    extent = float(stats["extent"])
    boxes = stats.get("verified_boxes")
    if extent <= 0:
        return []
    if not boxes:
        return ["the certificate records no verified boxes for a positive extent."]
    gap = uncovered([(b[0], b[1]) for b in boxes], extent, t.low, t.high)
    problems = [] if gap is None else [f"theta {gap} inside the certified extent {extent} is in no verified box."]
    layers = margin_layers(cnn_layers(model, tuple(x.shape[1:])), label)
    lo = torch.tensor([b[0] for b in boxes], dtype=torch.float64)
    hi = torch.tensor([b[1] for b in boxes], dtype=torch.float64)
    margin = margin_bounds(stats["method"], layers, t, x, lo, hi, int(stats.get("pieces", 1)),
                           float(stats["margin_tol"])).amin(1)
    for b, m in zip(boxes, margin.tolist()):
        if m <= float(stats["margin_tol"]) or m < b[2] - RECORDED_RTOL * abs(b[2]) - 1e-9:
            problems.append(f"box {b[0]}..{b[1]}: recomputed margin bound {m:.6g}, recorded {b[2]:.6g}.")
    return problems
