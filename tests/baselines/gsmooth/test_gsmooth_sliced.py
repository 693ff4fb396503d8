"""GSmooth's sliced certificate (baselines/gsmooth/sliced.py): the per-slice rule in closed form, the chain's
family-wise error on a known-probability classifier, the audit's recomputation, and soundness on the real
transformation."""
import json
import math
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch
from scipy.stats import norm

from attacks import build_attack
from baselines.gsmooth.certificates import FLOAT_SLACK, SupBound
from baselines.gsmooth.sliced import SlicedCertificates
from benchmark.audit.statistics import Protocol, certificate_problems
from benchmark.certify import code_noise, slice_rule
from benchmark.certify.smoothing import SmoothingParams
from benchmark.certify.threshold_rule import margin
from benchmark.datasets import get_dataset
from benchmark.errors import BenchError
from benchmark.transformations.pixelate import pixelate_intervals

from tests.gsmooth_zoo import DEFAULT_SMOOTHING, prepared_gsmooth
from tests.soundness import Verdict, judge

#: a small code layer's lattice record (the rule only reads its sizes and scales)
REC = code_noise.record(0.5, (2, 8, 8), 1, 2.0)


# ------------------------------------------------------------------ the per-slice rule in closed form
@pytest.mark.parametrize("seed", range(20))
def test_the_chain_never_covers_a_parameter_where_the_ideal_smoothed_classifier_flips(seed):
    """A code path z(xi) = xi v (Sigma^-1 units, |v| = s per unit of xi) heading straight at a half-space
    base classifier: the class's probability under the code noise is Phi(a - s xi), 1/2 at xi* = a / s. Each
    endpoint gets its exact probability as p_A lower and its exact half-slice shift s w / 2 as M_i. Every
    parameter of the certified coverage keeps probability above 1/2 + eps (what the lattice rule needs), and the
    coverage reaches xi* up to the price of the rule (a slice, and the lattice's cost over s)."""
    gen = torch.Generator().manual_seed(seed)
    a, s = 1.0 + 3 * float(torch.rand(1, generator=gen)), 0.05 + float(torch.rand(1, generator=gen))
    limit, slices = 2 * a / s, int(torch.randint(4, 60, (1,), generator=gen))
    one_sided = bool(seed % 2)
    first, width, centre = slice_rule.layout(limit, slices if one_sided else 2 * slices, one_sided)
    n = round((limit - first) / width) + 1
    bound = s * width / 2  # the exact sup of the shift over a half-slice

    def p_at(xi: float) -> float:
        return float(norm.cdf(a - s * abs(xi)))

    ok = {i: slice_rule.code_endpoint_certified(p_at(first + i * width), bound, REC) for i in range(n)}
    cov = slice_rule.coverage(ok, centre, width, limit, one_sided)
    eps = code_noise.table_error(REC)
    for xi in torch.linspace(0, cov, 201).tolist():
        assert p_at(xi) > 0.5 + eps
    cost = code_noise.required_margin(bound, REC) - bound  # what the rule adds to the exact shift
    assert cov >= min(a / s, limit) - 1.5 * width - cost / s
    # the threshold form the sequential rule stops on is the same decision
    for i in range(n):
        p = p_at(first + i * width)
        assert ok[i] == (p > 0.5 and p > slice_rule.code_endpoint_threshold(bound, REC))


def test_an_endpoint_that_pays_less_than_its_half_slice_would_certify_a_flip():
    """The rule is tight enough that the bound matters: an endpoint at the threshold of a bound one tenth of the
    true half-slice shift certifies a neighbourhood whose far end has probability below 1/2."""
    s, width = 1.0, 1.0
    true_shift = s * width / 2
    need = code_noise.required_margin(true_shift / 10, REC)
    p_end = float(norm.cdf(need + 1e-6))
    assert slice_rule.code_endpoint_certified(p_end, true_shift / 10, REC)
    assert norm.cdf(margin(p_end) - true_shift) < 0.5
    assert not slice_rule.code_endpoint_certified(p_end, true_shift, REC)


