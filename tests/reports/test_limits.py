"""Why a certificate misses a budget (benchmark/reports/limits.py): each rule replayed at the point estimate."""
from __future__ import annotations

import gzip
import lzma
import json

from scipy.stats import norm

from benchmark.certify import radius_rule, slice_rule, threshold_rule
from benchmark.reports.limits import diagnose, read_rows, tally
from benchmark.reports.table1 import (
    read_limits,
    read_results,
    render_markdown,
    table1_cells,
)


def _cert(stats: dict, certified: dict, correct: bool = True, abstained: bool = False, variant: str = "") -> dict:
    return {"certified": {repr(float(b)): v for b, v in certified.items()}, "correct": correct,
            "abstained": abstained, "stats": stats, "variant": variant}


def _threshold(count: int, n: int, need: float, lower: float) -> dict:
    rule = threshold_rule.record("p_a_lower", {repr(1.0): need})
    ok = threshold_rule.certified(rule, lower, False, 1.0)
    return _cert({"count_a": count, "n": n, "p_a_lower": lower, "threshold_rule": rule}, {0.0: True, 1.0: ok})


def test_threshold_rule_point_estimate_above_need_is_confidence_below_is_estimate():
    # p^ = 0.995 > 0.99 = need > lower 0.98: only the bound misses
    assert diagnose(_threshold(995, 1000, 0.99, 0.98), 1.0) == "confidence"
    # p^ = 0.985 < need: the point estimate misses too
    assert diagnose(_threshold(985, 1000, 0.99, 0.97), 1.0) == "estimate"
    assert diagnose(_threshold(1000, 1000, 0.99, 0.993), 1.0) == "certified"
    assert diagnose(_threshold(1000, 1000, 0.99, 0.993), 0.0) == "certified"


def test_margin_statistic_is_compared_as_a_margin():
    rule = threshold_rule.record("margin", {repr(2.0): 2.0})  # need Phi^-1(p) > 2, i.e. p > 0.97725
    cert = _cert({"count_a": 980, "n": 1000, "p_a_lower": 0.96, "threshold_rule": rule}, {2.0: False})
    assert norm.ppf(0.98) > 2.0 and diagnose(cert, 2.0) == "confidence"
    cert["stats"]["count_a"] = 975
    assert norm.ppf(0.975) < 2.0 and diagnose(cert, 2.0) == "estimate"


def test_radius_rule_replays_the_radius_of_the_point_estimate():
    rule = radius_rule.record("gaussian", 3.0)  # radius 3 Phi^-1(p); budget 8 needs p > Phi(8/3) = 0.99617
    stats = {"count_a": 9970, "n": 10000, "p_a_lower": 0.9950, "radius_rule": rule}
    assert diagnose(_cert(stats, {8.0: False}), 8.0) == "confidence"
    stats["count_a"] = 9950
    assert diagnose(_cert(stats, {8.0: False}), 8.0) == "estimate"


def test_wrong_abstained_and_unreplayable_certificates():
    stats = {"count_a": 10, "n": 10, "p_a_lower": 0.5, "radius_rule": radius_rule.record("gaussian", 1.0)}
    assert diagnose(_cert(stats, {1.0: False}, correct=False), 1.0) == "wrong"
    assert diagnose(_cert(stats, {1.0: False}, correct=False, abstained=True), 1.0) == "abstained"
    assert diagnose(_cert({}, {1.0: False}), 1.0) == "unknown"  # a deterministic verifier: nothing to replay


def _sliced(counts: dict[int, int], n: int = 1000, bound: float = 0.3, sigma: float = 0.2) -> dict:
    """Slices over [-2, 2] in 4 (width 1, centre index 2); endpoint i at theta = -2 + i."""
    endpoints = [{"theta": -2.0 + i, "count": c, "n": n, "bound": bound, "p_a_lower": 0.0} for i, c in counts.items()]
    return {"range": 2.0, "slices": 4, "sigma": sigma, "endpoints": endpoints}


def test_sliced_rule_replays_the_endpoints_point_estimates():
    need = slice_rule.endpoint_threshold(0.3, 0.2)  # Phi(1.5) = 0.9332
    good, bad = int(1000 * need) + 5, int(1000 * need) - 5
    # every evaluated endpoint passes at its point estimate: the bound is what missed
    cert = _cert(_sliced({2: good, 3: good, 1: good}), {1.5: False})
    assert diagnose(cert, 1.5) == "confidence"
    # the endpoint at theta = +1 fails at its point estimate: coverage 0.5 < 1.5
    cert = _cert(_sliced({2: good, 3: bad}), {1.5: False})
    assert diagnose(cert, 1.5) == "estimate"
    # endpoints never reached count as passing (the walk stopped at theta = -1, which passes at p^)
    cert = _cert(_sliced({2: good, 1: good}), {1.5: False})
    assert diagnose(cert, 1.5) == "confidence"


def _row(transformation: str, defense: str, certs: list[dict]) -> dict:
    return {"transformation": transformation, "defense": defense, "certificates": certs}


def test_tally_reads_run_folders_and_entries_and_labels_variants(tmp_path):
    rows = [_row("translation", "gsmooth", [_threshold(995, 1000, 0.99, 0.98),
                                            {**_threshold(985, 1000, 0.99, 0.97), "variant": "paper"}]),
            _row("translation", "gsmooth", [_threshold(985, 1000, 0.99, 0.97), _threshold(1000, 1000, 0.99, 0.993)])]
    rows[1]["certificates"][1]["variant"] = "paper"
    run = tmp_path / "run"
    run.mkdir()
    (run / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    entries = tmp_path / "entries"
    entries.mkdir()
    with gzip.open(entries / "gsmooth.rows.jsonl.gz", "wt") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    packed = tmp_path / "packed"  # a run folder bench pack packed
    packed.mkdir()
    (packed / "rows.jsonl.xz").write_bytes(lzma.compress((run / "rows.jsonl").read_bytes()))
    for source in (run, packed, entries, entries / "gsmooth.json"):
        t = tally(read_rows(source))
        assert t[("translation", "gsmooth", 1.0)] == {"confidence": 1, "estimate": 1}
        assert t[("translation", "gsmooth:paper", 1.0)] == {"estimate": 1, "certified": 1}
        assert t[("translation", "gsmooth", 0.0)] == {"certified": 2}


def test_table1_shows_the_misses_of_each_certified_cell(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    certs = [_threshold(995, 1000, 0.99, 0.98), _threshold(985, 1000, 0.99, 0.97),
             _threshold(1000, 1000, 0.99, 0.993)]
    for c in certs:  # at the paper's translation radius (8 px)
        c["certified"] = {repr(8.0): c["certified"][repr(1.0)]}
        c["stats"]["threshold_rule"]["required"] = {repr(8.0): 0.99}
    certs.append({**certs[0], "correct": False})
    (run / "rows.jsonl").write_text("".join(json.dumps(_row("translation", "gsmooth", [c])) + "\n" for c in certs))
    (run / "summary.csv").write_text("dataset,transformation,defense,budget,metric,value,n_examples\n"
                                     "mnist-t10k,translation,gsmooth,8.0,certified_accuracy,0.25,4\n")
    cells = table1_cells(read_results([run]), read_limits([run]))
    cell = next(c for c in cells if c.transformation == "translation" and c.label == "gsmooth")
    assert (cell.k, cell.short_estimate, cell.short_confidence, cell.wrong_or_abstained) == (1, 1, 1, 1)
    assert "| 1 / 4 | 1 / 1 / 1 |" in render_markdown(cells)
