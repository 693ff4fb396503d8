"""The sequential rule wired through the harness: profile key and --certify, the shared CERTIFY/PREDICT,
TSS (radius thresholds, contrast+brightness, slicing by fixed-sequence testing), the checker's replay and
``bench run`` / ``bench submit`` / ``bench verify-entry`` end to end on a defense without trained models."""
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from baselines.tss import TSS
from baselines.common.parameter_noise import ParameterNoise
from benchmark.audit.statistics import Protocol, certificate_problems
from benchmark.certify import radius_rule, slice_rule
from benchmark.certify.certificate import ABSTAIN, Certificate
from benchmark.certify.radii import gaussian_radius, radius_threshold
from benchmark.certify.sequential import SequentialSettings
from benchmark.certify.smoothing import SmoothingParams, certify, predict, sample_ledger
from benchmark.cli import main
from benchmark.datasets import get_dataset
from benchmark.run.options import RunOptions
from benchmark.run.plan import resolve_profile
from benchmark.suites import load_suite
from benchmark.transformations import get_transformation

SEQ = SmoothingParams(n0=16, n=2_000, alpha=0.001, batch_size=256, n_predict=1_000, rule="sequential")
FIXED = SmoothingParams(n0=16, n=2_000, alpha=0.001, batch_size=256, n_predict=1_000)
BUDGETS = [0.0, 0.5, 1.0]


def replay(cert: Certificate | dict, budgets: list[float] = BUDGETS, params: SmoothingParams = SEQ) -> list[str]:
    """The checker's and verify-entry's statistics rule (benchmark.audit.statistics) against params' protocol."""
    cert = cert.to_json() if isinstance(cert, Certificate) else cert
    return certificate_problems(cert, budgets, 10, Protocol.of(params))


def gaussian_cert(stats: dict, prediction: int, sigma: float = 0.5) -> dict:
    """A radius certificate of Gaussian smoothing from CERTIFY's statistics (as the template writes it)."""
    stats = {**stats, "radius_rule": {"distribution": "gaussian", "scale": sigma}}
    return Certificate.from_radius(prediction, gaussian_radius(stats["p_a_lower"], sigma), BUDGETS, stats).to_json()


def _sampler(p_top: float, num_classes: int = 10):
    """Labels drawn from the given generator: class 3 with probability p_top, else uniform over the rest."""
    def sample_labels(k, gen):
        u = torch.rand(k, generator=gen)
        other = torch.randint(0, num_classes - 1, (k,), generator=gen)
        return torch.where(u < p_top, torch.tensor(3), other + (other >= 3).long())
    return sample_labels


def test_profile_key_and_cli_override_keep_fixed_hashes():
    suite = load_suite("semantic")
    fixed = resolve_profile(suite, RunOptions(profile="smoke"))
    same = resolve_profile(suite, RunOptions(profile="smoke", certify="fixed"))
    seq = resolve_profile(suite, RunOptions(profile="smoke", certify="sequential"))
    assert fixed.certify == "fixed" and seq.certify == "sequential"
    h = lambda p: [t.hash for t in suite.tasks(p, 0, None, ["tss"], ["brightness"])]  # noqa: E731
    assert h(fixed) == h(same) != h(seq)
    assert suite.tasks(seq, 0, None, ["tss"], ["brightness"])[0].certify_key == \
        suite.tasks(fixed, 0, None, ["tss"], ["brightness"])[0].certify_key  # paired random streams
    assert SmoothingParams.from_profile(seq).rule == "sequential"
    from benchmark.errors import BenchError
    from benchmark.suites.loader import Profile
    with pytest.raises(BenchError, match="certify"):
        Profile(name="x", certify="adaptive")
    with pytest.raises(BenchError, match="sequential"):
        Profile(name="x", certify="sequential", sequential={"growht": 2})


def test_committed_fixed_entries_still_verify_with_the_statistics_replay():
    """Fixed-rule rows (abstentions included) replay through the statistics rule and keep their task hashes."""
    from benchmark.leaderboard.verify import recompute
    assert recompute(Path("leaderboards/semantic/digits/tss.json")) == []


