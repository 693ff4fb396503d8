"""Wald's floor on CERTIFY's samples (benchmark/studies/sequential_floor.py): the bound in closed form, the fixed
rule's exact certification probability, the repo's sequential rule never below the floor while an invalid
rule gets below it, and the report end to end on a tiny leaderboard folder and run folder."""
import gzip
import json
import lzma
import math

import numpy as np
import pytest
from scipy.stats import beta, norm

from benchmark.certify import sequential as sq
from benchmark.certify.stats import lower_confidence_bound
from benchmark.errors import BenchError
from benchmark.studies import sequential_floor as sf

CAP, ALPHA = 500, 1e-3


# ------------------------------------------------------------------ the bound
@pytest.mark.parametrize("p,tau,alpha", [(1.0, 0.9, 1e-3), (0.95, 0.8, 1e-3), (0.7, 0.5, 0.01), (0.99, 0.97, 1e-4)])
def test_wald_floor_at_full_power_is_log_one_over_alpha_over_kl(p, tau, alpha):
    kl = p * math.log(p / tau) + ((1 - p) * math.log((1 - p) / (1 - tau)) if p < 1 else 0.0)
    closed = math.log(1 / alpha) / kl
    assert sf.wald_floor(p, tau, alpha, 1.0) == pytest.approx(closed, rel=1e-12)
    assert sf.wald_floor(p, tau, alpha, 1 - 1e-12) == pytest.approx(closed, rel=1e-9)  # the limit power -> 1


def test_wald_floor_known_value_and_shape():
    assert sf.wald_floor(1.0, 0.9, 1e-3, 1.0) == pytest.approx(math.log(1000) / math.log(1 / 0.9), rel=1e-12)
    assert sf.wald_floor(1.0, 0.9, 1e-3, 1.0) == pytest.approx(65.5625, abs=1e-3)
    powers = [0.01, 0.2, 0.5, 0.9, 0.999, 1.0]
    floors = [sf.wald_floor(0.95, 0.9, 1e-3, w) for w in powers]
    assert all(a < b for a, b in zip(floors, floors[1:]))  # more power costs more samples
    assert sf.wald_floor(0.95, 0.9, 1e-3, 1e-3) == 0.0  # power <= alpha: a coin flip is a valid test
    assert sf.wald_floor(0.9, 0.9, 1e-3, 0.5) == math.inf  # no valid test has power > alpha at p = tau


@pytest.mark.parametrize("p", [0.6, 0.8, 0.9, 0.95, 0.99, 1.0])
@pytest.mark.parametrize("tau", [0.5, 0.75, 0.9, 0.97])
def test_the_fixed_rule_respects_the_floor_exactly(p, tau):
    """Clopper-Pearson at a fixed n is itself a valid (sequential) test: n >= the floor at its own power."""
    if p <= tau:
        return
    power = sf.fixed_certify_probability(p, CAP, ALPHA, tau)
    assert sf.wald_floor(p, tau, ALPHA, power) <= CAP


# ------------------------------------------------------------------ the fixed rule, exactly
def test_critical_count_is_the_clopper_pearson_boundary():
    for tau in (0.5, 0.8, 0.9, 0.95, 0.98):
        k = int(sf.critical_count(CAP, ALPHA, tau))
        assert lower_confidence_bound(k, CAP, ALPHA) > tau >= lower_confidence_bound(k - 1, CAP, ALPHA)


@pytest.mark.parametrize("p,tau", [(0.95, 0.9), (0.9, 0.85), (0.99, 0.97), (0.7, 0.6)])
def test_fixed_certify_probability_matches_monte_carlo(p, tau):
    trials = 200_000
    s = np.random.default_rng(1).binomial(CAP, p, size=trials)
    lower = np.where(s > 0, beta.ppf(ALPHA, np.maximum(s, 1), CAP - s + 1), 0.0)  # stats.lower_confidence_bound
    mc = float((lower > tau).mean())
    exact = sf.fixed_certify_probability(p, CAP, ALPHA, tau)
    assert 0.01 < exact < 0.999  # a non-trivial case
    assert abs(mc - exact) <= 4 * math.sqrt(exact * (1 - exact) / trials) + 1e-6, (mc, exact)


