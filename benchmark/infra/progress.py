"""Progress on stderr: a tqdm bar on a terminal, timed one-line updates in logs, nothing under BENCH_QUIET=1.

A tqdm bar redraws itself with carriage returns; written to a file or a CI log that becomes one giant
line. When stderr is not a terminal, :class:`LineProgress` prints a line when a task starts, then at
most one every ``BENCH_PROGRESS_EVERY`` seconds (default 30) while it runs, and one when it ends. Each
line says done/total, percent, rate, elapsed time, ETA and the bar's label (its postfix: which
defense x transformation, model or stage the work is on), so a log read an hour later says how far a run
got and what it was doing.

Callers use tqdm's own interface (``update``, ``refresh``, ``set_postfix_str``, ``set_postfix``, context
manager), which both kinds of bar understand; messages printed while a bar is live go through :func:`say`.
"""
from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import TextIO

from tqdm.auto import tqdm

EVERY_ENV = "BENCH_PROGRESS_EVERY"  # seconds between progress lines in logs
DEFAULT_EVERY = 30.0


def line_interval() -> float:
    """Seconds between progress lines in logs: ``BENCH_PROGRESS_EVERY`` when it is a number >= 0, else 30
    (a typo in the variable must not stop a run over its display)."""
    try:
        every = float(os.environ.get(EVERY_ENV, DEFAULT_EVERY))
    except ValueError:
        return DEFAULT_EVERY
    return every if every >= 0 else DEFAULT_EVERY


def format_rate(done: int, seconds: float, unit: str) -> str:
    """``12.50 ex/s`` when at least one unit a second, else ``3.2 s/ex`` (as tqdm shows it); ``? ex/s`` before
    the first unit."""
    if done <= 0 or seconds <= 0:
        return f"? {unit}/s"
    rate = done / seconds
    return f"{rate:.2f} {unit}/s" if rate >= 1 else f"{1 / rate:.1f} s/{unit}"


def say(message: str) -> None:
    """A message on stderr that does not break a live bar: on a terminal ``tqdm.write`` clears the bars, prints
    the message and redraws them below it (a plain print would land in the middle of the bar's line)."""
    tqdm.write(message, file=sys.stderr)


def task_label(task) -> str:
    """``dataset/transformation/defense`` of a task (its ``label``), a defense given by reference
    (``path/to/my_defense.py:MyDefense``) shortened to its class name so a bar stays one readable line."""
    ref = task.defense
    if ":" in ref and task.label.endswith(ref):
        return task.label[:-len(ref)] + ref.rsplit(":", 1)[1]
    return task.label


class LineProgress:
    """The part of tqdm's interface we use, as timed log lines (see the module docstring).

    ``clock`` (seconds, monotonic) is injectable so the cadence is testable without sleeping.
    """

    def __init__(self, total: int | None, desc: str, stream: TextIO, every: float | None = None,
                 unit: str = "it", clock: Callable[[], float] = time.monotonic):
        self.total, self.desc, self.stream, self.unit, self.clock = total, desc, stream, unit, clock
        self.every = line_interval() if every is None else every
        self.n, self.postfix, self.closed = 0, "", False
        self.start = self.last_line = clock()

    def status(self) -> str:
        """``338/1350 (25%), 1.60 ex/s, elapsed 03:31, ETA 10:32``: where the work stands now."""
        elapsed = self.clock() - self.start
        rate = format_rate(self.n, elapsed, self.unit)
        if not self.total:
            return f"{self.n} {self.unit}, {rate}, elapsed {tqdm.format_interval(elapsed)}"
        eta = tqdm.format_interval((self.total - self.n) * elapsed / self.n) if self.n else "?"
        return (f"{self.n}/{self.total} ({100 * self.n // self.total}%), {rate}, "
                f"elapsed {tqdm.format_interval(elapsed)}, ETA {eta}")

    def _line(self, what: str) -> None:
        label = f" | {self.postfix}" if self.postfix else ""
        print(f"{self.desc}: {what}{label}", file=self.stream, flush=True)
        self.last_line = self.clock()

    def _due(self) -> None:
        """A line when ``every`` seconds have passed since the last one and the work is not finished yet."""
        if not self.closed and self.clock() - self.last_line >= self.every and (not self.total or self.n < self.total):
            self._line(self.status())

    def __enter__(self) -> "LineProgress":
        self._line(f"0/{self.total}, started" if self.total else "started")
        return self

    def update(self, n: int = 1) -> None:
        self.n += n
        self._due()

    def refresh(self) -> None:
        """tqdm redraws here; a log gets a line only when one is due (callers call it while waiting)."""
        self._due()

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        self.postfix = str(s)

    def set_postfix(self, ordered_dict: dict | None = None, refresh: bool = True, **kw) -> None:
        self.postfix = ", ".join(f"{k}={v}" for k, v in {**(ordered_dict or {}), **kw}.items())

    def close(self, failed: bool = False) -> None:
        """The last line: ``done`` with the totals, or ``stopped`` where the work ended early."""
        if self.closed:
            return
        if failed or (self.total and self.n < self.total):
            self._line(f"stopped, {self.status()}")
        else:
            seconds = self.clock() - self.start
            count = f"{self.n}/{self.total} (100%)" if self.total else f"{self.n} {self.unit}"
            self._line(f"{count} done in {tqdm.format_interval(seconds)}, {format_rate(self.n, seconds, self.unit)}")
        self.closed = True

    def __exit__(self, exc_type, *exc) -> None:
        self.close(failed=exc_type is not None)


def progress_bar(total: int | None = None, desc: str = "", unit: str = "it", **kw) -> tqdm | LineProgress:
    """A tqdm bar on a terminal, timed progress lines otherwise; disabled under BENCH_QUIET=1.

    The bar's rate and ETA are averages since the start (``smoothing=0``), as in the log lines: tqdm's default
    moving average keeps the last burst's rate, so its ETA stays near 0 while a worker prepares a slow task."""
    quiet = os.environ.get("BENCH_QUIET") == "1"
    if not quiet and not sys.stderr.isatty():
        return LineProgress(total, desc, sys.stderr, unit=unit)
    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, disable=quiet, leave=False, dynamic_ncols=True,
                **{"smoothing": 0, **kw})


class StageBar:
    """A bar over the named stages of one job (``bench verify-entry``: recompute, re-run, proofs).

    ``enter(name)`` shows the stage's name and counts the stages before it as done, so a caller (or a function
    it passes ``enter`` to) says where it is without counting. A job that ends before its last stage (problems
    found early) ends ``stopped`` in a log.
    """

    def __init__(self, names: list[str], desc: str):
        self.names, self.current = names, 0  # index of the stage under way
        self.bar = progress_bar(total=len(names), desc=desc, unit="stage")
        self.bar.set_postfix_str(names[0])

    def __enter__(self) -> "StageBar":
        self.bar.__enter__()
        return self

    def enter(self, name: str) -> None:
        """Stage ``name`` starts."""
        i = self.names.index(name)
        self.bar.set_postfix_str(name)
        if i > self.current:
            self.bar.update(i - self.current)
            self.current = i

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is None and self.current == len(self.names) - 1:  # the last stage ran to its end
            self.bar.update(1)
            self.current += 1
        self.bar.__exit__(exc_type, *exc)
