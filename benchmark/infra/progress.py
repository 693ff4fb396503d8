"""Progress on stderr: a tqdm bar on a terminal, plain lines in logs, nothing under BENCH_QUIET=1.

A tqdm bar redraws itself with carriage returns; written to a file or a CI log that becomes one giant
line. When stderr is not a terminal, :class:`LineProgress` prints a line when a task starts, at every
``LINE_STEP`` percent and when it ends instead.
"""
from __future__ import annotations

import os
import sys
import time

from tqdm.auto import tqdm

LINE_STEP = 25  # percent between progress lines in logs


class LineProgress:
    """The part of tqdm's interface we use (``update``, ``set_postfix``, context manager), as log lines."""

    def __init__(self, total: int | None, desc: str, stream, step: int = LINE_STEP):
        self.total, self.desc, self.stream, self.step = total, desc, stream, step
        self.n, self.next_pct, self.postfix, self.start = 0, step, "", time.perf_counter()

    def _line(self, what: str) -> None:
        extra = f" ({self.postfix})" if self.postfix else ""
        print(f"{self.desc}: {what}{extra}", file=self.stream, flush=True)

    def __enter__(self) -> "LineProgress":
        self._line(f"0/{self.total}" if self.total else "started")
        return self

    def update(self, n: int = 1) -> None:
        self.n += n
        if not self.total:
            return
        pct = 100 * self.n // self.total
        if pct >= self.next_pct and self.n < self.total:
            self._line(f"{self.n}/{self.total} ({pct}%)")
            self.next_pct = (pct // self.step + 1) * self.step

    def set_postfix(self, **kw) -> None:
        self.postfix = ", ".join(f"{k}={v}" for k, v in kw.items())

    def __exit__(self, *exc) -> None:
        self._line(f"{self.n}/{self.total} done in {time.perf_counter() - self.start:.1f} s")


def progress_bar(total: int | None = None, desc: str = "", **kw) -> tqdm | LineProgress:
    """A tqdm bar on a terminal, progress lines otherwise; disabled under BENCH_QUIET=1."""
    quiet = os.environ.get("BENCH_QUIET") == "1"
    if not quiet and not sys.stderr.isatty():
        return LineProgress(total, desc, sys.stderr)
    return tqdm(total=total, desc=desc, file=sys.stderr, disable=quiet, leave=False, dynamic_ncols=True, **kw)
