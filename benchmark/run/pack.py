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
from benchmark.run.identity import rows_identity
from benchmark.run.store import PACKED_ROWS, RunStore


def pack_run(folder: Path, out: Path) -> tuple[Path, int]:
    """Write ``folder``'s config, task info and rows into ``out``: a new folder, an earlier packing of the same run
    (updated, if ``folder`` holds every row it holds), or ``folder`` itself (its plain rows.jsonl is replaced by the
    packed one). Returns (out, number of rows)."""
    src = RunStore(Path(folder))
    config, info = src.read_json("config.json"), src.read_json("tasks.json")
    if config is None or info is None:
        raise BenchError(f"{folder} is not a started run folder (config.json and tasks.json are needed); "
                         "pack the folder `bench run --out DIR` wrote.")
    rows = list(src.rows())
    same = Path(out).resolve() == Path(folder).resolve()
    dst = RunStore(Path(out))
    if not same and dst.config_path.exists():
        _check_update(dst, config, rows)
    dst.folder.mkdir(parents=True, exist_ok=True)
    if not same:
        dst.write_json("config.json", config)
        dst.write_json("tasks.json", info)
    atomic_write_bytes(dst.folder / PACKED_ROWS, rows_file.encode(rows))
    if dst.rows_path.exists():  # read before the packed rows, so it goes (its rows are all in them: checked)
        dst.rows_path.unlink()
    return dst.folder, len(rows)


def _check_update(dst: RunStore, config: dict, rows: list[dict]) -> None:
    """Refuse to overwrite ``dst`` unless it is a packing of the same run whose rows ``rows`` all hold."""
    if rows_identity(dst.read_json("config.json")) != rows_identity(config):
        raise BenchError(f"{dst.folder} already holds another run; choose a new folder for this one.")
    lost = {(r["task"], r["example"]) for r in dst.rows()} - {(r["task"], r["example"]) for r in rows}
    if lost:
        raise BenchError(f"{dst.folder} holds {len(lost)} row(s) the run being packed lacks; resume that folder "
                         f"(bench run ... --resume --out {dst.folder}) instead of packing over it.")
