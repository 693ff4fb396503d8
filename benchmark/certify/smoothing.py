"""CERTIFY and PREDICT of Cohen et al. (2019), generic over the noise.

A smoothed classifier is described by ``sample_labels(k, generator)``: it draws
``k`` noisy copies of one input (whatever the noise is: pixel, parameter or
semantic-layer noise) and returns the base classifier's labels ``[k]``. The
statistics here do not care which noise it was.

Protocol (methods.md section 1): n0 selection samples choose the class; n
*fresh* samples estimate its probability; a one-sided Clopper-Pearson bound at
level alpha decides. The sample sizes are fixed in advance: no optional stopping.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from benchmark.certify.certificate import ABSTAIN
from benchmark.certify.stats import lower_confidence_bound, predict_test_passes

SampleLabels = Callable[[int, torch.Generator], torch.Tensor]


@dataclass(frozen=True)
class SmoothingParams:
    """Monte-Carlo sample sizes and confidence level of one protocol."""

    n0: int = 100
    n: int = 100_000
    alpha: float = 0.001
    batch_size: int = 256
    n_predict: int | None = None  # PREDICT's sample size; defaults to n

    def __post_init__(self) -> None:
        if self.n0 < 1 or self.n < 1 or self.batch_size < 1:
            raise ValueError(f"sample sizes must be positive: {self}")
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be in (0,1): {self.alpha}")


def sample_counts(sample_labels: SampleLabels, num: int, num_classes: int, batch_size: int,
                  generator: torch.Generator) -> np.ndarray:
    """Class counts over ``num`` noisy samples, drawn in batches."""
    counts = np.zeros(num_classes, dtype=np.int64)
    remaining = num
    while remaining > 0:
        k = min(batch_size, remaining)
        labels = sample_labels(k, generator).detach().to("cpu", torch.int64)
        if labels.shape != (k,):
            raise ValueError(f"sample_labels returned shape {tuple(labels.shape)}, expected ({k},)")
        counts += np.bincount(labels.numpy(), minlength=num_classes)[:num_classes]
        remaining -= k
    return counts


@dataclass
class CertifyResult:
    """CERTIFY's outcome before a radius is attached."""

    prediction: int
    p_a_lower: float
    counts_selection: list[int]
    counts_estimation: list[int]
    n0: int
    n: int
    alpha: float

    @property
    def count_a(self) -> int:
        return 0 if self.prediction == ABSTAIN else self.counts_estimation[self.prediction]

    def stats(self) -> dict:
        """Raw statistics for the certificate record."""
        return {
            "n0": self.n0, "n": self.n, "alpha": self.alpha, "count_a": self.count_a,
            "p_a_lower": self.p_a_lower, "counts_selection": self.counts_selection,
            "counts_estimation": self.counts_estimation,
        }


def certify(sample_labels: SampleLabels, num_classes: int, params: SmoothingParams,
            generator: torch.Generator) -> CertifyResult:
    """CERTIFY: select with n0 samples, estimate with n fresh ones, abstain if p_A_lower <= 1/2."""
    sel = sample_counts(sample_labels, params.n0, num_classes, params.batch_size, generator)
    c_hat = int(sel.argmax())
    est = sample_counts(sample_labels, params.n, num_classes, params.batch_size, generator)
    p_lower = lower_confidence_bound(int(est[c_hat]), params.n, params.alpha)
    prediction = c_hat if p_lower > 0.5 else ABSTAIN
    return CertifyResult(prediction, p_lower, sel.tolist(), est.tolist(), params.n0, params.n, params.alpha)


def predict(sample_labels: SampleLabels, num_classes: int, params: SmoothingParams,
            generator: torch.Generator) -> tuple[int, list[int]]:
    """PREDICT: top-two counts over n samples; abstain unless the binomial test rejects at alpha."""
    n = params.n_predict or params.n
    counts = sample_counts(sample_labels, n, num_classes, params.batch_size, generator)
    order = np.argsort(-counts, kind="stable")
    n_a, n_b = int(counts[order[0]]), int(counts[order[1]]) if num_classes > 1 else 0
    label = int(order[0]) if predict_test_passes(n_a, n_b, params.alpha) else ABSTAIN
    return label, counts.tolist()
