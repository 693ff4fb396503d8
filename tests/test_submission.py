"""bench submit / verify-entry / leaderboard / plot: every checker rule, on one-file defenses outside the repo."""
import gzip
import json

import pytest

from benchmark.cli import main

# Defenses built on the packaged vanilla model (no training), each broken in one documented way.
HEADER = '''
import torch
from benchmark.certify.certificate import Certificate
from benchmark.certify.smoothing import certify
from benchmark.defense import Defense
from benchmark.models.recipes import classifier_spec


class Base(Defense):
    name = "base"

    def prepare(self, ctx):
        self.model = ctx.model(classifier_spec(ctx, "vanilla", {"name": "none"}, None))
        self.smoothing = ctx.smoothing

    def predict(self, x, t, g):
        with torch.no_grad():
            return self.model(x).argmax(1)
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
        res = certify(lambda k, gen: self.predict(x.expand(k, -1, -1, -1), t, gen), 10, self.smoothing, g)
        stats = {**res.stats(), "p_a_lower": 0.999999}
        return [Certificate.from_radius(res.prediction, 1.0, budgets, stats)]
''', "statistics"),
    "radius_not_from_rule": ('''
class D(Base):
    name = "radius_not_from_rule"
    certified = True
    def certify(self, x, t, budgets, g):
        res = certify(lambda k, gen: self.predict(x.expand(k, -1, -1, -1), t, gen), 10, self.smoothing, g)
        stats = {**res.stats(), "radius_rule": {"distribution": "gaussian", "scale": 0.1}}
        return [Certificate.from_radius(res.prediction, 5.0, budgets, stats)]
''', "statistics"),
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
        res = certify(lambda k, gen: self.predict(x.expand(k, -1, -1, -1), t, gen), 10, self.smoothing, g)
        rule = {"distribution": "gaussian", "scale": 1000.0}
        from benchmark.certify.radii import gaussian_radius
        radius = gaussian_radius(res.p_a_lower, 1000.0)
        return [Certificate.from_radius(res.prediction, radius, budgets, {**res.stats(), "radius_rule": rule})]
''', "consistency"),
}

WARNS = {
    "always_abstains": ('''
class D(Base):
    name = "always_abstains"
    def predict(self, x, t, g):
        return torch.full((len(x),), -1, dtype=torch.int64)
''', "abstain"),
    "randomized": ('''
class D(Base):
    name = "randomized"
    def predict(self, x, t, g):
        with torch.no_grad():
            noisy = x + 2.0 * torch.randn(x.shape, generator=g)
            return self.model(noisy).argmax(1)
''', "randomized"),
}


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
    else:
        assert entry["flags"]["high_abstain"] == ["brightness/always_abstains"]
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


def test_template_is_checked_run_and_ranked(template_entry, tmp_path, capsys):
    entry = json.loads(template_entry.read_text())
    assert entry["defense"]["certified"] and not entry["flags"]["invalid"]
    cells = {(r["transformation"], r["budget"]): r for r in entry["results"]}
    assert set(cells) == {("brightness", b) for b in (0.0, 0.1, 0.2, 0.3)}
    assert all(isinstance(r["certified_accuracy"], float) for r in cells.values())
    assert entry["provenance"]["checkpoints"], "checkpoint sha256 recorded"
    assert main(["verify-entry", str(template_entry), "--rerun", "1"]) == 0
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
    rows = [json.loads(line) for line in gzip.open(rows_path, "rt")]
    rows[0]["clean"]["correct"] = not rows[0]["clean"]["correct"]
    with gzip.open(rows_path, "wt") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    assert main(["verify-entry", str(path)]) == 1
    assert "sha256" in capsys.readouterr().err


def test_entry_schema_rejects_untyped_numbers(template_entry):
    from benchmark.errors import BenchError
    from benchmark.leaderboard.schema import validate_entry

    entry = json.loads(template_entry.read_text())
    validate_entry(entry)
    entry["results"][0]["certified_accuracy"] = "0.9"
    with pytest.raises(BenchError, match="certified_accuracy"):
        validate_entry(entry)
