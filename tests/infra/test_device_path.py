"""The GPU path: a smoke run on CUDA when present (skipped otherwise), and the out-of-memory message."""
from __future__ import annotations

import pytest
import torch

from benchmark.certify.smoothing import sample_counts
from benchmark.errors import BenchError
from tests.certify.test_certify_pinned import CASES, pinned_results
from tests.repo import SHARED_DATA


def test_out_of_memory_names_the_profile_key():
    def sample_labels(k: int, gen: torch.Generator) -> torch.Tensor:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    with pytest.raises(BenchError, match="batch_size"):
        sample_counts(sample_labels, 10, 3, 4, torch.Generator())


def test_other_runtime_errors_pass_through():
    def sample_labels(k: int, gen: torch.Generator) -> torch.Tensor:
        raise RuntimeError("shape mismatch")

    with pytest.raises(RuntimeError, match="shape mismatch"):
        sample_counts(sample_labels, 10, 3, 4, torch.Generator())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("defense,transformation", CASES)
def test_certify_on_cuda_matches_cpu_decisions(defense: str, transformation: str):
    """Same seeds on CUDA: noise comes from the same CPU generator (moved to the device), so counts agree up
    to the device's float round-off in the networks; predictions must agree."""
    gpu, cpu = pinned_results(defense, transformation, "cuda"), pinned_results(defense, transformation, "cpu")
    assert [[c["prediction"] for c in e["certificates"]] for e in gpu] == \
        [[c["prediction"] for c in e["certificates"]] for e in cpu]
    assert [e["ledger"] for e in gpu] == [e["ledger"] for e in cpu]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_smoke_run_on_cuda(tmp_path):
    from benchmark.cli import main

    assert main(["run", "--suite", "semantic", "--profile", "smoke", "--device", "cuda", "--no-train",
                 "--defense", "tss", "--defense", "gsmooth", "--transformation", "rotation",
                 "--transformation", "gaussian_blur", "--n-examples", "2", "--out", str(tmp_path / "run")]) == 0



def _smoke_rows_on_cuda(out, *args: str) -> list[dict]:
    """Rows of a smoke run with one image per task on CUDA (the run must succeed; one row per task)."""
    import json

    from benchmark.cli import main

    assert main(["run", *args, "--profile", "smoke", "--device", "cuda", "--no-train", "--n-examples", "1",
                 "--out", str(out)]) == 0
    rows = [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines()]
    assert len({(r["defense"], r["transformation"]) for r in rows}) == len(rows)  # one image per task
    return rows


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_every_task_of_the_default_suite_runs_on_cuda(tmp_path):
    """All nine defenses on all eleven transformations (smoke sizes, one image): nothing in their prepare,
    certify, predict, attacks or bounds mixes devices (a GPU run first found GSmooth's did)."""
    rows = _smoke_rows_on_cuda(tmp_path / "run", "--suite", "semantic")
    assert len({r["defense"] for r in rows}) == 9 and len({r["transformation"] for r in rows}) == 11


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.skipif(not (SHARED_DATA / "mnist").is_dir(), reason="real MNIST test files not found")
@pytest.mark.parametrize("suite", ["table1-mnist-official", "table1-mnist"])
def test_every_task_of_table1_mnist_runs_on_cuda(tmp_path, suite: str):
    """The Table 1 suites on real MNIST (smoke sizes, one image per task) on CUDA: their 28 x 28 models and
    settings (the official one's conv4fc3, sliced GSmooth rows, TSS's slices) differ from the default suite's."""
    rows = _smoke_rows_on_cuda(tmp_path / "run", "--suite", suite, "--data-root", str(SHARED_DATA / "mnist"))
    assert len({r["defense"] for r in rows}) == 9
