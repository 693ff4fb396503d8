"""verify-entry's re-verification of recorded bound-propagation proofs (benchmark/audit/proof_rerun.py)."""
from __future__ import annotations

import copy

import pytest

from benchmark.audit.proof_rerun import has_proof, reverify_proofs
from benchmark.run.options import RunOptions
from benchmark.run.plan import resolve_profile
from benchmark.reports import rows_file
from benchmark.suites import load_suite

from tests.repo import REPO

ROWS = rows_file.beside(REPO / "leaderboards" / "semantic" / "digits" / "deepg.json")


@pytest.fixture(scope="module")
def rotation_case():
    suite = load_suite("semantic")
    opts = RunOptions(profile="default", allow_train=False)
    (task,) = suite.tasks(resolve_profile(suite, opts), 0, ["digits"], ["deepg"], ["rotation"])
    rows = rows_file.read(ROWS)
    row = next(r for r in rows if r["task"] == task.hash and has_proof(r["certificates"][0])
               and len(r["certificates"][0]["stats"]["verified_boxes"]) > 2)
    return task, row, opts


def _check(task, row, opts):
    return reverify_proofs([task], {(task.hash, row["example"]): row}, [row["example"]], opts, log=lambda m: None)


def test_committed_proof_reverifies_and_tampering_is_caught(rotation_case):
    task, row, opts = rotation_case
    assert _check(task, row, opts) == []
    dropped = copy.deepcopy(row)
    boxes = dropped["certificates"][0]["stats"]["verified_boxes"]
    del boxes[len(boxes) // 2]
    assert any("in no verified box" in p for p in _check(task, dropped, opts))
    rounded = copy.deepcopy(row)  # recorded on another CPU: margins a little above what this one recomputes
    for box in rounded["certificates"][0]["stats"]["verified_boxes"]:
        box[2] *= 1 + 1e-4
    assert _check(task, rounded, opts) == []
    inflated = copy.deepcopy(row)
    inflated["certificates"][0]["stats"]["verified_boxes"][0][2] += 1.0
    assert any("recomputed margin bound" in p for p in _check(task, inflated, opts))
