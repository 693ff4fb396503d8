"""A transformation defined in a user's file goes through ``bench run`` end to end: vanilla and the suite's three
attacks, tss (the file declares an additive parameter) and gsmooth, each with what the transformation declares
(docs/adding-a-transformation.md). Models for it are trained on the fly into a private cache."""
from __future__ import annotations

import json
import textwrap

import pandas as pd
import yaml

from benchmark.cli import main

DARKEN = """
    from dataclasses import dataclass

    import torch

    from benchmark.api import Transformation


    @dataclass(frozen=True)
    class Darken(Transformation):
        \"\"\"x -> x - d: additive (composes by sum), two-sided, with exact pixel bounds.\"\"\"

        composition = "sum"
        defense_defaults = {"tss": {"smoothing": "gaussian", "scale": 0.3}, "gsmooth": {"sigma1": 0.3}}

        name: str = "darken"
        kind: str = "additive"
        units: str = "intensity offset"
        low: tuple = (-10.0,)
        high: tuple = (10.0,)

        def _apply(self, x, theta):
            return x - theta[:, 0].view(-1, 1, 1, 1)

        def _pixel_bounds(self, x, lo, hi):
            slack = 2 * 2.0 ** -24 * (x.abs() + torch.maximum(lo.abs(), hi.abs()).view(-1, 1, 1, 1))
            return x - hi.view(-1, 1, 1, 1) - slack, x - lo.view(-1, 1, 1, 1) + slack


    DARKEN = Darken()
"""


def test_a_users_transformation_runs_with_vanilla_the_attacks_tss_and_gsmooth(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_CACHE", str(tmp_path / "cache"))
    t = tmp_path / "darken.py"
    t.write_text(textwrap.dedent(DARKEN))
    ref = f"{t}:DARKEN"
    suite = {
        "name": "mine", "datasets": ["digits"], "defenses": ["vanilla", "tss", "gsmooth"],
        "attack": [{"name": "pgd_eot", "step_size": 0.25}, {"name": "worst_of_k"}, {"name": "grid"}],
        "profiles": {"smoke": {"n_examples": 2, "n0": 16, "n": 100, "alpha": 0.001, "batch_size": 128,
                               "n_predict": 100, "attack_k": 2, "survival_points": 3,
                               "attacks": {"pgd_eot": {"steps": 2, "restarts": 1, "eot": 2, "step_size": 0.5,
                                                       "candidates": "best"},
                                           "grid": {"points": 2, "dense": [21, 5]}}}},
        "transformations": {ref: {"budgets": [0.1], "defenses": {
            "gsmooth": {"encoder": "lowpass", "content_blur": 1.5, "sigma2": 0.25, "steps_recon": 20,
                        "steps_resolve": 0}}}},
    }
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(suite))
    out = tmp_path / "run"
    assert main(["run", "--suite", str(path), "--profile", "smoke", "--workers", "1", "--out", str(out)]) == 0
    summary = pd.read_csv(out / "summary.csv")
    assert set(summary.transformation) == {"darken"}
    assert {"vanilla", "tss", "gsmooth"} <= {str(d).split(":")[0] for d in summary.defense}
    rows = [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines()]
    by_defense = {r["defense"].split("@")[0]: r for r in rows}
    assert set(by_defense) == {"vanilla", "tss", "gsmooth"}
    for name in ("tss", "gsmooth"):  # certified, with the certificate each defense issues for it
        assert by_defense[name]["certificates"], name
    assert by_defense["tss"]["certificates"][0]["stats"]["noise"]["kind"] == "gaussian"
    assert all(r["attacks"] for r in rows)  # every defense was attacked on the real transformation
    config = json.loads((out / "config.json").read_text())
    assert [p["name"] for p in config["plugins"] if p["kind"] == "transformation"] == ["darken"]
