"""``bench merge``: join the folders of a sharded run (``bench run --shard i/k``) into one run folder with
the same rows, summary.csv and table.md an unsharded run writes.

The folders must hold the same run (equal ``rows_identity``: tasks, profile, attacks, seed; the shard is outside
it, and so are edits to tasks the run does not hold), or runs of different tasks of one suite with the same
protocol (equal ``protocol_identity``: e.g. ``--transformation rotation`` and ``--transformation zoom_blur``, each
sharded or not), which join into one run of their tasks' union; and together exactly the run's (task, example)
pairs: a duplicated or missing example is an error naming it. Each task's rows come with its own hash, which covers
its config, so a union holds each task as its own run computed it. A part may also be a leaderboard entry
(``NAME.json`` beside its rows file, ``entry_part.py``): the run it was written from, so a column can grow by
rows after its first rows were committed.
"""
from __future__ import annotations

import shutil
import sys
from collections import Counter
from pathlib import Path

from benchmark.errors import BenchError
from benchmark.run.driver import finish
from benchmark.run.entry_part import EntryAsRun
from benchmark.run.identity import protocol_identity, rows_identity
from benchmark.run.kinds import kind_of
from benchmark.run.options import RunOptions
from benchmark.run.results import tasks_from_config
from benchmark.run.store import RunStore
from benchmark.run.units import plan_pairs

SHOWN = 5  # examples named in an error message


def _named(keys: list[tuple[str, int]], labels: dict[str, str]) -> str:
    shown = ", ".join(f"{labels.get(h, h)} #{i}" for h, i in sorted(keys)[:SHOWN])
    return shown + (f" and {len(keys) - SHOWN} more" if len(keys) > SHOWN else "")


def _union_config(configs: list[dict]) -> dict:
    """The first run folder's config.json (an entry's only when every part is one) holding every folder's tasks
    (each once, in the order of that suite file's transformations and defenses), with every folder's config hash
    recorded (their suite files may differ in tasks the others do not hold)."""
    base = next((c for c in configs if c.get("suite_raw")), configs[0])  # a run's own config (an entry has none)
    raw = base.get("suite_raw") or {}
    t_order, d_order = list(raw.get("transformations") or []), list(raw.get("defenses") or [])

    def rank(names: list[str], name: str) -> int:
        return names.index(name) if name in names else len(names)

    tasks: dict[str, dict] = {}
    for c in configs:
        for t in c.get("tasks") or []:
            tasks.setdefault(t["hash"], t)
    ordered = sorted(tasks.values(), key=lambda t: (t["dataset"], rank(t_order, t["transformation"]),
                                                    t["transformation"], rank(d_order, t["defense"]), t["defense"],
                                                    t.get("corruption") or "", t["hash"]))
    return {**base, "tasks": ordered, "union_of": sorted({c["config_hash"] for c in configs})}


def merge_task_info(infos: list[dict]) -> dict[str, dict]:
    """tasks.json of the parts joined: per task, every key any part recorded (parts agree on shared keys)."""
    out: dict[str, dict] = {}
    for info in infos:
        for h, d in info.items():
            out.setdefault(h, {}).update({k: v for k, v in d.items() if k not in out.get(h, {})})
    return out


def merge_runs(folders: list[Path], out: Path, log=None, print_table: bool = True) -> Path:
    """Check and join ``folders`` into the new run folder ``out``; returns it."""
    log = log or (lambda m: print(m, file=sys.stderr))
    if not folders:
        raise BenchError("bench merge needs the run folders to join, e.g. bench merge runs/a runs/b --out runs/all.")
    if (Path(out) / "config.json").exists():
        raise BenchError(f"{out} already holds a run; choose a new --out DIR for the merged run.")
    stores = [EntryAsRun(Path(f)) if Path(f).suffix == ".json" else RunStore(Path(f)) for f in folders]
    configs, infos = [], []
    for s in stores:
        config, info = s.read_json("config.json"), s.read_json("tasks.json")
        if config is None or info is None:
            raise BenchError(f"{s.folder} is not a started run folder (config.json and tasks.json are needed); "
                             "pass the folders `bench run --shard i/k` wrote.")
        configs.append(config)
        infos.append(info)
    union = len({rows_identity(c) for c in configs}) > 1
    if union and len({protocol_identity(c) for c in configs}) > 1:
        listed = ", ".join(f"{s.folder}: {c['config_hash']}" for s, c in zip(stores, configs))
        raise BenchError(f"cannot merge runs of different configurations ({listed}); merge only the shards of one "
                         "`bench run` command, or runs of one suite with the same profile, seed and attacks.")
    merged_config = _union_config(configs) if union else configs[0]
    tasks = tasks_from_config(merged_config)
    task_info = merge_task_info(infos)
    labels = {t.hash: t.label for t in tasks}
    order = {t.hash: k for k, t in enumerate(tasks)}
    rows, where = [], Counter()
    for s in stores:
        seen = set()
        for r in s.rows():
            key = (r["task"], r["example"])
            if key in seen or r["task"] not in order:
                continue
            seen.add(key)
            where[key] += 1
            rows.append(r)
    dups = [k for k, n in where.items() if n > 1]
    if dups:
        raise BenchError(f"{len(dups)} example(s) are in more than one of the folders: {_named(dups, labels)}; "
                         "merge each shard's folder once (the shards of one run are disjoint).")
    expected = {(tasks[ti].hash, i) for ti, i in plan_pairs(tasks, {t.hash: task_info.get(t.hash, {}) for t in tasks})}
    missing = sorted(expected - set(where))
    if missing:
        raise BenchError(f"{len(missing)} example(s) are missing: {_named(missing, labels)}; finish the shard that "
                         "holds them (bench run ... --shard i/k --resume --out DIR) or pass every shard's folder.")
    store = RunStore(Path(out))
    config = {k: v for k, v in merged_config.items() if k != "shard"}
    config["merged_from"] = [str(s.folder) for s in stores]
    store.start(config, resume=False)
    with store.open_for_append() as writer:
        for r in sorted((r for r in rows if (r["task"], r["example"]) in expected),
                        key=lambda r: (order[r["task"]], r["example"])):
            writer.append(r)
    for s in stores:
        if s.folder.is_dir() and (s.folder / "artifacts").is_dir():
            shutil.copytree(s.folder / "artifacts", store.folder / "artifacts", dirs_exist_ok=True)
    store.write_json("tasks.json", task_info)
    kind = kind_of(config.get("kind"))(RunOptions(seed=int(config["seed"])))
    log(f"merged {len(stores)} folder(s), {len(expected)} example(s), into {store.folder}")
    return finish(kind, tasks, task_info, store, log, print_table)
