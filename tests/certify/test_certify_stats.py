"""Statistics of the shared smoothing core: radii, coverage, and a closed-form linear model."""
import math

import numpy as np
import pytest
import torch
from scipy.stats import beta, binom, norm

from benchmark.certify import radii
from benchmark.certify.certificate import ABSTAIN, Certificate
from benchmark.certify.smoothing import SmoothingParams, certify, predict
from benchmark.certify.stats import lower_confidence_bound, predict_test_passes, upper_confidence_bound


def _np_worst_case(p_a: float, delta: float, logpdf, grid: np.ndarray) -> float:
    """Neyman-Pearson: the smallest probability under the shifted noise of a set of mass p_A under the noise.

    The worst set collects the points where shifted/original density ratio is smallest.
    """
    p = np.exp(logpdf(grid))
    q = np.exp(logpdf(grid - delta))
    dx = grid[1] - grid[0]
    p, q = p * dx, q * dx
    order = np.argsort(q / np.maximum(p, 1e-300), kind="stable")
    cum_p = np.cumsum(p[order])
    idx = np.searchsorted(cum_p, p_a)
    return float(np.sum(q[order][:idx]))


def _np_radius(p_a: float, logpdf, grid: np.ndarray, hi: float) -> float:
    """Largest shift for which the Neyman-Pearson worst case stays above 1/2 (bisection)."""
    lo_d, hi_d = 0.0, hi
    for _ in range(32):
        mid = (lo_d + hi_d) / 2
        if _np_worst_case(p_a, mid, logpdf, grid) > 0.5:
            lo_d = mid
        else:
            hi_d = mid
    return lo_d


def _logpdf_exponential(lam):
    return lambda t: np.where(t >= 0, -t / lam - math.log(lam), -np.inf)


def _logpdf_uniform(lam):
    return lambda t: np.where((t >= 0) & (t <= lam), -math.log(lam), -np.inf)


def _logpdf_folded(sigma):
    return lambda t: np.where(t >= 0, norm.logpdf(t, scale=sigma) + math.log(2), -np.inf)


@pytest.mark.parametrize("p_a", [0.6, 0.8, 0.95])
@pytest.mark.parametrize(
    "name,logpdf,param",
    [("exponential", _logpdf_exponential, 2.0), ("uniform", _logpdf_uniform, 3.0),
     ("folded_gaussian", _logpdf_folded, 1.5)],
)
def test_one_sided_radii_match_numerical_neyman_pearson(name, logpdf, param, p_a):
    grid = np.linspace(-1e-9, 40.0, 160_001)
    r_formula = radii.RADIUS_FUNCTIONS[name](p_a, param)
    r_numeric = _np_radius(p_a, logpdf(param), grid, hi=20.0)
    assert r_formula == pytest.approx(r_numeric, abs=2e-3, rel=1e-3)


def test_gaussian_radius_closed_form_and_numeric():
    assert radii.gaussian_radius(norm.cdf(1.0), 0.5) == pytest.approx(0.5)
    assert radii.gaussian_radius(0.9, 1.0, 0.05) == pytest.approx((norm.ppf(0.9) - norm.ppf(0.05)) / 2)
    grid = np.linspace(-20, 20, 160_001)
    r_num = _np_radius(0.8, lambda t: norm.logpdf(t, scale=2.0), grid, hi=10.0)
    assert radii.gaussian_radius(0.8, 2.0) == pytest.approx(r_num, abs=2e-3)


def test_radius_zero_or_negative_at_half():
    for name, f in radii.RADIUS_FUNCTIONS.items():
        assert f(0.5, 1.0) <= 1e-12, name
    assert radii.exponential_radius(1.0, 1.0) == math.inf
    assert math.isfinite(radii.gaussian_radius(1.0, 1.0))


def test_phi_inverse_is_norm_ppf_bit_for_bit():
    """``radii._ppf`` (scipy.special.ndtri) returns exactly what ``norm.ppf`` did, clipping included: committed
    radii and margins replay to the same bits."""
    rng = np.random.default_rng(0)
    ps = [*rng.uniform(0, 1, 2000), *10 ** rng.uniform(-300, -1, 500), *(1 - 10 ** rng.uniform(-16, -1, 500)),
          0.0, 0.5, 1.0, -0.1, 1.1, 5e-324]
    assert [float.hex(radii._ppf(p)) for p in ps] == [float.hex(float(norm.ppf(min(max(p, 0.0), radii._P_MAX))))
                                                     for p in ps]


