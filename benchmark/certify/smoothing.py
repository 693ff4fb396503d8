"""CERTIFY and PREDICT of Cohen et al. (2019), generic over the noise.

A smoothed classifier is described by ``sample_labels(k, generator)``: it draws
``k`` noisy copies of one input (whatever the noise is: pixel, parameter or
semantic-layer noise) and returns the base classifier's labels ``[k]``. The
statistics here do not care which noise it was.

Protocol (docs/protocol.md): n0 selection samples choose the class; n
*fresh* samples estimate its probability; a one-sided Clopper-Pearson bound at
level alpha decides. With ``rule="fixed"`` (the default) the sample sizes are fixed
in advance: no optional stopping. With ``rule="sequential"`` the estimation step
draws fresh samples look by look and stops as soon as every decision the caller
names (its thresholds on p_A) is known, with an anytime-valid bound at the same
alpha and n as the cap (benchmark/certify/sequential.py); PREDICT likewise.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

import numpy as np
import torch

from benchmark.certify import predict_log, sequential
from benchmark.certify.certificate import ABSTAIN
from benchmark.certify.sequential import SequentialSettings
from benchmark.certify.stats import lower_confidence_bound, predict_test_passes
from benchmark.errors import BenchError

SampleLabels = Callable[[int, torch.Generator], torch.Tensor]
RULES = ("fixed", "sequential")
_LEDGER: ContextVar[dict | None] = ContextVar("sample_ledger", default=None)


@dataclass(frozen=True)
class SmoothingParams:
    """Monte-Carlo sample sizes and confidence level of one protocol."""

    n0: int = 100
    n: int = 100_000
    alpha: float = 0.001
    batch_size: int = 256
    n_predict: int | None = None  # PREDICT's sample size; defaults to n
    rule: str = "fixed"  # "fixed" | "sequential": n and n_predict are then the caps
    sequential: SequentialSettings = field(default_factory=SequentialSettings)
    predict_rule: str | None = None  # PREDICT's rule when it differs from ``rule`` (None = ``rule``)

    def __post_init__(self) -> None:
        if self.n0 < 1 or self.n < 1 or self.batch_size < 1:
            raise ValueError(f"sample sizes must be positive: {self}")
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be in (0,1): {self.alpha}")
        if self.rule not in RULES:
            raise ValueError(f"rule must be one of {RULES}, got {self.rule!r}")
        if self.predict_rule not in (None, *RULES):
            raise ValueError(f"predict_rule must be None or one of {RULES}, got {self.predict_rule!r}")

    @property
    def predict_rule_used(self) -> str:
        """The rule PREDICT follows."""
        return self.predict_rule or self.rule

    def best_p_lower(self) -> float:
        """The largest p_A lower bound CERTIFY can return under this protocol (every estimation sample
        of the selected class): a margin or threshold above it is never certified, whatever the model, so
        defenses can stop refining a supremum bound there before sampling (GSmooth). Under the sequential
        rule every look's level is below alpha, so fixed-n Clopper-Pearson at n bounds it too."""
        return lower_confidence_bound(self.n, self.n, self.alpha)

    @classmethod
    def from_profile(cls, p) -> "SmoothingParams":
        """The protocol of a suite profile (``benchmark.suites.loader.Profile``)."""
        return cls(n0=p.n0, n=p.n, alpha=p.alpha, batch_size=p.batch_size, n_predict=p.n_predict, rule=p.certify,
                   sequential=SequentialSettings.from_dict(p.sequential), predict_rule=getattr(p, "predict", None))


@contextmanager
def sample_ledger() -> Iterator[dict]:
    """Count the Monte-Carlo samples drawn inside the block by kind (``certify``, ``predict``) and the
    PREDICT calls; the runner records it per example."""
    ledger = {"certify": 0, "predict": 0, "predict_calls": 0}
    token = _LEDGER.set(ledger)
    try:
        yield ledger
    finally:
        _LEDGER.reset(token)


