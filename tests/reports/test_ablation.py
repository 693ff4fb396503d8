"""bench ablation: GSmooth's sigma1 x sigma2 grid from a gsmooth-ablation run, and the committed study page."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from benchmark.cli import main
from benchmark.defenses import split_tag
from benchmark.leaderboard.entry import default_root
from benchmark.reports.ablation import SUITE, ablation_section, render_grid, write_ablation
from benchmark.suites import load_suite

MNIST_SUITE = "gsmooth-ablation-mnist"

SIGMA1S, SIGMA2S = (2.5, 5.0, 10.0, 20.0), (0.1, 0.25, 0.5, 1.0)
COMMITTED = default_root() / SUITE / "digits" / "noise-grid"


def _value(s1: float, s2: float, budget: float) -> float:
    """A distinct certified accuracy per (cell, budget), so a misplaced cell shows."""
    return round(SIGMA1S.index(s1) / 10 + SIGMA2S.index(s2) / 100 + budget / 1000, 4)


def _fake_run(folder: Path, suite: str = SUITE, drop: str | None = None, grid_of: str = SUITE,
              dataset: str = "digits") -> Path:
    """A finished run folder (of ``suite``) holding ``grid_of``'s rotational-blur grid with made-up certified
    accuracies."""
    s = load_suite(grid_of)
    tasks = [t for t in s.tasks(s.profile("default"), 0, transformations=["rotational_blur"])
             if split_tag(t.defense)[0] == "gsmooth" and t.defense != drop]
    rows = [{"suite": grid_of, "dataset": dataset, "transformation": "rotational_blur", "defense": t.defense,
             "metric": "certified_accuracy", "budget": b,
             "value": _value(t.defense_config["sigma1"], t.defense_config["sigma2"], b), "n_examples": 100}
            for t in tasks for b in t.budgets]
    folder.mkdir(parents=True)
    pd.DataFrame(rows).to_csv(folder / "summary.csv", index=False)
    profile = {"name": "default", "n": 500, "alpha": 0.001, "certify": None}
    (folder / "config.json").write_text(json.dumps(
        {"suite": suite, "datasets": [dataset], "profile": profile, "seed": 0, "config_hash": "0123456789abcdef",
         "environment": {"git_commit": "f" * 40, "versions": {"torch": "2.14.1"}}}))
    (folder / "models.json").write_text(json.dumps(
        [{"key": "digits/gsmooth/rotational_blur@x", "sha256": "a" * 64, "config_hash": "c", "source": "cache"},
         {"key": "digits/tss/rotation", "sha256": "b" * 64, "config_hash": "d", "source": "zoo"}]))
    return folder


def test_the_grid_has_every_cell_in_place_and_a_heat_map(tmp_path):
    out = tmp_path / "study"
    assert main(["ablation", str(_fake_run(tmp_path / "run")), "--out", str(out)]) == 0
    grid = pd.read_csv(out / "grid.csv")
    assert len(grid) == 16 * 5 and set(grid.metric) == {"certified_accuracy"}
    prov = json.loads((out / "provenance.json").read_text())
    assert [m["key"] for m in prov["models"]] == ["digits/gsmooth/rotational_blur@x"]  # only the swept row's
    page = (out / "grid.md").read_text()
    for b in (2.5, 5, 7.5, 10):
        block = page.split(f"at budget {b:g}\n")[1].split("###")[0]
        for s1 in SIGMA1S:
            line = next(ln for ln in block.splitlines() if ln.startswith(f"| σ1 = {s1:g} "))
            cells = [c.strip() for c in line.strip("|").split("|")][1:]
            assert [float(c) for c in cells] == [round(100 * _value(s1, s2, b), 1) for s2 in SIGMA2S], (b, s1)
    assert (out / "heatmap.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(out.glob("*.tmp*"))


def test_bad_runs_get_one_clear_error(tmp_path, capsys):
    other = _fake_run(tmp_path / "other", suite="semantic")
    assert main(["ablation", str(other), "--out", str(tmp_path / "o1")]) == 2
    assert "not one of 'gsmooth-ablation', 'gsmooth-ablation-mnist'" in " ".join(capsys.readouterr().err.split())
    partial = _fake_run(tmp_path / "partial", drop="gsmooth@s1=20_s2=1")
    assert main(["ablation", str(partial), "--out", str(tmp_path / "o2")]) == 2
    assert "gsmooth@s1=20_s2=1" in capsys.readouterr().err and not (tmp_path / "o2" / "grid.md").exists()
    assert main(["ablation", str(partial), "--out", str(tmp_path / "o4"), "--transformation", "zoom_blur"]) == 2
    assert "not sigma1 and sigma2" in " ".join(capsys.readouterr().err.split())
    assert main(["ablation", str(tmp_path / "nothing"), "--out", str(tmp_path / "o3")]) == 2
    assert "not a finished run folder" in " ".join(capsys.readouterr().err.split())


@pytest.mark.skipif(not (COMMITTED / "grid.md").is_file(), reason="no committed ablation study")
def test_the_committed_study_is_the_codes_output_and_on_the_leaderboards_page():
    prov = json.loads((COMMITTED / "provenance.json").read_text())
    assert (COMMITTED / "grid.md").read_text() == render_grid(pd.read_csv(COMMITTED / "grid.csv"), prov), (
        f"{COMMITTED} is stale: regenerate it with `bench ablation RUN --out {COMMITTED.relative_to(default_root().parent)}`")
    assert (COMMITTED / "grid.md").read_text() in ablation_section(default_root())
    board = (default_root() / "README.md").read_text()
    assert ablation_section(default_root()) in board
    assert set(pd.read_csv(COMMITTED / "grid.csv").n_examples) == {100}  # at least 100 images per cell


def test_the_mnist_grid_is_written_from_its_own_suite(tmp_path):
    """A gsmooth-ablation-mnist run gives the same study, with that suite's cells and regenerate command."""
    run = _fake_run(tmp_path / "run", suite=MNIST_SUITE, grid_of=MNIST_SUITE, dataset="mnist")
    out = tmp_path / "study"
    assert main(["ablation", str(run), "--out", str(out)]) == 0
    prov = json.loads((out / "provenance.json").read_text())
    assert (prov["suite"], prov["dataset"]) == (MNIST_SUITE, "mnist")
    page = (out / "grid.md").read_text()
    assert f"--suite {MNIST_SUITE} --dataset mnist" in page
    assert "slices per column (σ2 = 0.1: 50, σ2 = 0.25: 20, σ2 = 0.5: 10, σ2 = 1: 10)" in page
    line = next(ln for ln in page.split("at budget 10\n")[1].splitlines() if ln.startswith("| σ1 = 20 "))
    assert [float(c) for c in line.strip("|").split("|")[1:]] == [round(100 * _value(20.0, s2, 10), 1)
                                                                  for s2 in SIGMA2S]


