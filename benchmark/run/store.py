"""The run folder: resolved config, per-example rows (append-only, flushed), summary and tables.

Rows are JSON lines keyed by ``(task hash, example id)``. A row is written in
one ``write`` and flushed as soon as its example finishes, so an interrupted run
keeps every finished row; a resumed run skips the keys already present. A
half-written last line (the process was killed mid-write) is ignored and
completed with a newline before new rows are appended.

A packed folder (``bench pack``) holds ``rows.jsonl.xz`` instead of ``rows.jsonl``: it is read as it is, and
unpacked into ``rows.jsonl`` before a resumed run appends to it.
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmark.errors import BenchError
from benchmark.infra.io import atomic_write_json, atomic_write_text
from benchmark.reports import rows_file
from benchmark.run.identity import rows_identity

PACKED_ROWS = rows_file.RUN_ROWS  # the rows of a packed run folder (bench pack)


def row_line(row: dict) -> str:
    """One row as rows.jsonl holds it: keys sorted, one line."""
    return json.dumps(row, sort_keys=True) + "\n"


class RunStore:
    """One run's folder."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.rows_path = self.folder / "rows.jsonl"
        self.packed_path = self.folder / PACKED_ROWS
        self.config_path = self.folder / "config.json"

    # ----------------------------------------------------------- config
    def start(self, config: dict, resume: bool) -> None:
        """Create the folder and write the config; on resume check it matches the stored one."""
        if self.config_path.exists():
            old = json.loads(self.config_path.read_text())
            if not resume:
                raise BenchError(f"run folder {self.folder} already holds a run; pass --resume to continue it "
                                 "or --out DIR for a new one.")
            if rows_identity(old) != rows_identity(config):
                raise BenchError(
                    f"cannot resume {self.folder}: its tasks, profile, attacks or seed differ from this command's "
                    f"(config hash {old.get('config_hash')} then, {config.get('config_hash')} now); "
                    "use --out DIR for a new run.")
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.config_path, config)

    def write_json(self, name: str, obj: Any) -> None:
        atomic_write_json(self.folder / name, obj)

    def read_json(self, name: str) -> Any:
        """A JSON file of the run folder, or None if it does not exist yet."""
        path = self.folder / name
        if not path.exists():
            return None
        try:
            return json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise BenchError(f"{path} is not valid JSON ({exc}); delete it and rerun with --resume.") from exc

    # ------------------------------------------------------------- rows
    def rows(self) -> Iterator[dict]:
        """All complete rows (a torn last line from an interrupted write is skipped)."""
        if not self.rows_path.exists():
            if self.packed_path.exists():
                yield from rows_file.read(self.packed_path)
            return
        with open(self.rows_path) as f:
            for line in f:
                if not line.endswith("\n"):
                    break
                try:
                    yield json.loads(line)
                except json.JSONDecodeError:
                    continue

    def done_keys(self) -> set[tuple[str, int]]:
        return {(r["task"], r["example"]) for r in self.rows()}

    def open_for_append(self) -> "RowWriter":
        self._unpack()
        return RowWriter(self.rows_path)

    def _unpack(self) -> None:
        """A packed folder's rows back into rows.jsonl, so a resumed run appends to them (written before the packed
        file is removed: a kill in between leaves both, and rows.jsonl, the complete one, is read)."""
        if self.rows_path.exists() or not self.packed_path.exists():
            return
        rows = rows_file.read(self.packed_path)
        atomic_write_text(self.rows_path, "".join(row_line(r) for r in rows))
        self.packed_path.unlink()


class RowWriter:
    """Appends rows, one flushed line each."""

    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        needs_newline = path.exists() and path.stat().st_size > 0 and not path.read_bytes().endswith(b"\n")
        self.f = open(path, "a")
        if needs_newline:  # terminate a torn line so it stays an (ignored) bad line of its own
            self.f.write("\n")
            self.f.flush()

    def append(self, row: dict) -> None:
        self.f.write(row_line(row))
        self.f.flush()
        os.fsync(self.f.fileno())

    def close(self) -> None:
        self.f.close()

    def __enter__(self) -> "RowWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
