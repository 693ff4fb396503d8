"""Existing leaderboard entries survive a submission: hashed before and after, and protected meanwhile.

Defense code may not touch the leaderboard folders (``benchmark.infra.sandbox`` refuses it); the hashes catch
what an audit hook cannot see (a C extension writing directly), so a change is an error naming the files.
"""
from __future__ import annotations

import hashlib
from pathlib import Path


def snapshot(roots: list[Path]) -> dict[str, str]:
    """sha256 of every file under ``roots`` (absolute path -> hex digest)."""
    out: dict[str, str] = {}
    for root in roots:
        if Path(root).is_dir():
            for p in sorted(Path(root).rglob("*")):
                if p.is_file():
                    out[str(p.resolve())] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def changed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Files added, removed or changed between two snapshots ('path (how)'), sorted."""
    out = []
    for p in sorted(before.keys() | after.keys()):
        if p not in after:
            out.append(f"{p} (removed)")
        elif p not in before:
            out.append(f"{p} (added)")
        elif before[p] != after[p]:
            out.append(f"{p} (changed)")
    return out
