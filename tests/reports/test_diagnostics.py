"""The certificate-diagnostics table of a run (benchmark/reports/summary.py: render_diagnostics), on two pinned
whole-path GSmooth certificates of pixelate (tests/data/pinned_certificates.json)."""
import json
from types import SimpleNamespace

from benchmark.reports.summary import render_diagnostics
from tests.repo import TEST_DATA


def test_whole_path_certificates_give_one_line_per_budget_with_their_medians():
    docs = json.loads((TEST_DATA / "pinned_certificates.json").read_text())["gsmooth/pixelate"]
    task = SimpleNamespace(hash="t", dataset="digits", transformation="pixelate", defense="gsmooth",
                           budgets=(0.0, 0.2, 0.4))
    rows = [{"task": "t", "certificates": [{**d["certificates"][0], "correct": True}]} for d in docs]
    table = render_diagnostics([task], {}, rows)
    assert table.startswith("### certificate diagnostics")
    lines = [line for line in table.splitlines() if line.startswith("| digits")]
    assert [line.split("|")[4].strip() for line in lines] == ["0.2", "0.4"]  # budgets with a diagnosis
    margins = sorted(d["certificates"][0]["stats"]["margin"] for d in docs)
    assert all(f"{(margins[0] + margins[1]) / 2:.2f}" in line for line in lines)  # the median of two
    # an incorrect prediction is not diagnosed: no table
    assert render_diagnostics([task], {}, [{**rows[0], "certificates": [{**rows[0]["certificates"][0],
                                                                         "correct": False}]}]) == ""
