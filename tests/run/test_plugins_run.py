"""Plugins in a run: a transformation and an attack given as ``file.py:Name`` in a tiny suite are resolved by
name in spawned worker processes, named by the transformation's ``name`` in tables, and recorded (path, sha256)
in config.json."""
import hashlib
import json
import textwrap

import pandas as pd
import yaml

from benchmark.run.driver import run_suite
from benchmark.run.executors import pool
from benchmark.run.options import RunOptions
from benchmark.suites import load_suite

TRANSFORM = """
    from dataclasses import dataclass

    from benchmark.transformations.base import Transformation


    @dataclass(frozen=True)
    class Darken(Transformation):
        name: str = "darken"
        kind: str = "additive"
        units: str = "intensity offset"
        low: tuple = (-10.0,)
        high: tuple = (10.0,)

        def _apply(self, x, theta):
            return x - theta[:, 0].view(-1, 1, 1, 1)
"""
ATTACK = """
    from attacks.worst_of_k import WorstOfK


    class Corners(WorstOfK):
        \"\"\"The region's extreme points only.\"\"\"

        name = "corners"
        defaults = {"k": 0}
        from_profile = {}
"""


def _tiny_suite(tmp_path) -> tuple:
    t = tmp_path / "darken.py"
    a = tmp_path / "corners.py"
    t.write_text(textwrap.dedent(TRANSFORM))
    a.write_text(textwrap.dedent(ATTACK))
    suite = {"name": "plugins", "datasets": ["digits"], "defenses": ["vanilla"], "attack": [{"name": f"{a}:Corners"}],
             "profiles": {"smoke": {"n_examples": 2, "n0": 16, "n": 100, "alpha": 0.001, "batch_size": 128,
                                    "n_predict": 100, "attack_k": 3}},
             "transformations": {f"{t}:Darken": {"budgets": [0.1]}, "brightness": {"budgets": [0.1]}}}
    path = tmp_path / "plugins.yaml"
    path.write_text(yaml.safe_dump(suite))
    return path, t, a


def test_plugin_transformation_and_attack_run_in_spawned_workers(tmp_path, monkeypatch):
    path, t, a = _tiny_suite(tmp_path)
    monkeypatch.setattr(pool, "START_METHOD", "spawn")  # workers start without the plugins' names
    out = run_suite(load_suite(str(path)), RunOptions(profile="smoke", allow_train=False, out=tmp_path / "run",
                                                      workers=2, print_table=False, log=lambda m: None))
    summary = pd.read_csv(out / "summary.csv")
    assert set(summary.transformation) == {"darken", "brightness"}
    rows = [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines()]
    assert {r["transformation"] for r in rows} == {"darken", "brightness"} and len(rows) == 4
    config = json.loads((out / "config.json").read_text())
    found = {p["kind"]: p for p in config["plugins"]}
    assert found["transformation"]["name"] == "darken"
    for kind, f in (("transformation", t), ("attack", a)):
        assert found[kind]["path"] == str(f.resolve())
        assert found[kind]["sha256"] == hashlib.sha256(f.read_bytes()).hexdigest()
    assert [x["name"] for x in config["attack"]] == [f"{a}:Corners"]


def test_a_plugin_transformation_is_chosen_by_reference_or_name(tmp_path):
    path, t, _ = _tiny_suite(tmp_path)
    suite = load_suite(str(path))
    profile = suite.profile("smoke")
    for ref in (f"{t}:Darken", "darken"):
        (task,) = suite.tasks(profile, 0, transformations=[ref])
        assert task.transformation == "darken"


def test_two_plugins_of_one_name_in_a_suite_are_refused(tmp_path):
    import pytest

    from benchmark.errors import BenchError

    path, t, _ = _tiny_suite(tmp_path)
    copy = tmp_path / "darken_copy.py"
    copy.write_text(t.read_text())
    raw = yaml.safe_load(path.read_text())
    raw["transformations"][f"{copy}:Darken"] = {"budgets": [0.2]}
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(BenchError, match="is named 'darken', like another of the suite's transformations"):
        load_suite(str(path))


def test_resume_refuses_a_changed_plugin_file(tmp_path):
    import pytest

    from benchmark.errors import BenchError

    path, t, _ = _tiny_suite(tmp_path)

    def run(resume: bool):
        opts = RunOptions(profile="smoke", allow_train=False, out=tmp_path / "run", workers=1, n_examples=1,
                          transformations=["darken"], resume=resume, print_table=False, log=lambda m: None)
        return run_suite(load_suite(str(path)), opts)

    run(False)
    run(True)  # unchanged: resumes
    t.write_text(t.read_text() + "\n# edited\n")
    with pytest.raises(BenchError, match="transformation plugin .*darken.py changed since the run started"):
        run(True)


def test_a_plugin_dataset_names_the_run_folder_without_its_directories():
    from benchmark.run.plan import run_prefix

    suite = load_suite("semantic")
    prefix = run_prefix(suite, RunOptions(profile="smoke", datasets=["/some/dir/my_data.py:Tiny"]))
    assert prefix == "semantic-my_data.py_Tiny-smoke-s0"
