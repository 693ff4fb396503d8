"""The Corollary 1 ceiling (benchmark/studies/surrogate_ceiling.py) and its study (paper_design.py)."""
from __future__ import annotations

import json

import pytest

from baselines.gsmooth.defense import GSmooth
from benchmark.certify.smoothing import SmoothingParams
from benchmark.context import Context
from benchmark.datasets import get_dataset
from benchmark.models.store import ModelStore
from benchmark.reports.intervals import clopper_pearson
from benchmark.studies.paper_design import main
from benchmark.studies.surrogate_ceiling import ImageCeiling, cap_margin, ceiling_summary, image_ceiling, still_part
from benchmark.transformations import get_transformation

PAPER_PROTOCOL = SmoothingParams(n0=100, n=100_000, alpha=0.001, batch_size=1000)


def test_surrogate_moving_exactly_along_a1_has_mstar_one_over_sigma1(tmp_path):
    """The brightness pose surrogate re-encodes its own output's mean exactly: F2(H(z0 + A1 xi)) moves by
    A1 xi, so J = A1, M* = 1/sigma1 and R_max = sigma1 m_cap (Cohen et al. at sigma1)."""
    sigma1, budget = 0.1, 0.2
    t = get_transformation("brightness")
    ctx = Context(dataset=get_dataset("digits"), transformation=t, smoothing=PAPER_PROTOCOL,
                  store=ModelStore(cache_dir=tmp_path, log=lambda m: None), budgets=(0.0, budget))
    defense = GSmooth(sigma1=sigma1, sigma2=0.25, encoder="pose", steps_recon=2, steps_resolve=0)
    defense.prepare_surrogate(ctx)
    m_cap = cap_margin(defense)
    assert m_cap == pytest.approx(3.81, abs=0.01)
    x, _ = ctx.train_data()
    for i in (0, 1):
        c = image_ceiling(defense, x[i:i + 1], budget, m_cap)
        assert c.mstar == pytest.approx(1 / sigma1, rel=1e-3)
        assert c.jacobian_part == pytest.approx(0, abs=1e-2 / sigma1 ** 2)
        assert c.r_max == pytest.approx(sigma1 * m_cap, rel=1e-3)
    # a code that ignores theta would pay ||A1||^2 / sigma2^2 = (H W / sigma1^2) / sigma2^2 (A1 from the float32 unit)
    assert still_part(defense) == pytest.approx(x[0].numel() / sigma1 ** 2 / 0.25 ** 2, rel=1e-6)


def _ceiling(r_max: float) -> ImageCeiling:
    return ImageCeiling(mstar=4.0 / r_max, inv_sigma1_sq=1.0, jacobian_part=16.0 / r_max ** 2 - 1.0, slack=0.0,
                        r_max=r_max)


def test_fraction_counts_strictly_above_reach_with_its_clopper_pearson_interval():
    images = [_ceiling(r) for r in (0.5, 1.5, 2.0, 1.0, 0.9)]
    s = ceiling_summary(images, reach=1.0)
    assert s["above"] == 2 and s["images"] == 5 and s["fraction"] == pytest.approx(0.4)  # R_max = reach: not above
    assert s["interval"] == list(clopper_pearson(2, 5))
    assert s["interval"][0] < 0.4 < s["interval"][1]
    assert s["median_r_max"] == pytest.approx(1.0) and s["median_mstar"] == pytest.approx(4.0)
    none = ceiling_summary(images, reach=2.0)
    assert none["above"] == 0 and none["interval"][0] == 0.0 and none["interval"][1] < 1
    with pytest.raises(ValueError):
        ceiling_summary([], reach=1.0)


def test_cli_smoke_writes_table_and_json_and_reads_its_cache(tmp_path, capsys):
    argv = ["--dataset", "digits", "--transformation", "gaussian_blur", "--designs", "paper", "--sigma2", "0.4",
            "--images", "2", "--steps-recon", "2", "--cache", str(tmp_path / "records"),
            "--model-cache", str(tmp_path / "models"), "--quiet",
            "--out", str(tmp_path / "t.md"), "--json", str(tmp_path / "t.json")]
    assert main(argv) == 0
    data = json.loads((tmp_path / "t.json").read_text())
    (rec,) = data["records"]
    assert rec["design"] == "paper" and rec["encoder"] == "local" and rec["config"]["steps_resolve"] == 0
    assert rec["sigma2"] == 0.4 and rec["sigma1"] == 2.5 and rec["budget"] == 6.0
    assert rec["surrogate"]["source"] == "trained" and len(rec["surrogate"]["sha256"]) == 64
    assert len(rec["per_image"]) == 2 and rec["summary"]["images"] == 2
    for c in rec["per_image"]:  # M*^2 = 1/sigma1^2 + the Jacobian part (the grid maximum) + the slack's share
        assert c["mstar"] ** 2 >= c["inv_sigma1_sq"] + c["jacobian_part"] - 1e-6
        assert c["r_max"] == pytest.approx(rec["m_cap"] / c["mstar"])
    assert "| gaussian_blur | paper | local | 2.5 | 0.4 |" in (tmp_path / "t.md").read_text()
    # a second invocation reads the cached record instead of measuring again
    (tmp_path / "t.json").unlink()
    assert main(argv) == 0
    again = json.loads((tmp_path / "t.json").read_text())["records"][0]
    assert again["per_image"] == rec["per_image"] and again["seconds"] == rec["seconds"]


def test_committed_table_is_rendered_from_its_committed_records():
    """leaderboards/.../paper-design: the markdown table is render() of the JSON records beside it, and every
    record is at 100 images with its surrogate's hash and sha256 recorded."""
    from benchmark.studies.paper_design import render
    from tests.repo import REPO

    folder = REPO / "leaderboards" / "table1-mnist" / "mnist-t10k" / "paper-design"
    records = json.loads((folder / "paper-design.json").read_text())["records"]
    assert render(records) in (folder / "paper-design.md").read_text()
    assert len(records) == 36 and {r["design"] for r in records} == {"paper", "committed"}
    for r in records:
        assert r["summary"]["images"] == 100 and len(r["surrogate"]["sha256"]) == 64
        assert r["surrogate"]["source"] in (("zoo",) if r["design"] == "committed" else ("trained", "cache"))
