"""The anytime-valid sequential rule (benchmark/certify/sequential.py): validity at the decision boundary,
the naive per-batch Clopper-Pearson rule caught by the same test, sample savings, PREDICT, replay."""
import json
import math

import numpy as np
import pytest
from scipy.stats import binom, binomtest

from benchmark.certify import sequential as sq
from benchmark.certify.stats import lower_confidence_bound, upper_confidence_bound

TRIALS = 100_000
SETTINGS = sq.SequentialSettings()


def _counts(rng, looks, p, trials=TRIALS):
    """Successes of ``trials`` Bernoulli(p) streams at each look: ``[trials, K]``."""
    return rng.binomial(np.diff((0, *looks)), p, size=(trials, len(looks))).cumsum(1)


def _false_rate(sched, thresholds, j, rng):
    """P(threshold j certified) when the true p_A is exactly that threshold (a false certification)."""
    tables = sq.decision_tables(sched, thresholds)
    _, certified = sq.run_rule(_counts(rng, sched.looks, tables.thresholds[j]), tables)
    return certified[:, j].mean()


def _limit(alpha, trials=TRIALS):
    """alpha plus three binomial standard errors: a valid rule stays below it."""
    return alpha + 3 * math.sqrt(alpha * (1 - alpha) / trials)


CASES = [  # (cap, alpha, thresholds, settings)
    (500, 0.01, [0.8, 0.95], SETTINGS),
    (2_000, 0.01, [0.6, 0.9, 0.99], sq.SequentialSettings(first=50, growth=1.5)),
    (10_000, 0.01, [0.7, 0.97], sq.SequentialSettings(first=100, growth=3.0, final_share=0.2)),
    (10_000, 0.001, [0.9], sq.SequentialSettings(first=10, growth=1.25)),
]


@pytest.mark.parametrize("cap,alpha,thresholds,settings", CASES)
def test_false_certification_rate_at_the_boundary_is_at_most_alpha(cap, alpha, thresholds, settings):
    """True p_A exactly on each decision boundary (1/2 included), 1e5 streams: certified <= alpha + 3 SE.

    The looks are the rule's (``first``, ``growth``); the batch size the samples are drawn in does not
    enter the rule (it only decides at its looks), so the schedules here play the role of batch sizes.
    """
    sched = sq.schedule(settings, cap, alpha)
    assert sum(sched.alphas) <= alpha * (1 + 1e-12) and sched.looks[-1] == cap
    rng = np.random.default_rng(cap)
    for j in range(len(thresholds) + 1):
        rate = _false_rate(sched, thresholds, j, rng)
        print(f"cap {cap}, looks {len(sched.looks)}, tau {([0.5] + thresholds)[j]}: false certifications {rate:.4f}"
              f" (alpha {alpha})")
        assert rate <= _limit(alpha), f"threshold {j}: {rate} > {alpha}"


@pytest.mark.parametrize("batch", [25, 100, 250])
@pytest.mark.parametrize("tau", [0.5, 0.9])
def test_the_same_test_catches_clopper_pearson_after_every_batch(batch, tau):
    """The naive rule: Clopper-Pearson at the full alpha after every batch, stop at the first success.
    The test above must fail on it (optional stopping inflates the false-certification rate)."""
    cap, alpha = 2_500, 0.01
    looks = tuple(range(batch, cap + 1, batch))
    naive = sq.Schedule(looks, (alpha,) * len(looks), (alpha,) * len(looks))
    rate = _false_rate(naive, [tau], 1 if tau > 0.5 else 0, np.random.default_rng(batch))
    valid = _false_rate(sq.schedule(SETTINGS, cap, alpha), [tau], 1 if tau > 0.5 else 0, np.random.default_rng(batch))
    print(f"batch {batch}, tau {tau}: false certifications naive {rate:.4f}, cp-union {valid:.4f} (alpha {alpha})")
    assert valid <= _limit(alpha) < rate, f"naive {rate}, cp-union {valid}"