def ledger_snapshot() -> dict:
    """A copy of the innermost open sample ledger (empty outside one)."""
    return dict(_LEDGER.get() or {})


def _count(kind: str, k: int) -> None:
    ledger = _LEDGER.get()
    if ledger is not None:
        ledger[kind] += k


def _labels(draw: Callable[[], torch.Tensor], k: int, batch_size: int) -> np.ndarray:
    """``draw()``'s k labels on the CPU; an out-of-memory batch becomes one error naming the key to lower."""
    try:
        labels = draw().detach().to("cpu", torch.int64)
    except RuntimeError as exc:  # torch.cuda.OutOfMemoryError is a RuntimeError
        if "out of memory" not in str(exc).lower():
            raise
        raise BenchError(f"a Monte-Carlo batch of {k} samples does not fit in device memory: lower the "
                         f"profile's batch_size (now {batch_size}) in the suite YAML.") from exc
    if labels.shape != (k,):
        raise ValueError(f"sample_labels returned shape {tuple(labels.shape)}, expected ({k},)")
    return labels.numpy()


def sample_counts(sample_labels: SampleLabels, num: int, num_classes: int, batch_size: int,
                  generator: torch.Generator, kind: str = "certify") -> np.ndarray:
    """Class counts over ``num`` noisy samples, drawn in batches (counted in the sample ledger as ``kind``)."""
    _count(kind, num)
    counts = np.zeros(num_classes, dtype=np.int64)
    remaining = num
    while remaining > 0:
        k = min(batch_size, remaining)
        labels = _labels(lambda: sample_labels(k, generator), k, batch_size)
        counts += np.bincount(labels, minlength=num_classes)[:num_classes]
        remaining -= k
    return counts


#: labels of the base model on noisy copies of several inputs: ``pieces`` = [(input index, copies), ...],
#: labels in that order (one batch)
MultiSampleLabels = Callable[[list[tuple[int, int]], torch.Generator], torch.Tensor]


def sample_counts_many(sample_labels: MultiSampleLabels, ks: Sequence[int], num_classes: int, batch_size: int,
                       generator: torch.Generator, kind: str = "certify") -> np.ndarray:
    """Class counts ``[len(ks), C]`` over ``ks[i]`` noisy samples of input i, packed into batches of at most
    ``batch_size`` across inputs (many inputs that each need a few samples, e.g. slice endpoints, then cost
    a few large forward passes instead of many small ones; counted in the sample ledger as ``kind``)."""
    _count(kind, int(sum(ks)))
    counts = np.zeros((len(ks), num_classes), dtype=np.int64)
    todo = [(i, int(k)) for i, k in enumerate(ks) if k > 0]
    while todo:
        pieces, room = [], batch_size
        while todo and room > 0:
            i, k = todo[0]
            take = min(k, room)
            pieces.append((i, take))
            room -= take
            todo[0] = (i, k - take)
            if k == take:
                todo.pop(0)
        size = batch_size - room
        labels = _labels(lambda: sample_labels(pieces, generator), size, batch_size)
        start = 0
        for i, k in pieces:
            counts[i] += np.bincount(labels[start:start + k], minlength=num_classes)[:num_classes]
            start += k
    return counts


@dataclass
class CertifyResult:
    """CERTIFY's outcome before a radius is attached."""

    prediction: int
    p_a_lower: float
    counts_selection: list[int]
    counts_estimation: list[int]
    n0: int
    n: int  # estimation samples used (the cap under the sequential rule when it ran to the end)
    alpha: float
    sequential: dict | None = None  # the sequential record (rule, settings, looks, thresholds, counts per look)

    @property
    def count_a(self) -> int:
        return 0 if self.prediction == ABSTAIN else self.counts_estimation[self.prediction]

    def stats(self) -> dict:
        """Raw statistics for the certificate record."""
        out = {
            "n0": self.n0, "n": self.n, "alpha": self.alpha, "count_a": self.count_a,
            "p_a_lower": self.p_a_lower, "counts_selection": self.counts_selection,
            "counts_estimation": self.counts_estimation,
        }
        if self.sequential is not None:
            out["sequential"] = self.sequential
        return out


