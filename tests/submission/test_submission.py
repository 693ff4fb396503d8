"""bench submit / verify-entry / leaderboard / plot: every checker rule, on one-file defenses outside the repo."""
import json

import pytest

from benchmark.cli import main
from benchmark.leaderboard.entry import read_rows, rows_bytes
from tests.repo import REPO

# Defenses built on the packaged vanilla model (no training), each broken in one documented way.
HEADER = '''
import sys
import torch
from benchmark.certify.certificate import Certificate
from benchmark.certify.radii import gaussian_radius
from benchmark.certify.smoothing import SmoothingParams, certify
from benchmark.defense import Defense
from benchmark.recipes import classifier_spec


def in_precheck():
    """What a cheating defense can do: behave honestly only while the checker's pre-run checks call it."""
    f = sys._getframe()
    while f is not None:
        if f.f_code.co_name == "precheck":
            return True
        f = f.f_back
    return False


class Base(Defense):
    name = "base"

    def prepare(self, ctx):
        self.model = ctx.model(classifier_spec(ctx, "vanilla", {"name": "none"}, None))
        self.smoothing = ctx.smoothing

    def predict(self, x, t, g):
        with torch.no_grad():
            return self.model(x).argmax(1)

    def mc(self, x, t, g, params=None):
        """CERTIFY's statistics for the (deterministic) base classifier."""
        return certify(lambda k, gen: self.predict(x.expand(k, -1, -1, -1), t, gen), 10, params or self.smoothing, g)

    def gaussian_cert(self, res, budgets, p=None, **edits):
        """The Gaussian-radius certificate (scale 0.5) of CERTIFY's result, its stats edited by ``edits``."""
        p = res.p_a_lower if p is None else p
        stats = {**res.stats(), "radius_rule": {"distribution": "gaussian", "scale": 0.5}, **edits}
        return [Certificate.from_radius(res.prediction, gaussian_radius(p, 0.5) if p > 0.5 else 0.0, budgets, stats)]

    def smoothed(self, x, budgets, g, draw):
        """CERTIFY under pixel noise draw(k, gen) [k, C, H, W] (what a smoothing defense does)."""
        def sample(k, gen):
            with torch.no_grad():
                return self.model(x + draw(k, gen)).argmax(1)
        return self.gaussian_cert(certify(sample, 10, self.smoothing, g), budgets)
'''

