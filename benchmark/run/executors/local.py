"""The local executor: every unit in this process, in plan order, under one progress bar for the run."""
from __future__ import annotations

from benchmark.models.store import ModelStore
from benchmark.run.executors.bar import RunProgress
from benchmark.run.plan import Plan
from benchmark.run.sink import RowSink
from benchmark.run.units import Unit


def run_local(plan: Plan, units: list[Unit], models: ModelStore, sink: RowSink) -> None:
    """Prepare each unit's task (once per task) and stream its rows to ``sink`` as they finish."""
    worker = plan.kind.worker(models, plan.store.folder)
    with RunProgress(plan.tasks, units, "run") as progress:
        for unit in units:
            task = plan.tasks[unit.task]
            progress.started(0, unit.task)
            sink.prepared(task, worker.prepare(task))
            for i in unit.examples:
                sink.row(worker.evaluate(task, i))
                progress.rows(unit.task)
