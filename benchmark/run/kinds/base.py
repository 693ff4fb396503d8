"""The interface every kind of task implements (see benchmark.run.kinds)."""
from __future__ import annotations

from typing import Protocol

from benchmark.models.store import ModelStore
from benchmark.run.options import RunOptions
from benchmark.run.store import RunStore


class KindWorker(Protocol):
    """Evaluates examples of tasks in one process; prepares each task's defense at most once."""

    def prepare(self, task) -> dict:
        """Prepare ``task`` (cached); returns what preparing learned for tasks.json (models, reports)."""

    def evaluate(self, task, example: int) -> dict:
        """The row of one example (``task`` must be prepared)."""


class Kind(Protocol):
    """A kind of task, bound to the run options (data root, device, ...)."""

    def __init__(self, opts: RunOptions) -> None: ...

    def describe(self, task) -> dict:
        """tasks.json info known without preparing: label(s), supported, the task's example ids."""

    def run_config(self, suite, profile, tasks: list) -> dict:
        """The run's config.json content (hashed: same config, same rows)."""

    def worker(self, models: ModelStore, out_dir) -> KindWorker:
        """A worker evaluating this kind's tasks with ``models`` (artifacts under ``out_dir``)."""

    def report(self, config: dict, tasks: list, task_info: dict[str, dict], store: RunStore, log) -> str:
        """Write summary.csv, table.md (and extras) from the store's rows; returns the table."""
