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

from benchmark.verification.network import Layer
from benchmark.verification.propagation import backward, forward_linear, interval
from benchmark.verification.relaxation import image_relaxation, photometric_relaxation, pixel_box
from benchmark.transformations.base import Transformation

Method = Literal["ibp", "crown", "deepg"]
METHODS = ("ibp", "crown", "deepg")


#: boxes bounded together: the backward pass holds several [boxes x outputs, C, H, W] float64 tensors at the first
#: convolution's output (32 x 28 x 28 on MNIST-sized images, 200 kB a row), so 26 boxes took a worker ~300 MB past
#: its steady size; 8 keep that under 100 MB. Every box's bounds are computed row by row (convolutions, their
#: adjoints and the dense layers give each row the same bits at any batch size on the CPU), so grouping does
#: not change them (tests/baselines/test_verifier_groups.py).
MAX_BOXES = 8


def margin_bounds(method: Method, layers: list[Layer], t: Transformation, x: torch.Tensor, lo: torch.Tensor,
                  hi: torch.Tensor, pieces: int = 1, tol: float = 0.0) -> torch.Tensor:
    """Lower bounds ``[N, K-1]`` of the margins (``layers`` end in the folded specification, see
    ``network.margin_layers``) of ``t(x, theta)`` for every theta in the boxes ``lo, hi [N, m]``, in groups of at
    most ``MAX_BOXES`` boxes. Margins whose bound exceeds ``tol`` early may be returned less tight than possible
    (not refined further)."""
    if method not in METHODS:
        raise ValueError(f"unknown bound method '{method}' ({', '.join(METHODS)})")
    lo, hi = lo.to(torch.float64), hi.to(torch.float64)
    if len(lo) <= MAX_BOXES:
        return _margin_bounds(method, layers, t, x, lo, hi, pieces, tol)
    return torch.cat([_margin_bounds(method, layers, t, x, lo[i:i + MAX_BOXES], hi[i:i + MAX_BOXES], pieces, tol)
                      for i in range(0, len(lo), MAX_BOXES)])


def _margin_bounds(method: Method, layers: list[Layer], t: Transformation, x: torch.Tensor, lo: torch.Tensor,
                   hi: torch.Tensor, pieces: int, tol: float) -> torch.Tensor:
    with torch.no_grad():
        if method == "deepg":
            return backward(layers, forward_linear(layers, *image_relaxation(t, x, lo, hi, pieces)), tol)
        photometric = t.has_linear_layer
        if photometric:
            sym_lo, sym_hi, z_lo, z_hi, box_lo, box_hi = photometric_relaxation(t, x, lo, hi)
        else:  # geometric: IBP and CROWN-IBP need only the pixel box, not DeepG's slopes and offsets
            box_lo, box_hi = pixel_box(t, x, lo, hi)
        tr = interval(layers, box_lo, box_hi)
        if method == "ibp":
            return tr.boxes[len(layers)][0]
        if photometric:  # the transformation's exact linear perturbation layer (Transformation.linear_layer)
            tr.syms[0], tr.z_lo, tr.z_hi = (sym_lo, sym_hi), z_lo, z_hi
        return backward(layers, tr, tol)