def test_shared_certify_sequential_records_and_replays():
    need = [radius_threshold(lambda p: gaussian_radius(p, 0.5), b) for b in BUDGETS]
    with sample_ledger() as ledger:
        res = certify(_sampler(0.999), 10, SEQ, torch.Generator().manual_seed(0), thresholds=need)
    s = res.stats()
    assert res.prediction == 3 and s["n"] < SEQ.n and ledger["certify"] == SEQ.n0 + s["n"]
    assert s["sequential"]["thresholds"][0] == 0.5 and replay(gaussian_cert(s, res.prediction)) == []
    breaks = {"p_a_lower inflated": lambda b, r: b.update(p_a_lower=b["p_a_lower"] + 1e-3),
              "level at the cap tripled": lambda b, r: r["alphas"].__setitem__(-1, 3 * r["alphas"][-1]),
              "last count edited": lambda b, r: r["counts_a"].__setitem__(-1, r["counts_a"][-1] - 1),
              "stopped later than the rule": lambda b, r: r["counts_a"].append(r["counts_a"][-1]),
              "n is not the last look": lambda b, r: b.update(n=SEQ.n)}
    for what, edit in breaks.items():
        s_bad = json.loads(json.dumps(s))
        edit(s_bad, s_bad["sequential"])
        assert replay(gaussian_cert(s_bad, res.prediction)), what
    # the same protocol checks as fixed-n certificates: the suite's rule, settings and cap
    assert any("rule 'fixed'" in m for m in replay(gaussian_cert(s, res.prediction), params=FIXED))
    other = SmoothingParams(n0=16, n=2_000, alpha=0.001, rule="sequential", sequential=SequentialSettings(first=32))
    assert any("settings" in m for m in replay(gaussian_cert(s, res.prediction), params=other))
    assert any("cap" in m for m in replay(gaussian_cert(s, res.prediction), params=SmoothingParams(
        n0=16, n=4_000, alpha=0.001, rule="sequential")))
    # without thresholds the sequential rule cannot know when to stop: fixed n
    fixed_like = certify(_sampler(0.995), 10, SEQ, torch.Generator().manual_seed(0))
    assert fixed_like.n == SEQ.n and "sequential" not in fixed_like.stats()


def test_fixed_certify_unchanged_and_abstentions_replay():
    res = certify(_sampler(0.3), 10, FIXED, torch.Generator().manual_seed(1), thresholds=[0.9])
    s = res.stats()
    assert res.prediction == ABSTAIN and s["count_a"] == 0 and s["n"] == FIXED.n and "sequential" not in s
    assert replay(gaussian_cert(s, res.prediction), params=FIXED) == []  # the selected class's bound, not count_a = 0
    assert replay(gaussian_cert(s, res.prediction)) == []  # a fixed-n certificate is fine under the sequential rule
    same = certify(_sampler(0.3), 10, FIXED, torch.Generator().manual_seed(1))
    assert same.stats() == s


def test_best_p_lower_bounds_every_certificate():
    """best_p_lower is the fixed rule's bound at n of n; the sequential rule with match_fixed certifies a
    threshold just below it, from every sample (so only at the cap), with a bound at most best_p_lower."""
    for params in (SEQ, FIXED):
        best = params.best_p_lower()
        just_below = certify(_sampler(1.0), 10, params, torch.Generator().manual_seed(0), thresholds=[best - 1e-12])
        assert best - 1e-12 < just_below.p_a_lower <= best < 1.0 and just_below.n == params.n
    assert FIXED.best_p_lower() == SEQ.best_p_lower() == pytest.approx(0.001 ** (1 / 2_000))
    unmatched = replace(SEQ, sequential=replace(SEQ.sequential, match_fixed=False))
    best = unmatched.best_p_lower()
    lost = certify(_sampler(1.0), 10, unmatched, torch.Generator().manual_seed(0), thresholds=[best - 1e-12])
    assert lost.p_a_lower < best - 1e-12  # without matching part of alpha goes to the early looks: lost


def test_sequential_predict_uses_fewer_samples_and_abstains_on_ties():
    with sample_ledger() as ledger:
        label, counts = predict(_sampler(0.9), 10, SEQ, torch.Generator().manual_seed(2))
    assert label == 3 and ledger["predict"] == sum(counts) < SEQ.n_predict and ledger["predict_calls"] == 1
    tie = lambda k, g: torch.randint(0, 2, (k,), generator=g)  # noqa: E731  two classes at exactly 1/2
    label, counts = predict(tie, 2, SEQ, torch.Generator().manual_seed(3))
    assert label == ABSTAIN and sum(counts) == SEQ.n_predict


# ------------------------------------------------------------------ TSS with a hand-made base classifier
class _MeanModel(torch.nn.Module):
    """Class 3 when the input's mean exceeds a threshold, class 5 otherwise (no training)."""

    def __init__(self, thr: float):
        super().__init__()
        self.thr = thr

    def forward(self, z):
        m = z.flatten(1).mean(1)
        logits = torch.full((len(z), 10), -1.0)
        logits[:, 3], logits[:, 5] = m - self.thr, self.thr - m
        return logits


