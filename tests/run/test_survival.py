"""The survival table: surrogate-only certificates checked on the real transformation
(benchmark/run/survival.py)."""
import json
import math

import pandas as pd
import pytest
import torch

from attacks.region import integer_points
from benchmark.audit.checker import CheckReport, check_run
from benchmark.certify.certificate import SURROGATE_ONLY
from benchmark.cli import main
from benchmark.leaderboard.entry import build_entry, load_entries, load_entry, write_entry
from benchmark.leaderboard.formats import render
from benchmark.leaderboard.render import survival_table
from benchmark.leaderboard.schema import validate_entry
from benchmark.leaderboard.verify import recompute
from benchmark.reports.summary import consistency_violations
from benchmark.reports.survival import render_survival, survival_records
from benchmark.run.driver import run_suite
from benchmark.run.options import RunOptions
from benchmark.run.results import load_run
from benchmark.run.survival import check_survival, survival_grid
from benchmark.suites import load_suite
from benchmark.suites.loader import Profile, Task
from benchmark.transformations import get_transformation

# The packaged vanilla model, except that a brightness offset in [low, high) -- read off the image minimum:
# digits have a black background and brightness is not clipped -- turns its label into the next class.
# Its sound certificate claims budget 0.1 only (true); its surrogate-only one claims every budget.
FLIP = '''
import torch
from benchmark.certify.certificate import SURROGATE_ONLY, Certificate
from benchmark.certify.smoothing import certify
from benchmark.defense import Defense
from benchmark.recipes import classifier_spec


class Flip(Defense):
    name = "flip"
    certified = True
    variants = ("", "paper")
    low, high = 0.15, 10.0

    def prepare(self, ctx):
        self.model = ctx.model(classifier_spec(ctx, "vanilla", {"name": "none"}, None))
        self.smoothing = ctx.smoothing

    def predict(self, x, t, g):
        with torch.no_grad():
            label = self.model(x).argmax(1)
        b = x.amin(dim=(1, 2, 3))
        return torch.where((b >= self.low) & (b < self.high), (label + 1) % 10, label)

    def certify(self, x, t, budgets, g):
        # honest Monte-Carlo statistics of a constant sampler; the per-budget claims are threshold rules
        # on the margin (0: claimed, 1e9: not), which the checker recomputes
        p = int(self.predict(x, t, g)[0])
        res = certify(lambda k, gen: torch.full((k,), p), 10, self.smoothing, g)
        sound = {repr(float(b)): 0.0 if b <= 0.1 else 1e9 for b in budgets if b > 0}
        paper = {repr(float(b)): 0.0 for b in budgets if b > 0}
        return [Certificate(p, None, {b: b <= 0.1 for b in budgets},
                            {**res.stats(), "threshold_rule": {"statistic": "margin", "required": sound}}),
                Certificate(p, None, {b: True for b in budgets},
                            {**res.stats(), "threshold_rule": {"statistic": "margin", "required": paper},
                             "certifies": SURROGATE_ONLY}, "paper")]


class Band(Flip):
    """Flips only for offsets in (0.14, 0.16): no boundary point of any budget region is in it."""
    name = "band"
    low, high = 0.14, 0.16
'''

# extreme points only (k = 0): the attacks cannot find Band's flip, only the survival grid can
SUITE = '''
name: survival-test
datasets: [digits]
defenses: [vanilla]
attack: [{name: worst_of_k, k: 0}]
profiles:
  smoke: {n_examples: 3, n0: 16, n: 100, alpha: 0.001, batch_size: 128, n_predict: 100, attack_k: 0,
          survival_points: 5}
transformations:
  brightness: {budgets: {default: [0.1, 0.2, 0.3]}}
'''


@pytest.fixture(scope="module")
def flip_file(tmp_path_factory):
    f = tmp_path_factory.mktemp("defense") / "flip.py"
    f.write_text(FLIP)
    return f


@pytest.fixture(scope="module")
def flip_run(flip_file, tmp_path_factory):
    """`bench run` on Flip: the attacks (extreme points) break its surrogate-only claims at 0.2 and 0.3."""
    out = tmp_path_factory.mktemp("runs") / "flip"
    code = main(["run", "--profile", "smoke", "--transformation", "brightness", "--defense", f"{flip_file}:Flip",
                 "--n-examples", "4", "--no-train", "--out", str(out)])
    return out, code


def _rows(folder):
    return [json.loads(x) for x in (folder / "rows.jsonl").read_text().splitlines()]