def test_one_sided_layout_walk_and_coverage():
    first, width, centre = slice_rule.layout(2.0, 8, one_sided=True)
    assert (first, width, centre) == (0.0, 0.25, 0)
    assert slice_rule.walk_order(5, one_sided=True) == [0, 1, 2, 3, 4]
    assert slice_rule.walk_order(5) == [2, 3, 1, 4, 0]
    assert slice_rule.coverage({0: True, 1: True, 2: False}, 0, 0.25, 2.0, one_sided=True) == 0.375
    assert slice_rule.coverage({0: True, 1: True, 2: False}, 0, 0.25, 2.0) == 0.125  # two-sided reading
    assert slice_rule.layout(-1.0, 8) == (0.0, 0.0, 0) and slice_rule.layout(1.0, 0) == (0.0, 0.0, 0)
    # the walk stops at the first failure and judges nothing after it
    seen = []

    def group_ok(idx):
        seen.extend(idx)
        return [i != 3 for i in idx][:[i != 3 for i in idx].index(False) + 1] if 3 in idx else [True] * len(idx)

    assert slice_rule.walk([0, 1, 2, 3, 4, 5], group_ok, 2) == {0: True, 1: True, 2: True, 3: False}
    assert seen == [1, 2, 3, 4]


# ------------------------------------------------------------------ a known-probability classifier
class KnownProbability(SlicedCertificates):
    """The sliced certificate of the defense on a base classifier whose class-0 probability at each parameter
    is ``prob(theta)`` (the code of endpoint theta is theta itself), every endpoint's bound ``bound``."""

    def __init__(self, smoothing: SmoothingParams, prob, bound: float, slices: int, one_sided: bool):
        self.t = SimpleNamespace(one_sided=one_sided, name="known")
        self.smoothing, self.num_classes, self.device = smoothing, 2, "cpu"
        self.config = {"slices": slices, "subslices": 2, "refinements": 0, "report_estimated": False}
        self.code_record, self.sigma1, self.sigma2 = REC, 1.0, 0.5
        self.surrogate = SimpleNamespace(F2=lambda x: x)
        self.prob, self.bound = prob, bound

    def _labels(self, theta: float, k: int, gen: torch.Generator) -> torch.Tensor:
        return (torch.rand(k, generator=gen) >= self.prob(theta)).long()

    def _sampler(self, z0):
        return lambda k, gen: self._labels(float(z0.flatten()[0]), k, gen)

    def _multi_sampler(self, z):
        return lambda pieces, gen: torch.cat([self._labels(float(z[i]), k, gen) for i, k in pieces])

    def _codes(self, x, thetas):
        z = torch.tensor(thetas, dtype=torch.float64)[:, None]
        return z, z

    def _endpoint_bounds(self, x, idx, refs, spans, threshold):
        return {i: self.bound for i in idx}

    def mstars(self, z0, budgets):
        return {b: SupBound(1e6, 1e6, 0.0, 0.0, 1, False) for b in budgets}

    def reach(self, b: float) -> float:
        return b

    def run(self, budgets: list[float], gen: torch.Generator):
        return self.certify_sliced(torch.zeros(1, 1, dtype=torch.float64), budgets, gen)


def _smoothing(rule: str, alpha: float = 0.001, n: int = 500) -> SmoothingParams:
    return SmoothingParams(n0=20, n=n, alpha=alpha, batch_size=256, rule=rule)


@pytest.mark.parametrize("rule", ["fixed", "sequential"])
@pytest.mark.parametrize("one_sided", [True, False])
def test_the_chain_falsely_certifies_at_rate_at_most_alpha(rule, one_sided):
    """Family-wise error of the slice chain: the centre is truly certified (p = 0.999) and every other endpoint
    sits exactly at its threshold Phi(required_margin(M)) (a false hypothesis, the worst case), so any coverage
    beyond the centre's half-slice is a false claim. Over 300 runs at alpha = 0.1 it happens at most at rate
    alpha (plus 3 standard errors), with no split of alpha over the endpoints; and endpoints 0.15 above their
    threshold are covered most of the time (the check is not vacuous)."""
    alpha, trials, bound = 0.1, 300, 0.4
    tau = slice_rule.code_endpoint_threshold(bound, REC)
    budgets = [0.0, 1.0, 2.0]
    centre_only = slice_rule.layout(2.0, 8, one_sided)[1] / 2  # the centre's half-slice
    false = 0
    gen = torch.Generator().manual_seed(5)
    for _ in range(trials):
        d = KnownProbability(_smoothing(rule, alpha, 200), lambda th: 0.999 if th == 0 else tau, bound, 8,
                             one_sided)
        sound, _ = d.run(budgets, gen)
        false += sound.stats["coverage"] > centre_only + 1e-12
    assert false / trials <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / trials), false
    good = sum(KnownProbability(_smoothing(rule, alpha, 200), lambda th: min(0.999, tau + 0.15), bound, 8,
                                one_sided).run(budgets, gen)[0].certified[2.0] for _ in range(20))
    assert good >= 15