BROKEN = {
    "raises": ('''
class D(Base):
    name = "raises"
    def predict(self, x, t, g):
        raise RuntimeError("boom")
''', "outputs"),
    "nan_logits": ('''
class D(Base):
    name = "nan_logits"
    def noisy_logits(self, x, t, g):
        return torch.full((len(x), 10), float("nan"))
''', "outputs"),
    "float_labels": ('''
class D(Base):
    name = "float_labels"
    def predict(self, x, t, g):
        return torch.zeros(len(x))
''', "outputs"),
    "nondeterministic": ('''
class D(Base):
    name = "nondeterministic"
    def predict(self, x, t, g):
        return torch.randint(0, 10, (len(x),))   # global RNG instead of the generator
''', "determinism"),
    "no_statistics": ('''
class D(Base):
    name = "no_statistics"
    certified = True
    def certify(self, x, t, budgets, g):
        return [Certificate.from_radius(int(self.predict(x, t, g)[0]), 0.05, budgets, {})]
''', "statistics"),
    "inflated_p": ('''
class D(Base):
    name = "inflated_p"
    certified = True
    def certify(self, x, t, budgets, g):
        res = self.mc(x, t, g)
        stats = {**res.stats(), "p_a_lower": 0.999999}
        return [Certificate.from_radius(res.prediction, 1.0, budgets, stats)]
''', "statistics"),
    "radius_not_from_rule": ('''
class D(Base):
    name = "radius_not_from_rule"
    certified = True
    def certify(self, x, t, budgets, g):
        res = self.mc(x, t, g)
        stats = {**res.stats(), "radius_rule": {"distribution": "gaussian", "scale": 0.1}}
        return [Certificate.from_radius(res.prediction, 5.0, budgets, stats)]
''', "statistics"),
    "missing_radius_rule": ('''
class D(Base):
    name = "missing_radius_rule"
    certified = True
    def certify(self, x, t, budgets, g):
        res = self.mc(x, t, g)
        return [Certificate.from_radius(res.prediction, gaussian_radius(res.p_a_lower, 0.5), budgets, res.stats())]
''', "statistics"),
    "own_protocol": ('''
class D(Base):
    name = "own_protocol"
    certified = True
    def certify(self, x, t, budgets, g):
        mine = SmoothingParams(n0=self.smoothing.n0, n=self.smoothing.n // 2, alpha=0.05)   # not the suite's
        return self.gaussian_cert(self.mc(x, t, g, mine), budgets)
''', "statistics"),
    "selection_reuses_estimation": ('''
class D(Base):
    name = "selection_reuses_estimation"
    certified = True
    def certify(self, x, t, budgets, g):
        res = self.mc(x, t, g)
        return self.gaussian_cert(res, budgets, counts_selection=res.counts_estimation)  # one sample set for both
''', "statistics"),
    "per_budget_without_rule": ('''
class D(Base):
    name = "per_budget_without_rule"
    certified = True
    def certify(self, x, t, budgets, g):
        res = self.mc(x, t, g)
        flags = {float(b): res.prediction != -1 for b in budgets}
        return [Certificate(res.prediction, None, flags, res.stats())]
''', "statistics"),
    # honest while the pre-run checks call it, an inflated bound (and radius) during the run
    "honest_only_in_precheck": ('''
class D(Base):
    name = "honest_only_in_precheck"
    certified = True
    def certify(self, x, t, budgets, g):
        res = self.mc(x, t, g)
        p = res.p_a_lower if in_precheck() else min(1.2 * res.p_a_lower, 0.999)
        return self.gaussian_cert(res, budgets, p, p_a_lower=p)
''', "statistics"),
    "fails_mid_run": ('''
class D(Base):
    name = "fails_mid_run"
    def predict(self, x, t, g):
        if not in_precheck():
            raise RuntimeError("only works on the pre-check's images")
        return super().predict(x, t, g)
''', "run"),
    "infinite_radius": ('''
class D(Base):
    name = "infinite_radius"
    certified = True
    def certify(self, x, t, budgets, g):
        return [Certificate(int(self.predict(x, t, g)[0]), float("inf"), {float(b): True for b in budgets},
                            {"deterministic": True})]
''', "statistics"),
    "loads_test_split": ('''
class D(Base):
    name = "loads_test_split"
    def prepare(self, ctx):
        super().prepare(ctx)
        x, y = ctx.dataset.load("test")   # through the harness's dataset object
''', "test_split"),
    # gets the test split around the harness's guard and looks labels up by the exact image bytes
    "looks_up_test_labels": ('''
class D(Base):
    name = "looks_up_test_labels"
    def prepare(self, ctx):
        super().prepare(ctx)
        from benchmark.datasets.digits import Digits
        x, y = Digits.load.__wrapped__(Digits(), "test")
        self.table = {xi.numpy().tobytes(): int(yi) for xi, yi in zip(x, y)}
    def predict(self, x, t, g):
        return torch.tensor([self.table.get(xi.numpy().tobytes(), 0) for xi in x], dtype=torch.int64)
''', "test_split"),
    # deterministic certificates on integer translation are checked by enumeration: a false claim is caught
    "false_translation_proof": ('''
class D(Base):
    name = "false_translation_proof"
    certified = True
    def certify(self, x, t, budgets, g):
        return [Certificate(int(self.predict(x, t, g)[0]), float(max(budgets)), {float(b): True for b in budgets},
                            {"deterministic": True})]
''', "unverified"),
    # writes outside its run folder (here: beside its own file)
    "writes_outside_run": ('''
from pathlib import Path
class D(Base):
    name = "writes_outside_run"
    def prepare(self, ctx):
        super().prepare(ctx)
        (Path(__file__).parent / "planted.txt").write_text("x")
''', "sandbox"),
    # a few noise draws repeated to fill n: deterministic in the generator, but the n labels are not independent
    "repeated_noise": ('''
class D(Base):
    name = "repeated_noise"
    certified = True
    def certify(self, x, t, budgets, g):
        def draw(k, gen):
            few = 0.5 * torch.randn(8, *x.shape[1:], generator=gen)
            return few.repeat((k + 7) // 8, 1, 1, 1)[:k]
        return self.smoothed(x, budgets, g, draw)
''', "independence"),
    # abstains on every example: no accuracy to rank (item of the abstain rule that rejects)
    "always_abstains": ('''
class D(Base):
    name = "always_abstains"
    def predict(self, x, t, g):
        return torch.full((len(x),), -1, dtype=torch.int64)
''', "abstain"),
    "prepare_fails": ('''
class D(Base):
    name = "prepare_fails"
    def prepare(self, ctx):
        raise ValueError("weights not found")
''', "prepare"),
    "not_a_defense": ('''
class D:
    name = "not_a_defense"
''', "api"),
    # statistics are internally consistent, but the base classifier is deterministic and attackable, so
    # the claimed huge radius is false: only the run (attack) can catch it
    "liar": ('''
class D(Base):
    name = "liar"
    certified = True
    def certify(self, x, t, budgets, g):
        res = self.mc(x, t, g)
        rule = {"distribution": "gaussian", "scale": 1000.0}
        from benchmark.certify.radii import gaussian_radius
        radius = gaussian_radius(res.p_a_lower, 1000.0)
        return [Certificate.from_radius(res.prediction, radius, budgets, {**res.stats(), "radius_rule": rule})]
''', "consistency"),
}

