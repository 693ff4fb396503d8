"""Our TSS column beside TSS's released per-image results (benchmark/reports/tss_agreement.py): the four-way count,
the paper-radius budgets, label and budget mismatches, and the command line, on a built fixture."""
from pathlib import Path

import pytest

from benchmark.errors import BenchError
from benchmark.reports import tss_agreement as ta
from benchmark.reports.tss_released import ROWS, find_root, read_file
from tests.reports.test_tss_released import _build


def _rows(folder: Path, transformation: str, certify: dict[int, bool], budget: float, abstain: int = -1) -> list:
    """Our rows for the released row's images, certified at ``budget`` as ``certify`` says (default: as TSS is)."""
    row = ROWS[transformation]
    out = []
    for e in read_file(find_root(folder) / row.path):
        ok = certify.get(e.idx, e.correct and (e.radius > row.threshold if row.rule == "radius" else e.radius >= 0))
        cert = {"certified": {"0.0": ok, repr(float(budget)): ok}, "prediction": e.label if e.idx != abstain else None,
                "abstained": e.idx == abstain, "variant": ""}
        out.append({"defense": "tss", "transformation": transformation, "example": e.idx, "label": e.label,
                    "certificates": [cert]})
    return out


def test_budgets_are_the_paper_radii_in_registry_units():
    assert ta.BUDGETS == {"gaussian_blur": 36.0, "translation": 8.0, "contrast_brightness": 0.6932,
                          "rotation": 50.0, "scaling": 0.3}


def test_four_way_count_and_disagreeing_images(tmp_path):
    _build(tmp_path)
    row = ROWS["translation"]
    released = read_file(find_root(tmp_path) / row.path)
    # TSS certifies images 0..497 (idx 0, 20, ...); we flip two of its certified ones and certify one it does not
    rows = _rows(tmp_path, "translation", {0: False, 20: False, 9980: True}, 8.0, abstain=9960)
    a = ta.compare(ta.our_certificates(rows, "translation", 8.0), released, row, 8.0)
    assert (a.n, a.both, a.only_ours, a.only_tss, a.neither) == (500, 496, [9980], [0, 20], 1)
    assert (a.ours, a.tss) == (497, 498)
    # clean predictions: TSS's file has wrong / abstaining lines where ours names the label; 9960 abstains in ours
    assert a.same_prediction == sum(e.predict == e.label for e in released if e.idx != 9960) + \
        sum(e.predict == -1 for e in released if e.idx == 9960)
    text = ta.render_markdown([a])
    assert "| translation | 8 | 500 | 496 | 1 | 2 | 1 | 497 | 498 |" in text and "| 9980 | 0, 20 |" in text


def test_a_certified_wrong_prediction_is_not_a_certified_image(tmp_path):
    """Certified accuracy's event, as TSS's recount has it: certified at the budget and correct."""
    _build(tmp_path)
    row = ROWS["translation"]
    released = read_file(find_root(tmp_path) / row.path)
    rows = _rows(tmp_path, "translation", {}, 8.0)
    wrong = rows[0]["certificates"][0]
    wrong["certified"] = {k: True for k in wrong["certified"]}
    wrong["prediction"] = (rows[0]["label"] + 1) % 10
    ours = ta.our_certificates(rows, "translation", 8.0)
    assert not ours[rows[0]["example"]].certified and ours[rows[1]["example"]].certified
    a = ta.compare(ours, released, row, 8.0)
    assert rows[0]["example"] == 0 and a.only_tss == [0] and not a.only_ours and a.ours == a.tss - 1


