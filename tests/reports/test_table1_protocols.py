"""`bench table1` on both Table 1 protocols (benchmark/reports/table1.py): the protocol follows the results' dataset
(mnist-t10k -> table1-mnist's radii, mnist -> table1-mnist-official's), mixing them is an error, the official report
says what differs from the paper without the t10k caveats, ``--tss-results`` adds TSS's released recount and the
image-by-image agreement (on the built fixture of test_tss_released), the leaderboard renders a section per
protocol, and the committed side-by-side files of both protocols are still exactly the command's output."""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from benchmark.cli import _table1_section, main
from benchmark.errors import BenchError
from benchmark.reports.table1 import (
    OFFICIAL,
    PAPER_TO_REGISTRY,
    PAPER_TO_REGISTRY_OFFICIAL,
    RELEASED_COLUMNS,
    T10K,
    detect_protocol,
    read_results,
    read_survival,
    table1_cells,
    write_table1,
)
from tests.reports.test_tss_agreement import _rows
from tests.reports.test_tss_released import _build
from tests.repo import REPO

OFFICIAL_BOARD = REPO / "leaderboards" / "table1-mnist-official" / "mnist"


def _run(folder: Path, dataset: str, results: list[tuple[str, str, float, int, int]], suite: str = "") -> Path:
    """A run folder with the summary.csv rows bench run writes (as tests/suites/test_table1_suite.py's ``_fake_run``):
    one certified_accuracy line per (transformation, defense, budget, k, n), and its config.json."""
    suite = suite or (OFFICIAL.suite if dataset == OFFICIAL.dataset else T10K.suite)
    folder.mkdir(parents=True)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["suite", "dataset", "transformation", "defense", "metric", "budget", "n_examples", "value"])
    for t, defense, budget, k, n in results:
        w.writerow([suite, dataset, t, defense, "certified_accuracy", budget, n, k / n])
    (folder / "summary.csv").write_text(buf.getvalue())
    (folder / "config.json").write_text(json.dumps({"suite": suite, "seed": 0, "profile": {
        "name": "table1", "n0": 100, "n": 100000, "alpha": 0.001, "certify": "sequential", "n_examples": 500}}))
    return folder


#: blur and brightness/contrast at table1-mnist's radius and at the official one, with different counts
BOTH_RADII = [("gaussian_blur", "tss", 6.0, 480, 500), ("gaussian_blur", "tss", 36.0, 440, 500),
              ("contrast_brightness", "tss", 0.5, 490, 500), ("contrast_brightness", "tss", 0.6932, 470, 500)]


def _cell(cells, transformation: str, label: str = "tss"):
    return next(c for c in cells if c.transformation == transformation and c.label == label)


def test_protocol_follows_the_results_dataset(tmp_path):
    official = _run(tmp_path / "official", "mnist", BOTH_RADII)
    t10k = _run(tmp_path / "t10k", "mnist-t10k", BOTH_RADII)
    entries = tmp_path / "entries"
    entries.mkdir()
    (entries / "tss.json").write_text(json.dumps({"dataset": "mnist", "results": []}))
    other = _run(tmp_path / "other", "digits", [("translation", "tss", 1.0, 1, 2)], suite="semantic")
    assert detect_protocol([official]) is OFFICIAL and detect_protocol([entries]) is OFFICIAL
    assert detect_protocol([t10k]) is T10K
    assert detect_protocol([other]) is T10K  # neither dataset: the t10k protocol, as before there were two
    assert detect_protocol([official, other]) is OFFICIAL


def test_official_results_are_read_at_the_official_radii(tmp_path):
    run = _run(tmp_path / "run", "mnist", BOTH_RADII)
    cells = table1_cells(read_results([run]), protocol=OFFICIAL)
    blur, cb = _cell(cells, "gaussian_blur"), _cell(cells, "contrast_brightness")
    assert (blur.budget, blur.k, blur.n, blur.paper) == (36.0, 440, 500, 90.6)
    assert (cb.budget, cb.k, cb.radius) == (0.6932, 470, "‖α‖∞ < 0.5")
    assert blur.budget == PAPER_TO_REGISTRY_OFFICIAL["gaussian_blur"].budget == 36.0
    assert PAPER_TO_REGISTRY["gaussian_blur"].budget == 6.0
    # the same numbers on mnist-t10k are read at table1-mnist's radii; a protocol ignores the other's dataset
    t10k = _run(tmp_path / "t10k", "mnist-t10k", BOTH_RADII)
    assert (_cell(table1_cells(read_results([t10k])), "gaussian_blur").k,
            _cell(table1_cells(read_results([t10k])), "contrast_brightness").k) == (480, 490)
    assert read_results([run], T10K) == [] and read_results([t10k], OFFICIAL) == []