# each draws its noise from somewhere else than the generator argument; the message must name it
NOISE_SOURCES = {
    "numpy_global": ('''
import numpy as np
class D(Base):
    name = "numpy_global"
    certified = True
    def certify(self, x, t, budgets, g):
        return self.smoothed(x, budgets, g, lambda k, gen: torch.from_numpy(
            np.random.normal(0, 0.5, (k,) + tuple(x.shape[1:]))).float())
''', "numpy's global generator"),
    "python_random": ('''
import random
class D(Base):
    name = "python_random"
    certified = True
    def certify(self, x, t, budgets, g):
        return self.smoothed(x, budgets, g, lambda k, gen: 1.5 * torch.tensor(  # strong enough to move counts
            [random.gauss(0, 1) for _ in range(k * x[0].numel())]).view(k, *x.shape[1:]))
''', "Python's `random` module"),
    "torch_global_in_noisy_logits": ('''
class D(Base):
    name = "torch_global_in_noisy_logits"
    def noisy_logits(self, x, t, g):
        return self.model(x + 0.3 * torch.randn_like(x))   # labels and certificates are deterministic
''', "torch's global generator"),
    # the global generator, with noise too weak to move the counts of the plain check images
    "torch_global_degenerate_counts": ('''
class D(Base):
    name = "torch_global_degenerate_counts"
    certified = True
    def certify(self, x, t, budgets, g):
        return self.smoothed(x, budgets, g, lambda k, gen: 0.1 * torch.randn(k, *x.shape[1:]))   # no generator=
''', "torch's global generator"),
    "clock_seeded": ('''
import time
class D(Base):
    name = "clock_seeded"
    certified = True
    def certify(self, x, t, budgets, g):
        own = torch.Generator().manual_seed(time.time_ns())
        return self.smoothed(x, budgets, g, lambda k, gen: 0.5 * torch.randn(k, *x.shape[1:], generator=own))
''', "seeded by the clock"),
    "fixed_seed": ('''
class D(Base):
    name = "fixed_seed"
    certified = True
    def certify(self, x, t, budgets, g):
        own = torch.Generator().manual_seed(1234)   # the same noise whatever the harness's seed
        return self.smoothed(x, budgets, g, lambda k, gen: 0.5 * torch.randn(k, *x.shape[1:], generator=own))
    def noisy_logits(self, x, t, g):
        own = torch.Generator().manual_seed(1234)
        return self.model(x + 0.5 * torch.randn(x.shape, generator=own))
''', "identical for generator seeds"),
}

WARNS = {
    # abstains on the brighter images (one of the three evaluated): above 30% a warning, not a rejection
    "often_abstains": ('''
class D(Base):
    name = "often_abstains"
    def predict(self, x, t, g):
        labels = super().predict(x, t, g)
        return torch.where(x.mean((1, 2, 3)) > 0.3, torch.full_like(labels, -1), labels)
''', "abstain"),
    # the newcomer's smoothing: its own noise and radius rule, which the harness cannot tie to the transformation
    "hand_rolled_smoothing": ('''
class D(Base):
    name = "hand_rolled_smoothing"
    certified = True
    def certify(self, x, t, budgets, g):
        return self.smoothed(x, budgets, g, lambda k, gen: 0.3 * torch.randn(k, 1, 1, 1, generator=gen))
''', "unverified"),
    # deterministic certificates from outside code on a continuous transformation: listed, not ranked
    "unverified": ('''
class D(Base):
    name = "unverified"
    certified = True
    def certify(self, x, t, budgets, g):
        return [Certificate(int(self.predict(x, t, g)[0]), 0.1, {float(b): b <= 0.1 for b in budgets},
                            {"deterministic": True})]
''', "unverified"),
    "randomized": ('''
class D(Base):
    name = "randomized"
    def predict(self, x, t, g):
        with torch.no_grad():
            noisy = x + 2.0 * torch.randn(x.shape, generator=g)
            return self.model(noisy).argmax(1)
''', "randomized"),
}


def test_every_rule_of_the_checker_has_a_defense_that_breaks_it():
    import re

    from benchmark.audit import checker

    documented = set(re.findall(r"^  ([a-z_]+) {2,}", checker.__doc__, re.M))
    assert {"api", "statistics", "determinism", "test_split", "unverified", "consistency"} <= documented
    broken = {rule for _, rule in BROKEN.values()} | {rule for _, rule in WARNS.values()}
    assert documented <= broken, f"rules without a breaking defense: {sorted(documented - broken)}"


def _write(tmp_path, name, body):
    f = tmp_path / f"{name}.py"
    f.write_text(HEADER + body)
    return f"{f}:D"


def _submit(tmp_path, ref, *extra, transformation="translation", n=3):
    lb = tmp_path / "lb"
    report = tmp_path / "report.json"
    rc = main(["submit", ref, "--suite", "semantic", "--profile", "smoke", "--transformation", transformation,
               "--n-examples", str(n), "--no-train", "--leaderboards", str(lb), "--report", str(report),
               "--out", str(tmp_path / "run"), *extra])
    return rc, json.loads(report.read_text()), lb


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_submission_is_rejected_with_a_report_and_no_entry(tmp_path, name, capsys):
    body, rule = BROKEN[name]
    rc, report, lb = _submit(tmp_path, _write(tmp_path, name, body), n=8 if name == "liar" else 3)
    assert rc == 1
    assert not report["passed"]
    assert rule in {f["rule"] for f in report["findings"] if f["level"] == "error"}, report["findings"]
    assert not list(lb.rglob("*.json")), "a failing submission must not produce an entry"
    assert "FAILED" in capsys.readouterr().err


