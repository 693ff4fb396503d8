"""The ``independence`` rule: a certificate's Monte-Carlo samples are independent draws.

The Clopper-Pearson bound treats the n labels behind a certificate as independent. A sampler that
draws a handful of noise vectors and repeats them to fill n is deterministic in the generator (so the
``determinism`` rule passes) but its counts move in blocks: across generator seeds they vary far more
than a binomial count can. The harness certifies its most split probe input (``noise.split_probes``)
under ``SEEDS`` generator seeds and applies the over-dispersion test to every class's count in each
sample CERTIFY draws as one independent sample (the n0 selection samples; the n estimation samples under
the fixed rule): sum_s (y_s - N p)^2 / (N p (1 - p)) is chi-square with SEEDS - 1 degrees of freedom for
binomial counts; a Bonferroni-adjusted p-value below ``LEVEL`` rejects.
"""
from __future__ import annotations

import torch
from scipy.stats import chi2

from benchmark.audit.statistics import kind

SEEDS = 12  # generator seeds the probe is certified under
LEVEL = 1e-6  # p-value of the dispersion test below which the samples are taken as dependent
MIN_EXPECTED = 5.0  # mean count per seed in (and outside) the class needed for the chi-square approximation


def iid_samples(cert: dict) -> list[list[int]]:
    """Class counts of each sample a certificate drew as one independent sample: the n0 selection
    samples and, under the fixed rule, the n estimation samples (sequential estimation stops on the data)."""
    s = cert.get("stats") or {}
    sel, est = s.get("counts_selection"), s.get("counts_estimation")
    if kind(s) not in ("monte_carlo", "sliced") or not isinstance(sel, list):
        return []
    fixed = kind(s) == "monte_carlo" and "sequential" not in s and isinstance(est, list) and len(est) == len(sel)
    return [list(sel), list(est)] if fixed else [list(sel)]


def dispersion_pvalue(successes: list[int], trials: list[int]) -> float | None:
    """P-value of the over-dispersion test of binomial counts ``successes`` out of ``trials`` (None: no power)."""
    total, size = sum(successes), sum(trials)
    if len(trials) < 2 or min(total, size - total) < MIN_EXPECTED * len(trials):
        return None
    p = total / size
    stat = sum((y - n * p) ** 2 / (n * p * (1 - p)) for y, n in zip(successes, trials) if n)
    return float(chi2.sf(stat, len(trials) - 1))


def smallest_pvalue(runs: list[list[list[int]]]) -> tuple[float, str] | None:
    """Bonferroni-adjusted smallest dispersion p-value over every sample kind and class of ``runs`` (one list
    of samples per seed), and which it was; None when no test has power."""
    tests = []
    for j in range(min(len(r) for r in runs)):
        counts = [r[j] for r in runs]
        trials = [sum(c) for c in counts]
        for cls in range(len(counts[0])):
            p = dispersion_pvalue([c[cls] for c in counts], trials)
            if p is not None:
                tests.append((p, f"class {cls} in the {('selection', 'estimation')[j]} samples"))
    if not tests:
        return None
    p, where = min(tests)
    return min(1.0, p * len(tests)), where


def check_independence(defense, x: torch.Tensor, t, budgets: list[float], seed: int, report) -> None:
    """Certify ``x [1,C,H,W]`` under ``SEEDS`` seeds; counts over-dispersed against the binomial reject."""
    report.ran("independence")
    runs = [[iid_samples(c.to_json()) for c in defense.certify(x, t, budgets, torch.Generator().manual_seed(s))]
            for s in range(seed + 1000, seed + 1000 + SEEDS)]
    for v in range(min(len(r) for r in runs)):
        found = smallest_pvalue([r[v] for r in runs]) if all(r[v] for r in runs) else None
        if found is not None and found[0] < LEVEL:
            report.add("independence", "error",
                       f"certificate {v}: over {SEEDS} generator seeds the counts of {found[1]} vary far more than "
                       f"independent draws can (over-dispersion test against the binomial, Bonferroni-adjusted "
                       f"p = {found[0]:.1e}): the samples are not independent (e.g. a few noise draws repeated to fill "
                       "n), so the Clopper-Pearson bound does not hold; draw fresh noise for every sample from the "
                       "generator.")
            return
