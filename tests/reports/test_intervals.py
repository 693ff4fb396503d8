"""The 95 % intervals and the paired test behind "best" marking, against closed forms and exact coverage."""
import math

import numpy as np
import pytest
from scipy.stats import binom

from benchmark.reports.intervals import clopper_pearson, mcnemar_p, paired_counts


@pytest.mark.parametrize("n", [1, 25, 500])
def test_closed_forms_at_the_edges(n):
    lo, hi = clopper_pearson(0, n)
    assert lo == 0 and math.isclose(hi, 1 - 0.025 ** (1 / n), rel_tol=1e-9)
    lo, hi = clopper_pearson(n, n)
    assert hi == 1 and math.isclose(lo, 0.025 ** (1 / n), rel_tol=1e-9)
    assert clopper_pearson(0, 0) == (0.0, 1.0)


def _coverage(interval, n: int, p: float) -> float:
    """Exact coverage: the binomial mass of the k whose interval holds p."""
    return sum(binom.pmf(k, n, p) for k in range(n + 1) if interval(k, n)[0] <= p <= interval(k, n)[1])


@pytest.mark.parametrize("n", [25, 100])
def test_coverage_is_at_least_95_percent(n):
    """For every true accuracy on a fine grid the interval holds it at least 95 % of the time; the Wald
    interval (what a naive rule would use) fails the same check, so the test can fail."""
    grid = np.linspace(0.01, 0.99, 99)
    assert min(_coverage(clopper_pearson, n, p) for p in grid) >= 0.95 - 1e-12

    def wald(k, n):
        q = k / n
        h = 1.96 * math.sqrt(q * (1 - q) / n)
        return q - h, q + h

    assert min(_coverage(wald, n, p) for p in grid) < 0.95


def test_mcnemar_exact_values():
    assert mcnemar_p(0, 0) == 1.0
    assert math.isclose(mcnemar_p(0, 6), 2 * 0.5 ** 6)  # 0.03125: separates at 5 %
    assert math.isclose(mcnemar_p(0, 5), 2 * 0.5 ** 5)  # 0.0625: does not
    assert mcnemar_p(3, 9) == mcnemar_p(9, 3)
    assert paired_counts([True, True, False, False], [True, False, True, True]) == (1, 2)
    with pytest.raises(ValueError):
        paired_counts([True], [True, False])
