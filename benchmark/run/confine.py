"""The sandbox rules of a run (``benchmark.infra.sandbox``): what its defense code may read and write."""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from benchmark.datasets import evaluation_data
from benchmark.infra import sandbox


@contextmanager
def run_sandbox(folder: Path, datasets: Iterable[str], data_root: Path | None, cache_dir: Path) -> Iterator[None]:
    """Defense code may read neither the datasets' files nor the run folder (its rows), and may write only in
    the run's ``artifacts/`` and the model cache's checkpoints."""
    with sandbox.protect(evaluation_data(datasets, data_root), "test_split"), sandbox.protect([folder]), \
            sandbox.allow_writes([Path(folder) / "artifacts", Path(cache_dir) / "checkpoints"]):
        yield
