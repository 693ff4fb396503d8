"""A calibrated judge of certified regions on the real transformation, shared by the soundness tests.

A certificate claims that at every parameter theta of its region the smoothed classifier's probability of
the certified class is at least 1/2. At each theta the judge draws ``n`` fresh samples of the base
classifier there and computes Clopper-Pearson bounds on that probability at level ``JUDGE_ALPHA``:

* *violation*: the upper bound is below 1/2 (the smoothed classifier confidently names another class);
* *confident*: the lower bound is above 1/2 (the point confidently keeps the certified class).

Unlike counting PREDICT's answers, an abstention is neither: a test asserts few violations *and* many
confident points, so neither an always-abstaining classifier nor a region pushed past the decision
boundary passes.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch

from benchmark.certify.smoothing import sample_counts
from benchmark.certify.stats import lower_confidence_bound, upper_confidence_bound

JUDGE_ALPHA = 1e-4


@dataclass
class Verdict:
    points: int = 0
    violations: int = 0
    confident: int = 0

    def add(self, other: "Verdict") -> "Verdict":
        return Verdict(self.points + other.points, self.violations + other.violations,
                       self.confident + other.confident)


def judge(samplers: Iterable[Callable], c: int, n: int, num_classes: int, gen: torch.Generator,
          batch: int = 500) -> Verdict:
    """Judge the points whose smoothed classifiers ``samplers`` (``sample_labels(k, gen)``) describe."""
    v = Verdict()
    for sample_labels in samplers:
        k = int(sample_counts(sample_labels, n, num_classes, batch, gen)[c])
        v.points += 1
        v.violations += upper_confidence_bound(k, n, JUDGE_ALPHA) < 0.5
        v.confident += lower_confidence_bound(k, n, JUDGE_ALPHA) > 0.5
    return v
