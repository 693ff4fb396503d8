"""The paper-cap projection (benchmark/studies/paper_cap.py) on the smoke profile: counts match the protocol."""
from __future__ import annotations

from benchmark.studies.paper_cap import measure, render
from benchmark.suites import load_suite


def test_fixed_rule_draws_exactly_n0_plus_n_and_sequential_never_more():
    p = load_suite("semantic").profile("smoke")
    recs = measure(["tss"], ["brightness", "rotation"], 2, fixed_slices=False, profile="smoke", log=lambda m: None)
    by = {r["transformation"]: r for r in recs}
    bright = by["brightness"]
    assert bright["fixed"]["samples"] == p.n0 + p.n  # one CERTIFY call: selection plus estimation
    assert bright["sequential"]["samples"] <= bright["fixed"]["samples"]
    agree, total = map(int, bright["agree"].split("/"))
    assert total == 2 * len(bright["budgets"]) and 0 <= agree <= total
    # sliced TSS is not run under the fixed rule unless asked for, and the table says so
    assert "fixed" not in by["rotation"] and by["rotation"]["sequential"]["samples"] > 0
    table = render(recs)
    assert "not run" in table and "| tss | brightness | 2 |" in table


def test_median_seconds_are_taken_on_examples_both_rules_certify():
    recs = measure(["tss"], ["brightness"], 3, fixed_slices=False, profile="smoke", log=lambda m: None)
    r = recs[0]
    assert 0 <= r["certified_both"] <= 3
    if r["certified_both"]:
        assert r["fixed"]["median_seconds_certified"] > 0 and r["sequential"]["median_seconds_certified"] > 0
        assert "median s/certified ex fixed" in render(recs)