def test_clopper_pearson_values():
    assert lower_confidence_bound(0, 10, 0.05) == 0.0
    assert upper_confidence_bound(10, 10, 0.05) == 1.0
    # all successes: lower bound alpha^(1/n)
    assert lower_confidence_bound(100, 100, 0.001) == pytest.approx(0.001 ** (1 / 100))
    assert lower_confidence_bound(37, 100, 0.01) == pytest.approx(beta.ppf(0.01, 37, 64))
    with pytest.raises(ValueError):
        lower_confidence_bound(5, 3, 0.1)


@pytest.mark.parametrize("p", [0.3, 0.7, 0.95, 0.995])
def test_lower_bound_coverage(p):
    """Over many binomial trials the (1-alpha) lower bound exceeds p at most ~alpha of the time."""
    rng = np.random.default_rng(0)
    n, alpha, trials = 200, 0.05, 20_000
    ks = rng.binomial(n, p, size=trials)
    bounds = {k: lower_confidence_bound(int(k), n, alpha) for k in np.unique(ks)}
    fails = np.mean([bounds[k] > p for k in ks])
    assert fails <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / trials)
    # and it is not vacuous: exact failure probability is close to alpha from below
    exact = sum(binom.pmf(k, n, p) for k in range(n + 1) if lower_confidence_bound(k, n, alpha) > p)
    assert exact <= alpha
    upper_fails = np.mean([upper_confidence_bound(int(k), n, alpha) < p for k in ks])
    assert upper_fails <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / trials)


def test_predict_test():
    assert not predict_test_passes(5, 5, 0.05)
    assert predict_test_passes(90, 10, 0.001)
    assert not predict_test_passes(0, 0, 0.05)


def _linear_sampler(w: torch.Tensor, b: float, x: torch.Tensor, sigma: float):
    def sample(k: int, gen: torch.Generator) -> torch.Tensor:
        noise = torch.randn(k, x.numel(), generator=gen, dtype=torch.float64) * sigma
        return ((x + noise) @ w + b > 0).long()
    return sample


def test_linear_classifier_radius_never_exceeds_truth_beyond_alpha():
    """Closed form: p_A = Phi(|w.x+b|/(sigma|w|)), true radius |w.x+b|/|w|.

    Over 10^4 certifications of points near the boundary, a certificate that is wrong
    (wrong class, or radius larger than the true distance to the boundary) happens at most
    alpha of the time (within sampling error).
    """
    gen = torch.Generator().manual_seed(1)
    w = torch.tensor([3.0, -4.0], dtype=torch.float64)
    b, sigma, alpha = 0.5, 1.0, 0.05
    params = SmoothingParams(n0=10, n=100, alpha=alpha, batch_size=1000)
    trials, bad, certified = 10_000, 0, 0
    offsets = torch.linspace(0.05, 2.0, 40, dtype=torch.float64)  # signed distances near the boundary
    for i in range(trials):
        dist = float(offsets[i % len(offsets)]) * (1 if i % 2 else -1)
        x = w / w.norm() * (dist - b / w.norm())  # w.x+b = dist*|w|
        true_class = int(dist > 0)
        res = certify(_linear_sampler(w, b, x, sigma), 2, params, gen)
        if res.prediction == ABSTAIN:
            continue
        certified += 1
        r = radii.gaussian_radius(res.p_a_lower, sigma)
        if res.prediction != true_class or r > abs(dist):
            bad += 1
    assert certified > trials * 0.5  # the test exercises real certificates
    assert bad / trials <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / trials)
    # and the p_A lower bound is close to the closed form for a far point (not vacuous)
    x = w / w.norm() * (1.5 - b / w.norm())
    res = certify(_linear_sampler(w, b, x, sigma), 2, SmoothingParams(n0=10, n=20_000, alpha=alpha), gen)
    assert res.p_a_lower == pytest.approx(norm.cdf(1.5), abs=0.01)


def _fresh_and_separate(certify_fn) -> bool:
    """Whether ``certify_fn`` selects with n0 draws and estimates with n *other* draws: the sampler sees two
    calls' worth of fresh noise (n0 then n) and the recorded counts sum to n0 and to n separately."""
    params = SmoothingParams(n0=20, n=300, alpha=0.01, batch_size=1000)
    drawn: list[torch.Tensor] = []
    w = torch.tensor([1.0, 0.0], dtype=torch.float64)
    inner = _linear_sampler(w, 0.0, torch.tensor([0.3, 0.0], dtype=torch.float64), 1.0)

    def sample(k, gen):
        labels = inner(k, gen)
        drawn.append(labels)
        return labels

    res = certify_fn(sample, 2, params, torch.Generator().manual_seed(0))
    sizes = [len(d) for d in drawn]
    return (sizes == [params.n0, params.n] and sum(res.counts_selection) == params.n0
            and sum(res.counts_estimation) == params.n
            and res.counts_estimation == torch.bincount(drawn[1], minlength=2).tolist())