def certify(sample_labels: SampleLabels, num_classes: int, params: SmoothingParams,
            generator: torch.Generator, thresholds: Sequence[float] | None = None) -> CertifyResult:
    """CERTIFY: select with n0 samples, estimate with n fresh ones, abstain if p_A_lower <= 1/2.

    ``thresholds``: the caller's decisions on p_A (certified at budget b iff p_A_lower > tau_b). Under
    ``params.rule == "sequential"`` the estimation stops as soon as each of them (and 1/2) is decided,
    with n as the cap; without thresholds CERTIFY uses the fixed n (it cannot know when to stop).
    """
    sel = sample_counts(sample_labels, params.n0, num_classes, params.batch_size, generator)
    c_hat = int(sel.argmax())
    record = None
    if params.rule == "sequential" and thresholds is not None:
        def draw(k: int) -> np.ndarray:
            return sample_counts(sample_labels, k, num_classes, params.batch_size, generator)

        res = sequential.estimate(draw, c_hat, params.sequential, params.n, params.alpha, thresholds)
        est, p_lower, n_used, record = res.counts, res.p_lower, res.n, res.record
    else:
        est = sample_counts(sample_labels, params.n, num_classes, params.batch_size, generator)
        p_lower, n_used = lower_confidence_bound(int(est[c_hat]), params.n, params.alpha), params.n
    prediction = c_hat if p_lower > 0.5 else ABSTAIN
    return CertifyResult(prediction, p_lower, sel.tolist(), est.tolist(), params.n0, n_used, params.alpha, record)


def predict_many(sample_labels: MultiSampleLabels, m: int, num_classes: int, params: SmoothingParams,
                 generator: torch.Generator) -> list[tuple[int, list[int]]]:
    """PREDICT of ``m`` inputs side by side (``sample_labels`` as for ``sample_counts_many``): the same rule
    per input as ``predict``, the samples of all running inputs packed into shared batches (many attack
    candidates then cost a few large forward passes instead of many small ones). Records are logged in
    input order."""
    n = params.n_predict or params.n
    ledger = _LEDGER.get()
    if ledger is not None:
        ledger["predict_calls"] += m

    def draw(inputs: list[int], k: int) -> np.ndarray:
        return sample_counts_many(lambda pieces, gen: sample_labels([(inputs[i], c) for i, c in pieces], gen),
                                  [k] * len(inputs), num_classes, params.batch_size, generator, kind="predict")

    if params.predict_rule_used == "sequential":
        out = []
        for label, counts, record in sequential.predict_many(draw, params.sequential, n, params.alpha, m):
            predict_log.log(record)
            out.append(((ABSTAIN if label is None else label), counts.tolist()))
        return out
    out = []
    for counts in draw(list(range(m)), n):
        order = np.argsort(-counts, kind="stable")
        n_a, n_b = int(counts[order[0]]), int(counts[order[1]]) if num_classes > 1 else 0
        out.append((int(order[0]) if predict_test_passes(n_a, n_b, params.alpha) else ABSTAIN, counts.tolist()))
    return out


def predict(sample_labels: SampleLabels, num_classes: int, params: SmoothingParams,
            generator: torch.Generator) -> tuple[int, list[int]]:
    """PREDICT: top-two counts over n samples; abstain unless the binomial test rejects at alpha.

    Under the sequential rule n_predict is the cap and the test is run look by look (stop as soon as it
    accepts or can no longer accept; benchmark/certify/sequential.py) and its record is logged for the
    row (``benchmark.certify.predict_log``). One input of ``predict_many``: the same batches and draws.
    """
    return predict_many(lambda pieces, gen: sample_labels(sum(k for _, k in pieces), gen), 1, num_classes, params,
                        generator)[0]
