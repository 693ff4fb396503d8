"""Run store (append, torn lines, resume guard) and suite validation."""
import json

import pytest

from benchmark.errors import BenchError
from benchmark.run.store import RunStore
from benchmark.suites import load_suite
from benchmark.suites.loader import parse_suite


def test_rows_append_and_torn_line(tmp_path):
    store = RunStore(tmp_path / "run")
    store.start({"config_hash": "a"}, resume=False)
    with store.open_for_append() as w:
        w.append({"task": "t", "example": 0})
        w.append({"task": "t", "example": 1})
    # simulate a kill in the middle of writing the third row
    with open(store.rows_path, "a") as f:
        f.write('{"task": "t", "exam')
    assert store.done_keys() == {("t", 0), ("t", 1)}
    with store.open_for_append() as w:
        w.append({"task": "t", "example": 2})
    assert store.done_keys() == {("t", 0), ("t", 1), ("t", 2)}
    assert len(list(store.rows())) == 3


def test_resume_guard(tmp_path):
    """A folder resumes only a command with the same rows' tasks (benchmark/run/identity.py); another suite hash
    alone (an edit to tasks the run does not hold) does not stop it, and the stored config stays."""
    cfg = lambda h, task: {"config_hash": h, "tasks": [{"hash": task}], "seed": 0}  # noqa: E731
    store = RunStore(tmp_path / "run")
    store.start(cfg("a", "t1"), resume=False)
    with pytest.raises(BenchError, match="--resume"):
        RunStore(tmp_path / "run").start(cfg("a", "t1"), resume=False)
    with pytest.raises(BenchError, match="cannot resume .*config hash a then, b now"):
        RunStore(tmp_path / "run").start(cfg("b", "t2"), resume=True)
    RunStore(tmp_path / "run").start(cfg("a", "t1"), resume=True)  # fine
    RunStore(tmp_path / "run").start(cfg("b", "t1"), resume=True)  # fine: the same tasks
    assert json.loads((tmp_path / "run" / "config.json").read_text())["config_hash"] == "a"


def _raw():
    return {
        "name": "s", "datasets": ["digits"], "defenses": ["vanilla", "tss"],
        "profiles": {"smoke": {"n_examples": 2, "n0": 8, "n": 50}},
        "transformations": {"brightness": {"budgets": {"default": [0.1]}, "defenses": {"tss": {"scale": 0.2}}},
                            "rotation": {"budgets": [5, 10]}},
    }


def test_parse_and_expand():
    s = parse_suite(_raw())
    tasks = s.tasks(s.profile("smoke"), seed=3)
    assert [(t.transformation, t.defense) for t in tasks] == [
        ("brightness", "vanilla"), ("brightness", "tss"), ("rotation", "vanilla"), ("rotation", "tss")]
    assert tasks[1].defense_config == {"scale": 0.2}
    assert tasks[0].budgets == (0.0, 0.1) and tasks[2].budgets == (0.0, 5.0, 10.0)
    assert len({t.hash for t in tasks}) == 4
    assert s.tasks(s.profile("smoke"), seed=4)[0].hash != tasks[0].hash


@pytest.mark.parametrize("mutate,match", [
    (lambda r: r.update(transformatons={}), "unknown key 'transformatons'.*Did you mean 'transformations'"),
    (lambda r: r["profiles"]["smoke"].update(n00=3), "unknown key 'n00'"),
    (lambda r: r["transformations"]["rotation"].update(budget=[1]), "Did you mean 'budgets'"),
    (lambda r: r["transformations"].update(rotaton={}), "Did you mean 'rotation'"),
    (lambda r: r.update(defenses=["tsss"]), "Did you mean 'tss'"),
    (lambda r: r.update(datasets=["digit"]), "Did you mean 'digits'"),
    (lambda r: r["transformations"]["rotation"].update(defenses={"gsmooth": {}}), "not in the suite's defenses"),
])
def test_bad_suites(mutate, match):
    raw = _raw()
    mutate(raw)
    with pytest.raises(BenchError, match=match):
        parse_suite(raw)


def test_packaged_suite_and_unknown_profile():
    s = load_suite("semantic")
    assert len(s.transformations) == 11
    assert {"smoke", "default", "paper"} <= set(s.profiles)
    with pytest.raises(BenchError, match="Did you mean 'smoke'"):
        s.profile("smok")
    with pytest.raises(BenchError, match="Unknown suite"):
        load_suite("semantc")


def test_missing_budgets_for_dataset():
    raw = _raw()
    raw["transformations"]["brightness"]["budgets"] = {"cifar10": [0.1]}
    s = parse_suite(raw)
    with pytest.raises(BenchError, match="no budgets for dataset 'digits'"):
        s.tasks(s.profile("smoke"), 0)
