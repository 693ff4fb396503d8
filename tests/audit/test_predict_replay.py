"""The sequential PREDICT keeps its record in the row (clean prediction, every attack query), and the
checker's statistics rule / ``bench verify-entry`` replay it: a tampered record or decision is caught."""
import copy

import numpy as np
import pytest
import torch

from attacks.worst_of_k import WorstOfK
from benchmark.audit.predict_replay import predict_problems
from benchmark.certify.sequential import predict, recompute_predict
from benchmark.certify.smoothing import SmoothingParams
from benchmark.certify.smoothing import predict as smoothed_predict
from benchmark.defense import Defense
from benchmark.run.evaluate import evaluate_example
from benchmark.suites.loader import Profile, Task
from benchmark.transformations import get_transformation

PARAMS = SmoothingParams(n0=16, n=100, alpha=0.001, batch_size=64, n_predict=100, predict_rule="sequential")
SETTINGS = (PARAMS.sequential, 100, 0.001)


class Smoothed(Defense):
    """Class 1 when the noisy image mean exceeds 0.8, else class 0 (PREDICT of the shared smoothing code)."""

    name = "smoothed"

    def prepare(self, ctx):
        pass

    def predict(self, x, t, g):
        def sampler(xi):
            return lambda k, gen: (xi.mean() + 0.05 * torch.randn(k, generator=gen) > 0.8).long()
        return torch.tensor([smoothed_predict(sampler(xi), 10, PARAMS, g)[0] for xi in x], dtype=torch.int64)


@pytest.fixture(scope="module")
def row():
    task = Task("s", "digits", "brightness", "smoothed", {}, (0.0, 0.2, 0.5),
                Profile("p", n_predict=100, predict="sequential"), 0)
    return evaluate_example(task, Smoothed(), get_transformation("brightness"), [WorstOfK(k=2)],
                            torch.full((1, 1, 4, 4), 0.5), 0, 0)


def test_record_replays_and_tampering_is_caught():
    counts = iter([np.array([12, 4] + [0] * 8), np.array([16, 0] + [0] * 8)])  # looks 16, 32, 64, 100
    label, _, rec = predict(lambda k: next(counts), *SETTINGS)
    assert label == 0 and rec == {"rule": "cp-union", "n": 32, "top2": [[12, 4], [28, 4]], "label": 0}
    assert recompute_predict(rec, *SETTINGS) == (0, [])
    assert recompute_predict({**rec, "n": 16, "top2": [[16, 0]]}, *SETTINGS) == (0, [])  # accepted at look 1
    for bad in ({**rec, "label": -1}, {**rec, "label": 3, "top2": [[12, 4], [20, 12]]},
                {**rec, "top2": [[12, 4], [30, 2]]}, {**rec, "top2": [[12, 4]]}, {**rec, "top2": [[16, 0], [32, 0]]},
                {**rec, "top2": "x"}, {**rec, "n": 64}, {"n": 32, "top2": [[12, 4], [28, 4]], "label": 0}):
        assert recompute_predict(bad, *SETTINGS)[1], bad


def test_row_keeps_the_records_and_replays(row):
    assert row["clean"]["predict"] == {"rule": "cp-union", "n": 16, "top2": [[16, 0]], "label": 0}
    runs = {b: row["attacks"][b]["runs"][0] for b in ("0.2", "0.5")}
    # worst-of-k judges its 4 parameters in one chunk: 4 queries, 4 records, labels in order
    assert [len(r["predict"]) for r in runs.values()] == [r["queries"] for r in runs.values()] == [4, 4]
    assert [p["label"] for p in runs["0.5"]["predict"]] == [0, 1, 1, 0]
    assert row["empirical"] == {"0.0": True, "0.2": True, "0.5": False} and row["broken"]["0.5"] is True
    assert row["samples"]["predict_calls"] == 9 and row["samples"]["predict"] == 9 * 16
    assert predict_problems(row, PARAMS) == []


@pytest.mark.parametrize("tamper", [
    lambda r: [r["attacks"]["0.5"]["runs"][0]["predict"][i].update(label=0) for i in (1, 2)],  # the breaks
    lambda r: [p.update(top2=[[16, 0]], label=0) for p in r["attacks"]["0.5"]["runs"][0]["predict"]],  # all
    lambda r: r["attacks"]["0.5"]["runs"][0]["predict"][1].update(top2=[[8, 8]]),  # counts of a record
    lambda r: r["empirical"].update({"0.5": True}),  # the empirical decision
    lambda r: r["broken"].update({"0.5": False}),
    lambda r: r["attacks"]["0.2"]["runs"][0].update(robust=False),
    lambda r: r["clean"].update(prediction=1),
    lambda r: r["clean"].pop("predict"),
    lambda r: r["attacks"]["0.2"]["runs"][0]["predict"].pop(),  # a dropped query
    lambda r: r["attacks"]["0.2"]["runs"][0]["predict"][0].update(n=32, top2=[[16, 0], [32, 0]]),  # more samples
])
def test_tampered_row_is_rejected(row, tamper):
    bad = copy.deepcopy(row)
    tamper(bad)
    assert predict_problems(bad, PARAMS)


def test_fixed_predict_and_deterministic_rows_have_nothing_to_replay(row):
    assert predict_problems(row, SmoothingParams(n0=16, n=100, n_predict=100)) == []
    assert predict_problems({**row, "samples": {**row["samples"], "predict_calls": 0}}, PARAMS) == []


def test_checker_statistics_rule_replays_the_records(row):
    from types import SimpleNamespace

    from benchmark.audit.checker import row_problems

    task = Task("s", "digits", "brightness", "smoothed", {}, (0.0, 0.2, 0.5),
                Profile("p", n0=16, n=100, n_predict=100, predict="sequential"), 0)
    good = {**row, "task": task.hash}
    bad = copy.deepcopy(good)
    bad["empirical"]["0.5"] = True
    assert row_problems(SimpleNamespace(tasks=[task], rows=[good]), "smoothed") == []
    assert any("empirical" in m for m in row_problems(SimpleNamespace(tasks=[task], rows=[bad]), "smoothed"))
