"""Records of the sequential PREDICT calls made inside a block, so the runner can keep them in the row.

``benchmark.certify.smoothing.predict`` logs each record into the innermost open ``collect()`` block
(none open: dropped); the attacks collect the records of the candidates they judge, the runner those of
the clean prediction, and ``benchmark.audit.predict_replay`` replays them from the row.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_LOG: ContextVar[list[dict] | None] = ContextVar("predict_log", default=None)


@contextmanager
def collect() -> Iterator[list[dict]]:
    """The list the PREDICT records of the block are appended to, in call order."""
    records: list[dict] = []
    token = _LOG.set(records)
    try:
        yield records
    finally:
        _LOG.reset(token)


def log(record: dict) -> None:
    """Append ``record`` to the innermost open ``collect()`` list (if any)."""
    records = _LOG.get()
    if records is not None:
        records.append(record)
