"""The process-pool executor: the local executor's work on N worker processes of this machine, each
single-threaded by default, rows streamed back to the driver (the only writer of the run folder).

Why processes, not threads: most of a run is many small forward passes (PREDICT's and the sequential
rule's batches, attack queries) that one intra-op thread pool cannot keep two cores busy with; two
single-threaded workers can. The pool is started with ``spawn`` (a fresh interpreter: no OpenMP or torch
state is inherited from the driver) before the run's sandbox opens, and each worker confines defense code
itself, as the Ray executor's actors do. Rows do not depend on which worker evaluates them: every example's
random streams derive from (seed, task, example).

Units are handed out as by the Ray executor (``units.next_unit``); the dense-grid outcomes that the verifiers
share with the vanilla classifier reach every worker through files in the run folder (``benchmark.run.grid_cache``).
"""
from __future__ import annotations

import io
import multiprocessing
import os
import sys
import traceback
from dataclasses import replace

from benchmark.errors import BenchError
from benchmark.infra.progress import say
from benchmark.run.executors.bar import RunProgress
from benchmark.run.executors.worker import unit_worker
from benchmark.run.plan import Plan
from benchmark.run.sink import RowSink
from benchmark.run.units import Unit, next_unit

#: fork on Linux: the workers share the driver's imported modules (torch alone is hundreds of MB) page for
#: page instead of importing their own; the driver has run no parallel torch region with more than the
#: workers' one thread that a forked child could inherit locked. spawn elsewhere (fork is unsafe on macOS).
START_METHOD = "fork" if sys.platform.startswith("linux") else "spawn"


class _ToDriver(io.TextIOBase):
    """A worker's stderr: each complete line goes to the driver, which prints it above the run's progress bar.
    A worker writing to the terminal itself would land inside the bar's line; as this is no terminal, the
    worker's own bars (a model it trains) become timed log lines, which reach the screen the same way."""

    def __init__(self, outbox, wid: int):
        self.outbox, self.wid, self.pending = outbox, wid, ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        *lines, self.pending = (self.pending + text).split("\n")
        for line in lines:
            self.outbox.put(("say", self.wid, None, line))
        return len(text)


def _worker(wid: int, inbox, outbox, suite, opts, tasks: list, folder, threads: int) -> None:
    """A worker process: prepare tasks and evaluate units sent by the driver until it sends None."""
    import torch

    from benchmark.run.confine import run_sandbox

    torch.set_num_threads(threads)
    sys.stderr = _ToDriver(outbox, wid)
    try:
        worker, cache_dir = unit_worker(suite, opts, folder)
        parent = multiprocessing.parent_process()
        while True:
            # poll, not a bare recv: a forked sibling holds this pipe's send end too, so the driver's death
            # alone never ends the recv with EOF
            while not inbox.poll(1.0):
                if parent is not None and not parent.is_alive():
                    return
            if (unit := inbox.recv()) is None:
                break
            task = tasks[unit.task]
            with run_sandbox(folder, [task.dataset], opts.data_root, cache_dir):
                outbox.put(("prepared", wid, unit.task, worker.prepare(task)))
                for i in unit.examples:
                    if parent is not None and not parent.is_alive():
                        return  # the driver was killed: nobody would write this row (a resume redoes it)
                    outbox.put(("row", wid, unit.task, worker.evaluate(task, i)))
            outbox.put(("done", wid, unit.task, None))
    except EOFError:
        return  # the driver closed the pipe or died
    except BenchError as exc:
        outbox.put(("error", wid, None, (True, str(exc))))
    except BaseException as exc:  # noqa: BLE001 - reported to the driver, which stops the run
        outbox.put(("error", wid, None, (False, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")))


class _Pool:
    """N started worker processes with one inbox each and a shared outbox."""

    def __init__(self, plan: Plan, n: int, threads: int):
        opts = replace(plan.kind.opts, log=None, out_dir=plan.store.folder)
        # CUDA cannot be used in a child forked after the driver touched it: spawn there
        ctx = multiprocessing.get_context(START_METHOD if opts.device == "cpu" else "spawn")
        self.outbox = ctx.Queue()
        self.inboxes, self.procs = [], []
        for wid in range(n):
            receive, send = ctx.Pipe(duplex=False)
            p = ctx.Process(target=_worker, daemon=True, name=f"bench-worker-{wid}",
                            args=(wid, receive, self.outbox, plan.suite, opts, plan.tasks, plan.store.folder, threads))
            p.start()
            self.inboxes.append(send)
            self.procs.append(p)

    def close(self) -> None:
        for box, p in zip(self.inboxes, self.procs):
            try:
                if p.is_alive():
                    box.send(None)
            except (BrokenPipeError, OSError):
                pass
        for p in self.procs:
            p.join(timeout=5)
            if p.is_alive():
                p.terminate()


def start_pool(plan: Plan, units: list[Unit], workers: int) -> _Pool | None:
    """Start the workers (before the run's sandbox opens); None when one worker (in-process) is enough."""
    n = min(workers, len(units))
    if n <= 1:
        return None
    threads = int(os.environ.get("BENCH_THREADS", 0)) or max(1, (os.cpu_count() or 1) // n)
    return _Pool(plan, n, threads)


def run_pool(pool: _Pool, plan: Plan, units: list[Unit], sink: RowSink) -> None:
    """Evaluate ``units`` on ``pool``'s workers, streaming prepared info and rows into ``sink``."""
    pending = list(units)
    prepared: list[set[int]] = [set() for _ in pool.procs]
    busy: set[int] = set()

    def submit(w: int) -> None:
        unit = next_unit(pending, prepared[w])
        prepared[w].add(unit.task)
        pool.inboxes[w].send(unit)
        busy.add(w)
        progress.started(w, unit.task)

    try:
        with RunProgress(plan.tasks, units, f"run ({len(pool.procs)} workers)") as progress:
            for w in range(len(pool.procs)):
                if pending:
                    submit(w)
            while busy:
                try:
                    what, w, ti, payload = pool.outbox.get(timeout=5)
                except Exception:  # queue.Empty: check that no worker died without a word
                    dead = [w for w in busy if not pool.procs[w].is_alive()]
                    if dead:
                        raise BenchError(f"worker {dead[0]} exited (code {pool.procs[dead[0]].exitcode}) without a "
                                         "report; finished rows are kept, rerun with --resume (or --workers 1).")
                    progress.waiting()
                    continue
                if what == "say":
                    say(payload)
                elif what == "prepared":
                    sink.prepared(plan.tasks[ti], payload)
                elif what == "row":
                    sink.row(payload)
                    progress.rows(ti)
                elif what == "done":
                    busy.discard(w)
                    progress.finished(w)
                    if pending:
                        submit(w)
                else:
                    bench, message = payload
                    if bench:
                        raise BenchError(message)
                    raise BenchError(f"a worker failed: {message}Finished rows are kept; rerun with --resume "
                                     "(--workers 1 runs in this process, for a debugger).")
    finally:
        pool.close()