# ------------------------------------------------------------------ the audit
def _records(rule: str):
    d = KnownProbability(_smoothing(rule), lambda th: 0.999 if abs(th) < 1.3 else 0.7, 0.8, 8, False)
    sound, paper = d.run([0.0, 1.0, 2.0], torch.Generator().manual_seed(3))
    return [json.loads(json.dumps(c.to_json())) for c in (sound, paper)], Protocol.of(d.smoothing)


@pytest.mark.parametrize("rule", ["fixed", "sequential"])
def test_the_audit_recomputes_an_honest_sliced_record(rule):
    (sound, paper), protocol = _records(rule)
    assert sound["stats"]["alpha_split"] == "fixed-sequence" and len(sound["stats"]["endpoints"]) > 3
    assert not sound["certified"]["2.0"] and sound["certified"]["1.0"]  # the chain stops inside the range
    assert certificate_problems(sound, [0.0, 1.0, 2.0], 2, protocol) == []
    assert certificate_problems(paper, [0.0, 1.0, 2.0], 2, protocol) == []


def _tampered(cert: dict, how: str) -> dict:
    c = json.loads(json.dumps(cert))
    s, ends = c["stats"], c["stats"]["endpoints"]
    if how == "count":
        ends[1]["count"] += 1
    elif how == "bound":  # a smaller bound, the recorded required margin left as it was
        ends[-1]["bound"] /= 4
    elif how == "bound and required":  # no bound, with its required margin: the walk no longer stops there
        ends[-1]["bound"] = 0.0
        ends[-1]["required"] = code_noise.required_margin(ends[-1]["bound"], s["code_noise"])
    elif how == "flags":
        c["certified"]["2.0"] = True
    elif how == "coverage":
        s["coverage"] = c["radius"] = 2.0
    elif how == "dropped":  # the failing endpoint removed: a walk that never stopped
        ends.pop()
    elif how == "bonferroni":
        s["alpha_split"] = "bonferroni"
    elif how == "alpha":
        s["alpha_slice"] = 2 * s["alpha"]
    elif how == "one_sided":
        s["one_sided"] = True
    return c


@pytest.mark.parametrize("how", ["count", "bound", "bound and required", "flags", "coverage", "dropped",
                                 "bonferroni", "alpha", "one_sided"])
def test_the_audit_rejects_a_tampered_sliced_record(how):
    (sound, _), protocol = _records("sequential")
    assert certificate_problems(_tampered(sound, how), [0.0, 1.0, 2.0], 2, protocol)


# ------------------------------------------------------------------ the draw budget (cost control)
def _budgeted(max_draws: int | None):
    smoothing = SmoothingParams(n0=20, n=500, alpha=0.001, batch_size=32, rule="sequential")  # groups of 2
    d = KnownProbability(smoothing, lambda th: 0.999, 0.4, 16, False)
    if max_draws is not None:
        d.config["max_draws"] = max_draws
    sound, _ = d.run([0.0, 0.5, 1.0, 2.0], torch.Generator().manual_seed(11))
    return json.loads(json.dumps(sound.to_json())), Protocol.of(d.smoothing)


