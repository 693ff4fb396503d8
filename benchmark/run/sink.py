"""Where executors deliver results: the driver process, the only writer of rows.jsonl and tasks.json.

What preparing a task learned is saved (tasks.json, atomically) before the task's first row, so a
run killed at any moment never has rows whose task lacks its preparation info.
"""
from __future__ import annotations

from benchmark.run.store import RowWriter, RunStore


class RowSink:
    """Collects prepared-task info and rows from any executor, in any order."""

    def __init__(self, store: RunStore, writer: RowWriter, task_info: dict[str, dict], previous: dict[str, dict]):
        self.store, self.writer, self.task_info, self.previous = store, writer, task_info, previous

    def prepared(self, task, info: dict) -> None:
        """Merge what preparing ``task`` learned (first report wins; workers agree) and save tasks.json."""
        current = self.task_info[task.hash]
        new = {k: v for k, v in info.items() if k not in current or current[k] != v}
        if not new:
            return
        current.update(new)
        self.save()

    def save(self) -> None:
        self.store.write_json("tasks.json", {**self.previous, **self.task_info})

    def row(self, row: dict) -> None:
        self.writer.append(row)