def test_fixed_certify_probability_trivial_cases():
    assert sf.fixed_certify_probability(1.0, CAP, ALPHA, 0.9) == 1.0
    assert sf.fixed_certify_probability(0.0, CAP, ALPHA, 0.5) == 0.0
    assert sf.fixed_certify_probability(1.0, CAP, ALPHA, 1.0) == 0.0  # tau = 1: never certifiable
    best = lower_confidence_bound(CAP, CAP, ALPHA)  # every sample a success
    assert sf.fixed_certify_probability(1.0, CAP, ALPHA, best) == 0.0
    assert sf.fixed_certify_probability(1.0, CAP, ALPHA, best - 1e-9) == 1.0
    vec = sf.fixed_certify_probability(1.0, CAP, ALPHA, np.array([0.5, 0.9, 1.0]))
    assert vec.tolist() == [1.0, 1.0, 0.0]


# ------------------------------------------------------------------ the rules against the floor
def _streams(rng, looks, p, trials):
    return rng.binomial(np.diff((0, *looks)), p, size=(trials, len(looks))).cumsum(1)


def _cp_union(p, tau, rng, trials):
    """The repo's rule on one threshold: (mean estimation samples, its standard error, power)."""
    tables = sq.plan(sq.SequentialSettings(), CAP, ALPHA, [tau])
    sched = tables.schedule
    looks = np.asarray(sched.looks)
    stop, certified = sq.run_rule(_streams(rng, looks, p, trials), tables)
    used, j = looks[stop], int(np.searchsorted(tables.thresholds, tau))
    return used.mean(), used.std() / math.sqrt(trials), certified[:, j].mean()


def _naive(p, tau, rng, trials, batch=16):
    """Invalid: one-sided Clopper-Pearson at the full alpha after every batch, stop at the first certification
    (or at the cap). Returns (mean samples, standard error, power)."""
    looks = np.unique(np.minimum(np.arange(batch, CAP + batch, batch), CAP))
    crit = np.array([int(sf.critical_count(int(t), ALPHA, tau)) for t in looks])
    ok = _streams(rng, looks, p, trials) >= crit
    hit = ok.any(1)
    used = looks[np.where(hit, ok.argmax(1), len(looks) - 1)]
    return used.mean(), used.std() / math.sqrt(trials), hit.mean()


GRID = [(1.0, 0.9), (0.99, 0.8), (0.99, 0.9), (0.97, 0.8), (0.97, 0.9), (0.95, 0.7), (0.9, 0.7), (0.8, 0.5)]


def test_the_sequential_rule_never_beats_the_floor_and_an_invalid_rule_does():
    rng = np.random.default_rng(7)
    beaten = []
    for p, tau in GRID:
        used, se, power = _cp_union(p, tau, rng, 4000)
        floor = sf.wald_floor(p, tau, ALPHA, power)
        print(f"p {p}, tau {tau}: cp-union {used:.1f} samples (power {power:.3f}), floor {floor:.1f}")
        assert used + 3 * se >= floor, (p, tau, used, floor)
        used, se, power = _naive(p, tau, rng, 4000)
        floor = sf.wald_floor(p, tau, ALPHA, power)
        print(f"    naive per-batch CP {used:.1f} samples (power {power:.3f}), floor {floor:.1f}")
        if used + 3 * se < floor:
            beaten.append((p, tau))
    assert beaten, "the invalid per-batch rule should get below Wald's floor somewhere on the grid"
    assert (0.97, 0.9) in beaten
    # ... because it is invalid: at p_A = tau it certifies far more often than alpha
    _, _, false_rate = _naive(0.9, 0.9, rng, 20_000)
    assert false_rate > 3 * ALPHA