def test_a_draw_budget_stops_the_walk_on_a_prefix_of_the_unlimited_walk():
    """With ``max_draws`` the walk stops once the endpoints' draws reach it: on the same draws its endpoints are
    a prefix of the unlimited walk's (so its claims are a subset of that walk's, the chain's error bound
    unchanged), its coverage is smaller, the record says why it stopped, and the audit recomputes it."""
    full, protocol = _budgeted(None)
    ends = full["stats"]["endpoints"]
    assert full["stats"]["coverage"] == 2.0 and len(ends) == 17 and "walk_stop" not in full["stats"]
    budget = sum(e["n"] for e in ends[:5])
    cut, _ = _budgeted(budget)
    kept = cut["stats"]["endpoints"]
    assert 5 <= len(kept) < len(ends) and kept == ends[:len(kept)]
    assert sum(e["n"] for e in kept) >= budget > sum(e["n"] for e in kept[:-2])  # stopped at the group after it
    assert (cut["stats"]["walk_stop"], cut["stats"]["max_draws"]) == ("max_draws", budget)
    assert 0 < cut["stats"]["coverage"] < full["stats"]["coverage"] and not cut["certified"]["2.0"]
    assert certificate_problems(cut, [0.0, 0.5, 1.0, 2.0], 2, protocol) == []
    unlimited_budget, _ = _budgeted(10 ** 9)  # a budget never reached changes nothing but the record
    assert unlimited_budget["stats"]["endpoints"] == ends and "walk_stop" not in unlimited_budget["stats"]


def _slow_walk(max_draws: int | None):
    """Endpoints whose p_A sits just above their threshold (the centre is sure): each runs its sequential rule
    long, so a group of them can spend far more than a budget checked only between groups."""
    need = slice_rule.code_endpoint_threshold(0.4, REC)
    smoothing = SmoothingParams(n0=20, n=20_000, alpha=0.001, batch_size=32, rule="sequential")  # groups of 2
    d = KnownProbability(smoothing, lambda th: 0.999 if th == 0 else need + 0.01, 0.4, 16, False)
    if max_draws is not None:
        d.config["max_draws"] = max_draws
    sound, _ = d.run([0.0, 0.5, 1.0, 2.0], torch.Generator().manual_seed(5))
    return json.loads(json.dumps(sound.to_json())), Protocol.of(d.smoothing)


def test_a_draw_budget_also_cuts_a_group_of_slow_endpoints():
    """Within a group the endpoints draw no look after the budget is reached: the first endpoint of the walk
    still undecided there fails (record ``stopped: budget``) and the walk stops at it, on a prefix of the draws
    of no budget; the audit recomputes it and rejects the cut without its mark."""
    free, protocol = _slow_walk(None)
    spent = sum(e["n"] for e in free["stats"]["endpoints"])
    centre_n = free["stats"]["endpoints"][0]["n"]
    budget = centre_n + 600
    assert spent > 10 * budget
    cut, _ = _slow_walk(budget)
    s = cut["stats"]
    last = s["endpoints"][-1]
    assert last["sequential"]["stopped"] == "budget" and last["margin"] <= last["required"]
    assert (s["walk_stop"], s["max_draws"]) == ("max_draws", budget) and not cut["certified"]["2.0"]
    assert sum(e["n"] for e in s["endpoints"]) < budget + 2 * 600  # not millions: the group stopped with it
    freed = {e["index"]: e["sequential"]["counts_a"] for e in free["stats"]["endpoints"]}
    for e in s["endpoints"]:
        assert e["sequential"]["counts_a"] == freed[e["index"]][:len(e["sequential"]["counts_a"])]
    assert certificate_problems(cut, [0.0, 0.5, 1.0, 2.0], 2, protocol) == []
    del last["sequential"]["stopped"]
    assert certificate_problems(cut, [0.0, 0.5, 1.0, 2.0], 2, protocol)


@pytest.mark.parametrize("how", ["budget not reached", "no budget", "no stop reason"])
def test_the_audit_rejects_an_early_stop_the_draw_budget_does_not_explain(how):
    cut, protocol = _budgeted(sum(e["n"] for e in _budgeted(None)[0]["stats"]["endpoints"][:5]))
    s = cut["stats"]
    if how == "budget not reached":
        s["max_draws"] = sum(e["n"] for e in s["endpoints"]) + 1
    elif how == "no budget":
        del s["max_draws"]
    else:
        del s["walk_stop"]
    assert any("max_draws" in m for m in certificate_problems(cut, [0.0, 0.5, 1.0, 2.0], 2, protocol))


# ------------------------------------------------------------------ soundness on the real transformation
def _sliced(name: str, slices: int):
    d, t, budgets = prepared_gsmooth(name)
    d.smoothing = replace(DEFAULT_SMOOTHING, rule="sequential")
    d.config["slices"] = slices
    return d, t, budgets


