"""Margin lower bounds over parameter boxes on the CNN, for the three deterministic verifiers.

* ``ibp`` (``interval``): the registry's per-pixel bounds over the box, then interval propagation.
* ``crown`` (``semanify``): the same pixel box (or semanify's exact linear perturbation layer for
  brightness/contrast), intermediate bounds by IBP, and the margin by one backward linear pass
  (CROWN-IBP, Zhang et al. 2020): full CROWN back-substitutes every one of SmallCNN's ~44k hidden
  neurons, far beyond the default run's budget.
* ``deepg``: DeepG's linear relaxation of the image in theta (relaxation.py), intermediate bounds by
  forward linear propagation in theta intersected with IBP, the margin by a backward pass concretized
  at every layer over that layer's box and linear functions of theta (at the input: the image's
  relaxation, DeepG's substitution), keeping the best (all are sound).
"""
from __future__ import annotations

from typing import Literal

import torch

from baselines.deepg.network import Layer
from baselines.deepg.propagation import backward, forward_linear, interval
from baselines.deepg.relaxation import image_relaxation, photometric_relaxation, pixel_box
from baselines.semanify.photometric import LINEAR_LAYERS
from benchmark.transformations.base import Transformation

Method = Literal["ibp", "crown", "deepg"]
METHODS = ("ibp", "crown", "deepg")


def margin_bounds(method: Method, layers: list[Layer], t: Transformation, x: torch.Tensor, lo: torch.Tensor,
                  hi: torch.Tensor, pieces: int = 1, tol: float = 0.0) -> torch.Tensor:
    """Lower bounds ``[N, K-1]`` of the margins (``layers`` end in the folded specification, see
    ``network.margin_layers``) of ``t(x, theta)`` for every theta in the boxes ``lo, hi [N, m]``.
    Margins whose bound exceeds ``tol`` early may be returned less tight than possible (not refined further)."""
    if method not in METHODS:
        raise ValueError(f"unknown bound method '{method}' ({', '.join(METHODS)})")
    lo, hi = lo.to(torch.float64), hi.to(torch.float64)
    with torch.no_grad():
        if method == "deepg":
            return backward(layers, forward_linear(layers, *image_relaxation(t, x, lo, hi, pieces)), tol)
        photometric = t.name in LINEAR_LAYERS
        if photometric:
            sym_lo, sym_hi, z_lo, z_hi, box_lo, box_hi = photometric_relaxation(t, x, lo, hi)
        else:  # geometric: IBP and CROWN-IBP need only the pixel box, not DeepG's slopes and offsets
            box_lo, box_hi = pixel_box(t, x, lo, hi)
        tr = interval(layers, box_lo, box_hi)
        if method == "ibp":
            return tr.boxes[len(layers)][0]
        if photometric:  # semanify's exact perturbation layer (brightness, contrast+brightness)
            tr.syms[0], tr.z_lo, tr.z_hi = (sym_lo, sym_hi), z_lo, z_hi
        return backward(layers, tr, tol)