def test_contradicted_surrogate_claims_are_findings_not_consistency_failures(flip_run):
    out, code = flip_run
    assert code == 0
    assert json.loads((out / "consistency.json").read_text()) == []
    s = pd.read_csv(out / "survival.csv").set_index("budget")
    assert list(s.label.unique()) == ["flip:paper"]
    n = s.loc[0.1, "n_certified"]
    assert n >= 3 and (s.n_examples == 4).all()  # the vanilla model is right on (nearly) every example
    assert s.loc[0.1, "contradicted"] == 0 and s.loc[0.1, "also_sound"] == 1
    assert s.loc[0.1, "grid_points"] == 5  # 0.1 is the only open budget: the full grid of its region
    for b in (0.2, 0.3):
        assert s.loc[b, "contradicted"] == 1 and s.loc[b, "n_contradicted"] == n and s.loc[b, "also_sound"] == 0
        assert math.isnan(s.loc[b, "grid_points"])
    for r in _rows(out):
        if r["certificates"][1]["correct"]:
            assert r["survival"]["paper"]["0.2"]["by"] == "attack" and r["broken"]["0.2"]
    table = (out / "table.md").read_text()
    assert "survival of surrogate-only certificates" in table and "flip:paper †" in table
    assert " !" not in table and "consistency failure" not in table.split("### survival")[0]
    assert "100.0 / 0.0" in table and "100.0 / 0.0 ‡" not in table  # ‡ would claim no confident wrong label


def test_the_grid_finds_what_the_attacks_miss(flip_file, tmp_path):
    suite_file = tmp_path / "suite.yaml"
    suite_file.write_text(SUITE)
    opts = RunOptions(profile="smoke", defenses=[f"{flip_file}:Band"], allow_train=False, out=tmp_path / "run",
                      log=lambda m: None, print_table=False)
    out = run_suite(load_suite(str(suite_file)), opts)
    rows = [r for r in _rows(out) if r["certificates"][1]["correct"]]
    missed = [r for r in rows if r["empirical"]["0.3"]]  # the attacks saw nothing on these
    assert len(missed) >= 2
    for r in missed:
        got = r["survival"]["paper"]
        # grid of [-0.3, 0.3]: 0, +-0.15, +-0.3 and the boundary points +-0.1, +-0.2; the flip is at +0.15
        assert got["0.1"] == {"checked": 3, "contradicted": False, "by": None, "theta": None, "sound_certified": True}
        for b, n in (("0.2", 7), ("0.3", 9)):
            assert got[b]["contradicted"] and got[b]["by"] == "grid" and got[b]["checked"] == n
            assert got[b]["theta"] == pytest.approx([0.15]) and not got[b]["sound_certified"]
    for r in rows:  # where the vanilla model itself breaks, the attack's label is the evidence
        for b in ("0.2", "0.3"):
            assert r["survival"]["paper"][b]["contradicted"]
            assert (r["survival"]["paper"][b]["by"] == "attack") == r["broken"][b]
    s = pd.read_csv(out / "survival.csv").set_index("budget")
    assert list(s.contradicted) == [0.0, 1.0, 1.0] and s.loc[0.1, "grid_points"] == 3
    assert json.loads((out / "consistency.json").read_text()) == []


def test_survival_numbers_reach_the_leaderboard(flip_run, tmp_path):
    out, _ = flip_run
    run = load_run(out)
    ref = run.tasks[0].defense
    entry, data = build_entry(run, ref, "digits", checker={})
    assert [(r["budget"], r["contradicted"]) for r in entry["survival"]] == [(0.1, 0.0), (0.2, 1.0), (0.3, 1.0)]
    assert entry["flags"]["consistency_violations"] == 0 and not entry["flags"]["invalid"]
    report = CheckReport(ref, strict=True)  # nor an error or a warning of the submission checker
    check_run(run, ref, report)
    assert report.passed and not report.findings
    path = write_entry(tmp_path, entry, data)
    assert recompute(path) == []
    doctored = {**entry, "survival": [{**entry["survival"][1], "contradicted": 0.0}]}
    path.write_text(json.dumps(doctored))
    assert any("survival" in p for p in recompute(path))
    path.write_text(json.dumps(entry))
    md = render(load_entries(tmp_path, entry["suite"], "digits"), "md", ["certified", "survival"], "t")
    assert "Survival of surrogate-only certificates" in md
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in md.split("### Survival")[1].splitlines()
             if line.startswith("|")]
    assert cells[0] == ["transformation", "budget", "certificate", "certified", "also sound", "contradicted", "n",
                        "grid"]
    assert cells[3] == ["brightness", "0.2", "flip:paper †", "100.0 [39.7, 100.0]", "0.0 [0.0, 60.3]",
                        "100.0 [39.7, 100.0]", "4", "--"]  # 95 % Clopper-Pearson intervals of 4/4, 0/4, 4/4


