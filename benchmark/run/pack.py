"""``bench pack``: a run folder, finished or not, as the three files that carry its results (``config.json``,
``tasks.json``, ``rows.jsonl.xz``), small enough to commit.

Why: a run that takes longer than one machine lives (a Table 1 column of many hours on CPUs) survives only in
the repository. A packed folder is still a run folder: ``bench merge`` reads it as it is, and
``bench run --resume --out DIR`` continues it (``RunStore`` unpacks the rows before it appends). The rows are
written in the entries' rows format (``reports.rows_file``: sorted, sequential records compacted, xz), so the same
rows pack to the same bytes. Summaries, tables and pictures are left behind: ``bench merge`` and ``bench run``
write them again from the rows.
"""
from __future__ import annotations

from pathlib import Path

from benchmark.errors import BenchError
from benchmark.infra.io import atomic_write_bytes
from benchmark.reports import rows_file
from benchmark.run.store import PACKED_ROWS, RunStore


def pack_run(folder: Path, out: Path) -> tuple[Path, int]:
    """Write ``folder``'s config, task info and rows into ``out`` (may be ``folder`` itself: then its plain
    rows.jsonl is replaced by the packed one). Returns (out, number of rows)."""
    src = RunStore(Path(folder))
    config, info = src.read_json("config.json"), src.read_json("tasks.json")
    if config is None or info is None:
        raise BenchError(f"{folder} is not a started run folder (config.json and tasks.json are needed); "
                         "pack the folder `bench run --out DIR` wrote.")
    rows = list(src.rows())
    same = Path(out).resolve() == Path(folder).resolve()
    dst = RunStore(Path(out))
    if not same and (dst.config_path.exists() or (dst.folder / PACKED_ROWS).exists()):
        raise BenchError(f"{out} already holds a run; choose a new folder, or pack {folder} in place "
                         f"(bench pack {folder} --out {folder}).")
    dst.folder.mkdir(parents=True, exist_ok=True)
    if not same:
        dst.write_json("config.json", config)
        dst.write_json("tasks.json", info)
    atomic_write_bytes(dst.folder / PACKED_ROWS, rows_file.encode(rows))
    if same and src.rows_path.exists():
        src.rows_path.unlink()
    return dst.folder, len(rows)
