"""The table1-mnist suite (GSmooth paper Table 1, MNIST rows) and its side-by-side report.

The suite parses and sits at the paper's radii (every conversion paper value -> registry value is pinned here);
the report (benchmark/reports/table1.py) builds from a fabricated run with exact Clopper-Pearson intervals; the
real-data checks skip when shared/data/mnist is absent.
"""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from scipy.stats import beta

from benchmark.cli import main
from benchmark.reports.table1 import (
    COLUMNS,
    PAPER,
    PAPER_TO_REGISTRY,
    read_results,
    read_survival,
    render_csv,
    table1_cells,
    write_table1,
)
from benchmark.suites import load_suite
from benchmark.transformations import get_transformation
from tests.repo import SHARED_DATA

MNIST = SHARED_DATA / "mnist"

#: paper's MNIST radius -> registry budget, pinned (docs/table1.md states the sources)
PINNED = {
    "gaussian_blur": (6.0, 6.0),        # TSS: squared kernel radius = variance; registry: variance
    "translation": (8.0, 8.0),          # px, l2 of an integer shift (ours cyclic)
    "contrast_brightness": (0.5, 0.5),  # l-inf of (k, b) in e^k (x + b) (ours unclipped)
    "rotation": (50.0, 50.0),           # degrees
    "scaling": (0.3, 0.3),              # factor - 1
    "rotational_blur": (10.0, 10.0),    # degrees
    "defocus_blur": (5.0, 5.0),         # disk radius px
    "zoom_blur": (0.5, 0.5),            # zoom factor - 1
    "pixelate": (0.5, 0.5),             # fraction removed
}


def test_every_radius_conversion_is_pinned():
    assert {t: (r.paper_value, r.budget) for t, r in PAPER_TO_REGISTRY.items()} == PINNED
    for t, r in PAPER_TO_REGISTRY.items():
        tr = get_transformation(t)
        assert all(lo <= r.budget <= hi or lo <= -r.budget for lo, hi in zip(tr.low, tr.high)), t
        assert r.units and r.source and r.differs


def test_suite_parses_and_each_largest_budget_is_the_paper_radius():
    suite = load_suite("table1-mnist")
    assert suite.datasets == ["mnist-t10k"]
    assert set(suite.transformations) == set(PINNED)
    for t, (_, budget) in PINNED.items():
        assert max(suite.budgets(t, "mnist-t10k")) == budget, t
    p = suite.profile("table1")
    assert (p.alpha, p.n0, p.n, p.certify) == (0.001, 100, 100_000, "sequential")
    assert p.n_examples >= 500
    smoke = suite.profile("smoke")
    assert smoke.n_examples <= 4 and smoke.n <= 100
    tasks = suite.tasks(smoke, 0)
    assert {(t.transformation, t.defense) for t in tasks} >= {("translation", "enumeration"), ("rotation", "spt"),
                                                              ("scaling", "deepg"), ("pixelate", "gsmooth")}
    # every paper column with a number has a defense in the suite that runs on that transformation
    ran = {(t.transformation, t.defense) for t in tasks}
    for t, cols in PAPER.items():
        for col, v in cols.items():
            if v.value is None or col in ("DeepG", "Interval", "Semanify-NN") and t == "translation":
                continue
            base = COLUMNS[col][0].split(":")[0]
            assert (t, base) in ran, (t, col)


def test_paper_numbers_are_the_papers():
    assert PAPER["gaussian_blur"]["GSmooth"].value == 91.0 and PAPER["gaussian_blur"]["TSS"].value == 90.6
    assert PAPER["rotation"]["Semanify-NN"].value == 92.48 and PAPER["rotation"]["Semanify-NN"].at_most
    assert PAPER["contrast_brightness"]["DeepG"].at_most and not PAPER["scaling"]["DeepG"].at_most
    assert PAPER["pixelate"]["GSmooth"].value == 87.1 and PAPER["pixelate"]["TSS"].value is None


