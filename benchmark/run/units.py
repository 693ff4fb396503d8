"""Work units: (task, chunk of example ids). The plan's (task, example) pairs, a shard's part of them,
and the pending ones grouped into units for an executor.

Shards are round-robin over the pairs in plan order (pair j goes to part j mod k + 1): every part gets
a share of every expensive task, and the split depends on the plan alone (not on what is done).
"""
from __future__ import annotations

from dataclasses import dataclass

Pair = tuple[int, int]  # (task index in the plan, example id)


@dataclass(frozen=True)
class Unit:
    """Examples of one task an executor evaluates together (the task prepared once for them)."""

    task: int
    examples: tuple[int, ...]


def plan_pairs(tasks: list, task_info: dict[str, dict]) -> list[Pair]:
    """Every (task, example) of the supported tasks, in plan order."""
    return [(ti, i) for ti, t in enumerate(tasks) if task_info[t.hash].get("supported")
            for i in task_info[t.hash].get("examples", [])]


def shard_pairs(pairs: list[Pair], shard: tuple[int, int] | None) -> list[Pair]:
    """The ``shard = (i, k)`` part (1-based) of ``pairs``; all of them without a shard."""
    if shard is None:
        return list(pairs)
    i, k = shard
    return [p for j, p in enumerate(pairs) if j % k == i - 1]


def pending_units(pairs: list[Pair], tasks: list, done: set, only: list[int] | None = None,
                  chunk: int | None = None) -> list[Unit]:
    """Units of the pairs not done yet (and in ``only`` if given), each at most ``chunk`` examples of one
    task (None: one unit per task)."""
    units: list[Unit] = []
    current: list[int] = []
    task = None
    for ti, i in pairs:
        if (tasks[ti].hash, i) in done or (only is not None and i not in only):
            continue
        if ti != task or (chunk is not None and len(current) >= chunk):
            if current:
                units.append(Unit(task, tuple(current)))
            task, current = ti, []
        current.append(i)
    if current:
        units.append(Unit(task, tuple(current)))
    return units


def next_unit(pending: list[Unit], prepared: set[int]) -> Unit:
    """Take the unit a free worker evaluates next: one of a task it has already prepared when there is one (so
    a task is prepared at most once per worker), else the first pending one."""
    return pending.pop(next((k for k, u in enumerate(pending) if u.task in prepared), 0))
