"""The entry rows file (benchmark/reports/rows_file.py): lossless, deterministic, and older gzip entries still read."""
import gzip
import hashlib
import json
import lzma

import numpy as np
import pytest

from benchmark.certify import sequential as sq
from benchmark.errors import BenchError
from benchmark.leaderboard.entry import write_entry
from benchmark.reports import rows_file

from tests.repo import REPO


def _record(seed: int, thresholds: list[float]) -> dict:
    rng = np.random.default_rng(seed)
    draw = lambda k: np.bincount(rng.choice(3, size=k, p=[0.96, 0.03, 0.01]), minlength=3)
    return sq.estimate(draw, 0, sq.SequentialSettings(), 2_000, 0.001, thresholds).record


def _rows() -> list[dict]:
    """Rows shaped like a smoothing certificate's and a TSS sliced certificate's (a record per endpoint)."""
    endpoints = [{"theta": float(i), "sequential": _record(i, [0.9])} for i in range(5)]
    return [{"task": "b", "example": 3, "certificates": [{"stats": {"endpoints": endpoints, "p_a_lower": 0.9}}]},
            {"task": "a", "example": 7, "certificates": [{"stats": {"sequential": _record(9, [0.8, 0.95])}}],
             "attacks": {"1.0": {"runs": [{"predict": [{"rule": sq.RULE, "n": 100, "top2": [[90, 5]], "label": 1}]}]}}}]


def test_rows_round_trip_exactly_and_the_bytes_are_deterministic():
    rows = _rows()
    data = rows_file.encode(rows)
    assert data.startswith(b"\xfd7zXZ\x00") and data == rows_file.encode(list(reversed(rows)))
    back = rows_file.decode(data)
    assert back == sorted(rows, key=lambda r: (r["task"], r["example"]))
    stored = lzma.decompress(data).decode()
    assert '"alphas"' not in stored and '"counts_a"' in stored  # the derived levels are left out, the counts kept
    full = "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows)
    assert len(data) < len(gzip.compress(full.encode()))


def test_reading_expands_every_record_as_expand_record_does_one_by_one():
    """``decode`` (records found with a stack and expanded in one batch, in place) gives what mapping
    ``expand_record`` over every record gives, on a committed entry's rows (550 sequential records)."""
    path = REPO / "leaderboards" / "semantic" / "digits" / "gsmooth.rows.jsonl.xz"
    data = path.read_bytes()
    slow = [rows_file._map_records(json.loads(line), sq.expand_record)
            for line in lzma.decompress(data).decode().splitlines() if line.strip()]
    fast = rows_file.decode(data)
    assert json.dumps(fast) == json.dumps(slow)
    assert sum(1 for r in rows_file._records(fast) if "looks" in r) == len(rows_file._records(fast)) >= 500


def test_older_gzip_entries_still_read(tmp_path):
    rows = _rows()
    legacy = gzip.compress("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows).encode())
    (tmp_path / "x.json").write_text("{}")
    (tmp_path / "x.rows.jsonl.gz").write_bytes(legacy)
    assert rows_file.beside(tmp_path / "x.json") == tmp_path / "x.rows.jsonl.gz"
    assert rows_file.read(tmp_path / "x.rows.jsonl.gz") == rows
    assert rows_file.in_folder(tmp_path) == [tmp_path / "x.rows.jsonl.gz"]
    (tmp_path / "x.rows.jsonl.xz").write_bytes(rows_file.encode(rows))
    assert rows_file.beside(tmp_path / "x.json") == tmp_path / "x.rows.jsonl.xz"
    assert rows_file.in_folder(tmp_path) == [tmp_path / "x.rows.jsonl.xz"]


def test_a_new_entry_replaces_an_older_entrys_gzip_rows(tmp_path):
    folder = tmp_path / "suite" / "data"
    folder.mkdir(parents=True)
    (folder / "d.rows.jsonl.gz").write_bytes(gzip.compress(b"{}\n"))
    data = rows_file.encode(_rows())
    entry = {"suite": "suite", "dataset": "data", "defense": {"name": "d"},
             "provenance": {"rows_file": "d" + rows_file.SUFFIX, "rows_sha256": hashlib.sha256(data).hexdigest()}}
    write_entry(tmp_path, entry, data)
    assert sorted(p.name for p in folder.iterdir()) == ["d.json", "d.rows.jsonl.xz"]
    assert rows_file.read(folder / "d.rows.jsonl.xz") == sorted(_rows(), key=lambda r: (r["task"], r["example"]))


def test_a_file_in_neither_format_is_one_clear_error(tmp_path):
    bad = tmp_path / "x.rows.jsonl.xz"
    bad.write_text('{"task": "a"}\n')
    with pytest.raises(BenchError, match=r"x\.rows\.jsonl\.xz.*neither xz nor gzip"):
        rows_file.read(bad)
    assert rows_file.entry_name(bad) == "x" and rows_file.entry_name(tmp_path / "y.rows.jsonl.gz") == "y"