@pytest.mark.parametrize("p", [0.3, 0.75, 0.95, 0.999, 1.0])
def test_far_from_the_boundaries_it_stops_much_earlier(p):
    """E[samples] / n at the paper's cap for p_A away from every threshold (and the decisions agree with
    fixed-n Clopper-Pearson); the ratio is printed (pytest -s)."""
    cap, alpha, thresholds = 100_000, 0.001, [0.6, 0.85, 0.98]
    sched = sq.schedule(SETTINGS, cap, alpha)
    tables = sq.decision_tables(sched, thresholds)
    stop, certified = sq.run_rule(_counts(np.random.default_rng(7), sched.looks, p, 20_000), tables)
    used = np.asarray(sched.looks)[stop].mean()
    print(f"p_A={p}: mean samples {used:.0f} of {cap} ({cap / used:.0f}x fewer)")
    assert cap / used >= 10
    fixed = np.array([binom.sf(c - 1, cap, p) for c in sq.decision_tables(sq.Schedule((cap,), (alpha,), (alpha,)),
                                                                           thresholds).certify[0]])
    assert np.abs(certified.mean(0) - fixed).max() < 0.01


@pytest.mark.parametrize("cap", [500, 10_000])
def test_power_close_to_fixed_n_near_the_boundary(cap):
    """Averaged over p_A spread around a threshold, sequential certifies within 2 points of fixed n."""
    alpha, tau = 0.001, 0.9
    sched = sq.schedule(SETTINGS, cap, alpha)
    tables = sq.decision_tables(sched, [tau])
    crit = sq.decision_tables(sq.Schedule((cap,), (alpha,), (alpha,)), [tau]).certify[0, 1]
    rng = np.random.default_rng(cap)
    ps = np.linspace(tau, 1.0, 21)
    seq = [sq.run_rule(_counts(rng, sched.looks, p, 4_000), tables)[1][:, 1].mean() for p in ps]
    fixed = binom.sf(crit - 1, cap, ps)
    print(f"cap {cap}: certified fixed {fixed.mean():.3f}, sequential {np.mean(seq):.3f}")
    assert np.mean(seq) >= fixed.mean() - 0.02


def test_tables_agree_with_the_scalar_bounds():
    sched = sq.schedule(SETTINGS, 700, 0.001)
    tables = sq.decision_tables(sched, [0.7, 0.93, 1.0, 1.5])
    for k, t in enumerate(sched.looks):
        for j, tau in enumerate(tables.thresholds):
            c, f = int(tables.certify[k, j]), int(tables.futile[k, j])
            if c <= t:
                assert lower_confidence_bound(c, t, sched.alphas[k]) > tau
            if 0 <= c - 1 <= t:
                assert not lower_confidence_bound(c - 1, t, sched.alphas[k]) > tau
            if f >= 0:
                assert upper_confidence_bound(f, t, sched.betas[k]) < tau
            if f + 1 <= t:
                assert not upper_confidence_bound(f + 1, t, sched.betas[k]) < tau
    # thresholds >= 1 can never be certified: decided (unreachable) at the first look
    assert (tables.certify[:, -2:] > np.asarray(sched.looks)[:, None]).all()
    assert sq.run_rule(np.array([[0]]), sq.decision_tables(sched, [1.0]))[0][0] == 0


def _stream(p, seed, num_classes=3):
    rng = np.random.default_rng(seed)
    probs = [p] + [(1 - p) / (num_classes - 1)] * (num_classes - 1)
    return lambda k: np.bincount(rng.choice(num_classes, size=k, p=probs), minlength=num_classes)


@pytest.mark.parametrize("p", [0.55, 0.9, 0.99, 1.0])
def test_runtime_estimate_stops_where_the_rule_does_and_replays(p):
    thresholds = [0.8, 0.95]
    est = sq.estimate(_stream(p, 1), 0, SETTINGS, 1_000, 0.001, thresholds)
    sched = sq.plan(SETTINGS, 1_000, 0.001, thresholds).schedule
    k = len(est.counts_a)
    assert est.n == sched.looks[k - 1] and est.counts[0] == est.counts_a[-1]
    assert est.p_lower == sq.lower_bound(est.counts_a, sched) == max(
        lower_confidence_bound(c, t, a) for c, t, a in zip(est.counts_a, sched.looks, sched.alphas))
    p_rec, problems = sq.recompute(est.record, alpha=0.001)
    assert problems == [] and p_rec == est.p_lower
    full = est.counts_a + [est.counts_a[-1] + (t - sched.looks[k - 1]) for t in sched.looks[k:]]
    stop, _ = sq.run_rule(np.asarray(full), sq.decision_tables(sched, thresholds))
    assert stop == k - 1
    assert sum(sched.alphas) <= 0.001 * (1 + 1e-12) and sched.alphas[-1] >= SETTINGS.final_share * 0.001


