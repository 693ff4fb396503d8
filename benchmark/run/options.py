"""What a run depends on besides the suite file, and the per-example seed rule."""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from benchmark.errors import BenchError

EXECUTORS = ("local", "ray")


@dataclass
class RunOptions:
    """Everything a run depends on besides the suite file.

    ``shard`` = (i, k): evaluate only the i-th (1-based) of k disjoint parts of the (task, example) pairs
    (``bench run --shard i/k``; ``bench merge`` joins the parts). ``executor``: local (``workers`` processes of this machine) or ray;
    ``address``, ``workers``, ``gpus_per_worker`` and ``chunk`` configure the Ray executor.
    """

    profile: str = "default"
    seed: int = 0
    device: str = "cpu"
    datasets: list[str] | None = None
    defenses: list[str] | None = None
    transformations: list[str] | None = None
    n_examples: int | None = None
    data_root: Path | None = None
    offline: bool = False
    allow_train: bool = True
    out: Path | None = None
    resume: bool = False
    only_examples: list[int] | None = None  # evaluate just these example ids (bench verify-entry --rerun)
    certify: str | None = None  # overrides the profile's certify rule (fixed | sequential)
    print_table: bool = True
    shard: tuple[int, int] | None = None
    executor: str = "local"
    address: str | None = None  # Ray cluster address (None: start a local Ray)
    workers: int | None = None  # worker processes (None: local_workers() here, one per CPU of a Ray cluster)
    gpus_per_worker: float = 0.0
    chunk: int = 4  # examples per Ray work unit (rows stream back per unit)
    log: object = field(default=None, repr=False)
    out_dir: Path | None = field(default=None, repr=False)  # the resolved run folder (set by run_suite)

    def local_workers(self) -> int:
        """Worker processes of the local executor: ``workers``, else $BENCH_WORKERS, else one per usable CPU on
        the CPU (1 on a GPU: its work is batched on the device). 1 runs everything in this process."""
        if self.workers:
            return self.workers
        if os.environ.get("BENCH_WORKERS"):
            return max(1, int(os.environ["BENCH_WORKERS"]))
        if self.device != "cpu":
            return 1
        try:
            return len(os.sched_getaffinity(0))
        except AttributeError:  # pragma: no cover - macOS, Windows
            return os.cpu_count() or 1


def example_seed(seed: int, task_hash: str, example: int) -> int:
    """The seed of one example's random streams: depends on (run seed, task, example) only, never on the
    order, the executor or the shard that evaluates it."""
    digest = hashlib.sha256(f"{seed}:{task_hash}:{example}".encode()).hexdigest()
    return int(digest[:15], 16)


def parse_shard(text: str) -> tuple[int, int]:
    """``"i/k"`` (1-based part i of k) -> (i, k); anything else is one clear error."""
    try:
        i, k = (int(v) for v in text.split("/"))
    except ValueError:
        raise BenchError(f"--shard {text}: expected I/K with whole numbers, e.g. --shard 1/4 (parts are 1-based: "
                         "1/4 ... 4/4).") from None
    if not (k >= 1 and 1 <= i <= k):
        raise BenchError(f"--shard {text}: the part must be between 1 and {max(k, 1)} (1-based: --shard 1/{max(k, 1)} "
                         f"... --shard {max(k, 1)}/{max(k, 1)}).")
    return i, k