# ------------------------------------------------------------------ end to end
def _cert(count_a, sel, correct=True, rule=None, **extra):
    est = [0] * 10
    est[2], est[5] = count_a, CAP - count_a
    stats = {"count_a": count_a, "n": CAP, "n0": 32, "alpha": ALPHA, "counts_selection": sel,
             "counts_estimation": est, "p_a_lower": lower_confidence_bound(count_a, CAP, ALPHA), **extra}
    stats.update(rule or {"radius_rule": {"distribution": "gaussian", "scale": 1.0}})
    return {"variant": None, "correct": correct, "certified": {"0.0": True, "1.0": True},
            "stats": stats}


def _rows():
    sel = [0, 0, 32, 0, 0, 0, 0, 0, 0, 0]
    sound = _cert(CAP, sel)
    surrogate = {**_cert(CAP, sel, certifies="surrogate transformation"), "variant": "paper"}
    sliced = _cert(CAP, sel, endpoints=[])
    return [{"dataset": "digits", "transformation": "translation", "defense": "toy", "label": 2, "example": 0,
             "certificates": [sound, surrogate, sliced]}]


def _leaderboard(tmp_path, rows, sequential=None):
    with gzip.open(tmp_path / "x.rows.jsonl.gz", "wt") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    protocol = {"n0": 32, "n": CAP, "alpha": ALPHA, "profile_settings": {"sequential": sequential or {}}}
    (tmp_path / "x.json").write_text(json.dumps({"protocol": protocol}))
    return tmp_path


def test_end_to_end_on_a_leaderboard_folder(tmp_path, capsys):
    """p_hat = 1, Gaussian radius_rule with scale 1, budgets 0 and 1: the thresholds are 1/2 and Phi(1); the
    floor is n0 + ln(1/alpha) / ln(1/Phi(1)) (Phi(1) is the harder one); the rule stops at the first look t_k
    with alpha_k^(1/t_k) > Phi(1) (Clopper-Pearson at t_k of t_k)."""
    folder = _leaderboard(tmp_path, _rows())
    assert sf.main([str(folder), "--trials", "200", "--out", str(tmp_path / "t.md"),
                    "--json", str(tmp_path / "t.json")]) == 0
    text = capsys.readouterr().out
    floor = 32 + math.log(1 / ALPHA) / math.log(1 / norm.cdf(1.0))
    sched = sq.plan(sq.SequentialSettings(), CAP, ALPHA, [norm.cdf(1.0)]).schedule
    used = 32 + next(t for t, a in zip(sched.looks, sched.alphas) if a ** (1 / t) > norm.cdf(1.0))
    assert f"| translation | toy | 1 | 532 | {floor:.1f} | {used:.1f} | {532 / floor:.1f}x | {532 / used:.1f}x |" in text
    assert "| translation | toy:paper (surrogate) | 1 |" in text
    assert "| translation | toy | 1 | 1.000 | 1.000 | +0.0 pt | 0.0 pt |" in text
    assert "mean over 1 certificates (surrogate-only left out)" in text  # the surrogate and the sliced are out
    assert f"Wald floor {floor:.1f}" in text and f"estimation floor {floor - 32:.1f}" in text
    assert (tmp_path / "t.md").read_text() == text
    records = json.loads((tmp_path / "t.json").read_text())["rows"]
    assert [(r["label"], r["surrogate"]) for r in records] == [("toy", False), ("toy:paper", True)]
    assert records[0]["samples_floor"] == pytest.approx(floor, rel=1e-9)


def test_run_folder_reads_the_profiles_sequential_settings(tmp_path, capsys):
    """Looks 60, 120, ... (first = 60): the rule certifies Phi(1) at p_hat = 1 at the first look."""
    (tmp_path / "config.json").write_text(json.dumps({"profile": {"sequential": {"first": 60}}}))
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _rows()))
    sf.main([str(tmp_path), "--trials", "50"])
    assert "| translation | toy | 1 | 532 |" in capsys.readouterr().out
    rec = sf.analyse_sources(sf.load_source(tmp_path), trials=50)[0]
    assert rec["samples_sequential"] == 32 + 60
    packed = tmp_path / "packed"  # the same run folder after bench pack
    packed.mkdir()
    (packed / "config.json").write_text((tmp_path / "config.json").read_text())
    (packed / "rows.jsonl.xz").write_bytes(lzma.compress((tmp_path / "rows.jsonl").read_bytes()))
    assert sf.analyse_sources(sf.load_source(packed), trials=50)[0] == rec