@pytest.mark.parametrize("name", sorted(NOISE_SOURCES))
def test_noise_from_elsewhere_than_the_generator_is_rejected_naming_the_source(tmp_path, name):
    body, source = NOISE_SOURCES[name]
    rc, report, lb = _submit(tmp_path, _write(tmp_path, name, body))
    assert rc == 1 and not list(lb.rglob("*.json"))
    messages = [f["message"] for f in report["findings"] if f["rule"] == "determinism" and f["level"] == "error"]
    assert messages and source in messages[0], report["findings"]
    assert "generator=generator" in messages[0]


def test_an_honest_smoothed_defense_passes_the_noise_checks(tmp_path):
    body = '''
class D(Base):
    name = "honest_smoothing"
    certified = True
    def certify(self, x, t, budgets, g):
        return self.smoothed(x, budgets, g, lambda k, gen: 0.5 * torch.randn(k, *x.shape[1:], generator=gen))
    def noisy_logits(self, x, t, g):
        return self.model(x + 0.5 * torch.randn(x.shape, generator=g))
'''
    from benchmark.audit.checker import CheckReport
    from benchmark.defenses import get_defense_class
    from benchmark.run.options import RunOptions
    from benchmark.submission.precheck import precheck
    from benchmark.suites import load_suite

    ref = _write(tmp_path, "honest_smoothing", body)
    report = CheckReport(ref)
    opts = RunOptions(profile="smoke", transformations=["translation"], allow_train=False)
    precheck(get_defense_class(ref), ref, load_suite("semantic"), opts, report)
    assert report.passed, report.render()
    assert {"determinism", "statistics", "test_split"} <= set(report.rules_run)
    assert report.canary["real_accuracy"] - report.canary["canary_accuracy"] < 0.2
    assert report.canary["traps"] == 16 and report.canary["trap_accuracy"] >= 0.8, report.canary


def test_deterministic_certificates_checked_by_enumeration_are_not_flagged(tmp_path):
    body = '''
from baselines.semanify.enumeration import Enumeration
class D(Enumeration):   # outside code: the harness enumerates every shift itself
    name = "my_enumeration"
'''
    rc, report, lb = _submit(tmp_path, _write(tmp_path, "my_enumeration", body))
    assert rc == 0, report["findings"]
    assert "unverified" in report["rules_run"]
    entry = json.loads((lb / "semantic" / "digits" / "my_enumeration.json").read_text())
    assert entry["flags"]["unverified"] == []


def test_a_file_without_class_lists_its_defenses_or_says_it_is_missing(tmp_path):
    ref = _write(tmp_path, "two", "class D(Base):\n    name = 'd'\n\nclass E(Base):\n    name = 'e'\n")
    path = ref.rsplit(":", 1)[0]
    rc, report, _ = _submit(tmp_path, path)
    (msg,) = [f["message"] for f in report["findings"] if f["rule"] == "api"]
    assert rc == 1 and "exists" in msg and "Base, D, E" in msg and f"{path}:Base" in msg
    rc, report, _ = _submit(tmp_path, str(tmp_path / "missing.py"))
    (msg,) = [f["message"] for f in report["findings"] if f["rule"] == "api"]
    assert rc == 1 and "does not exist" in msg


def test_the_report_goes_where_out_says_even_when_the_run_never_starts(tmp_path):
    ref = _write(tmp_path, "prepare_fails", BROKEN["prepare_fails"][0])
    out = tmp_path / "run"
    assert main(["submit", ref, "--profile", "smoke", "--transformation", "translation", "--no-train",
                 "--leaderboards", str(tmp_path / "lb"), "--out", str(out)]) == 1
    assert json.loads((out / "submission_report-D.json").read_text())["passed"] is False


@pytest.mark.parametrize("name", sorted(WARNS))
def test_warnings_are_flagged_and_strict_turns_them_into_errors(tmp_path, name):
    body, rule = WARNS[name]
    ref = _write(tmp_path, name, body)
    rc, report, lb = _submit(tmp_path, ref, transformation="brightness")
    assert rc == 0 and report["passed"]
    assert rule in {f["rule"] for f in report["findings"] if f["level"] == "warning"}
    entry = json.loads((lb / "semantic" / "digits" / f"{name}.json").read_text())
    if name == "randomized":
        assert entry["flags"]["randomized_without_certificate"]
    elif name in ("unverified", "hand_rolled_smoothing"):
        assert entry["flags"]["unverified"] == [f"brightness/{name}"]
    else:
        assert entry["flags"]["high_abstain"] == ["brightness/often_abstains"]
    strict_dir = tmp_path / "strict"
    strict_dir.mkdir()
    rc, report, lb = _submit(strict_dir, ref, "--strict", transformation="brightness")
    assert rc == 1 and not list(lb.rglob("*.json"))


