"""Read a finished run folder: its config, rebuilt tasks (hashes checked), rows, and result records.

The leaderboard builds entries from this, ``bench merge`` checks shards with it and the audit
recomputes a run's consistency from it.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from benchmark.errors import BenchError
from benchmark.reports.summary import build_summary, consistency_violations
from benchmark.reports.survival import survival_records
from benchmark.suites.loader import Profile, Task


@dataclass
class RunData:
    """What a finished run folder holds, with its tasks rebuilt (and their hashes checked)."""

    folder: Path
    config: dict
    tasks: list[Task]
    task_info: dict[str, dict]
    rows: list[dict]


def is_corruption_run(config: dict) -> bool:
    return config.get("kind") == "corruptions"


def tasks_from_config(config: dict) -> list:
    """Rebuild the run's tasks from ``config.json``; every rebuilt hash must match the recorded one."""
    from benchmark.suites.corruption_suite import CorruptionTask

    from benchmark.transformations import register_plugin

    for p in config.get("plugins") or []:  # a plugin transformation's tasks name it by its `name`
        if p["kind"] == "transformation":
            register_plugin(p["ref"])
    profile = Profile(**config["profile"])
    tasks = []
    for t in config["tasks"]:
        common = dict(suite=config["suite"], dataset=t["dataset"], transformation=t["transformation"],
                      defense=t["defense"], defense_config=t["config"],
                      budgets=tuple(float(b) for b in t["budgets"]), profile=profile, seed=int(config["seed"]))
        task = CorruptionTask(corruption=t["corruption"], **common) if is_corruption_run(config) else Task(**common)
        if task.hash != t["hash"]:
            raise BenchError(f"task {task.label}: recomputed hash {task.hash} differs from the recorded "
                             f"{t['hash']}; the run's config.json was edited or written by another version.")
        tasks.append(task)
    return tasks


def load_run(folder: Path) -> RunData:
    """Read a run folder written by ``bench run`` (config.json, tasks.json, rows.jsonl)."""
    from benchmark.run.store import RunStore

    store = RunStore(Path(folder))
    config = store.read_json("config.json")
    task_info = store.read_json("tasks.json")
    if config is None or task_info is None:
        raise BenchError(f"{folder} is not a finished run folder (config.json and tasks.json are needed); "
                         "run `bench run` first, or `bench run --resume --out DIR` to finish it.")
    return RunData(Path(folder), config, tasks_from_config(config), task_info, list(store.rows()))


def results_table(summary: pd.DataFrame) -> list[dict]:
    """Long summary -> one record per (transformation, label, budget) with every metric as a number or None."""
    out = []
    if summary.empty:
        return out
    for (tname, label), g in summary.groupby(["transformation", "defense"], sort=False):
        metric = {(m, float(b)): float(v) for m, b, v in zip(g.metric, g.budget, g.value)}
        if ("clean_accuracy", 0.0) not in metric:
            continue  # derived rows (the corruption suite's overall mean) are recomputed by the renderer
        n = int(g.n_examples.max())
        budgets = sorted({float(b) for m, b in metric if m in ("empirical_accuracy", "certified_accuracy",
                                                                "corruption_accuracy")} | {0.0})
        for b in budgets:
            rec = {"transformation": str(tname), "label": str(label), "budget": b,
                   "clean_accuracy": metric[("clean_accuracy", 0.0)],
                   "certified_accuracy": metric.get(("certified_accuracy", b)),
                   "empirical_accuracy": metric.get(("empirical_accuracy", b)),
                   "abstain_rate": metric[("abstain_rate", 0.0)],
                   "seconds_per_example": metric.get(("seconds_per_example", 0.0), 0.0),
                   "n_examples": n}
            if ("corruption_accuracy", b) in metric:
                rec["corruption_accuracy"] = metric[("corruption_accuracy", b)]
            out.append(rec)
    return out


def compute_results(run: RunData, defense_ref: str) -> tuple[list[Task], list[dict], dict[tuple, int]]:
    """The tasks of ``defense_ref`` in ``run``, their result records and consistency violations."""
    tasks = [t for t in run.tasks if t.defense == defense_ref]
    if not tasks:
        have = sorted({t.defense for t in run.tasks})
        raise BenchError(f"run {run.folder} has no tasks of defense '{defense_ref}' (it has {have}).")
    missing = [t.label for t in tasks if t.hash not in run.task_info]
    if missing:
        raise BenchError(f"run {run.folder} did not finish tasks {missing}; finish it with "
                         f"`bench run --resume --out {run.folder}`.")
    hashes = {t.hash for t in tasks}
    rows = [r for r in run.rows if r["task"] in hashes]
    for t in tasks:
        info = run.task_info[t.hash]
        have = {r["example"] for r in rows if r["task"] == t.hash}
        if info.get("supported") and set(info.get("examples", [])) - have:
            raise BenchError(f"run {run.folder} is missing examples of {t.label}; finish it with "
                             f"`bench run --resume --out {run.folder}`.")
    if is_corruption_run(run.config):
        from benchmark.reports.corruption import build_corruption_summary

        summary = build_corruption_summary(run.config["suite"], tasks, run.task_info, rows)
        return tasks, results_table(summary), {}
    summary = build_summary(run.config["suite"], tasks, run.task_info, rows)
    return tasks, results_table(summary), consistency_violations(tasks, run.task_info, rows)


def entry_survival(run: RunData, tasks: list[Task]) -> list[dict]:
    """The survival table of ``tasks`` as entry records (the dataset is the entry's own)."""
    return [{k: v for k, v in r.items() if k != "dataset"} for r in survival_records(tasks, run.task_info, run.rows)]
