"""TSS contrast+brightness: Neyman-Pearson bound for Gaussians of different covariance, and soundness."""
import math

import numpy as np
import pytest
import torch
from scipy.stats import norm

from baselines.common import contrast


def _log_ratio(u, v, a, c, s):
    return a * u - a * a / 2 + v**2 / 2 - (v - c) ** 2 / (2 * s * s) - math.log(s)


@pytest.mark.parametrize("k1,b1,tau", [(0.15, 0.1, 0.3), (-0.2, 0.2, -0.5), (0.0, 0.1, 0.1), (0.3, 0.0, 1.0),
                                       (-0.05, -0.3, 0.0)])
def test_set_probabilities_match_monte_carlo(k1, b1, tau):
    sk, sb = 0.2, 0.25
    a, c, s = k1 / sk, b1 / sb, math.exp(-k1)
    p0, p1 = contrast.set_probabilities(tau + a * a / 2, a, c, s)  # A = {log ratio <= tau}
    rng = np.random.default_rng(1)
    n = 400_000
    m0 = (_log_ratio(rng.standard_normal(n), rng.standard_normal(n), a, c, s) <= tau).mean()
    m1 = (_log_ratio(a + rng.standard_normal(n), c + s * rng.standard_normal(n), a, c, s) <= tau).mean()
    assert float(p0) == pytest.approx(m0, abs=4e-3) and float(p1) == pytest.approx(m1, abs=4e-3)


def test_equal_variances_reduce_to_the_shifted_gaussian_closed_form():
    # k1 = 0: same covariance, mean shift (0, b1/sb): V = Phi(Phi^-1(p) - |b1|/sb)
    for p, b1 in [(0.9, 0.1), (0.99, 0.3), (0.7, -0.05)]:
        v = contrast.worst_case_probability(p, 0.0, b1, 0.2, 0.2)
        assert v == pytest.approx(norm.cdf(norm.ppf(p) - abs(b1) / 0.2), abs=1e-7)


def test_bound_is_attained_and_never_beaten_by_hand_built_classifiers():
    """Simulated smoothed classifiers of base classifiers h(k, b) on (k, b): the attacked probability
    is never below the bound (any h), and the Neyman-Pearson set attains it."""
    sk, sb, k1, b1 = 0.2, 0.2, -0.15, 0.12
    rng = np.random.default_rng(2)
    n = 400_000
    k0, b0 = sk * rng.standard_normal(n), sb * rng.standard_normal(n)
    # attacked: the smoothing noise composes to (k1 + k, b1 + b exp(-k1))
    ka, ba = k1 + sk * rng.standard_normal(n), b1 + math.exp(-k1) * sb * rng.standard_normal(n)
    a, c, s = k1 / sk, b1 / sb, math.exp(-k1)
    classifiers = {
        "half-plane": lambda k, b: 0.7 * k + b < 0.15,
        "disc": lambda k, b: (k / sk) ** 2 + (b / sb) ** 2 < 3.0,
        "band": lambda k, b: np.abs(b - 0.05) < 0.35,
        "np-set": lambda k, b: _log_ratio(k / sk, b / sb, a, c, s) <= 0.4,
    }
    for name, h in classifiers.items():
        p_clean = h(k0, b0).mean()
        p_attacked = h(ka, ba).mean()
        bound = contrast.worst_case_probability(p_clean, k1, b1, sk, sb)
        assert p_attacked >= bound - 5e-3, name
        if name == "np-set":
            assert p_attacked == pytest.approx(bound, abs=5e-3)


def test_required_probability_certifies_every_point_of_the_box():
    sk, sb, budget = 0.2, 0.25, 0.1
    p_star = contrast.required_probability(budget, sk, sb)
    assert 0.5 < p_star < 1
    # pure brightness at the corner needs at least the shifted-Gaussian value
    assert p_star >= norm.cdf(math.hypot(budget / sk, budget / sb)) - 1e-3
    k1, b1 = np.meshgrid(np.linspace(-budget, budget, 21), np.linspace(-budget, budget, 21))
    assert contrast.worst_case_probability(p_star, k1, b1, sk, sb).min() > 0.5
    # and the search is not vacuous: slightly below p* some point fails (tight within the Pinsker slack)
    low = p_star - 0.03
    assert contrast.worst_case_probability(low, k1, b1, sk, sb).min() < 0.5
    assert contrast.required_probability(0.0, sk, sb) == 0.5
    assert contrast.required_probability(2 * budget, sk, sb, delta=0.05) > p_star