@pytest.fixture(scope="module")
def template_entry(tmp_path_factory):
    """The shipped template, copied out of the repo with `bench template`, submitted end to end."""
    d = tmp_path_factory.mktemp("template")
    assert main(["template", str(d / "my_defense.py")]) == 0
    lb = d / "lb"
    rc = main(["submit", f"{d / 'my_defense.py'}:BrightnessSmoothing", "--suite", "semantic", "--profile", "smoke",
               "--transformation", "brightness", "--n-examples", "3", "--leaderboards", str(lb),
               "--out", str(d / "run")])
    assert rc == 0
    return lb / "semantic" / "digits" / "brightness_smoothing.json"


def test_template_is_checked_run_and_ranked(template_entry, tmp_path, capsys, monkeypatch):
    entry = json.loads(template_entry.read_text())
    assert entry["defense"]["certified"] and not entry["flags"]["invalid"]
    cells = {(r["transformation"], r["budget"]): r for r in entry["results"]}
    assert set(cells) == {("brightness", b) for b in (0.0, 0.1, 0.2, 0.3)}
    assert all(isinstance(r["certified_accuracy"], float) for r in cells.values())
    assert entry["provenance"]["checkpoints"], "checkpoint sha256 recorded"
    monkeypatch.delenv("BENCH_QUIET", raising=False)
    monkeypatch.setenv("BENCH_PROGRESS_EVERY", "0")  # a progress line at every step
    capsys.readouterr()
    assert main(["verify-entry", str(template_entry), "--rerun", "1"]) == 0
    err = capsys.readouterr().err.splitlines()
    stages = [x for x in err if x.startswith(f"verify {template_entry.name}: ")]
    assert [x.rsplit(" | ", 1)[1] for x in stages] == ["recompute from rows", "re-run examples", "re-verify proofs",
                                                       "re-verify proofs"]
    assert stages[-1].startswith(f"verify {template_entry.name}: 3/3 (100%) done in ")
    assert any(x.startswith("run: 1/1 (100%) done in ") and x.endswith(" | digits/brightness/BrightnessSmoothing")
               for x in err), err
    lb = template_entry.parents[2]
    capsys.readouterr()
    for fmt in ("md", "latex", "csv", "html"):
        assert main(["leaderboard", "--leaderboards", str(lb), "--format", fmt]) == 0
        assert "brightness" in capsys.readouterr().out
    png = tmp_path / "plot.png"
    assert main(["plot", "--leaderboards", str(lb), "--out", str(png)]) == 0
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_verify_entry_detects_edited_numbers_and_rows(template_entry, tmp_path, capsys):
    import shutil

    work = tmp_path / "lb" / "semantic" / "digits"
    shutil.copytree(template_entry.parent, work)
    path = work / template_entry.name
    entry = json.loads(path.read_text())
    entry["results"][1]["certified_accuracy"] = 0.0 if entry["results"][1]["certified_accuracy"] else 1.0
    path.write_text(json.dumps(entry))
    assert main(["verify-entry", str(path)]) == 1
    assert "certified_accuracy" in capsys.readouterr().err

    shutil.copy(template_entry, path)
    rows_path = work / entry["provenance"]["rows_file"]
    rows = read_rows(rows_path)
    rows[0]["clean"]["correct"] = not rows[0]["clean"]["correct"]
    rows_path.write_bytes(rows_bytes(rows))
    assert main(["verify-entry", str(path)]) == 1
    assert "sha256" in capsys.readouterr().err


ENTRY_EDITS = {
    "protocol.n": lambda e: e["protocol"].update(n=100000),
    "protocol.alpha": lambda e: e["protocol"].update(alpha=0.01),
    "protocol.n0": lambda e: e["protocol"].update(n0=100),
    "protocol.n_predict": lambda e: e["protocol"].update(n_predict=10000),
    "protocol.n_examples": lambda e: e["protocol"].update(n_examples=500),
    "protocol.examples": lambda e: e["protocol"].update(examples=e["protocol"]["examples"][:-1]),
    "protocol.attack": lambda e: e["protocol"]["attack"][0].update(steps=50),
    "flags.high_abstain": lambda e: e["flags"].update(high_abstain=["brightness/brightness_smoothing"]),
    "flags.unverified": lambda e: e["flags"].update(unverified=["brightness/brightness_smoothing"]),
    "provenance.checkpoints": lambda e: e["provenance"]["checkpoints"].update(
        {k: "0" * 64 for k in e["provenance"]["checkpoints"]}),
    "task models": lambda e: e["tasks"][0]["models"][0].update(sha256="0" * 64),
}


