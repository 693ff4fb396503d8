"""SPT (IndivSPT / DistSPT): the closed-form rule, the rho bounds, the interpolation-error bounds on the real
transformation, and record replay."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.stats import norm

from baselines.spt.interpolation import FLOAT32_ALLOWANCE, _errors, sup_errors, wrap
from benchmark.audit.statistics import certificate_problems
from benchmark.certify import spt_rule
from benchmark.certify.radii import gaussian_radius
from benchmark.certify.stats import lower_confidence_bound
from benchmark.transformations import get_transformation


def test_rule_without_error_is_cohen_radius():
    for p in (0.6, 0.8, 0.95, 0.99):
        for b in (0.5, 1.0, 2.0, 4.0):
            need = spt_rule.required_probability(b, 2.0, 1.0, 0.0, 0.0)
            assert (p > need) == (gaussian_radius(p, 2.0) > b)


def test_rule_closed_form_is_tight_for_the_worst_case_classifier():
    """The worst-case base classifier is a half-space in the whitened (beta, delta) space; shifting it by
    (gamma, E) gives exactly Phi(Phi^-1(p) - sqrt((gamma/sg)^2 + (E/sd)^2)) (Monte-Carlo check)."""
    gen = torch.Generator().manual_seed(0)
    sg, sd, gamma, err, p = 3.0, 0.5, 2.0, 0.4, 0.9
    w = np.array([gamma / sg, err / sd]); w /= np.linalg.norm(w)
    z = torch.randn(400_000, 2, generator=gen, dtype=torch.float64).numpy()
    inside = lambda u: (u @ w) >= -norm.ppf(p)  # mass p at the origin
    shifted = inside(z + np.array([gamma / sg, err / sd])[None] * -1)
    want = norm.cdf(norm.ppf(p) - math.hypot(gamma / sg, err / sd))
    assert abs(shifted.mean() - want) < 4e-3
    # the threshold is where the bound minus rho crosses 1/2
    rho = 0.05
    need = spt_rule.required_probability(gamma, sg, sd, err, rho)
    assert norm.cdf(norm.ppf(need) - math.hypot(gamma / sg, err / sd)) - rho == pytest.approx(0.5, abs=1e-9)
    assert spt_rule.required_probability(gamma, sg, sd, err, 0.5) == 1.0


def test_rho_bounds_closed_form_and_markov():
    rec = {"kind": "clopper_pearson", "failures": 0, "trials": 100, "alpha": 0.0005}
    assert spt_rule.rho_bound(rec) == pytest.approx(1 - 0.0005 ** (1 / 100), rel=1e-9)
    assert spt_rule.rho_bound({**rec, "markov_fraction": 0.1}) == pytest.approx(10 * (1 - 0.0005 ** (1 / 100)))
    assert spt_rule.rho_bound({"kind": "exact", "value": 0.0}) == 0.0
    assert spt_rule.rho_alpha(rec) == 0.0005 and spt_rule.rho_alpha({"kind": "exact", "value": 0}) == 0.0


def test_rho_upper_bound_covers_at_its_alpha_share():
    """Monte-Carlo coverage of the Clopper-Pearson upper bound used for rho (its own alpha share)."""
    rng = np.random.default_rng(0)
    true, trials, alpha = 0.05, 100, 0.1
    k = rng.binomial(trials, true, size=4000)
    covered = np.mean([spt_rule.rho_bound({"kind": "clopper_pearson", "failures": int(f), "trials": trials,
                                           "alpha": alpha}) >= true for f in k])
    assert covered >= 1 - alpha


def _digit() -> torch.Tensor:
    x = torch.zeros(1, 1, 28, 28)
    x[0, 0, 6:22, 12:16] = 1.0
    x[0, 0, 6:10, 8:20] = 0.7
    return x


def test_rotation_sup_bound_holds_on_a_dense_grid():
    t = get_transformation("rotation")
    x, mask = _digit(), get_transformation("rotation").support_mask(28, 28).float()
    betas = torch.tensor([[7.3], [-15.1], [0.4]])
    sup, _ = sup_errors(t, x, mask, betas, 5.0, 20, 10.0)  # target high: no refinement, coarse grid
    dense = _errors(t, x, mask, betas, torch.linspace(-5, 5, 2001)[:, None])
    assert (dense.amax(1) <= sup).all()
    assert (sup < dense.amax(1) + 10).all()  # and the bound is finite and not vacuous


@pytest.mark.parametrize("name,channels", [("rotation", 1), ("rotation", 3), ("translation", 2)])
def test_errors_equal_one_pair_per_call_bit_for_bit(name, channels):
    """_errors stacks the J images as channels and groups betas per call: the errors must be exactly those of
    evaluating each (beta, gamma) pair on its own, as the defense applies the transformation."""
    t = get_transformation(name)
    gen = torch.Generator().manual_seed(channels)
    x = torch.rand(1, channels, 28, 28, generator=gen)
    mask = get_transformation("rotation").support_mask(28, 28).float()
    betas = torch.randn(5, t.dim, generator=gen) * 9
    gammas = torch.randn(7, t.dim, generator=gen) * 4
    fast = _errors(t, x, mask, betas, gammas, 16)  # 16 images per call: betas in groups of 2
    slow = torch.empty(5, 7, dtype=torch.float64)
    for k in range(5):
        for j in range(7):
            composed = t.apply(t.apply(x, gammas[j:j + 1]), wrap(t, betas[k:k + 1], x.shape))
            direct = t.apply(x, wrap(t, betas[k:k + 1] + gammas[j:j + 1], x.shape))
            slow[k, j] = (mask.double() * (composed.double() - direct.double())).norm()
    assert torch.equal(fast, slow)


def test_refined_levels_reuse_the_coarse_points_with_identical_bounds(monkeypatch):
    """Refinement evaluates only the midpoints, and the bounds and record equal evaluating every level whole."""
    import baselines.spt.interpolation as interp
    t = get_transformation("rotation")
    x, mask = _digit(), get_transformation("rotation").support_mask(28, 28).float()
    betas = torch.tensor([[7.3], [-15.1], [0.4], [30.0]])
    gammas_seen: list[int] = []
    real_errors = interp._errors
    # a target above every level-0 error but below the level-0 bounds: no beta passes or is hopeless early
    target = float(real_errors(t, x, mask, betas, torch.linspace(-10, 10, 9)[:, None]).amax()) + 0.05

    def counting(t_, x_, mask_, beta, gammas, block=2048):
        gammas_seen.append(len(beta) * len(gammas))
        return real_errors(t_, x_, mask_, beta, gammas, block)

    monkeypatch.setattr(interp, "_errors", counting)
    sup, info = interp.lipschitz_sup(t, x, mask, betas, 10.0, 8, target, depth=2)
    reused = sum(gammas_seen)
    gammas_seen.clear()
    monkeypatch.setattr(interp, "_refined_errors", lambda t_, x1, m, b, todo, grid, *rest: counting(
        t_, x1, m, b[todo], grid[:, None].to(torch.float32)))
    whole_sup, whole_info = interp.lipschitz_sup(t, x, mask, betas, 10.0, 8, target, depth=2)
    assert torch.equal(sup, whole_sup) and info == whole_info
    assert info["evaluated_points"] == sum(gammas_seen) == 4 * (9 + 17 + 33)
    assert reused == 4 * (9 + 8 + 16)


def test_enumerated_errors_are_round_off_only():
    t = get_transformation("translation")
    gen = torch.Generator().manual_seed(1)
    x = torch.rand(1, 1, 28, 28, generator=gen)
    betas = torch.randn(300, 2, generator=gen) * 3
    sup, info = sup_errors(t, x, torch.ones(1, 1, 28, 28), betas, 3.0, 0, 0.0)
    assert info["method"] == "enumeration"
    assert float(sup.max()) <= 1e-3  # the E the defense uses for translation
    assert float(sup.max()) >= FLOAT32_ALLOWANCE
    # wrapping keeps the image: a shift by the period is the identity
    th = torch.tensor([[30.5, -29.25]])
    assert torch.allclose(t.apply(x, wrap(t, th, x.shape)), t.apply(x, wrap(t, th - 28, x.shape)), atol=1e-6)


def _record(budgets, rule, count=495, n=500, alpha=0.001, alpha_p=0.0005):
    p = lower_confidence_bound(count, n, alpha_p)
    need = spt_rule.thresholds(budgets, rule)
    certified = {repr(float(b)): (b == 0) or p > need[float(b)] for b in budgets}
    stats = {"n0": 10, "n": n, "alpha": alpha, "alpha_p_a": alpha_p, "count_a": count, "p_a_lower": p,
             "counts_selection": [0, 10], "counts_estimation": [n - count, count], "spt_rule": rule,
             "threshold_rule": {"statistic": "p_a_lower", "required": {repr(b): v for b, v in need.items()}}}
    return {"prediction": 1, "radius": None, "certified": certified, "stats": stats}


def test_record_replay_accepts_and_catches_tampering():
    rule = {"sigma_gamma": 12.0, "sigma_delta": 0.6, "error": 1.0,
            "rho": {"kind": "clopper_pearson", "failures": 0, "trials": 100, "alpha": 0.0005}}
    budgets = [0.0, 5.0, 10.0]
    cert = _record(budgets, rule)
    assert certificate_problems(cert, budgets, 2) == []
    bad = _record(budgets, {**rule, "error": 0.1})
    bad["stats"]["spt_rule"] = rule  # thresholds computed for a smaller E than recorded
    assert certificate_problems(bad, budgets, 2)
    over = _record(budgets, rule, alpha_p=0.001)  # p_A at the whole alpha plus rho's share: over budget
    assert certificate_problems(over, budgets, 2)


def _prepared(name: str):
    from baselines.spt.defense import SPT
    from benchmark.certify.smoothing import SmoothingParams
    from benchmark.context import Context
    from benchmark.datasets import get_dataset
    from benchmark.models.store import ModelStore
    from benchmark.suites.loader import load_suite

    suite = load_suite("semantic")
    cfg = suite.transformations[name]["defenses"]["spt"]
    budgets = suite.budgets(name, "digits")
    ctx = Context(dataset=get_dataset("digits"), transformation=get_transformation(name),
                  smoothing=SmoothingParams(n0=32, n=500, alpha=0.001, batch_size=500, n_predict=200),
                  store=ModelStore(allow_train=True), seed=0, budgets=budgets)
    d = SPT(**cfg)
    d.prepare(ctx)
    return d, ctx.transformation, budgets


@pytest.mark.slow
@pytest.mark.parametrize("name", ["translation", "rotation"])
def test_soundness_on_the_real_transformation(name):
    """Inside every certified region (a dense grid of the real transformation: every integer shift of the
    ball, or 15 angles) the smoothed classifier keeps the certified class (tests/soundness.py's judge)."""
    from benchmark.datasets import get_dataset
    from benchmark.transformations.translation import integer_ball

    from tests.soundness import Verdict, judge

    d, t, budgets = _prepared(name)
    x, _ = get_dataset("digits").load("test")
    gen = torch.Generator().manual_seed(5)
    total, certified = Verdict(), 0
    for i in (0, 5, 11):
        for c in d.certify(x[i:i + 1], t, list(budgets), gen):
            top = max((b for b, ok in c.certified.items() if ok and b > 0), default=0.0)
            if c.abstained or top == 0:
                continue
            certified += 1
            pts = integer_ball(top) if name == "translation" else torch.linspace(-top, top, 15)[:, None]
            total = total.add(judge((d._sampler(t.apply(x[i:i + 1], th.view(1, -1))) for th in pts),
                                    c.prediction, 300, 10, gen))
    assert certified >= 1
    assert total.violations == 0 and total.confident >= 0.8 * total.points, total


@pytest.mark.parametrize("budget,rho", [(5.0, 0.0), (10.0, 0.02)])
def test_the_lattice_rule_pays_the_grid_and_the_table_error(budget, rho):
    """Closed form of the floating-point rule (benchmark/certify/spt_rule.py): E grows by sqrt(d) Q, rho and
    p_A pay eps = d * tv on both sides; the rule record's ``pixel_noise`` selects it."""
    from benchmark.certify import lattice_noise

    sg, sd, err, d = 12.0, 0.6, 1.0, 784
    eps = d * lattice_noise.tv_per_coordinate(sd / lattice_noise.Q)
    closed = norm.cdf(norm.ppf(0.5 + rho + eps) + math.hypot(budget / sg, (err + math.sqrt(d) * lattice_noise.Q) / sd))
    got = spt_rule.required_probability(budget, sg, sd, err, rho, d)
    assert got == pytest.approx(closed + eps, rel=1e-12)
    assert got > spt_rule.required_probability(budget, sg, sd, err, rho)  # stricter than exact arithmetic
    rule = {"sigma_gamma": sg, "sigma_delta": sd, "error": err, "rho": {"kind": "exact", "value": rho}}
    assert spt_rule.thresholds([budget], {**rule, "pixel_noise": {"d": d}})[budget] == got
    assert spt_rule.thresholds([budget], rule)[budget] == spt_rule.required_probability(budget, sg, sd, err, rho)


def test_spt_samples_are_blind_to_sub_grid_bits():
    """The certified samples depend on the input only through its grid point (the float32 training noise
    does not)."""
    from baselines.spt.defense import SPT
    from benchmark.certify import lattice_noise

    d = SPT()
    d.t, d.sigma_gamma, d.sigma_delta = get_transformation("rotation"), 12.0, 0.6
    d.mask = get_transformation("rotation").support_mask(28, 28).float()
    x = torch.rand(2, 1, 28, 28, generator=torch.Generator().manual_seed(0))
    grid = (lattice_noise.quantise(x).double() * lattice_noise.Q).float()
    a, b = (d._lattice_pixels(z, torch.Generator().manual_seed(3)) for z in (x, grid))
    assert torch.equal(a, b) and torch.equal(a.double() / lattice_noise.Q, (a.double() / lattice_noise.Q).round())
    assert not torch.equal(*(d._float_pixels(z, torch.Generator().manual_seed(3)) for z in (x, grid)))
