"""Inference on the CPU in slices of a few dozen rows: the same numbers per row, about twice as fast.

Measured on the suite's 2-core machine (one thread, batch 1000 of 28x28 images): the MNIST classifier
(``SmallCNN``) runs 4,000 rows/s on the whole batch and 6,900 in slices of 64; GSmooth's U-Net decoder H
890 and 1,790. A batch of 1000 activations (32 channels x 28 x 28 floats = 100 KB per row) falls out of
the caches between layers; 64 rows stay in them. The rows are independent (no batch statistics at
inference), so slicing changes no row's arithmetic beyond the convolution back-end's choice of kernel,
which on the machine we measured gave bit-identical outputs for slices of 64-256 rows
(tests/infra/test_chunks.py checks the classifier and H to float tolerance, so that it holds on any CPU). On CUDA, and whenever autograd records (training, attacks), the batch is kept
whole: there the large batch is what is fast, and gradients must see the layer as written.
"""
from __future__ import annotations

from collections.abc import Callable

import torch

#: rows per slice on the CPU (measured best among 32, 64, 128, 256 for the classifier and H)
CPU_ROWS = 64


def in_cpu_slices(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor,
                  rows: int = CPU_ROWS) -> torch.Tensor:
    """``fn(x)``, evaluated ``rows`` rows at a time when ``x`` is a large CPU batch and no gradient is taken."""
    if x.device.type != "cpu" or x.shape[0] <= rows or torch.is_grad_enabled():
        return fn(x)
    return torch.cat([fn(part) for part in x.split(rows)])