@pytest.mark.parametrize("field", sorted(ENTRY_EDITS))
def test_verify_entry_checks_every_field_the_rows_determine(template_entry, tmp_path, capsys, field):
    import shutil

    work = tmp_path / "lb" / "semantic" / "digits"
    shutil.copytree(template_entry.parent, work)
    path = work / template_entry.name
    assert main(["verify-entry", str(path)]) == 0
    entry = json.loads(path.read_text())
    ENTRY_EDITS[field](entry)
    path.write_text(json.dumps(entry))
    capsys.readouterr()
    assert main(["verify-entry", str(path)]) == 1
    assert "MISMATCH" in capsys.readouterr().err


def test_verify_entry_rerun_detects_a_changed_decision(template_entry, tmp_path):
    import shutil

    from benchmark.leaderboard.verify import rerun

    work = tmp_path / "lb" / "semantic" / "digits"
    shutil.copytree(template_entry.parent, work)
    path = work / template_entry.name
    entry = json.loads(path.read_text())
    k = len(entry["protocol"]["examples"])
    assert rerun(path, k, tolerance=0.0, log=lambda m: None) == []
    rows_path = work / entry["provenance"]["rows_file"]
    rows = read_rows(rows_path)
    for r in rows:  # one decision per example: the clean prediction
        r["clean"]["prediction"] = (r["clean"]["prediction"] + 1) % 10
    rows_path.write_bytes(rows_bytes(rows))
    (problem,) = rerun(path, k, tolerance=0.0, log=lambda m: None)
    assert "differ from the stored rows" in problem


def test_entry_schema_rejects_untyped_numbers(template_entry):
    from benchmark.errors import BenchError
    from benchmark.leaderboard.schema import validate_entry

    entry = json.loads(template_entry.read_text())
    validate_entry(entry)
    entry["results"][0]["certified_accuracy"] = "0.9"
    with pytest.raises(BenchError, match="certified_accuracy"):
        validate_entry(entry)


def test_a_wrong_class_name_lists_the_classes_found(tmp_path):
    ref = _write(tmp_path, "two", "class D(Base):\n    name = 'd'\n\nclass E(Base):\n    name = 'e'\n")
    path = ref.rsplit(":", 1)[0]
    for wrong in ("Nope", "torch"):  # missing, and not a Defense subclass
        rc, report, _ = _submit(tmp_path, f"{path}:{wrong}")
        (msg,) = [f["message"] for f in report["findings"] if f["rule"] == "api"]
        assert rc == 1 and "Defense subclasses found in it: Base, D, E." in msg, msg