def test_mixing_protocols_is_an_error_that_names_the_fix(tmp_path, capsys):
    official = _run(tmp_path / "official", "mnist", BOTH_RADII)
    t10k = _run(tmp_path / "t10k", "mnist-t10k", BOTH_RADII)
    with pytest.raises(BenchError, match="mix two Table 1 protocols: .*t10k on mnist-t10k .*official on mnist"):
        detect_protocol([t10k, official])
    assert main(["table1", str(t10k), str(official), "--out", str(tmp_path / "out")]) == 2
    assert "run `bench table1` once per protocol" in " ".join(capsys.readouterr().err.split())  # unwrapped


def test_the_official_report_states_its_protocol_and_how_to_add_tss_released(tmp_path):
    run = _run(tmp_path / "run", "mnist", BOTH_RADII)
    (run / "survival.csv").write_text(
        "dataset,transformation,label,budget,n_examples,certified,also_sound,contradicted,n_certified,n_also_sound,"
        "n_contradicted,grid_points\nmnist,gaussian_blur,gsmooth:paper,36.0,20,0.25,0.4,0.2,5,2,1,9\n"
        "mnist-t10k,gaussian_blur,gsmooth:paper,6.0,20,0.5,0.4,0.2,10,2,1,9\n")
    files = write_table1([run], tmp_path / "out")
    md = files["markdown"].read_text()
    assert "NOT the paper's protocol" not in md and "8,000" not in md and "mnist-t10k" not in md
    for said in ("official protocol (suite table1-mnist-official", "60,000 train / 10,000 test",
                 "TSS's 500 test images", "kernel variance 36", "l-inf box 0.6932", "Adam instead of TSS's SGD",
                 "profile table1"):
        assert said in md, said
    assert "not table1-mnist-official" not in md  # the run is of the protocol's suite
    assert "| gaussian_blur | ‖α‖₂ < 6 | 36 | TSS | tss | 90.6 | 88.0 |" in md
    assert "| gaussian_blur | ‖α‖₂ < 6 | 36 | kernel variance (px^2) |" in md  # the conversions are the official ones
    assert "Add `--tss-results DIR`" in md and "TSS released |" not in md
    (survival,) = read_survival([run])
    assert (survival["dataset"], survival["budget"]) == ("mnist", 36.0)
    header = files["csv"].read_text().splitlines()[0].split(",")
    assert header[-len(RELEASED_COLUMNS):] == RELEASED_COLUMNS
    assert files["plot"].stat().st_size > 1000