def _tss(name, params, thr, **settings):
    t = get_transformation(name)
    d = TSS(scale=0.4)
    d._t, d.t_name, d.smoothing, d.num_classes, d.device = t, name, params, 10, "cpu"
    d.model = _MeanModel(thr)
    if name in ("rotation", "scaling"):
        d.sigma, d.mask = 0.4, get_transformation(name).support_mask(28, 28).float()
        d.slices, d.subslices, d.n_slice = settings.get("slices", 8), 10, settings.get("n_slice", 400)
    elif name == "contrast_brightness":
        d.sk = d.sb = 0.2
    else:
        d.noise = ParameterNoise("gaussian", 0.3)
    return d, t


@pytest.fixture(scope="module")
def image():
    x, _ = get_dataset("digits").load("test")
    return x[:1]


@pytest.mark.parametrize("name,budgets", [("brightness", [0.0, 0.1, 0.2, 0.3]),
                                          ("contrast_brightness", [0.0, 0.1, 0.2])])
def test_tss_parameter_smoothing_sequential_matches_its_decisions(image, name, budgets):
    m = float(image.mean())
    for thr in (m - 0.2, m - 0.02):  # far inside, and near a budget's boundary
        d, t = _tss(name, SEQ, thr)
        (c,) = d.certify(image, t, budgets, torch.Generator().manual_seed(4))
        s = c.stats
        assert replay(c, budgets) == [] and s["n"] <= SEQ.n
        rule = lambda p: radius_rule.radius(s["radius_rule"], p, False, s["parameter_noise"])  # noqa: E731
        need = s["threshold_rule"]["required"] if "threshold_rule" in s else \
            {repr(float(b)): radius_threshold(rule, b) for b in budgets}
        assert sorted(s["sequential"]["thresholds"]) == sorted({0.5, *need.values()})
        for b in budgets:
            assert c.certified[float(b)] == (c.prediction != ABSTAIN and s["p_a_lower"] > need[repr(float(b))])


@pytest.mark.parametrize("name,budgets", [("rotation", [0.0, 5.0, 10.0]), ("scaling", [0.0, 0.02, 0.04])])
def test_tss_slicing_fixed_sequence_and_its_replay(image, name, budgets):
    m = float((get_transformation(name).support_mask(28, 28).float() * image).mean())  # the classifier sees the masked image
    d, t = _tss(name, SEQ, m - 0.05, n_slice=4_000)
    (c,) = d.certify(image, t, budgets, torch.Generator().manual_seed(5))
    s = c.stats
    assert s["alpha_split"] == "fixed-sequence" and s["alpha_slice"] == SEQ.alpha
    assert [e["index"] for e in s["endpoints"]] == [4, 5, 3, 6, 2, 7, 1, 8, 0][:len(s["endpoints"])]
    assert replay(c, budgets) == []
    assert c.prediction == 3 and c.radius == max(budgets)  # an easy image: every endpoint passes early
    assert sum(e["n"] for e in s["endpoints"]) < len(s["endpoints"]) * d.n_slice / 3
    edits = {"order": lambda e: e.reverse(), "bound": lambda e: e[-1].update(bound=e[-1]["bound"] + 10.0),
             "count": lambda e: e[0]["sequential"]["counts_a"].__setitem__(-1, 0)}
    for what, edit in edits.items():
        bad = json.loads(json.dumps(s))
        edit(bad["endpoints"])
        assert replay({**c.to_json(), "stats": bad}, budgets), what
    # fixed rule: Bonferroni at alpha/(N+1), the walk as before
    d, t = _tss(name, FIXED, m - 0.05, n_slice=100)
    (f,) = d.certify(image, t, budgets, torch.Generator().manual_seed(5))
    assert f.stats["alpha_split"] == "bonferroni" and f.stats["alpha_slice"] == pytest.approx(FIXED.alpha / 9)
    assert replay(f, budgets, FIXED) == []


def test_tss_slicing_stops_at_the_first_failing_endpoint(image):
    """A classifier whose margin shrinks with the rotation angle: the chain stops at its first failing
    endpoint, every endpoint before it passed, and the coverage is what they give."""
    d, t = _tss("rotation", SEQ, 0.0, slices=40, n_slice=2_000)
    ref = (get_transformation("rotation").support_mask(28, 28).float() * image).flatten()
    ref = ref / ref.norm()

    class Projection(torch.nn.Module):  # class 3 while <z, ref> > 8 (about 17 degrees off), else 5
        def forward(self, z):
            v = z.flatten(1) @ ref - 8.0
            logits = torch.full((len(z), 10), -1.0)
            logits[:, 3], logits[:, 5] = v, -v
            return logits

    d.model = Projection()
    (c,) = d.certify(image, t, [0.0, 10.0, 20.0], torch.Generator().manual_seed(6))
    s = c.stats
    assert replay(c, [0.0, 10.0, 20.0]) == []
    grid = s["pixel_noise"]["d"]  # the lattice noise's rule (benchmark/certify/slice_rule.py)
    passed = [slice_rule.endpoint_certified(e["p_a_lower"], s["sigma"], e["bound"], grid) for e in s["endpoints"]]
    assert all(passed[:-1]) and not passed[-1] and 5.0 < c.radius < 20.0 and c.certified[10.0]


