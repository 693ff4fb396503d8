"""The Ray executor: work units (task, chunk of examples) on a Ray cluster's actors, rows streamed back
to the driver as each unit completes (the driver is the only writer of the run folder).

Each actor keeps its prepared defenses, and a free actor is handed a unit of a task it has already
prepared when there is one, so a task is prepared at most once per actor. Rows do not depend on which
actor evaluates them: every example's random streams derive from (seed, task, example). Ray is
imported here only, so the default install does not need it (``pip install -e '.[ray]'``).
"""
from __future__ import annotations

import os
from dataclasses import replace

from benchmark.errors import BenchError
from benchmark.run.executors.bar import RunProgress
from benchmark.run.executors.worker import unit_worker
from benchmark.run.plan import Plan
from benchmark.run.sink import RowSink
from benchmark.run.units import Unit, next_unit

#: environment variables an actor needs to see the driver's caches, data and settings
FORWARDED_ENV = ("PYTHONPATH", "BENCH_CACHE", "BENCH_DATA_ROOT", "BENCH_QUIET", "BENCH_PROGRESS_EVERY", "BENCH_THREADS",
                 "OMP_NUM_THREADS")


class UnitActor:
    """One Ray worker: its own model store and prepared defenses; evaluates units."""

    def __init__(self, suite, opts, tasks: list, out_dir, threads: int):
        import torch

        torch.set_num_threads(threads)
        self.worker, cache_dir = unit_worker(suite, opts, out_dir)
        self.tasks = tasks
        self.confine = (out_dir, opts.data_root, cache_dir)

    def run(self, unit: Unit) -> tuple[int, dict, list[dict]]:
        from benchmark.run.confine import run_sandbox

        task = self.tasks[unit.task]
        folder, data_root, cache_dir = self.confine
        with run_sandbox(folder, [task.dataset], data_root, cache_dir):  # as the local executor's
            info = self.worker.prepare(task)
            return unit.task, info, [self.worker.evaluate(task, i) for i in unit.examples]


def _import_ray():
    try:
        import ray
    except ImportError as exc:
        raise BenchError("--executor ray needs Ray, which is not installed; install it with "
                         "pip install -e '.[ray]' (or drop --executor ray).") from exc
    return ray


def run_ray(plan: Plan, units: list[Unit], sink: RowSink) -> None:
    """Evaluate ``units`` on Ray (``opts.address``: a cluster; None: a local Ray on this machine)."""
    ray = _import_ray()
    opts = plan.kind.opts
    started = not ray.is_initialized()
    if started:
        try:
            ray.init(address=opts.address, include_dashboard=False, log_to_driver=True)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise BenchError(f"cannot start or reach Ray ({exc}); check --address (auto, or HOST:PORT of a running "
                             "`ray start --head`), or drop --address to start a local Ray.") from exc
    try:
        _run(ray, plan, units, sink, opts)
    finally:
        if started:
            ray.shutdown()


def _run(ray, plan: Plan, units: list[Unit], sink: RowSink, opts) -> None:
    if not units:
        return
    cpus = float(ray.cluster_resources().get("CPU", 1.0))
    n = min(opts.workers or max(1, int(cpus)), len(units))
    share = cpus / n
    threads = int(os.environ.get("BENCH_THREADS", 0)) or max(1, int(share))
    env = {k: os.environ[k] for k in FORWARDED_ENV if k in os.environ}
    actor_cls = ray.remote(UnitActor)
    worker_opts = replace(opts, log=None, out_dir=plan.store.folder)
    actors = [actor_cls.options(num_cpus=int(share) if share >= 1 else round(share, 4), num_gpus=opts.gpus_per_worker,
                                runtime_env={"env_vars": env})
              .remote(plan.suite, worker_opts, plan.tasks, plan.store.folder, threads) for _ in range(n)]
    pending = list(units)
    prepared: list[set[int]] = [set() for _ in actors]
    inflight: dict = {}

    def submit(a: int) -> None:
        unit = next_unit(pending, prepared[a])
        prepared[a].add(unit.task)
        inflight[actors[a].run.remote(unit)] = a
        progress.started(a, unit.task)

    try:
        with RunProgress(plan.tasks, units, f"run (ray, {n} workers)") as progress:
            for a in range(len(actors)):
                if pending:
                    submit(a)
            while inflight:
                ready, _ = ray.wait(list(inflight), num_returns=1, timeout=5)
                if not ready:  # a unit is a chunk of examples: keep elapsed time and ETA moving meanwhile
                    progress.waiting()
                    continue
                a = inflight.pop(ready[0])
                try:
                    ti, info, rows = ray.get(ready[0])
                except ray.exceptions.RayTaskError as exc:
                    cause = exc.cause if isinstance(getattr(exc, "cause", None), BaseException) else exc
                    if isinstance(cause, BenchError):
                        raise BenchError(str(cause)) from None
                    raise BenchError(f"a Ray worker failed: {type(cause).__name__}: {cause}. Finished rows are "
                                     "kept; rerun with --resume.") from None
                sink.prepared(plan.tasks[ti], info)
                for row in rows:
                    sink.row(row)
                progress.finished(a)
                progress.rows(ti, len(rows))
                if pending:
                    submit(a)
    finally:
        for actor in actors:
            ray.kill(actor)
