"""``benchmark.evaluate``: the Python entry point runs what ``bench run`` runs and returns the run folder's
summary.csv as a DataFrame, for a defense name and for a Defense instance."""
import subprocess
import sys

import pandas as pd
import pytest

import benchmark
from benchmark.cli import main
from benchmark.errors import BenchError

TINY = dict(suite="semantic", transformations="brightness", profile="smoke", n_examples=3)


def _numbers(summary: pd.DataFrame) -> pd.DataFrame:
    """The summary without the timing rows (seconds per example differ between runs)."""
    return summary[summary.metric != "seconds_per_example"].reset_index(drop=True)


@pytest.fixture(scope="module")
def by_name(tmp_path_factory):
    return benchmark.evaluate("vanilla", out=tmp_path_factory.mktemp("runs") / "name", allow_train=False, **TINY)


def test_a_name_gives_the_run_folders_summary_and_the_numbers_of_bench_run(by_name, tmp_path):
    assert isinstance(by_name, benchmark.Evaluation)
    pd.testing.assert_frame_equal(by_name.summary, pd.read_csv(by_name.folder / "summary.csv"))
    assert set(by_name.summary.defense) == {"vanilla"} and set(by_name.summary.transformation) == {"brightness"}
    assert "brightness" in by_name.table
    cli = tmp_path / "cli"
    assert main(["run", "--defense", "vanilla", "--transformation", "brightness", "--profile", "smoke",
                 "--n-examples", "3", "--no-train", "--workers", "1", "--out", str(cli)]) == 0
    pd.testing.assert_frame_equal(_numbers(by_name.summary), _numbers(pd.read_csv(cli / "summary.csv")))


def test_a_defense_instance_runs_in_process_with_the_same_numbers(by_name, tmp_path):
    from baselines.vanilla import Vanilla

    defense = Vanilla()
    result = benchmark.evaluate(defense, out=tmp_path / "instance", allow_train=False, **TINY)
    pd.testing.assert_frame_equal(result.summary, pd.read_csv(result.folder / "summary.csv"))
    pd.testing.assert_frame_equal(_numbers(result.summary), _numbers(by_name.summary))
    assert getattr(defense, "model", None) is not None  # this very object was prepared
    with pytest.raises(BenchError, match="runs in this process only; pass workers=1"):
        benchmark.evaluate(Vanilla(), workers=2, **TINY)
    with pytest.raises(BenchError, match="defense must be a benchmark.defense.Defense instance"):
        benchmark.evaluate(Vanilla, **TINY)


def test_import_benchmark_stays_light():
    code = ("import sys, benchmark; heavy = [m for m in ('torch', 'pandas', 'benchmark.evaluation') if m in "
            "sys.modules]; assert not heavy, heavy; assert callable(benchmark.evaluate); "
            "assert 'benchmark.evaluation' in sys.modules")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