def test_tss_results_add_the_released_column_and_the_agreement(tmp_path, capsys):
    tss = _build(tmp_path / "tss")
    run = _run(tmp_path / "run", "mnist", [("translation", "tss", 8.0, 497, 500), ("rotation", "tss", 50.0, 487, 500),
                                          ("translation", "vanilla", 8.0, 400, 500)])
    rows = _rows(tss, "translation", {0: False, 20: False, 9980: True}, 8.0) + _rows(tss, "rotation", {}, 50.0)
    (run / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    verifiers = _run(tmp_path / "verifiers", "mnist", [("translation", "enumeration", 8.0, 90, 100)])
    assert main(["table1", str(run), str(verifiers), "--out", str(tmp_path / "out"), "--tss-results", str(tss)]) == 0
    md = (tmp_path / "out" / "table1.md").read_text()
    assert "| paper | TSS released | ours | 95 % CI | diff | diff (released) |" in md
    assert "| translation | ‖α‖₂ < 8 | 8 | TSS | tss | 99.6 | 99.6 (498 / 500) | 99.4 |" in md
    assert "| -0.2 | -0.2 | 497 / 500 |" in md  # diff vs the paper, then vs the released recount
    assert "| translation | ‖α‖₂ < 8 | 8 | VeriVis | enumeration | 98.8 |  | 90.0 |" in md  # no released number
    assert "Add `--tss-results DIR`" not in md and "TSS released = TSS's own number" in md
    agreement = md.split("## Our TSS beside TSS's released results, image by image", 1)[1]
    assert "| translation | 8 | 500 | 496 | 1 | 2 | 1 | 497 | 498 |" in agreement
    assert "| rotation | 50 | 500 | 487 | 0 | 0 | 13 | 487 | 487 |" in agreement
    out = {r["label"] + "/" + r["transformation"]: r
           for r in csv.DictReader(io.StringIO((tmp_path / "out" / "table1.csv").read_text()))}
    assert (out["tss/translation"]["released_k"], out["tss/translation"]["released_n"]) == ("498", "500")
    assert float(out["tss/scaling"]["released"]) == pytest.approx(98.4)  # not run by us, TSS's number still shown
    assert out["enumeration/translation"]["released"] == ""
    assert "wrote" in capsys.readouterr().out
    # sources without tss rows: the released column stays, the agreement says there is nothing to compare
    md = write_table1([verifiers], tmp_path / "verifiers-only", tss)["markdown"].read_text()
    assert "99.6 (498 / 500)" in md and "nothing to compare image by image" in md


def test_tss_results_are_only_for_the_official_protocol(tmp_path, capsys):
    t10k = _run(tmp_path / "t10k", "mnist-t10k", BOTH_RADII)
    assert main(["table1", str(t10k), "--out", str(tmp_path / "out"), "--tss-results", str(tmp_path)]) == 2
    assert "only for results of table1-mnist-official" in " ".join(capsys.readouterr().err.split())


def test_the_leaderboard_renders_a_section_per_protocol_with_entries(tmp_path):
    assert _table1_section(tmp_path) == ""
    for proto, budget in ((OFFICIAL, 36.0), (T10K, 6.0)):
        folder = tmp_path / proto.suite / proto.dataset
        folder.mkdir(parents=True)
        (folder / "tss.json").write_text(json.dumps({"dataset": proto.dataset, "results": [
            {"transformation": "gaussian_blur", "label": "tss", "budget": budget, "n_examples": 500,
             "certified_accuracy": 0.9}]}))
        if proto is OFFICIAL:
            text = _table1_section(tmp_path)
            assert text.startswith("\n## GSmooth paper's Table 1 (MNIST, official protocol) side by side\n")
            assert "| gaussian_blur | ‖α‖₂ < 6 | 36 | TSS | tss | 90.6 | 90.0 |" in text
            assert "bench table1 " + tmp_path.name + "/table1-mnist-official/mnist --out DIR" in text
    text = _table1_section(tmp_path)
    t10k_at, official_at = (text.index("## GSmooth paper's Table 1 (MNIST) side by side"),
                            text.index("## GSmooth paper's Table 1 (MNIST, official protocol) side by side"))
    assert t10k_at < official_at
    assert "| gaussian_blur | ‖α‖₂ < 6 | 6 | TSS | tss | 90.6 | 90.0 |" in text[:official_at]
    assert "NOT the paper's protocol" in text[:official_at] and "NOT the paper's protocol" not in text[official_at:]


def test_the_committed_side_by_side_is_the_commands_output(tmp_path):
    """``bench table1 leaderboards/<suite>/<dataset> --out DIR`` writes the committed files byte for byte (the
    plot is left out: its bytes depend on the matplotlib version). Only the official protocol has committed entries:
    table1-mnist's (mnist-t10k) left the leaderboards with issue #43."""
    board = OFFICIAL_BOARD
    files = write_table1([board], tmp_path)
    for kind in ("markdown", "csv", "survival"):
        committed = board / "side-by-side" / files[kind].name
        assert files[kind].read_text() == committed.read_text(), (
            f"{committed} is stale: regenerate it with `bench table1 {board.relative_to(REPO)} --out "
            f"{committed.parent.relative_to(REPO)}`")