def test_the_mnist_grid_is_table1s_rotational_blur_with_only_the_noise_changed():
    """Every cell is Table 1's rotational-blur GSmooth (its surrogate pinned, TSS's network and recipe) with sigma1,
    sigma2, the slices that keep Table 1's half-slice bound in units of sigma2, and Table 1's draw budget; so the
    (5, 0.5) cell is Table 1's own classifier."""
    official = load_suite("table1-mnist-official")
    t1 = next(t for t in official.tasks(official.profile("table1"), 0, transformations=["rotational_blur"])
              if t.defense == "gsmooth").defense_config
    s = load_suite(MNIST_SUITE)
    assert s.datasets == ["mnist"]
    p = s.profile("default")
    t1p = official.profile("table1")
    assert (p.n_examples, p.alpha, p.n0, p.n, p.certify) == (100, t1p.alpha, t1p.n0, t1p.n, t1p.certify)
    cells = {(t.defense_config["sigma1"], t.defense_config["sigma2"]): t.defense_config
             for t in s.tasks(p, 0, transformations=["rotational_blur"])}
    assert sorted(cells) == sorted((a, b) for a in SIGMA1S for b in SIGMA2S)
    for (s1, s2), cfg in cells.items():
        slices = max(10, round(10 * 0.5 / s2))
        assert cfg == {**t1, "sigma1": s1, "sigma2": s2, "surrogate_sigma1": 5.0, "surrogate_sigma2": 0.5,
                       "slices": slices, "max_draws": 200_000}, (s1, s2)
    assert t1["sigma1"] == 5.0 and "sigma2" not in t1  # Table 1's row: sigma1 5, GSmooth's default sigma2 0.5
