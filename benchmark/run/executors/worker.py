"""What a worker process of either multi-process executor (pool, Ray) builds once: the run kind's worker with
its own model store."""
from __future__ import annotations

from pathlib import Path


def unit_worker(suite, opts, folder: Path):
    """(the kind's worker, the model cache folder) for a process evaluating units of ``suite`` into ``folder``."""
    from benchmark.infra.progress import say
    from benchmark.models.store import ModelStore
    from benchmark.run.kinds import kind_of

    suite.load_plugins()  # a spawned process (Ray, or the pool off Linux) does not know the plugins' names yet
    kind = kind_of(getattr(suite, "kind", None))(opts, suite)
    models = ModelStore(allow_train=opts.allow_train, device=opts.device, log=say)
    return kind.worker(models, folder), models.cache_dir