def test_entries_without_survival_still_validate_and_render():
    from benchmark.leaderboard.entry import default_root

    path = default_root() / "semantic" / "digits" / "gsmooth.json"
    assert recompute(path) == []  # the task hashes do not depend on survival_points
    entry = load_entry(path)
    entry.pop("survival", None)  # an entry from before the survival table
    validate_entry(entry)
    assert not survival_table([entry]).rows
    assert "Survival" not in render([entry], "md", ["certified", "survival"], "t")


def _task(budgets=(0.0, 5.0, 10.0), defense="gsmooth"):
    return Task("semantic", "digits", "rotation", defense, {}, budgets, Profile(name="smoke"), 0)


def _cert(variant, certified, correct=True, surrogate=False):
    stats = {"certifies": SURROGATE_ONLY} if surrogate else {}
    return {"variant": variant, "correct": correct, "certified": {repr(b): v for b, v in certified.items()},
            "stats": stats}


def _claim(sound, contradicted, checked=21):
    return {"checked": checked, "contradicted": contradicted, "by": "grid" if contradicted else None,
            "theta": [3.0] if contradicted else None, "sound_certified": sound}


def test_report_on_hand_made_rows():
    task, other = _task(), _task(defense="tss")
    # budget 5: paper certifies examples 0, 1, 2 (75% of 4); example 0 also sound (1 of 3), example 2
    # contradicted (1 of 3). Budget 10: paper certifies example 1 only (25%), not sound, not contradicted.
    claims = [{"5.0": _claim(True, False, 15)}, {"5.0": _claim(False, False, 11), "10.0": _claim(False, False, 21)},
              {"5.0": _claim(False, True)}, {}]
    rows = []
    for i, survival in enumerate(claims):
        paper = {0.0: True, 5.0: "5.0" in survival, 10.0: "10.0" in survival}
        rows.append({"task": task.hash, "example": i, "survival": {"paper": survival},
                     "certificates": [_cert("", {0.0: True, 5.0: i == 0, 10.0: False}),
                                      _cert("paper", paper, surrogate=True)]})
    rows.append({**rows[2], "example": 9})  # not one of the task's examples: ignored
    rows.append({"task": other.hash, "example": 0, "certificates": [_cert("", {5.0: True})]})  # no survival
    info = {task.hash: {"supported": True, "certified": True, "examples": [0, 1, 2, 3], "labels": ["gsmooth", "gsmooth:paper"]},
            other.hash: {"supported": True, "examples": [0], "labels": ["tss"]}}
    recs = survival_records([task, other], info, rows)
    assert [(r["label"], r["budget"]) for r in recs] == [("gsmooth:paper", 5.0), ("gsmooth:paper", 10.0)]
    five, ten = recs
    assert (five["certified"], five["n_certified"], five["n_examples"]) == (0.75, 3, 4)
    assert five["also_sound"] == pytest.approx(1 / 3) and five["contradicted"] == pytest.approx(1 / 3)
    assert five["grid_points"] == 11  # fewest points on an uncontradicted example
    assert (ten["certified"], ten["also_sound"], ten["contradicted"], ten["grid_points"]) == (0.25, 0.0, 0.0, 21)
    text = render_survival(recs)
    assert "|    digits |         rotation | gsmooth:paper † |        5 |   4 |        75.0 |         33.3 |" in text
    # nothing certified: the shares are undefined, not 0
    empty = [{**r, "survival": {"paper": {}}} for r in rows[:4]]
    recs = survival_records([task], info, empty)
    assert recs[0]["certified"] == 0 and recs[0]["also_sound"] is None and recs[0]["contradicted"] is None
    assert "--" in render_survival(recs)
    # surrogate-only certificates never count as consistency failures; sound ones still do
    broken = [{**rows[0], "broken": {"0.0": False, "5.0": True, "10.0": True}}]
    assert consistency_violations([task], info, broken) == {("digits", "rotation", "gsmooth", 5.0): 1}
    assert consistency_violations([task], info, broken, surrogate_only=True) == {
        ("digits", "rotation", "gsmooth:paper", 5.0): 1}


