"""Run (or resume) a suite of any kind: plan, open the folder, evaluate the pending units with the
chosen executor, write tasks.json/models.json and the kind's reports."""
from __future__ import annotations

from pathlib import Path

from benchmark.run.confine import run_sandbox
from benchmark.run.executors.local import run_local
from benchmark.run.executors.pool import run_pool, start_pool
from benchmark.run.executors.ray_executor import run_ray  # imports Ray itself only when it runs
from benchmark.run.kinds import Kind
from benchmark.run.options import RunOptions
from benchmark.run.plan import open_run, plan_run
from benchmark.run.sink import RowSink
from benchmark.run.store import RunStore
from benchmark.run.units import pending_units, plan_pairs, shard_pairs


def run_suite(suite, opts: RunOptions) -> Path:
    """Run (or resume) ``suite``; returns the run folder. Prints the table at the end."""
    plan = plan_run(suite, opts)
    models, done = open_run(plan.store, plan.config, opts, plan.log)
    store = plan.store
    # what earlier invocations learned while preparing (models used, surrogate fit) survives a resume
    previous: dict[str, dict] = store.read_json("tasks.json") or {}
    task_info = {t.hash: {**previous.get(t.hash, {}), **plan.task_info[t.hash]} for t in plan.tasks}
    pairs = shard_pairs(plan_pairs(plan.tasks, task_info), opts.shard)
    ray = opts.executor == "ray"
    units = pending_units(pairs, plan.tasks, done, opts.only_examples, chunk=opts.chunk if ray else None)
    pool = None if ray else start_pool(plan, units, opts.local_workers())
    # defense code may write in the run's artifacts/ only, and read neither the data nor the run's rows
    with store.open_for_append() as writer, \
            run_sandbox(store.folder, {t.dataset for t in plan.tasks}, opts.data_root, models.cache_dir):
        sink = RowSink(store, writer, task_info, previous)
        sink.save()
        if ray:
            run_ray(plan, units, sink)
        elif pool is not None:
            run_pool(pool, plan, units, sink)
        else:
            run_local(plan, units, models, sink)
    return finish(plan.kind, plan.tasks, task_info, store, plan.log, opts.print_table)


def used_models(tasks: list, task_info: dict[str, dict]) -> list[dict]:
    """Provenance of every model the tasks used, once each, in task order."""
    seen: dict[tuple, dict] = {}
    for t in tasks:
        for m in task_info.get(t.hash, {}).get("models", []):
            seen.setdefault((m["key"], m["config_hash"]), m)
    return list(seen.values())


def finish(kind: Kind, tasks: list, task_info: dict[str, dict], store: RunStore, log,
           print_table: bool = True) -> Path:
    """models.json and the kind's reports (summary.csv, table.md, ...) of a run folder; prints the table.
    Shared by ``run_suite`` and ``bench merge``."""
    store.write_json("models.json", used_models(tasks, task_info))
    table = kind.report(store.read_json("config.json"), tasks, task_info, store, log)
    if print_table:
        print(table)
    log(f"wrote {store.folder / 'summary.csv'} and {store.folder / 'table.md'}")
    return store.folder