# ------------------------------------------------------------------ end to end
DEFENSE = '''
import torch
from benchmark.certify.certificate import Certificate
from benchmark.certify.radii import gaussian_radius, radius_threshold
from benchmark.certify.smoothing import certify, predict
from benchmark.defense import Defense


class MeanSmoothing(Defense):
    """Gaussian smoothing over brightness of a hand-made classifier (a bucket of the image's contrast, which
    brightness does not change): no training."""

    name = "mean_smoothing"
    certified = True
    defaults = {"sigma": 0.3}

    def supports(self, t):
        return t.name == "brightness"

    def prepare(self, ctx):
        self.smoothing, self.sigma = ctx.smoothing, float(self.config["sigma"])

    def _logits(self, z):
        s = z.flatten(1).std(1)
        return -(s[:, None] - 0.04 * torch.arange(10)) ** 2

    def _sampler(self, x):
        def sample_labels(k, gen):
            return self._logits(x.expand(k, -1, -1, -1) + self.sigma * torch.randn(k, 1, 1, 1, generator=gen)).argmax(1)
        return sample_labels

    def predict(self, x, t, g):
        return torch.tensor([predict(self._sampler(xi[None]), 10, self.smoothing, g)[0] for xi in x])

    def certify(self, x, t, budgets, g):
        need = [radius_threshold(lambda p: gaussian_radius(p, self.sigma), b) for b in budgets]
        res = certify(self._sampler(x), 10, self.smoothing, g, thresholds=need)
        stats = {**res.stats(), "radius_rule": {"distribution": "gaussian", "scale": self.sigma}}
        return [Certificate.from_radius(res.prediction, gaussian_radius(res.p_a_lower, self.sigma), budgets, stats)]

    def noisy_logits(self, x, t, g):
        return self._logits(x + self.sigma * torch.randn(len(x), 1, 1, 1, generator=g))
'''


def test_run_submit_and_verify_entry_end_to_end(tmp_path):
    f = tmp_path / "mean_defense.py"
    f.write_text(DEFENSE)
    ref = f"{f}:MeanSmoothing"
    lb = tmp_path / "lb"
    rc = main(["submit", ref, "--suite", "semantic", "--profile", "smoke", "--transformation", "brightness",
               "--n-examples", "3", "--no-train", "--certify", "sequential", "--leaderboards", str(lb),
               "--report", str(tmp_path / "report.json"), "--out", str(tmp_path / "run")])
    report = json.loads((tmp_path / "report.json").read_text())
    assert rc == 0, report["findings"]
    assert "statistics" in report["rules_run"]
    rows = [json.loads(line) for line in (tmp_path / "run" / "rows.jsonl").read_text().splitlines()]
    assert all(r["samples"]["rule"] == "sequential" and r["samples"]["predict_calls"] >= 1 for r in rows)
    assert all("sequential" in c["stats"] for r in rows for c in r["certificates"])
    entry = lb / "semantic" / "digits" / "mean_smoothing.json"
    assert json.loads(entry.read_text())["protocol"]["profile_settings"]["certify"] == "sequential"
    assert main(["verify-entry", str(entry), "--rerun", "1"]) == 0
    # a row whose sequential record was edited no longer verifies
    rows[0]["certificates"][0]["stats"]["sequential"]["counts_a"][-1] -= 1
    assert replay(rows[0]["certificates"][0], [float(b) for b in rows[0]["certificates"][0]["certified"]],
                  SmoothingParams.from_profile(resolve_profile(load_suite("semantic"),
                                                        RunOptions(profile="smoke", certify="sequential"))))
    # the comparison report reads a fixed and a sequential run folder
    assert main(["run", "--suite", "semantic", "--profile", "smoke", "--transformation", "brightness",
                 "--defense", ref, "--n-examples", "3", "--no-train", "--out", str(tmp_path / "fixed")]) == 0
    from benchmark.studies.sequential_report import compare_runs, render
    table = compare_runs(tmp_path / "fixed", tmp_path / "run")
    assert [r["label"] for r in table] == ["mean_smoothing"] and table[0]["examples"] == 3
    assert np.isfinite([r["certify_samples_fixed"] / r["certify_samples_sequential"] for r in table]).all()
    assert "certify samples" in render(table)