class _Band:
    """PREDICT of a tiny fake defense on brightness: class 1 for offsets in (0.11, 0.16), abstain in
    (-0.08, -0.04), else class 0 (the offset is the image minimum)."""

    def __init__(self):
        self.queries = 0

    def predict(self, x, t, g):
        self.queries += len(x)
        b = x.amin(dim=(1, 2, 3))
        out = torch.zeros(len(x), dtype=torch.int64)
        out[(b > 0.11) & (b < 0.16)] = 1
        out[(b > -0.08) & (b < -0.04)] = -1
        return out


def test_check_survival_nesting_evidence_and_abstentions():
    t, x, g = get_transformation("brightness"), torch.zeros(1, 1, 4, 4), torch.Generator().manual_seed(0)
    certs = [_cert("", {0.0: True, 0.1: True, 0.25: False, 0.3: False}),
             _cert("paper", {0.0: True, 0.1: True, 0.25: True, 0.3: True}, surrogate=True)]
    d = _Band()
    got = check_survival(d, t, x, 0, certs, {}, 11, g)["paper"]
    # grid of [-0.3, 0.3] with 11 points (step 0.06) plus +-0.1, +-0.25: region 0.1 holds 0, +-0.06, +-0.1,
    # where -0.06 abstains (not a contradiction); the smallest flip is at 0.12
    assert got["0.1"] == {"checked": 5, "contradicted": False, "by": None, "theta": None, "sound_certified": True}
    assert got["0.25"]["by"] == "grid" and got["0.25"]["theta"] == pytest.approx([0.12])
    assert got["0.3"]["theta"] == pytest.approx([0.12]) and not got["0.3"]["sound_certified"]
    # earlier evidence settles a budget; the grid then covers only the open ones
    d = _Band()
    got = check_survival(d, t, x, 0, certs, {"0.3": ("attack", [0.28])}, 11, g)["paper"]
    assert got["0.3"] == {"checked": 0, "contradicted": True, "by": "attack", "theta": [0.28],
                          "sound_certified": False}
    assert got["0.25"]["theta"] == pytest.approx([0.15])  # grid of [-0.25, 0.25], step 0.05
    assert d.queries == len(survival_grid(t, [0.1, 0.25], 11)) < len(survival_grid(t, [0.1, 0.25, 0.3], 11))
    # points = 0: the attacks only; a wrong certificate claims nothing
    assert check_survival(_Band(), t, x, 0, certs, {}, 0, g)["paper"]["0.3"]["checked"] == 0
    wrong = [certs[0], {**certs[1], "correct": False}]
    assert check_survival(_Band(), t, x, 0, wrong, {}, 11, g) == {"paper": {}}


@pytest.mark.parametrize("name,budgets,points,size", [
    ("rotation", [5.0, 10.0, 20.0], 21, 21 + 2),  # -20, -18, ..., 20 and +-5
    ("contrast_brightness", [0.1, 0.2], 21, 5 * 5),  # round(sqrt(21)) = 5 per dimension; extremes on the grid
    ("gaussian_blur", [1.0, 2.0], 5, 5),  # one-sided: 0, 0.5, ..., 2
])
def test_survival_grid_is_sorted_by_norm_and_covers_every_boundary(name, budgets, points, size):
    t = get_transformation(name)
    g = survival_grid(t, budgets, points)
    norms = t.norm_of(g.double())
    assert len(g) == size and bool((norms[1:] >= norms[:-1]).all())
    assert norms.max().item() == pytest.approx(max(budgets))
    for b in budgets:  # every budget's boundary points are on the grid
        for e in t.extremes(b):
            assert any(torch.allclose(e, p) for p in g)


def test_translation_grid_is_every_integer_shift():
    t = get_transformation("translation")
    g = survival_grid(t, [1.0, 2.5], 21)
    assert {tuple(p) for p in g.tolist()} == {tuple(p) for p in integer_points(t, 2.5).tolist()}


def test_survival_points_leave_task_hashes_alone():
    a = _task()
    b = Task(a.suite, a.dataset, a.transformation, a.defense, {}, a.budgets, Profile(name="smoke", survival_points=5), 0)
    assert a.hash == b.hash
    with pytest.raises(Exception, match="survival_points"):
        Profile(name="smoke", survival_points=1)