@pytest.mark.slow
def test_certificates_hold_on_the_real_transformation():
    """Certified budgets: at attacked images exp(k1)(x + b1) on a grid of the l-inf box (corners included)
    the smoothed classifier keeps the certified class, judged by a calibrated estimate (tests/soundness.py)."""
    from baselines.tss import TSS
    from benchmark.certify.smoothing import SmoothingParams
    from benchmark.context import Context
    from benchmark.datasets import get_dataset
    from benchmark.models.store import ModelStore
    from benchmark.transformations import get_transformation

    from tests.soundness import Verdict, judge

    ds, t = get_dataset("digits"), get_transformation("contrast_brightness")
    smoothing = SmoothingParams(n0=32, n=500, alpha=0.001, batch_size=500, n_predict=300)
    d = TSS(scale=0.2, scale_b=0.2)
    d.prepare(Context(dataset=ds, transformation=t, smoothing=smoothing, store=ModelStore(allow_train=False), seed=0))
    x, _ = ds.load("test")
    gen = torch.Generator().manual_seed(4)
    budgets = [0.0, 0.1, 0.2]
    total, certified = Verdict(), 0
    for i in range(0, 40, 8):
        (c,) = d.certify(x[i:i + 1], t, budgets, gen)
        assert c.stats["threshold_rule"]["required"][repr(0.2)] == pytest.approx(contrast.required_probability(0.2, 0.2, 0.2))
        top = max((b for b in budgets if c.certified[b]), default=None)
        if not top:
            continue
        certified += 1
        vals = torch.linspace(-top, top, 4)
        points = [torch.stack([k1, b1])[None] for k1 in vals for b1 in vals]
        total = total.add(judge((d._sampler(t.apply(x[i:i + 1], th), t) for th in points), c.prediction, 300, 10,
                                gen))
    assert certified >= 2
    assert total.violations <= 1 and total.confident >= 0.8 * total.points, total


@pytest.mark.parametrize("k1,b1,tau", [(0.15, 0.1, 0.3), (-0.2, 0.2, -0.5), (0.05, -0.25, 0.8)])
def test_set_probabilities_match_adaptive_quadrature(k1, b1, tau):
    """Precision well below the 1e-6 margin on p*: compare with scipy quad over v (u integrated in closed form)."""
    from scipy.integrate import quad

    sk, sb = 0.2, 0.25
    a, c, s = k1 / sk, b1 / sb, math.exp(-k1)

    def ell(v):
        return v**2 / 2 - (v - c) ** 2 / (2 * s * s) - math.log(s)

    # A = {a u + l(v) <= tau}: u ~ N(0,1) under q0, N(a,1) under q1
    ref0 = quad(lambda v: norm.pdf(v) * norm.cdf((tau - ell(v)) / abs(a)), -15, 15, epsabs=1e-12, limit=200)[0]
    ref1 = quad(lambda v: norm.pdf(v, c, s) * norm.cdf((tau - a * a - ell(v)) / abs(a)), c - 15 * s, c + 15 * s,
                epsabs=1e-12, limit=200)[0]
    p0, p1 = contrast.set_probabilities(tau, a, c, s)
    assert float(p0) == pytest.approx(ref0, abs=1e-8) and float(p1) == pytest.approx(ref1, abs=1e-8)


def test_bisection_stops_early_with_the_full_runs_result():
    """_bisect leaves the loop once no element moves; the result equals all 90 iterations run out."""
    a, c, s = np.array([0.3, -0.5, 1.0]), np.array([0.2, 0.7, 0.0]), np.exp(-np.array([0.1, -0.2, 0.3]))
    target = np.array([0.4, 0.8, 0.999])
    calls = []

    def prob(tau):
        calls.append(1)
        return contrast.set_probability(tau, a, c, s, under_q1=True)

    fast = contrast._bisect(prob, target, a.shape)
    lo, hi = np.full(a.shape, -1e3), np.full(a.shape, 1e3)
    for _ in range(90):
        mid = (lo + hi) / 2
        below = contrast.set_probability(mid, a, c, s, under_q1=True) < target
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    assert np.array_equal(fast, hi)
    assert len(calls) < 80  # it did stop early (float64 bisection of [-1e3, 1e3] settles in about 60 steps)
    p0, p1 = contrast.set_probabilities(hi, a, c, s)
    assert np.array_equal(p1, contrast.set_probability(hi, a, c, s, under_q1=True))
    assert np.array_equal(p0, contrast.set_probability(hi, a, c, s, under_q1=False))