@pytest.mark.parametrize("name,slices,images", [
    ("rotation", 40, [24, 36]),
    pytest.param("scaling", 40, [0, 24, 36], marks=pytest.mark.slow),
    pytest.param("defocus_blur", 8, [0, 24, 36], marks=pytest.mark.slow),
    pytest.param("rotational_blur", 8, [0, 24, 36], marks=pytest.mark.slow),
    pytest.param("zoom_blur", 8, [0, 24, 36], marks=pytest.mark.slow)])
def test_sliced_certificates_hold_on_a_dense_grid_and_under_attack(name, slices, images):
    """For the largest budget the sliced rule certifies, the smoothed classifier on the real transformation at a
    dense grid of the region keeps the certified class (calibrated judge, tests/soundness.py), PGD+EoT finds no
    confident wrong label there, and the audit recomputes the record."""
    d, t, budgets = _sliced(name, slices)
    x, _ = get_dataset("digits").load("test")
    gen = torch.Generator().manual_seed(17)
    total = Verdict()
    pgd = build_attack({"name": "pgd_eot", "steps": 3, "restarts": 1, "eot": 2, "step_size": 0.4,
                        "candidates": "best"})
    for i in images:
        sound, paper = d.certify(x[i:i + 1], t, list(budgets), gen)
        assert sound.stats["endpoints"] and paper.variant == "paper"
        assert certificate_problems(json.loads(json.dumps(sound.to_json())), list(budgets), 10,
                                    Protocol.of(d.smoothing)) == []
        certified = [b for b in budgets if b > 0 and sound.certified[b]]
        for b in certified[-1:]:
            grid = torch.linspace(0 if t.one_sided else -b, b, 61)[:, None]
            with torch.no_grad():
                z = d.surrogate.F2(t.apply(x[i:i + 1].expand(len(grid), -1, -1, -1), grid))
            total = total.add(judge((d._sampler(zi[None]) for zi in z), sound.prediction, 200, 10, gen))
            assert not pgd.run(d, x[i:i + 1], sound.prediction, t, b, gen).confident_wrong
    if total.points == 0:
        pytest.skip(f"no example certified for {name} in this sample")
    assert total.violations <= 1, total
    assert total.confident >= 0.8 * total.points, total


# ------------------------------------------------------------------ one endpoint per interval of constant output
#: a partition of the float32 parameters of [0, 0.5] (pixelate's on 28 x 28 images: 15 sides)
SPANS = pixelate_intervals(0.5, 28)


class KnownOutputs(KnownProbability):
    """``KnownProbability`` with ``layout: outputs`` over ``SPANS`` (one-sided)."""

    def __init__(self, smoothing: SmoothingParams, prob, bound: float):
        super().__init__(smoothing, prob, bound, 0, True)
        self.t = SimpleNamespace(one_sided=True, name="known", output_intervals=lambda b, shape: SPANS)
        self.config["layout"] = "outputs"


def _outputs_record(prob, bound: float = 0.01, rule: str = "sequential"):
    d = KnownOutputs(_smoothing(rule), prob, bound)
    sound, _ = d.run([0.0, 0.2, 0.5], torch.Generator().manual_seed(5))
    return json.loads(json.dumps(sound.to_json())), Protocol.of(d.smoothing)


@pytest.mark.parametrize("rule", ["fixed", "sequential"])
def test_output_interval_endpoints_cover_their_intervals_and_the_audit_recomputes_them(rule):
    """Endpoint i sits in span i (the centre at theta = 0), the walk goes up from 0 and stops at the first
    failure, and the coverage is the end of the last certified span (capped at the range)."""
    cert, protocol = _outputs_record(lambda th: 0.999 if th < 0.3 else 0.3, rule=rule)
    s = cert["stats"]
    assert s["layout"] == "outputs" and s["spans"] == [list(sp) for sp in SPANS] and s["slices"] == len(SPANS) - 1
    ends = s["endpoints"]
    assert [e["index"] for e in ends] == list(range(len(ends))) and ends[0]["theta"] == 0.0
    assert all(SPANS[e["index"]][0] <= e["theta"] <= SPANS[e["index"]][1] for e in ends)
    last = ends[-2]["index"]  # the last certified endpoint; the one after it failed (p = 0.3 there)
    assert ends[-1]["theta"] >= 0.3 > ends[-2]["theta"]
    assert s["coverage"] == cert["radius"] == SPANS[last][1]
    assert cert["certified"] == {"0.0": True, "0.2": True, "0.5": False}
    assert certificate_problems(cert, [0.0, 0.2, 0.5], 2, protocol) == []
    full, _ = _outputs_record(lambda th: 0.999, rule=rule)
    assert full["stats"]["coverage"] == 0.5 and len(full["stats"]["endpoints"]) == len(SPANS)
    assert certificate_problems(full, [0.0, 0.2, 0.5], 2, protocol) == []


