"""Kinds of task: how a suite's tasks are described, prepared, evaluated per example and reported.

Each kind provides ``describe`` (what the table needs to know without preparing), ``worker`` (prepares a
task's defense once and evaluates examples) and ``report`` (summary.csv, table.md and friends from the
rows). The run loop (benchmark.run.driver) and the executors are the same for every kind.
"""
from __future__ import annotations

from benchmark.run.kinds.base import Kind
from benchmark.run.kinds.corruption import CorruptionKind
from benchmark.run.kinds.semantic import SemanticKind


def kind_of(config_kind: str | None) -> type[Kind]:
    """The kind class of a suite (``suite.kind``) or run config (``config["kind"]``); None: transformations."""
    return CorruptionKind if config_kind == "corruptions" else SemanticKind


__all__ = ["Kind", "CorruptionKind", "SemanticKind", "kind_of"]