def test_a_relative_submission_reruns_from_anywhere_and_shows_beside_the_built_ins(tmp_path, monkeypatch, capsys):
    src = tmp_path / "src"
    src.mkdir()
    assert main(["template", str(src / "my_defense.py")]) == 0
    monkeypatch.chdir(src)
    lb = tmp_path / "lb"
    assert main(["submit", "my_defense.py:BrightnessSmoothing", "--profile", "smoke", "--transformation",
                 "brightness", "--n-examples", "2", "--leaderboards", str(lb), "--out", str(tmp_path / "run")]) == 0
    entry = lb / "semantic" / "digits" / "brightness_smoothing.json"
    assert json.loads(entry.read_text())["defense"]["ref"] == f"{src / 'my_defense.py'}:BrightnessSmoothing"
    monkeypatch.chdir(tmp_path)
    assert main(["verify-entry", str(entry), "--rerun", "1"]) == 0
    capsys.readouterr()
    assert main(["leaderboard", "--also", str(lb), "--format", "md", "--table", "certified"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    header = [c.strip() for c in next(x for x in lines if x.lstrip("| ").startswith("transformation")).strip("|").split("|")]
    assert "brightness_smoothing ¶" in header and "tss" in header  # beside the built-ins
    mine = header.index("brightness_smoothing ¶")
    rows = [[c.strip() for c in x.strip("|").split("|")] for x in lines if x.lstrip("| ").startswith("brightness")]
    assert rows and not any(r[mine].startswith("**") for r in rows)  # a smoke entry is never ranked


def test_the_documented_blur_example_is_sound_and_accepted(tmp_path):
    """docs/examples/blur_smoothing.py: parameter smoothing over the blur on the packaged vanilla checkpoint,
    ranked (verified mechanism)."""

    example = REPO / "docs" / "examples" / "blur_smoothing.py"
    assert example.name in (example.parent.parent / "submitting.md").read_text()
    rc, report, lb = _submit(tmp_path, f"{example}:BlurSmoothing", transformation="gaussian_blur", n=4)
    assert rc == 0, report["findings"]
    assert {"statistics", "consistency", "sandbox", "test_split"} <= set(report["rules_run"])
    entry = json.loads((lb / "semantic" / "digits" / "blur_smoothing.json").read_text())
    assert not entry["flags"]["invalid"] and entry["flags"]["unverified"] == []
    cells = {r["budget"]: r for r in entry["results"] if r["transformation"] == "gaussian_blur"}
    assert sorted(cells) == [0.0, 1.0, 2.0, 4.0]
    accs = [cells[b]["certified_accuracy"] for b in sorted(cells)]
    assert accs == sorted(accs, reverse=True) and accs[0] > 0  # nested budgets, something certified


def test_verify_entry_rerun_compares_counts_not_only_decisions(template_entry, tmp_path):
    import shutil

    from benchmark.leaderboard.verify import rerun

    work = tmp_path / "lb" / "semantic" / "digits"
    shutil.copytree(template_entry.parent, work)
    path = work / template_entry.name
    entry = json.loads(path.read_text())
    rows_path = work / entry["provenance"]["rows_file"]
    rows = read_rows(rows_path)
    for r in rows:  # one selection sample moved between classes: no decision changes, the counts do
        sel = r["certificates"][0]["stats"]["counts_selection"]
        top = sel.index(max(sel))
        sel[top] -= 1
        sel[(top + 1) % len(sel)] += 1
    rows_path.write_bytes(rows_bytes(rows))
    (problem,) = rerun(path, len(entry["protocol"]["examples"]), tolerance=0.0, log=lambda m: None)
    assert "Monte-Carlo counts" in problem and f"{len(rows)} of {len(rows)}" in problem


# item: only mechanisms the harness verifies end to end are ranked
PIXEL = '''
from benchmark.defense import pixel_smoothing
class D(Base):
    name = "pixel_helper"
    certified = True
    def certify(self, x, t, budgets, g):
        return [pixel_smoothing(self.model, x, t, budgets, g, self.smoothing, 10, sigma=0.25)]
'''
FORGED = {
    # the helper's record kept, its budget thresholds lowered (flags follow them, so the statistics agree)
    "lowered_thresholds": PIXEL.replace("        return [pixel_smoothing(", "        c = pixel_smoothing(").replace(
        "sigma=0.25)]", """sigma=0.25)
        from benchmark.audit.statistics import margin
        rule = {"statistic": "margin", "required": {b: v / 4 for b, v in c.stats["threshold_rule"]["required"].items()}}
        c.stats["threshold_rule"] = rule
        c.certified = {b: c.prediction >= 0 and (b == 0 or margin(c.stats["p_a_lower"]) > rule["required"][repr(b)])
                       for b in c.certified}
        return [c]"""),
    # the helper run on another input than the one to certify (its pixel distances are not this image's)
    "other_input": PIXEL.replace("pixel_smoothing(self.model, x,", "pixel_smoothing(self.model, 0.5 * x,"),
}


def test_pixel_smoothing_helper_is_verified_and_ranked_on_any_transformation_with_pixel_bounds(tmp_path):
    rc, report, lb = _submit(tmp_path, _write(tmp_path, "pixel_helper", PIXEL), transformation="zoom_blur")
    assert rc == 0, report["findings"]
    entry = json.loads((lb / "semantic" / "digits" / "pixel_helper.json").read_text())
    assert entry["flags"]["unverified"] == []
    rows = read_rows(lb / "semantic" / "digits" / entry["provenance"]["rows_file"])
    assert {r["certificates"][0]["stats"]["mechanism"]["kind"] for r in rows} == {"pixel"}
    assert main(["verify-entry", str(lb / "semantic" / "digits" / "pixel_helper.json")]) == 0


@pytest.mark.parametrize("name", sorted(FORGED))
def test_a_forged_mechanism_is_listed_as_unverified(tmp_path, name):
    rc, report, lb = _submit(tmp_path, _write(tmp_path, name, FORGED[name]), transformation="zoom_blur")
    assert {f["rule"] for f in report["findings"] if f["level"] == "warning"} >= {"unverified"}, report["findings"]
    if rc == 0:  # (a false claim may also be broken by the attack: then it is rejected outright)
        entry = json.loads((lb / "semantic" / "digits" / "pixel_helper.json").read_text())
        assert entry["flags"]["unverified"] == ["zoom_blur/pixel_helper"]


def test_newcomer_radius_rule_on_another_transformation_is_not_ranked(tmp_path, capsys):
    """Brightness noise and its radius rule, submitted on zoom blur: listed with §, never bold."""
    body = WARNS["hand_rolled_smoothing"][0]
    rc, report, lb = _submit(tmp_path, _write(tmp_path, "hand_rolled_smoothing", body), transformation="zoom_blur")
    assert rc == 0 and "unverified" in {f["rule"] for f in report["findings"] if f["level"] == "warning"}
    entry = json.loads((lb / "semantic" / "digits" / "hand_rolled_smoothing.json").read_text())
    assert entry["flags"]["unverified"] == ["zoom_blur/hand_rolled_smoothing"]
    capsys.readouterr()
    assert main(["leaderboard", "--leaderboards", str(lb), "--format", "md"]) == 0
    table = capsys.readouterr().out
    assert "§" in table and "**" not in table.split("Certified vs attacked")[0]


def test_template_without_supports_refuses_a_transformation_it_cannot_certify(template_entry, tmp_path):
    src = (template_entry.parents[3] / "my_defense.py").read_text()
    body = src.replace('        return t.kind == "additive" and t.dim == 1 and not t.one_sided and not t.integer',
                       "        return True")
    assert body != src
    f = tmp_path / "everywhere.py"
    f.write_text(body)
    rc, report, lb = _submit(tmp_path, f"{f}:BrightnessSmoothing", transformation="zoom_blur")
    assert rc == 1 and not list(lb.rglob("*.json"))
    assert any("additively" in m["message"] for m in report["findings"] if m["level"] == "error")


def test_template_certificates_record_the_parameter_mechanism(template_entry):
    entry = json.loads(template_entry.read_text())
    assert entry["flags"]["unverified"] == []
    rows = read_rows(template_entry.with_name(entry["provenance"]["rows_file"]))
    mech = rows[0]["certificates"][0]["stats"]["mechanism"]
    assert (mech["kind"], mech["transformation"], mech["distribution"]) == ("parameter", "brightness", "gaussian")


def test_dispersion_test_separates_binomial_counts_from_repeated_draws():
    import numpy as np

    from benchmark.audit.independence import LEVEL, dispersion_pvalue

    rng = np.random.default_rng(0)
    honest = rng.binomial(116, 0.4, size=12).tolist()
    repeated = (rng.binomial(8, 0.4, size=12) * 116 // 8).tolist()  # 8 draws, each repeated ~14 times
    assert dispersion_pvalue(honest, [116] * 12) > 1e-3
    assert dispersion_pvalue(repeated, [116] * 12) < LEVEL
    assert dispersion_pvalue([116] * 12, [116] * 12) is None  # all in one class: no power, no verdict
    assert dispersion_pvalue([0] * 11 + [40], [116] * 12) is None  # a rare class: no chi-square approximation


def test_parameter_smoothing_is_refused_where_its_radius_is_not_a_proof():
    from benchmark.certify.mechanisms import parameter_problem
    from benchmark.transformations import get_transformation

    assert parameter_problem(get_transformation("brightness"), "gaussian") is None
    assert parameter_problem(get_transformation("gaussian_blur"), "exponential") is None
    assert "additively" in parameter_problem(get_transformation("zoom_blur"), "gaussian")
    assert "one of" in parameter_problem(get_transformation("gaussian_blur"), "gaussian")  # one-sided parameter


def test_the_documented_pixel_example_certifies_rotation_with_a_verified_per_budget_rule():
    """docs/examples/blur_smoothing.py:PixelSmoothing on rotation: one required margin per budget, and the
    checker re-derives its mechanism from the test image (so it would be ranked)."""
    import importlib.util

    import torch

    from benchmark.audit.mechanism import problem
    from benchmark.certify.smoothing import SmoothingParams
    from benchmark.context import Context
    from benchmark.datasets import get_dataset
    from benchmark.models.store import ModelStore
    from benchmark.transformations import get_transformation

    path = REPO / "docs" / "examples" / "blur_smoothing.py"
    spec = importlib.util.spec_from_file_location("blur_smoothing_example", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    t, ds = get_transformation("rotation"), get_dataset("digits")
    d = module.PixelSmoothing()
    d.prepare(Context(dataset=ds, transformation=t, smoothing=SmoothingParams(n0=16, n=64, alpha=0.01),
                      store=ModelStore(allow_train=False), budgets=(0.0, 1.0, 5.0)))
    x = ds.load("test")[0][:1]
    cert = d.certify(x, t, [0.0, 1.0, 5.0], torch.Generator().manual_seed(0))[0].to_json()
    assert sorted(cert["stats"]["threshold_rule"]["required"]) == ["0.0", "1.0", "5.0"]
    assert problem(cert, t, x) is None
    assert problem(cert, get_transformation("scaling"), x) is not None  # tied to the task's transformation


# a false certificate hidden behind abstentions (issue #45): PREDICT at the profile's 100 samples abstains on
# the brightened digit, with 10,000 samples it names another class; the checker re-runs PREDICT there
ABSTAINS_WHERE_FALSE = BROKEN["liar"][0].replace('"liar"', '"abstains_where_false"') + '''
    def predict(self, x, t, g):
        labels = super().predict(x, t, g)
        shifted = x.flatten(1).quantile(0.1, dim=1).abs() > 0.05   # a brightened digit has no background left
        other = torch.full_like(labels, -1) if (self.smoothing.n_predict or 0) < 10000 else (labels + 1) % 10
        return torch.where(shifted, other, labels)
'''


def test_a_false_certificate_behind_predict_abstentions_is_rejected_after_a_larger_predict(tmp_path):
    rc, report, lb = _submit(tmp_path, _write(tmp_path, "abstains_where_false", ABSTAINS_WHERE_FALSE),
                             transformation="brightness")
    errors = [f["message"] for f in report["findings"] if f["level"] == "error" and f["rule"] == "consistency"]
    assert rc == 1 and not list(lb.rglob("*.json")), report["findings"]
    assert errors and "PREDICT with 10000 samples gives class" in errors[0], report["findings"]
