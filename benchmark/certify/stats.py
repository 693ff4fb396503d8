"""Confidence bounds and tests used by every smoothing certificate (Cohen et al. 2019)."""
from __future__ import annotations

from scipy.stats import beta, binomtest


def lower_confidence_bound(k: int, n: int, alpha: float) -> float:
    """One-sided (1-alpha) Clopper-Pearson lower bound on a binomial proportion.

    It is the alpha-quantile of Beta(k, n-k+1); 0 when k == 0. P(bound > p) <= alpha.
    """
    _check(k, n, alpha)
    if k == 0:
        return 0.0
    return float(beta.ppf(alpha, k, n - k + 1))


def upper_confidence_bound(k: int, n: int, alpha: float) -> float:
    """One-sided (1-alpha) Clopper-Pearson upper bound; 1 when k == n."""
    _check(k, n, alpha)
    if k == n:
        return 1.0
    return float(beta.ppf(1 - alpha, k + 1, n - k))


def predict_test_passes(n_a: int, n_b: int, alpha: float) -> bool:
    """PREDICT's test: a two-sided binomial test of n_a out of n_a+n_b at p=1/2 rejects at alpha."""
    if n_a + n_b == 0 or n_a <= n_b:
        return False
    return binomtest(n_a, n_a + n_b, 0.5).pvalue <= alpha


def _check(k: int, n: int, alpha: float) -> None:
    if n <= 0 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n and n > 0, got k={k}, n={n}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0,1), got {alpha}")
