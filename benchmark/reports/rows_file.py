"""The per-example rows file beside a leaderboard entry (``NAME.rows.jsonl.xz`` next to ``NAME.json``).

Format: JSON lines (keys sorted), the rows sorted by (task, example), each sequential CERTIFY record without
the fields its own settings determine (``sequential.compact_record``: looks and alpha / beta levels, which
``recompute`` requires to equal the schedule anyway), xz-compressed. Reading restores those fields
(``sequential.expand_records``: ``expand_record`` on every record, their schedules built in one batch), so
every reader sees the rows exactly as the run wrote them.

Why not gzip, as before: a TSS rotation certificate holds one sequential record per slice endpoint (up to
101); the `table1` TSS rows of 500 images were 8.3 MB gzipped, 3.6 MB like this, and the checkout must stay
under 50 MB. Entries written before (``NAME.rows.jsonl.gz``, full records) are still read: the format is told
by the file's magic bytes, and an entry names its own rows file.
"""
from __future__ import annotations

import gzip
import json
import lzma
from collections.abc import Callable
from pathlib import Path

from benchmark.certify import sequential
from benchmark.errors import BenchError

SUFFIX = ".rows.jsonl.xz"
RUN_ROWS = "rows.jsonl.xz"  # the rows of a run folder packed by ``bench pack`` (this format, no entry name)
LEGACY_SUFFIX = ".rows.jsonl.gz"
_XZ_MAGIC = b"\xfd7zXZ\x00"
_GZIP_MAGIC = b"\x1f\x8b"


def _map_records(obj: object, fn: Callable[[dict], dict]) -> object:
    """``obj`` with ``fn`` applied to every sequential CERTIFY record inside it (any depth)."""
    if isinstance(obj, dict):
        if sequential.is_estimate_record(obj):
            obj = fn(obj)
        return {k: _map_records(v, fn) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_map_records(v, fn) for v in obj]
    return obj


def _records(rows: list[dict]) -> list[dict]:
    """Every sequential CERTIFY record inside freshly parsed JSON ``rows`` (any depth; in no particular order).
    A loop over a stack of the containers only (exact ``dict`` / ``list``: what ``json.loads`` builds):
    recursive generators took a third more of the time of reading an entry."""
    found, stack = [], [rows]
    while stack:
        obj = stack.pop()
        if type(obj) is dict:
            if sequential.is_estimate_record(obj):
                found.append(obj)
            obj = obj.values()
        stack.extend([v for v in obj if type(v) is dict or type(v) is list])
    return found


def encode(rows: list[dict]) -> bytes:
    """Deterministic bytes of ``rows`` (sorted, keys sorted, records compacted, xz at the default preset), so the
    sha256 an entry records is reproducible from the same rows."""
    rows = sorted(rows, key=lambda r: (r["task"], r["example"]))
    text = "".join(json.dumps(_map_records(r, sequential.compact_record), sort_keys=True) + "\n" for r in rows)
    return lzma.compress(text.encode(), format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64)


def decode(data: bytes) -> list[dict]:
    """The rows in ``data`` (this format, or the gzipped full-record one of older entries), records expanded."""
    if data.startswith(_XZ_MAGIC):
        text = lzma.decompress(data)
    elif data.startswith(_GZIP_MAGIC):
        text = gzip.decompress(data)
    else:
        raise BenchError("not an entry rows file (neither xz nor gzip): rewrite the entry with `bench submit`.")
    rows = [json.loads(line) for line in text.decode().splitlines() if line.strip()]
    sequential.expand_records(_records(rows))  # in place: these objects are freshly parsed, nobody else's
    return rows


def read(path: Path) -> list[dict]:
    """The rows of the rows file at ``path`` (either format)."""
    try:
        return decode(Path(path).read_bytes())
    except BenchError as exc:
        raise BenchError(f"{path}: {exc}") from exc


def entry_name(rows_path: Path) -> str:
    """``NAME`` of a rows file ``NAME.rows.jsonl.xz`` (or the older ``.gz``): the stem its entry file shares."""
    name = Path(rows_path).name
    return name.removesuffix(SUFFIX).removesuffix(LEGACY_SUFFIX)


def siblings(entry_json: Path) -> tuple[Path, Path]:
    """(the rows file a new entry ``NAME.json`` gets, ``NAME.rows.jsonl.xz``; the older ``NAME.rows.jsonl.gz``)."""
    entry_json = Path(entry_json)
    stem = entry_json.name.removesuffix(".json")
    return entry_json.with_name(stem + SUFFIX), entry_json.with_name(stem + LEGACY_SUFFIX)


def beside(entry_json: Path) -> Path:
    """The rows file that belongs to the entry file ``entry_json``: the new one, or the older one when only
    that exists."""
    new, old = siblings(entry_json)
    return old if old.is_file() and not new.is_file() else new


def in_folder(folder: Path) -> list[Path]:
    """Every entry rows file in ``folder`` (either format), one per entry, sorted by name."""
    found = {entry_name(p): p for p in Path(folder).glob("*" + LEGACY_SUFFIX)}
    found.update({entry_name(p): p for p in Path(folder).glob("*" + SUFFIX)})  # the new one wins
    return [found[k] for k in sorted(found)]
