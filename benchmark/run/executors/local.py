"""The local executor: every unit in this process, in plan order, one progress bar per unit."""
from __future__ import annotations

from benchmark.infra.progress import progress_bar
from benchmark.models.store import ModelStore
from benchmark.run.plan import Plan
from benchmark.run.sink import RowSink
from benchmark.run.units import Unit


def run_local(plan: Plan, units: list[Unit], models: ModelStore, sink: RowSink) -> None:
    """Prepare each unit's task (once per task) and stream its rows to ``sink`` as they finish."""
    worker = plan.kind.worker(models, plan.store.folder)
    for unit in units:
        task = plan.tasks[unit.task]
        sink.prepared(task, worker.prepare(task))
        with progress_bar(total=len(unit.examples), desc=task.label) as bar:
            for i in unit.examples:
                sink.row(worker.evaluate(task, i))
                bar.update(1)