def _fake_run(folder: Path, n: int = 20) -> Path:
    """A run folder with the summary.csv rows bench run writes (counts out of n)."""
    rows = []
    def add(t, label, metric, budget, k):
        rows.append({"suite": "table1-mnist", "dataset": "mnist-t10k", "transformation": t, "defense": label,
                     "metric": metric, "budget": budget, "n_examples": n,
                     "value": k if metric == "seconds_per_example" else (k * n // 20) / n})  # k of 20, scaled to n
    add("gaussian_blur", "gsmooth", "certified_accuracy", 6.0, 17)
    add("gaussian_blur", "gsmooth", "seconds_per_example", 0.0, 2.5)
    add("gaussian_blur", "gsmooth:paper", "certified_accuracy", 6.0, 20)
    add("gaussian_blur", "tss", "certified_accuracy", 6.0, 0)
    add("gaussian_blur", "tss", "certified_accuracy", 4.0, 10)
    add("gaussian_blur", "vanilla", "empirical_accuracy", 6.0, 3)
    folder.mkdir(parents=True)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
    (folder / "summary.csv").write_text(buf.getvalue())
    (folder / "config.json").write_text(json.dumps({"suite": "table1-mnist", "seed": 0, "profile": {
        "name": "smoke", "n0": 16, "n": 100, "alpha": 0.001, "certify": "sequential", "n_examples": n}}))
    return folder


def test_report_builds_from_a_fabricated_run_with_exact_cp_intervals(tmp_path):
    run = _fake_run(tmp_path / "run")
    cells = {(c.transformation, c.label): c for c in table1_cells(read_results([run]))}
    g = cells[("gaussian_blur", "gsmooth")]
    assert (g.k, g.n, g.paper, g.ours) == (17, 20, 91.0, 85.0)
    assert g.ci_low == pytest.approx(100 * beta.ppf(0.025, 17, 4), abs=1e-9)
    assert g.ci_high == pytest.approx(100 * beta.ppf(0.975, 18, 3), abs=1e-9)
    assert g.diff == pytest.approx(85.0 - 91.0)
    assert g.seconds_per_example == 2.5
    t = cells[("gaussian_blur", "tss")]
    assert (t.k, t.ours, t.ci_low) == (0, 0.0, 0.0)
    assert t.ci_high == pytest.approx(100 * (1 - 0.025 ** (1 / 20)), abs=1e-9)
    assert cells[("gaussian_blur", "gsmooth:paper")].ci_high == 100.0
    assert cells[("gaussian_blur", "vanilla")].metric == "empirical_accuracy"
    assert cells[("translation", "tss")].status == "not run"
    assert cells[("translation", "deepg")].paper == 0.0 and "enumeration" in cells[("translation", "deepg")].note
    assert ("gaussian_blur", "deepg") not in cells  # "--" in the paper and not run: no cell
    assert "paper_at_most" in render_csv(list(cells.values())).splitlines()[0]


def test_a_later_source_replaces_an_earlier_ones_numbers(tmp_path):
    a = _fake_run(tmp_path / "a", n=20)
    b = _fake_run(tmp_path / "b", n=10)
    cell = next(c for c in table1_cells(read_results([a, b])) if c.label == "gsmooth")
    assert cell.n == 10


def test_cli_writes_markdown_csv_and_plot(tmp_path, capsys):
    run = _fake_run(tmp_path / "run")
    assert main(["table1", str(run), "--out", str(tmp_path / "out")]) == 0
    md = (tmp_path / "out" / "table1.md").read_text()
    assert "mnist-t10k" in md and "NOT the paper's protocol" in md and "| gaussian_blur |" in md
    assert "profile smoke" in md and "≤92.48" in md
    assert (tmp_path / "out" / "table1.png").stat().st_size > 1000
    assert list(csv.DictReader(io.StringIO((tmp_path / "out" / "table1.csv").read_text())))


def test_survival_table_goes_beside_it_from_runs_and_entries(tmp_path):
    run = _fake_run(tmp_path / "run")
    (run / "survival.csv").write_text(
        "dataset,transformation,label,budget,n_examples,certified,also_sound,contradicted,n_certified,n_also_sound,"
        "n_contradicted,grid_points\nmnist-t10k,gaussian_blur,gsmooth:paper,6.0,20,0.25,0.4,0.2,5,2,1,9\n")
    entries = tmp_path / "entries"
    entries.mkdir()
    (entries / "gsmooth.json").write_text(json.dumps({"dataset": "mnist-t10k", "results": [], "survival": [
        {"transformation": "gaussian_blur", "label": "gsmooth:paper", "budget": 6.0, "n_examples": 10,
         "certified": 0.1, "also_sound": 0.0, "contradicted": 1.0, "n_certified": 1, "n_also_sound": 0,
         "n_contradicted": 1, "grid_points": None}]}))
    (got,) = read_survival([run])
    assert (got["budget"], got["n_contradicted"], got["grid_points"], got["contradicted"]) == (6.0, 1, 9, 0.2)
    (got,) = read_survival([run, entries])  # the later source replaces the earlier one's record
    assert (got["n_examples"], got["grid_points"], got["dataset"]) == (10, None, "mnist-t10k")
    files = write_table1([run], tmp_path / "out")
    md = files["markdown"].read_text()
    assert "## Survival of surrogate-only certificates" in md and "gsmooth:paper †" in md
    assert "|        25.0 |         40.0 |           20.0 |      9 |" in md
    assert list(csv.DictReader(io.StringIO(files["survival"].read_text())))[0]["n_contradicted"] == "1"


def test_cli_names_a_wrong_source(tmp_path, capsys):
    assert main(["table1", str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    assert "not a run folder" in capsys.readouterr().err


@pytest.mark.skipif(not MNIST.is_dir(), reason=f"MNIST test files not found at {MNIST}")
def test_smoke_run_on_real_mnist_builds_the_report(tmp_path):
    """bench run --suite table1-mnist --profile smoke on two tasks of the real data (2 images; ~3 s), then the report."""
    out = tmp_path / "run"
    rc = main(["run", "--suite", "table1-mnist", "--profile", "smoke", "--data-root", str(MNIST), "--no-train",
               "--transformation", "translation", "--defense", "tss", "--defense", "enumeration", "--out", str(out)])
    assert rc == 0
    files = write_table1([out], tmp_path / "t1")
    text = files["markdown"].read_text()
    assert "| translation | ‖α‖₂ < 8 | 8 | TSS | tss |" in text