def test_replay_rejects_edited_records():
    est = sq.estimate(_stream(1.0, 2), 0, SETTINGS, 1_000, 0.001, [0.9])
    assert sq.recompute(est.record, 0.001)[1] == []
    edits = {
        "alphas": lambda r: r.update(alphas=[a * 2 for a in r["alphas"]]),
        "final_share": lambda r: r.update(final_share=0.9),
        "impossible count": lambda r: r["counts_a"].__setitem__(-1, r["counts_a"][-1] + 10_000),
        "stopped late": lambda r: r["counts_a"].append(r["counts_a"][-1] + r["looks"][len(r["counts_a"])]
                                                        - r["looks"][len(r["counts_a"]) - 1]),
        "stopped early": lambda r: r.update(thresholds=[0.5, 0.9, 0.99]),
        "other alpha": lambda r: r.update(alpha=0.01),
    }
    for name, edit in edits.items():
        rec = {k: (list(v) if isinstance(v, list) else v) for k, v in est.record.items()}
        edit(rec)
        assert sq.recompute(rec, 0.001)[1], name


def test_predict_pvalue_is_scipys_binomtest():
    for m in [*range(0, 40), 99, 250]:
        for k in range(m + 1):
            expect = binomtest(k, m, 0.5).pvalue if m else 1.0
            assert sq.predict_pvalue(k, m - k) == pytest.approx(expect, rel=1e-9, abs=1e-300)


def test_predict_pvalue_is_binom_sf_bit_for_bit():
    """The shortcut through ``binom._sf`` gives the p-values of ``binom.sf`` exactly (PREDICT's decisions)."""
    n_a, n_b = np.meshgrid(np.arange(0, 260), np.arange(0, 260), indexing="ij")
    m, top = n_a + n_b, np.maximum(n_a, n_b)
    ref = np.minimum(1.0, 2 * binom.sf(top - 1, np.maximum(m, 1), 0.5))
    ref = np.where((m == 0) | (2 * top == m), 1.0, ref)
    assert np.array_equal(sq.predict_pvalue(n_a, n_b), ref)


def test_predict_look_tests_every_later_look_as_one_test_per_look_would():
    """``predict_look`` judges all later looks in one call: the same accept / hopeless as testing them one by
    one, for count arrays and for the scalar counts the runtime passes."""
    rng = np.random.default_rng(2)
    for cap, alpha in ((1, 0.01), (100, 0.001), (1_000, 0.2), (100_000, 1e-9)):
        sched = sq.schedule(SETTINGS, cap, alpha)
        for k, t in enumerate(sched.looks):
            n = rng.integers(0, t + 1, 300)
            n_a = np.maximum(n, t - n)
            for a, b in ((n_a, t - n_a), (np.int64(n_a[0]), np.int64(t - n_a[0]))):
                hopeless = np.ones(np.shape(a), dtype=bool)
                for m in range(k + 1, len(sched.looks)):
                    hopeless &= ~(sq.predict_pvalue(a + sched.looks[m] - t, b) <= sched.alphas[m])
                accept, got = sq.predict_look(a, b, k, sched)
                assert np.shape(got) == np.shape(a) and np.array_equal(got, hopeless)
                assert np.array_equal(accept, (a > b) & (sq.predict_pvalue(a, b) <= sched.alphas[k]))