def test_missing_images_and_mismatches_are_reported(tmp_path):
    _build(tmp_path)
    row = ROWS["rotation"]
    released = read_file(find_root(tmp_path) / row.path)
    rows = _rows(tmp_path, "rotation", {}, 50.0)[:-3]
    a = ta.compare(ta.our_certificates(rows, "rotation", 50.0), released, row, 50.0)
    assert a.n == 497 and a.missing_ours == [9940, 9960, 9980] and not a.only_ours and not a.only_tss
    assert "rotation: 3 of TSS's images not in ours" in ta.render_markdown([a])
    with pytest.raises(BenchError, match="no certificate at budget 45.0"):
        ta.our_certificates(rows, "rotation", 45.0)
    rows[0]["label"] = (rows[0]["label"] + 1) % 10
    with pytest.raises(BenchError, match="label .* do not index the same test file"):
        ta.compare(ta.our_certificates(rows, "rotation", 50.0), released, row, 50.0)


def test_command_line_on_a_run_folder(tmp_path, capsys):
    import json
    _build(tmp_path / "tss")
    run = tmp_path / "run"
    run.mkdir()
    rows = [r for t in ("translation", "scaling") for r in _rows(tmp_path / "tss", t, {}, ta.BUDGETS[t])]
    (run / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    ta.main(["--tss-results", str(tmp_path / "tss"), "--ours", str(run)])
    out = capsys.readouterr().out
    assert len(out.splitlines()) == 4 and "| translation |" in out and "| scaling |" in out  # header rule + 2 rows
    with pytest.raises(BenchError, match="no 'gsmooth' rows"):
        ta.main(["--tss-results", str(tmp_path / "tss"), "--ours", str(run), "--defense", "gsmooth"])


def test_each_disagreeing_image_says_where_ours_stands(tmp_path, capsys):
    """render_differences: per disagreeing image, TSS's printed radius and ours: a sliced row's extent with its
    first failing endpoint (angle, p_A bound, the bound it needed), a parameter row's radius and p_A bound, a wrong
    clean prediction, and whether our attack broke our model at the radius; agreeing rows add nothing."""
    import json
    _build(tmp_path / "tss")
    rot = _rows(tmp_path / "tss", "rotation", {0: False}, 50.0)
    seq = {"thresholds": [0.5, 0.831]}
    rot[0]["certificates"][0].update(radius=29.3, stats={"p_a_lower": 0.809, "endpoints": [
        {"theta": 0.0, "p_a_lower": 0.95, "n": 128, "sequential": seq},
        {"theta": 29.5, "p_a_lower": 0.809, "n": 32768, "sequential": seq}]})
    rot[0]["broken"] = {"0.0": False, "50.0": True}
    blur = _rows(tmp_path / "tss", "gaussian_blur", {0: False, 20: False}, 36.0)
    blur[0]["certificates"][0].update(radius=0.525, stats={"p_a_lower": 0.526, "n": 1024})
    blur[0]["broken"] = {"36.0": False}
    blur[1]["certificates"][0]["prediction"] = (blur[1]["label"] + 1) % 10
    run = tmp_path / "run"
    run.mkdir()
    trans = _rows(tmp_path / "tss", "translation", {}, 8.0)
    (run / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rot + blur + trans))
    rows = ta.agreements(run, tmp_path / "tss")
    text = ta.render_differences(rows)
    assert ("| rotation | 0 | only TSS | " in text and "certified to 29.3; at +29.5: p_A lower bound 0.809 < 0.831 "
            "needed (32,768 draws); our attack breaks our model at 50 |" in text)
    assert ("| gaussian_blur | 0 | only TSS | " in text and "certified to 0.525; p_A lower bound 0.526 (1,024 draws); "
            "our attack does not break our model at 36 |" in text)
    assert "| gaussian_blur | 20 | only TSS | " in text and f"predicts {(blur[1]['label'] + 1) % 10}, label" in text
    assert "| translation |" not in text and len(text.splitlines()) == 2 + 3
    ta.main(["--tss-results", str(tmp_path / "tss"), "--ours", str(run)])
    out = capsys.readouterr().out
    assert "Where the two disagree, image by image" in out and text in out
    assert ta.render_differences([r for r in rows if r.transformation == "translation"]) == ""