@pytest.mark.parametrize("how", ["gap", "theta outside", "centre off zero", "coverage", "short", "two-sided",
                                 "order"])
def test_the_audit_rejects_tampered_output_interval_records(how):
    cert, protocol = _outputs_record(lambda th: 0.999 if th < 0.3 else 0.3)
    s, ends = cert["stats"], cert["stats"]["endpoints"]
    if how == "gap":  # a float32 parameter between two spans would be claimed without an endpoint
        s["spans"][2][0] = float(torch.nextafter(torch.tensor(s["spans"][2][0], dtype=torch.float32),
                                                 torch.tensor(1.0)))
    elif how == "theta outside":
        ends[2]["theta"] = s["spans"][3][0]
    elif how == "centre off zero":
        ends[0]["theta"] = s["spans"][0][1]
    elif how == "coverage":
        s["coverage"] = cert["radius"] = s["spans"][ends[-1]["index"]][1]
    elif how == "short":  # spans that stop before the range
        s["spans"] = s["spans"][:4]
        s["slices"] = 3
    elif how == "two-sided":
        s["one_sided"] = False
    elif how == "order":
        ends[1], ends[2] = ends[2], ends[1]
    assert certificate_problems(cert, [0.0, 0.2, 0.5], 2, protocol)


def test_output_intervals_only_where_the_transformation_has_them():
    d, t, budgets = prepared_gsmooth("rotation")
    d.config["layout"] = "outputs"
    x, _ = get_dataset("digits").load("test")
    with pytest.raises(BenchError, match="layout 'outputs' needs"):
        d.certify(x[:1], t, list(budgets), torch.Generator().manual_seed(0))
    with pytest.raises(BenchError, match="layout must be"):
        type(d)(layout="sides")


@pytest.mark.parametrize("images", [[0, 24, 36]])
def test_output_interval_certificates_hold_on_a_dense_grid_and_under_attack(images):
    """Pixelate with one endpoint per side (the digits zoo's classifier): each interval's proven shift is the
    rounding of its one image, so the chain pays almost nothing; the certified region holds on a dense grid of
    the real transformation and under attack, and the audit recomputes the record."""
    d, t, budgets = prepared_gsmooth("pixelate")
    d.smoothing = replace(DEFAULT_SMOOTHING, rule="sequential")
    d.config["layout"] = "outputs"
    x, _ = get_dataset("digits").load("test")
    gen = torch.Generator().manual_seed(17)
    total = Verdict()
    attack = build_attack({"name": "grid", "points": 41})
    for i in images:
        sound, _ = d.certify(x[i:i + 1], t, list(budgets), gen)
        s = sound.stats
        # each bound is the float64 evaluation's slack plus the rounding of one image and its code
        assert s["layout"] == "outputs" and max(e["bound"] for e in s["endpoints"]) < FLOAT_SLACK + 1e-4
        assert certificate_problems(json.loads(json.dumps(sound.to_json())), list(budgets), 10,
                                    Protocol.of(d.smoothing)) == []
        certified = [b for b in budgets if b > 0 and sound.certified[b]]
        for b in certified[-1:]:
            grid = torch.linspace(0, b, 61)[:, None]
            with torch.no_grad():
                z = d.surrogate.F2(t.apply(x[i:i + 1].expand(len(grid), -1, -1, -1), grid))
            total = total.add(judge((d._sampler(zi[None]) for zi in z), sound.prediction, 200, 10, gen))
            assert not attack.run(d, x[i:i + 1], sound.prediction, t, b, gen).confident_wrong
    if total.points == 0:
        pytest.skip("no example certified for pixelate in this sample")
    assert total.violations <= 1, total
    assert total.confident >= 0.8 * total.points, total