def test_certify_estimates_with_fresh_samples_separate_from_selection():
    assert _fresh_and_separate(certify)

    def reuses_selection(sample_labels, num_classes, params, generator):  # estimation reuses the n0 draws
        from benchmark.certify.smoothing import CertifyResult

        sel = np.bincount(sample_labels(params.n0, generator).numpy(), minlength=num_classes)
        c = int(sel.argmax())
        p = lower_confidence_bound(int(sel[c]), params.n0, params.alpha)
        return CertifyResult(c if p > 0.5 else ABSTAIN, p, sel.tolist(), sel.tolist(), params.n0, params.n0,
                             params.alpha)

    assert not _fresh_and_separate(reuses_selection)


def _confident_predict_is_right(predict_fn) -> bool:
    """Where the smoothed classifier is clearly decided (p_A = Phi(2) ~ 0.98), PREDICT must return the right
    class almost always: an always-abstaining PREDICT is 'rarely wrong' but fails this."""
    gen = torch.Generator().manual_seed(3)
    w = torch.tensor([1.0, 0.0], dtype=torch.float64)
    x = torch.tensor([2.0, 0.0], dtype=torch.float64)
    params = SmoothingParams(n0=1, n=100, alpha=0.001, batch_size=100)
    out = [predict_fn(_linear_sampler(w, 0.0, x, 1.0), 2, params, gen)[0] for _ in range(300)]
    return np.mean([o == 1 for o in out]) >= 0.99


def test_predict_returns_the_right_class_when_it_is_confident():
    assert _confident_predict_is_right(predict)
    assert not _confident_predict_is_right(lambda *a: (ABSTAIN, [0, 0]))  # never wrong, never right


def test_predict_rarely_wrong_on_linear_model():
    gen = torch.Generator().manual_seed(2)
    w = torch.tensor([1.0, 0.0], dtype=torch.float64)
    x = torch.tensor([0.1, 0.0], dtype=torch.float64)  # p_A = Phi(0.1) ~ 0.54: mostly abstain
    params = SmoothingParams(n0=1, n=200, alpha=0.05, batch_size=200)
    out = [predict(_linear_sampler(w, 0.0, x, 1.0), 2, params, gen)[0] for _ in range(2000)]
    wrong = np.mean([o == 0 for o in out])
    assert wrong <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 2000)


def test_certificate_from_radius():
    c = Certificate.from_radius(3, 1.2, [0.0, 1.0, 2.0], {"n": 5})
    assert c.certified == {0.0: True, 1.0: True, 2.0: False}
    a = Certificate.from_radius(ABSTAIN, 5.0, [0.0], {})
    assert a.abstained and a.radius == 0.0 and a.certified == {0.0: False}
    assert a.to_json()["abstained"] is True


@pytest.mark.parametrize("p_a", [0.55, 0.8, 0.95, 0.999])
def test_general_radius_integral_reproduces_the_closed_forms(p_a):
    from benchmark.certify.general_radius import general_radius

    assert general_radius(p_a, None, "gaussian", 0.7) == pytest.approx(0.7 * norm.ppf(p_a), rel=1e-6)
    assert general_radius(p_a, None, "uniform", 0.7) == pytest.approx(0.7 * (2 * p_a - 1), rel=1e-9)
    assert general_radius(p_a, None, "laplace", 0.7) == pytest.approx(-0.7 * math.log(2 - 2 * p_a), rel=1e-6)
    # two-class form with a separate runner-up bound
    assert general_radius(p_a, 0.01, "gaussian", 1.0) == pytest.approx((norm.ppf(p_a) - norm.ppf(0.01)) / 2,
                                                                        rel=1e-6)
    assert general_radius(0.5, None, "laplace", 1.0) == 0.0


@pytest.mark.parametrize("dist", ["uniform", "laplace"])
def test_general_radius_is_tight_by_monte_carlo_for_a_threshold_classifier(dist):
    """1-D smoothing of f(t) = [t < c] (worst case for a shift to the right): the smoothed probability at
    shift R is exactly 1/2, and at shifts below R stays above 1/2."""
    from scipy.stats import laplace, uniform

    from benchmark.certify.general_radius import general_radius

    scale, c = 1.0, 0.4
    cdf = (lambda t: uniform.cdf(t, -scale, 2 * scale)) if dist == "uniform" else (lambda t: laplace.cdf(t, 0, scale))
    p_a = cdf(c)
    r = general_radius(p_a, None, dist, scale)
    assert cdf(c - r) == pytest.approx(0.5, abs=1e-6)
    rng = np.random.default_rng(0)
    draws = rng.uniform(-scale, scale, 200_000) if dist == "uniform" else rng.laplace(0, scale, 200_000)
    assert ((draws + 0.9 * r) < c).mean() > 0.5
