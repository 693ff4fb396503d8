"""The one progress bar of a run, shared by every executor: examples done over all pending units, with rate
and ETA, its postfix naming the task (dataset/transformation/defense) the work is on.

Workers of the pool and Ray executors report each finished example (pool) or unit (Ray) to the driver,
which is where this bar lives; the postfix names the task of the latest event (a unit handed out or rows
received) and how many other tasks the workers are evaluating at the same time.
"""
from __future__ import annotations

from benchmark.infra.progress import progress_bar, task_label
from benchmark.run.units import Unit


class RunProgress:
    """Context manager around the run's bar; executors report ``started``, ``rows``, ``finished``, ``waiting``."""

    def __init__(self, tasks: list, units: list[Unit], desc: str):
        self.tasks = tasks
        self.bar = progress_bar(total=sum(len(u.examples) for u in units), desc=desc, unit="ex")
        self.running: dict[int, int] = {}  # worker -> index of the task of the unit it evaluates
        self.last: int | None = None
        self.shown = ""

    def __enter__(self) -> "RunProgress":
        self.bar.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.bar.__exit__(*exc)

    def label(self) -> str:
        """``digits/rotation/tss (+1 more task)``: the latest task, and other tasks being evaluated now."""
        if self.last is None:
            return ""
        others = len(set(self.running.values()) - {self.last})
        more = f" (+{others} more task{'s' if others > 1 else ''})" if others else ""
        return task_label(self.tasks[self.last]) + more

    def _show(self) -> None:
        text = self.label()
        if text != self.shown:  # a tqdm bar redraws on every set_postfix_str: only when the text changes
            self.bar.set_postfix_str(text)
            self.shown = text

    def started(self, worker: int, task: int) -> None:
        """``worker`` starts a unit of task ``task`` (preparing it first, which may take a while)."""
        self.running[worker] = self.last = task
        self._show()

    def rows(self, task: int, n: int = 1) -> None:
        """``n`` examples of task ``task`` finished (the label is set first, so a due log line names it)."""
        self.last = task
        self._show()
        self.bar.update(n)

    def finished(self, worker: int) -> None:
        """``worker`` finished its unit and is idle until it is handed the next."""
        self.running.pop(worker, None)
        self._show()

    def waiting(self) -> None:
        """The driver waited without news: redraw elapsed time and ETA (a log line if one is due)."""
        self.bar.refresh()
