"""Uncertainty of a leaderboard cell and of a comparison between two cells.

A cell is k successes (certified or robust examples) out of n evaluated examples; its 95 % interval is the
two-sided Clopper-Pearson interval (exact, conservative; the one-sided bounds of ``benchmark.certify.stats``
at alpha/2 each). Two defenses evaluated on the same examples are compared with the exact McNemar test on
their discordant pairs (a two-sided binomial test of b successes in b + c trials at 1/2), which uses the
pairing that an unpaired test of two proportions would throw away.
"""
from __future__ import annotations

from scipy.stats import binomtest

from benchmark.certify.stats import lower_confidence_bound, upper_confidence_bound

LEVEL = 0.95  # every rendered interval
TEST_ALPHA = 0.05  # "best" marking: a column is best only where McNemar separates it at this level


def clopper_pearson(k: int, n: int, level: float = LEVEL) -> tuple[float, float]:
    """Two-sided ``level`` interval for a proportion k/n; (0, 1) when n == 0 (nothing was measured)."""
    if n == 0:
        return 0.0, 1.0
    a = (1 - level) / 2
    return lower_confidence_bound(k, n, a), upper_confidence_bound(k, n, a)


def mcnemar_p(only_a: int, only_b: int) -> float:
    """Exact two-sided McNemar p-value from the discordant counts (examples only A gets right, only B)."""
    m = only_a + only_b
    if m == 0:
        return 1.0
    return float(binomtest(only_a, m, 0.5, alternative="two-sided").pvalue)


def paired_counts(a: list[bool], b: list[bool]) -> tuple[int, int]:
    """(examples where only ``a`` holds, examples where only ``b`` holds) over the same examples in order."""
    if len(a) != len(b):
        raise ValueError(f"paired flags need the same examples: {len(a)} vs {len(b)}")
    return sum(x and not y for x, y in zip(a, b)), sum(y and not x for x, y in zip(a, b))
