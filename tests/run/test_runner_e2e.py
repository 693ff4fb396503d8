"""End to end through the runner with the packaged zoo (no training): table, summary, determinism, resume."""
import json
import shutil

import pandas as pd
import pytest

from benchmark.cli import main
from benchmark.errors import BenchError
from benchmark.reports.summary import SUMMARY_COLUMNS
from benchmark.run.driver import run_suite
from benchmark.run.options import RunOptions
from benchmark.suites import load_suite

TRANSFORMS = ["brightness", "translation", "pixelate"]


def _run(out, **kw):
    opts = RunOptions(profile="smoke", seed=kw.pop("seed", 0), transformations=TRANSFORMS, n_examples=3,
                      allow_train=False, out=out, log=lambda m: None, **kw)
    return run_suite(load_suite("semantic"), opts)


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("runs") / "a")


def test_summary_and_table(first_run, capsys):
    s = pd.read_csv(first_run / "summary.csv")
    assert list(s.columns) == SUMMARY_COLUMNS
    assert set(s.metric) >= {"clean_accuracy", "certified_accuracy", "empirical_accuracy", "abstain_rate",
                             "seconds_per_example"}
    assert set(s.defense) == {"vanilla", "augmix", "tss", "gsmooth", "gsmooth:paper", "semanify", "interval",
                              "enumeration", "deepg", "spt:indiv", "spt:dist"}
    # tss does not support pixelate: no rows, "--" in the table
    assert s[(s.defense == "tss") & (s.transformation == "pixelate")].empty
    table = (first_run / "table.md").read_text()
    main_table = table.split("###")[1]
    lines = [line for line in main_table.splitlines() if line.strip().startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    rot = [c for c in cells if c[0] == "pixelate"]
    assert rot and all(c[header.index("tss")] == "--" for c in rot)
    assert all(c[header.index("gsmooth")] != "--" for c in rot)
    # certified accuracy is monotone in the budget and bounded by clean certified accuracy
    c = s[(s.defense == "tss") & (s.metric == "certified_accuracy") & (s.transformation == "brightness")]
    assert list(c.sort_values("budget").value) == sorted(c.value, reverse=True)
    rows = [json.loads(x) for x in (first_run / "rows.jsonl").read_text().splitlines()]
    cert = [r for r in rows if r["defense"] == "tss"][0]["certificates"][0]
    assert {"n0", "n", "alpha", "count_a", "p_a_lower", "counts_estimation"} <= set(cert["stats"])
    cfg = json.loads((first_run / "config.json").read_text())
    assert cfg["seed"] == 0 and cfg["environment"]["versions"]["torch"]
    assert "gsmooth:paper †" in table and "surrogate fit on held-out images" in table
    # the diagnostics table is about whole-path certificates; the semantic suite's gsmooth rows are now all
    # Theorem 1 or sliced, so it appears exactly when a run holds one (tests/reports/test_diagnostics.py renders it)
    whole_path = any(r["defense"] == "gsmooth" and "diagnostics" in r["certificates"][0]["stats"]
                     and "endpoints" not in r["certificates"][0]["stats"] for r in rows)
    assert ("certificate diagnostics" in table) == whole_path
    assert (first_run / "artifacts" / "pixelate" / "gsmooth" / "surrogate.png").exists()
    models = json.loads((first_run / "models.json").read_text())
    assert models and all(m["source"] == "zoo" and len(m["sha256"]) == 64 for m in models)


def _values(summary: pd.DataFrame) -> pd.DataFrame:
    """Every number of a run's table but wall-clock time."""
    return summary[summary.metric != "seconds_per_example"].reset_index(drop=True)


def test_same_seed_same_table_and_an_interrupted_run_resumes_to_it(first_run, tmp_path):
    """A second run with the same seed, killed mid-write after 4 rows and resumed, gives the first run's table:
    every row after those 4 is computed again from the seed (one run for both checks: the same-seed check needs
    a fresh run, and so does the resume, so they share it)."""
    out = tmp_path / "c"
    out.mkdir()
    shutil.copy(first_run / "config.json", out / "config.json")
    lines = (first_run / "rows.jsonl").read_text().splitlines(keepends=True)
    (out / "rows.jsonl").write_text("".join(lines[:4]) + lines[4][:30])  # killed mid-write
    with pytest.raises(BenchError, match="--resume"):
        _run(out)
    _run(out, resume=True)
    rows = [json.loads(x) for x in (out / "rows.jsonl").read_text().splitlines() if x.endswith("}")]
    assert len(rows) == len(lines)  # nothing lost, nothing duplicated
    assert len({(r["task"], r["example"]) for r in rows}) == len(lines)
    assert (out / "table.md").read_text() == (first_run / "table.md").read_text()
    a, b = pd.read_csv(first_run / "summary.csv"), pd.read_csv(out / "summary.csv")
    assert len(_values(a)) > 20 and _values(a).value.notna().any()
    pd.testing.assert_frame_equal(_values(a), _values(b))
    # the comparison sees one changed number (a certified accuracy of the second run, edited)
    edited = b.copy()
    row = edited.index[(edited.metric == "certified_accuracy") & edited.value.notna()][0]
    edited.loc[row, "value"] = 1.0 - edited.loc[row, "value"] + 0.25
    with pytest.raises(AssertionError):
        pd.testing.assert_frame_equal(_values(a), _values(edited))


def test_cli_run_prints_table(tmp_path, capsys):
    code = main(["run", "--profile", "smoke", "--transformation", "brightness", "--defense", "vanilla",
                 "--n-examples", "2", "--no-train", "--out", str(tmp_path / "d")])
    assert code == 0
    assert "brightness" in capsys.readouterr().out


@pytest.mark.parametrize("args,match", [
    (["run", "--transformation", "rotaton"], "Did you mean 'rotation'"),
    (["run", "--defense", "tsss"], "Did you mean 'tss'"),
    (["run", "--dataset", "cifar10", "--offline"], "cifar10"),
    (["run", "--suite", "semantc"], "Did you mean 'semantic'"),
    (["run", "--profile", "smoke", "--n-examples", "0"], "at least 1"),
])
def test_cli_errors(args, match, capsys, tmp_path):
    code = main(args + ["--out", str(tmp_path / "e")])
    err = capsys.readouterr().err
    assert code == 2 and "error:" in err
    import re
    assert re.search(match, err.replace("\n       ", " "))


def test_cli_list_and_help(capsys):
    assert main(["list", "transformations"]) == 0
    out = capsys.readouterr().out
    for name in ["gaussian_blur", "pixelate", "motion_blur", "non_resolvable"]:
        assert name in out
    for sub in ("run", "train", "list"):
        with pytest.raises(SystemExit):
            main([sub, "--help"])
        assert "examples:" in capsys.readouterr().out


LIAR = '''
import torch
from benchmark.certify.certificate import Certificate
from benchmark.defense import Defense
from benchmark.recipes import classifier_spec


class Liar(Defense):
    """Claims an infinite radius for the vanilla model's prediction: an unsound certificate."""
    name = "liar"
    certified = True

    def prepare(self, ctx):
        self.model = ctx.model(classifier_spec(ctx, "vanilla", {"name": "none"}, None))

    def predict(self, x, t, g):
        with torch.no_grad():
            return self.model(x).argmax(1)

    def certify(self, x, t, budgets, g):
        return [Certificate.from_radius(int(self.predict(x, t, g)[0]), 1e9, budgets, {})]
'''


def test_unsound_certificate_is_flagged(tmp_path):
    f = tmp_path / "liar.py"
    f.write_text(LIAR)
    opts = RunOptions(profile="smoke", defenses=[f"{f}:Liar"], transformations=["translation"], n_examples=8,
                      allow_train=False, out=tmp_path / "run", log=lambda m: None)
    out = run_suite(load_suite("semantic"), opts)
    bad = json.loads((out / "consistency.json").read_text())
    assert bad and all(v["violations"] > 0 for v in bad)
    assert "consistency failure" in (out / "table.md").read_text()
    # and `bench run` exits non-zero on it
    code = main(["run", "--profile", "smoke", "--transformation", "translation", "--defense", f"{f}:Liar",
                 "--n-examples", "8", "--no-train", "--out", str(tmp_path / "cli")])
    assert code == 1


def test_certificate_of_an_example_does_not_depend_on_subset_size(first_run, tmp_path):
    """Example 0 is in both the 3- and the 2-example subsets: same certificate (same draws)."""
    opts = RunOptions(profile="smoke", transformations=["brightness"], defenses=["tss"], n_examples=2,
                      allow_train=False, out=tmp_path / "f", log=lambda m: None)
    out = run_suite(load_suite("semantic"), opts)

    def cert0(folder):
        rows = [json.loads(x) for x in (folder / "rows.jsonl").read_text().splitlines()]
        r = [r for r in rows if r["defense"] == "tss" and r["transformation"] == "brightness" and r["example"] == 0]
        return r[0]["certificates"][0]

    assert cert0(out)["stats"] == cert0(first_run)["stats"]
