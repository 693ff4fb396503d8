"""The ``independence`` rule: a certificate's Monte-Carlo samples are independent draws.

The Clopper-Pearson bound treats the n labels behind a certificate as independent. A sampler that
draws a handful of noise vectors and repeats them to fill n is deterministic in the generator (so the
``determinism`` rule passes) but its counts move in blocks: across generator seeds they vary far more
than a binomial count can. The harness certifies its most split probe input (``noise.split_probes``)
under ``SEEDS`` generator seeds and applies the over-dispersion test to the top class's count among the
samples CERTIFY draws as one independent sample (the n0 selection samples, plus the n estimation samples
under the fixed rule): sum_s (y_s - N_s p)^2 / (N_s p (1 - p)) is chi-square with SEEDS - 1 degrees of
freedom for binomial counts; a p-value below ``LEVEL`` rejects.
"""
from __future__ import annotations

import torch
from scipy.stats import chi2

from benchmark.submission.statistics import kind

SEEDS = 24  # generator seeds the probe is certified under
LEVEL = 1e-6  # p-value of the dispersion test below which the samples are taken as dependent
MIN_MINORITY = 10  # pooled samples outside (and inside) the top class needed for the test to have power


def iid_counts(cert: dict) -> tuple[list[int], int] | None:
    """Class counts over the samples a certificate drew as one independent sample, and their number."""
    s = cert.get("stats") or {}
    sel = s.get("counts_selection")
    if kind(s) not in ("monte_carlo", "sliced") or not isinstance(sel, list):
        return None
    est = s.get("counts_estimation")
    if kind(s) == "monte_carlo" and "sequential" not in s and isinstance(est, list) and len(est) == len(sel):
        counts = [a + b for a, b in zip(sel, est)]
    else:  # sequential estimation stops on the data: only the fixed-size selection sample is binomial
        counts = list(sel)
    return counts, sum(counts)


def dispersion_pvalue(successes: list[int], trials: list[int]) -> float | None:
    """P-value of the over-dispersion test of binomial counts ``successes`` out of ``trials`` (None: no power)."""
    total, size = sum(successes), sum(trials)
    if len(trials) < 2 or min(total, size - total) < MIN_MINORITY:
        return None
    p = total / size
    stat = sum((y - n * p) ** 2 / (n * p * (1 - p)) for y, n in zip(successes, trials) if n)
    return float(chi2.sf(stat, len(trials) - 1))


def check_independence(defense, x: torch.Tensor, t, budgets: list[float], seed: int, report) -> None:
    """Certify ``x [1,C,H,W]`` under ``SEEDS`` seeds; counts over-dispersed against the binomial reject."""
    report.ran("independence")
    runs = [[iid_counts(c.to_json()) for c in defense.certify(x, t, budgets, torch.Generator().manual_seed(s))]
            for s in range(seed + 1000, seed + 1000 + SEEDS)]
    for v in range(len(runs[0])):
        samples = [r[v] for r in runs if v < len(r) and r[v] is not None and r[v][1] > 0]
        if len(samples) < 2:
            continue
        top = max(range(len(samples[0][0])), key=lambda c: sum(counts[c] for counts, _ in samples))
        pvalue = dispersion_pvalue([counts[top] for counts, _ in samples], [n for _, n in samples])
        if pvalue is not None and pvalue < LEVEL:
            report.add("independence", "error",
                       f"certificate {v}: over {len(samples)} generator seeds the counts of class {top} vary far more "
                       f"than independent draws can (over-dispersion test against the binomial, p = {pvalue:.1e}): the "
                       "samples are not independent (e.g. a few noise draws repeated to fill n), so the Clopper-Pearson "
                       "bound does not hold; draw fresh noise for every sample from the generator.")
            return
