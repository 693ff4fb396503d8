"""The corruptions suite end to end (smoke profile, packaged zoo, a small digits-c build) with resume."""
import json

import pandas as pd
import pytest

from benchmark.datasets.corruption_builder import build_corrupted_split
from benchmark.errors import BenchError
from benchmark.reports.summary import SUMMARY_COLUMNS
from benchmark.run.driver import run_suite
from benchmark.run.options import RunOptions
from benchmark.suites import load_suite
from benchmark.suites.corruption_suite import parse_corruption_suite

CORRUPTIONS = ["pixelate", "gaussian_noise", "brightness"]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A digits-c build holding only the corruptions this test runs (the full build takes ~30 s)."""
    from benchmark.datasets import get_dataset
    from benchmark.datasets.digits import digits

    mp = pytest.MonkeyPatch()
    root = tmp_path_factory.mktemp("cache")
    mp.setenv("BENCH_CACHE", str(root))
    ds = get_dataset("digits-c")
    ds.cache_root().parent.mkdir(parents=True)
    build_corrupted_split(*digits.load("test"), ds.cache_root(), 0, corruptions=tuple(CORRUPTIONS),
                          log=lambda m: None)
    yield root
    mp.undo()


def _run(out, resume=False, n=3):
    opts = RunOptions(profile="smoke", defenses=["vanilla", "tss", "augmix"], transformations=CORRUPTIONS + ["fog"],
                      n_examples=n, allow_train=False, out=out, resume=resume, log=lambda m: None)
    return run_suite(load_suite("corruptions"), opts)


def test_end_to_end_with_resume(cache, tmp_path):
    folder = _run(tmp_path / "a")
    full = (folder / "rows.jsonl").read_text().splitlines()
    # simulate an interruption: the last rows are lost and the final one is torn mid-write
    (folder / "rows.jsonl").write_text("\n".join(full[:-4]) + "\n" + full[-4][:20])
    folder = _run(tmp_path / "a", resume=True)
    rows = [json.loads(x) for x in (folder / "rows.jsonl").read_text().splitlines() if x.endswith("}")]
    keys = [(r["task"], r["example"]) for r in rows]
    assert len(keys) == len(set(keys)) == len(full)
    s = pd.read_csv(folder / "summary.csv")
    assert list(s.columns) == SUMMARY_COLUMNS
    assert set(s.metric) == {"clean_accuracy", "corruption_accuracy", "abstain_rate", "seconds_per_example"}
    acc = s[(s.metric == "corruption_accuracy") & (s.transformation == "brightness") & (s.defense == "vanilla")]
    assert sorted(acc.budget) == [0, 1, 2, 3, 4, 5] and set(acc.n_examples) == {3}
    # tss does not support pixelate (pixelate's models): no rows, "--" in the table
    assert s[(s.defense == "tss") & (s.transformation == "pixelate")].empty
    assert not s[(s.defense == "tss") & (s.transformation == "gaussian_noise")].empty
    mean = s[(s.transformation == "mean") & (s.defense == "vanilla")].value.item()
    cells = s[(s.defense == "vanilla") & (s.metric == "corruption_accuracy") & (s.budget > 0)].value
    assert abs(mean - cells.mean()) < 1e-9
    table = (folder / "table.md").read_text()
    assert "gaussian_noise #" in table and "fog (not provided by digits-c)" in table
    pixelate_row = [line for line in table.splitlines() if line.startswith("| ") and " pixelate " in line][0]
    assert "--" in pixelate_row
    # same seed, fresh folder: identical rows (predictions) for every example
    again = _run(tmp_path / "b")
    strip = lambda f: sorted((r["task"], r["example"], json.dumps(r["severities"]), r["clean"]["prediction"])  # noqa: E731
                             for r in map(json.loads, [x for x in (f / "rows.jsonl").read_text().splitlines()
                                                       if x.endswith("}")]))
    assert strip(again) == strip(folder)


def test_suite_validation():
    raw = {"name": "c", "kind": "corruptions", "datasets": ["digits-c"], "defenses": ["vanilla"],
           "models_from": "semantic", "profiles": {"smoke": {"n_examples": 2}}, "corruptions": {"fgo": "brightness"}}
    with pytest.raises(BenchError, match="fog"):
        parse_corruption_suite(raw)
    raw["corruptions"] = {"fog": "brightnes"}
    with pytest.raises(BenchError, match="brightness"):
        parse_corruption_suite(raw)
    raw["corruptions"] = {"fog": "brightness"}
    raw["budgets"] = {}
    with pytest.raises(BenchError, match="unknown key 'budgets'"):
        parse_corruption_suite(raw)
    del raw["budgets"]
    suite = parse_corruption_suite(raw)
    with pytest.raises(BenchError, match="not a corruption dataset"):
        suite.tasks(suite.profile("smoke"), 0, datasets=["digits"])