def test_thresholds_of_a_margin_rule_and_unproven_budgets():
    stats = {"threshold_rule": {"statistic": "margin", "required": {"1.0": 1.0, "2.0": 1e9, "3.0": None}}}
    assert sf.budget_threshold(stats, 1.0) == pytest.approx(norm.cdf(1.0))
    assert sf.budget_threshold(stats, 2.0) == 1.0 and sf.budget_threshold(stats, 3.0) == 1.0
    assert sf.budget_threshold(stats, 0.0) == 0.5
    stats = {"threshold_rule": {"statistic": "p_a_lower", "required": {"1.0": 0.3}}}
    assert sf.budget_threshold(stats, 1.0) == 0.5  # certifying needs a non-abstaining CERTIFY too


def test_sources_without_rows_or_usable_certificates_are_errors(tmp_path):
    with pytest.raises(BenchError, match="no rows"):
        sf.main([str(tmp_path)])
    rows = _rows()
    rows[0]["certificates"] = rows[0]["certificates"][2:]  # only the sliced one
    with pytest.raises(BenchError, match="no usable"):
        sf.main([str(_leaderboard(tmp_path, rows))])


# ------------------------------------------------------------------ slice certification
def _sliced_stats(bounds, counts, n_slice=60, sigma=0.4, alpha=1e-3, split="bonferroni"):
    a_slice = alpha / len(bounds) if split == "bonferroni" else alpha
    ends = [{"bound": b, "count": c, "p_a_lower": lower_confidence_bound(c, n_slice, a_slice)}
            for b, c in zip(bounds, counts)]
    return {"endpoints": ends, "n_slice": n_slice, "alpha_slice": a_slice, "alpha": alpha, "sigma": sigma,
            "n0": 32, "alpha_split": split}


def test_sliced_floor_closed_form():
    """Two endpoints pass with every sample (fixed power 1: the floor is ln(1/alpha) / ln(1/tau_i)), the third
    fails (counted 0); a sequential (fixed-sequence) record has no fixed walk to bound."""
    bounds, sigma = [0.1, 0.2, 0.9], 0.4
    stats = _sliced_stats(bounds, [60, 60, 60], sigma=sigma)
    assert stats["endpoints"][2]["p_a_lower"] < norm.cdf(0.9 / sigma)  # the far endpoint fails
    fixed, floor = sf.sliced_floor(stats)
    expect = 32 + sum(math.log(1 / ALPHA) / math.log(1 / norm.cdf(b / sigma)) for b in bounds[:2])
    assert fixed == 32 + 3 * 60 and floor == pytest.approx(expect, rel=1e-9)
    assert sf.sliced_floor(_sliced_stats(bounds, [60, 60, 60], split="fixed-sequence")) is None
    assert sf.sliced_floor({"count_a": 1}) is None


def test_sliced_table_in_the_report(tmp_path, capsys):
    row = {"dataset": "digits", "transformation": "rotation", "defense": "toy", "label": 2, "example": 0,
           "certificates": [{"variant": "", "correct": True, "certified": {"0.0": True, "5.0": True},
                             "stats": _sliced_stats([0.1, 0.2, 0.15], [60, 60, 60])}]}
    sound = _rows()[0]
    folder = _leaderboard(tmp_path, [sound, row])
    assert sf.main([str(folder), "--trials", "50"]) == 0
    text = capsys.readouterr().out
    assert "slice certification (fixed rule" in text and "| rotation | toy | 1 | 212 |" in text