def _predict_rate(sched, rng, trials=TRIALS):
    """Two classes at exactly 1/2: P(PREDICT returns a class) (every answer is a false claim), mean samples."""
    s = _counts(rng, sched.looks, 0.5, trials)
    accepted, done, used = np.zeros(trials, bool), np.zeros(trials, bool), np.zeros(trials)
    for k, t in enumerate(sched.looks):
        n_a = np.maximum(s[:, k], t - s[:, k])
        accept, hopeless = sq.predict_look(n_a, t - n_a, k, sched)
        new = ~done
        accepted |= accept & new
        used[(accept | hopeless) & new] = t
        done |= accept | hopeless
    return accepted.mean(), used.mean()


@pytest.mark.parametrize("cap", [100, 1_000])
def test_sequential_predict_is_valid_and_the_naive_one_is_not(cap):
    alpha = 0.01
    rate, _ = _predict_rate(sq.schedule(SETTINGS, cap, alpha), np.random.default_rng(cap))
    looks = tuple(range(cap // 10, cap + 1, cap // 10))
    naive, _ = _predict_rate(sq.Schedule(looks, (alpha,) * 10, (alpha,) * 10), np.random.default_rng(cap))
    print(f"PREDICT at a tie, cap {cap}: answers cp-union {rate:.4f}, binomial test after every batch {naive:.4f}")
    assert rate <= _limit(alpha) < naive


def test_sequential_predict_saves_samples_on_clear_inputs():
    label, counts, record = sq.predict(_stream(0.9, 3, 10), SETTINGS, 10_000, 0.001)
    assert label == 0 and counts.sum() == record["n"] <= 128
    label, counts, _ = sq.predict(_stream(0.34, 4, 3), SETTINGS, 2_000, 0.001)  # a near tie: abstains
    assert label is None


def test_settings_validation():
    from benchmark.errors import BenchError

    for bad in ({"first": 0}, {"growth": 1.0}, {"final_share": 1.0}, {"beta": 0.0}, {"match_fixed": "yes"}, {"firts": 3}):
        with pytest.raises(BenchError):
            sq.SequentialSettings.from_dict(bad)
    assert sq.schedule(SETTINGS, 10, 0.001) == sq.Schedule((10,), (0.001,), (0.001,))
    assert sq.centre_out_order(5) == [2, 3, 1, 4, 0]


def _chain_fwer(coverage_of, passes, false, trials):
    """P(the claimed coverage includes a false endpoint) for per-trial pass patterns over endpoint offsets."""
    bad = 0
    for n in range(trials):
        m = coverage_of(passes[n])
        bad += bool(false[:m + 1].any())
    return bad / trials


def test_slice_walk_by_fixed_sequence_is_valid_without_a_split():
    """Slices (baselines.tss.slicing.chain_coverage): every endpoint at the full alpha; the endpoints at
    offsets +3..+6 lie exactly on their boundary, all others are certifiable. The claimed coverage
    includes a false endpoint with probability <= alpha. The same test fails for a walk that skips failed
    endpoints (non-nested claims) and for per-endpoint Clopper-Pearson after every batch."""
    from baselines.tss.slicing import chain_coverage

    alpha, cap, tau, half, trials = 0.01, 500, 0.8, 6, 40_000
    offset = np.arange(2 * half + 1) - half
    p_true = np.where(offset >= 3, tau, 1.0)
    false_by_offset = np.arange(half + 1) >= 3

    def passes(sched):
        tables = sq.decision_tables(sched, [tau])
        rng = np.random.default_rng(11)
        return np.stack([sq.run_rule(_counts(rng, sched.looks, p, trials), tables)[1][:, 1] for p in p_true], 1)

    def walked(row):  # offsets covered (coverage (m + 1/2) w), through the product's walk
        if not row[half]:
            return -1
        cov = chain_coverage(len(row), 1.0, float(half), lambda i: bool(row[i]))
        return int(cov - 0.5) if cov < half else half

    def skipping(row):  # the bug: the furthest passed offset on each side, ignoring failures in between
        ext = [max((k for k in range(1, half + 1) if row[half + s * k]), default=0) for s in (1, -1)]
        return min(ext) if row[half] else -1

    valid = passes(sq.schedule(SETTINGS, cap, alpha))
    looks = tuple(range(25, cap + 1, 25))
    naive = passes(sq.Schedule(looks, (alpha,) * len(looks), (alpha,) * len(looks)))
    rates = [_chain_fwer(walked, valid, false_by_offset, trials), _chain_fwer(skipping, valid, false_by_offset, trials),
             _chain_fwer(walked, naive, false_by_offset, trials)]
    print(f"slice walk FWER at alpha={alpha}: valid {rates[0]:.4f}, skipping {rates[1]:.4f}, naive {rates[2]:.4f}")
    assert rates[0] <= _limit(alpha, trials) < min(rates[1:])


@pytest.mark.parametrize("cap,alpha", [(500, 0.001), (500, 0.0005), (100, 0.001), (60, 0.001)])
def test_matched_cap_certifies_every_threshold_from_the_fixed_rules_count(cap, alpha):
    """match_fixed: at the cap, a threshold fixed-n Clopper-Pearson certifies from count c is certified by the
    sequential rule from c too (closed form: the Beta CDF), for a dense grid of thresholds; with the plain
    final_share some thresholds near the fixed rule's best bound alpha^(1/n) are lost (so the test can fail)."""
    taus = np.unique(np.concatenate([np.linspace(0.5, 0.999, 400), alpha ** (1 / cap) - np.logspace(-7, -2, 30)]))
    lost_plain = 0
    bounds = [lower_confidence_bound(c, cap, alpha) for c in range(cap + 1)]  # nondecreasing in c
    for tau in taus:
        c_fixed = next((c for c, lb in enumerate(bounds) if lb > tau), None)
        if c_fixed is None:
            continue
        matched = sq.plan(SETTINGS, cap, alpha, [tau])
        j = int(np.searchsorted(matched.thresholds, tau))
        assert matched.certify[-1, j] <= c_fixed, (tau, c_fixed)
        plain = sq.decision_tables(sq.schedule(sq.SequentialSettings(match_fixed=False), cap, alpha), [tau])
        lost_plain += int(plain.certify[-1, int(np.searchsorted(plain.thresholds, tau))] > c_fixed)
    assert lost_plain > 0


@pytest.mark.parametrize("tau", [0.9849, 0.93, 0.7])
def test_matched_schedule_is_valid_at_the_boundary(tau):
    """The threshold-dependent schedule is still fixed before sampling: false certifications at p = tau stay
    <= alpha (here alpha = 0.0005 at cap 500, SPT's share; tau = 0.9849 needs a cap share near 1)."""
    alpha = 0.0005
    tables = sq.plan(SETTINGS, 500, alpha, [tau])
    j = int(np.searchsorted(tables.thresholds, tau))
    rng = np.random.default_rng(int(tau * 1e4))
    _, certified = sq.run_rule(_counts(rng, tables.schedule.looks, tau), tables)
    rate = certified[:, j].mean()
    print(f"matched schedule, tau={tau}: cap share {tables.schedule.alphas[-1] / alpha:.4f}, false rate {rate:.5f}")
    assert rate <= _limit(alpha)


def test_records_without_match_fixed_replay_as_unmatched():
    """Entries written before match_fixed existed keep replaying (their schedule used final_share only)."""
    old = sq.SequentialSettings(match_fixed=False)
    est = sq.estimate(_stream(0.97, 5), 0, old, 500, 0.001, [0.9])
    rec = {k: v for k, v in est.record.items() if k != "match_fixed"}
    assert sq.recompute(rec, 0.001)[1] == []
    assert sq.recompute({**rec, "match_fixed": True}, 0.001)[1]  # claiming the matched schedule is caught


def test_compact_record_drops_only_what_the_schedule_gives_and_expand_restores_it():
    est = sq.estimate(_stream(0.97, 3), 0, SETTINGS, 1_000, 0.001, [0.8, 0.95])
    small = sq.compact_record(est.record)
    assert set(est.record) - set(small) == set(sq.DERIVED_KEYS)
    full = sq.expand_record(json.loads(json.dumps(small)))  # as stored and read back
    assert full == est.record and json.dumps(full, sort_keys=True) == json.dumps(est.record, sort_keys=True)
    assert sq.recompute(full, 0.001) == sq.recompute(est.record, 0.001)
    # a record whose levels are not its schedule's is stored as it is, so the replay still reports it
    edited = {**est.record, "alphas": [a * 2 for a in est.record["alphas"]]}
    assert sq.compact_record(edited) == edited and sq.expand_record(edited) == edited
    assert sq.recompute(sq.expand_record(sq.compact_record(edited)), 0.001)[1]
    # a record without the fields its schedule needs is left alone both ways
    broken = {k: v for k, v in small.items() if k != "cap"}
    assert sq.expand_record(broken) == broken and sq.compact_record(broken) == broken


def test_matched_shares_equal_matched_share_bit_for_bit():
    """The batch over many keys gives each key's ``matched_share`` exactly: keys without thresholds, with
    thresholds no count can certify, caps from 1 to 100,000 and tiny levels, mixed in one call."""
    rng = np.random.default_rng(3)
    keys = [(500, 0.001, ()), (1, 0.5, (0.4,)), (100_000, 1e-9, (0.999999,)), (32, 1e-3, (0.9999, 0.2))]
    for _ in range(300):
        cap = int(rng.choice([2, 16, 100, 1_000, 10_000, 100_000]))
        alpha = float(rng.choice([0.5, 1e-3, 1e-3 / 41, 1e-9]))
        keys.append((cap, alpha, tuple(float(t) for t in rng.uniform(0, 1, int(rng.integers(0, 6))))))
    batch = sq.matched_shares(keys)
    assert [float.hex(b) for b in batch] == [float.hex(sq.matched_share(*key)) for key in keys]
    assert len({b for b in batch}) > 100  # the keys really differ


def test_expand_records_equals_expand_record_on_every_kind_of_record():
    """In-place batch expansion = ``expand_record`` one by one, key order included: compact records
    (matched, unmatched, written before match_fixed existed, the same schedule twice), full ones, and
    ones it must leave alone (a missing cap, a cap of 0, alpha outside (0, 1), edited levels)."""
    records = []
    for i, (settings, thresholds) in enumerate([(SETTINGS, [0.8, 0.95]), (SETTINGS, [0.8, 0.95]),
                                               (SETTINGS, [0.99999]), (SETTINGS, []),
                                               (sq.SequentialSettings(match_fixed=False), [0.7]),
                                               (sq.SequentialSettings(first=8, growth=3.0, beta=0.01), [0.6])]):
        est = sq.estimate(_stream(0.97, i), 0, settings, 2_000, 0.001, thresholds)
        records += [sq.compact_record(est.record), est.record]
    legacy = {k: v for k, v in sq.compact_record(sq.estimate(_stream(0.9, 9), 0, sq.SequentialSettings(
        match_fixed=False), 500, 0.001, [0.5]).record).items() if k != "match_fixed"}
    small = records[0]
    records += [legacy, {k: v for k, v in small.items() if k != "cap"}, {**small, "cap": 0}, {**small, "alpha": 1.5},
                {**records[1], "alphas": [a * 2 for a in records[1]["alphas"]]}]
    one_by_one = [sq.expand_record(json.loads(json.dumps(r))) for r in records]
    batch = [json.loads(json.dumps(r)) for r in records]
    sq.expand_records(batch)
    assert [json.dumps(r) for r in batch] == [json.dumps(r) for r in one_by_one]
    assert all(set(sq.DERIVED_KEYS) <= set(r) for r in batch[:13])  # the compact ones were expanded


def _tables_alone(sched, thresholds):
    """Reference: one schedule's tables on its own [looks, thresholds] grid (the formulation before batching)."""
    taus = np.unique(np.asarray([0.5, *thresholds], dtype=np.float64))
    t = np.asarray(sched.looks, dtype=np.int64)[:, None] + np.zeros(len(taus), dtype=np.int64)
    a = np.asarray(sched.alphas)[:, None] + np.zeros(len(taus))
    b = np.asarray(sched.betas)[:, None] + np.zeros(len(taus))
    tau = taus[None, :] + np.zeros(t.shape)
    cert = sq._first_true(lambda s: sq._cp_lower(s, t, a) > tau, t)
    futile = sq._first_true(lambda s: sq._cp_upper(s, t, b) >= tau, t) - 1
    reach = np.minimum.accumulate((cert - t)[::-1], axis=0)[::-1] + t
    return taus, cert, futile, reach


def test_tables_built_in_one_batch_equal_each_schedules_own_and_priming_feeds_the_replay():
    """``_tables_batch`` over schedules of different lengths, levels and thresholds gives each exactly the tables
    it gets alone (by plain bisection); ``prime_tables`` hands them to ``decision_tables`` and ``recompute``."""
    rng = np.random.default_rng(5)
    items = []
    for _ in range(60):
        settings = sq.SequentialSettings(first=int(rng.integers(1, 40)), growth=float(rng.uniform(1.3, 4)),
                                         beta=float(rng.choice([0.01, 0.2])) if rng.random() < 0.3 else None)
        thresholds = tuple(float(x) for x in rng.uniform(0.3, 0.99999, int(rng.integers(0, 4))))
        cap, alpha = int(rng.choice([1, 7, 100, 2_000, 100_000])), float(rng.choice([1e-3, 1e-3 / 41, 0.2]))
        items.append((sq.schedule(settings, cap, alpha, thresholds), thresholds))
    for (sched, thresholds), got in zip(items, sq._tables_batch(items)):
        want = _tables_alone(sched, thresholds)
        for x, y in zip((got.thresholds, got.certify, got.futile, got.reach), want):
            assert x.dtype == y.dtype and np.array_equal(x, y)
    records = [sq.estimate(_stream(0.97, i), 0, SETTINGS, 2_000, 0.001, [0.6 + 0.05 * i]).record for i in range(6)]
    alone = [sq.recompute(r, 0.001) for r in records]
    sq._tables.cache_clear()
    sq.prime_tables(records + [{"rule": sq.RULE, "counts_a": [1]}])  # an incomplete record is left to recompute
    assert len(sq._PRIMED) == 6
    assert [sq.recompute(r, 0.001) for r in records] == alone and not sq._PRIMED  # each primed table was used


def test_a_guess_never_changes_first_true_and_the_binomial_guess_gives_bisections_critical_counts():
    """``_first_true`` with a guess returns what bisection returns, however wrong the guess (checked against
    bisection alone); ``critical_count``'s bdtrik guess is exact in the tails and at tiny levels too, and the
    futility column's guess gives bisection's answer (nearly always at the first check)."""
    rng = np.random.default_rng(0)
    hits = total = 0
    for n in (1, 5, 32, 500, 10_000, 100_000):
        for alpha in (0.5, 1e-3, 1e-3 / 41, 1e-9):
            tau = np.concatenate([rng.uniform(0, 1, 40), 1 - 10 ** rng.uniform(-9, -1, 40),
                                  10 ** rng.uniform(-9, -1, 10), [0.0, 0.5, 1.0, 1 - 1e-16]])
            t = np.full(tau.shape, n, dtype=np.int64)

            def pred(s, t=t, tau=tau, alpha=alpha):
                return sq._cp_lower(s, t, alpha) > tau

            plain = sq._first_true(pred, t)
            assert np.array_equal(sq.critical_count(n, alpha, tau), plain)
            for off in (-n - 3, -2, -1, 1, 3, n + 3):
                assert np.array_equal(sq._first_true(pred, t, plain + off), plain)
            assert np.array_equal(sq._first_true(pred, t, rng.integers(-5, n + 7, len(t))), plain)

            def futile(s, t=t, tau=tau, beta=alpha):
                return sq._cp_upper(s, t, beta) >= tau

            plain = sq._first_true(futile, t)
            guess = sq._futile_guess(t, alpha, tau)
            assert np.array_equal(sq._first_true(futile, t, guess), plain)
            hits += int((guess == plain).sum())
            total += len(t)
    assert hits >= 0.97 * total  # the futility guess is right nearly everywhere (it is only a shortcut)
