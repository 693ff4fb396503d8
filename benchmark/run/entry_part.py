"""A leaderboard entry read back as the run it was written from (its config, task info and rows), so that
``bench verify-entry`` can recompute it and ``bench merge`` can join it with runs of the suite's other tasks.

Why merge reads entries: a column built row by row (Table 1's GSmooth: Theorem 1 rows committed first, the other
rows later, each in parts) keeps its finished rows only in the committed entry once the machine that ran them is
gone. The entry records everything the run's identity is made of (suite, profile, seed, attacks, dataset, every
task's config and hash), its per-task info (labels, examples, models) and every row, byte-checked by sha256.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmark.errors import BenchError
from benchmark.reports import rows_file


def entry_run_files(entry: dict) -> tuple[dict, dict]:
    """(config.json, tasks.json) of the run ``entry`` was written from, as far as the entry records them: every
    field a run's identity, its tasks and a merge need."""
    p, prov = entry["protocol"], entry.get("provenance") or {}
    corruptions = entry.get("kind") == "corruptions"
    config = {"suite": entry["suite"], "profile": p["profile_settings"], "seed": p["seed"],
              "attack": p.get("attack"), "datasets": [entry["dataset"]],
              "kind": entry.get("kind", "semantic"),
              "config_hash": prov.get("run_config_hash"), "created": prov.get("created"),
              "environment": prov.get("environment"),
              "tasks": [{"hash": t["hash"], "dataset": entry["dataset"],
                         "transformation": t.get("models_transformation", t["transformation"]),
                         **({"corruption": t["transformation"]} if corruptions else {}),
                         "defense": entry["defense"]["ref"], "config": t["config"], "budgets": t["budgets"]}
                        for t in entry["tasks"]]}
    info = {t["hash"]: {"labels": t["labels"], "certified": t["certified"], "supported": t["supported"],
                        "examples": t["examples"], "defense": entry["defense"]["ref"],
                        **({"models": t["models"]} if "models" in t else {})} for t in entry["tasks"]}
    return config, info


class EntryAsRun:
    """The read side of ``RunStore`` (``folder``, ``read_json``, ``rows``) over an entry ``NAME.json`` and its rows
    file; the rows are checked against the sha256 the entry records before they are read."""

    def __init__(self, path: Path):
        self.folder = Path(path)
        try:
            self.entry = json.loads(self.folder.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise BenchError(f"{path} is not a readable leaderboard entry ({exc}).") from exc
        if "protocol" not in self.entry or "provenance" not in self.entry:
            raise BenchError(f"{path} is not a leaderboard entry (no protocol / provenance); pass a run folder or "
                             "an entry NAME.json written by bench submit.")
        self.config, self.info = entry_run_files(self.entry)

    def read_json(self, name: str) -> Any:
        return {"config.json": self.config, "tasks.json": self.info}.get(name)

    def rows(self) -> Iterator[dict]:
        prov = self.entry["provenance"]
        path = self.folder.with_name(prov["rows_file"])
        data = path.read_bytes() if path.exists() else b""
        if hashlib.sha256(data).hexdigest() != prov.get("rows_sha256"):
            raise BenchError(f"{path} is missing or is not the rows file {self.folder} records (sha256 differs); "
                             "restore it from the repository.")
        yield from rows_file.decode(data)
