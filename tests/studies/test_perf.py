"""bench perf: rows pair certify with the same batches of bare forward passes and a Cohen-style reference loop."""
from __future__ import annotations

import json

import numpy as np
import torch

from benchmark.cli import main
from benchmark.studies.perf import prepare


def test_reference_loop_counts_every_sample_once():
    work = prepare("tss", "gaussian_blur", "smoke", 40, "cpu")
    x = torch.zeros(1, 1, 28, 28)
    counts = work.reference(x, [16, 16, 8], torch.Generator().manual_seed(0))
    assert counts.sum() == 40 and counts.dtype == np.int64
    # a constant black image: the reference and the defense's own sampler agree on the labels' support
    assert counts.argmax() == np.argmax(np.bincount(
        work.d._sampler(x, work.t)(40, torch.Generator().manual_seed(0)).numpy(), minlength=10))


def test_bench_perf_writes_rows(tmp_path, capsys):
    out = tmp_path / "perf.json"
    assert main(["perf", "--defense", "tss", "--defense", "gsmooth", "--transformation", "brightness",
                 "--n", "40", "--profile", "smoke", "--n-examples", "1", "--repeats", "2", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [(r["defense"], r["transformation"], r["n"]) for r in rows] == [("tss", "brightness", 40),
                                                                          ("gsmooth", "brightness", 40)]
    for r in rows:
        assert r["samples"] == 16 + 40  # n0 + n: every sample certify drew went through the classifier once
        assert r["certify_over_bare"] > 0 and r["reference_over_bare"] > 0
        assert r["bare_samples_per_s"] > 0
    printed = capsys.readouterr().out
    assert "cert/bare" in printed and printed.count("brightness") == 2


def test_bench_perf_times_fixed_n_under_a_sequential_profile(tmp_path):
    """The default profile certifies sequentially; bench perf still draws n0 + n samples (the limit at n)."""
    out = tmp_path / "perf.json"
    assert main(["perf", "--defense", "tss", "--transformation", "brightness", "--n", "2000", "--profile", "default",
                 "--n-examples", "1", "--repeats", "1", "--json", str(out)]) == 0
    (row,) = json.loads(out.read_text())["rows"]
    assert row["samples"] == 32 + 2000
