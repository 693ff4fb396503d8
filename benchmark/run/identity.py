"""What a run folder's rows depend on, for ``--resume`` and ``bench merge``.

A run's ``config_hash`` (its provenance) covers the whole suite file, its path included, so an edit to a task
the run does not hold, or the same suite read from another checkout, gives another hash. Rows depend only on
the run's tasks (each task's hash covers its suite, dataset, transformation, defense and config, budgets,
profile and seed), the attacks, the profile and the seed: two folders with the same of these hold rows of the
same run, so a sharded run can be resumed and joined across such edits and machines.
"""
from __future__ import annotations

from benchmark.infra.io import config_hash


def rows_identity(config: dict) -> str:
    """The hash of what the rows of the run with this ``config.json`` depend on (module docstring)."""
    return config_hash({"tasks": sorted(t["hash"] for t in config.get("tasks") or []),
                        "attack": config.get("attack"), "profile": config.get("profile"),
                        "seed": config.get("seed"), "datasets": config.get("datasets")})


def protocol_identity(config: dict) -> str:
    """``rows_identity`` without the tasks: the suite's name, attacks, profile, seed and datasets. Runs that share it
    but hold different tasks of one suite (``--transformation`` / ``--defense`` subsets, each possibly sharded)
    are parts of one run of their tasks' union (``bench merge``)."""
    return config_hash({"suite": config.get("suite"), "attack": config.get("attack"),
                        "profile": config.get("profile"), "seed": config.get("seed"),
                        "datasets": config.get("datasets")})

