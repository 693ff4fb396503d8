"""``bench train``: prepare every (defense, dataset, transformation) of a suite so all its models exist.

With ``write_zoo`` the models go into the packaged zoo (``benchmark/zoo``) with
their configs, sha256, weights digest and training environment, which is how the
embedded default ships trained. ``bench train --verify`` (models/zoo_verify.py)
runs the same preparation into a temporary store and compares.
"""
from __future__ import annotations

import sys
from pathlib import Path

from benchmark.certify.smoothing import SmoothingParams
from benchmark.context import Context
from benchmark.datasets import get_dataset
from benchmark.defenses import get_defense_class
from benchmark.models.store import ModelStore
from benchmark.suites.loader import Suite
from benchmark.transformations import get_transformation


def prepare_suite(suite: Suite, store: ModelStore, datasets=None, defenses=None, transformations=None,
                  device: str = "cpu", data_root: Path | None = None, offline: bool = False) -> None:
    """Run ``prepare`` of every supported task of the default profile against ``store``."""
    profile = suite.profile("default")
    smoothing = SmoothingParams(n0=profile.n0, n=profile.n, alpha=profile.alpha, batch_size=profile.batch_size)
    train_cache: dict[str, tuple] = {}
    for task in suite.tasks(profile, 0, datasets, defenses, transformations):
        t = get_transformation(task.transformation)
        defense = get_defense_class(task.defense)(**task.defense_config)
        if not defense.supports(t):
            continue
        ds = get_dataset(task.dataset)
        ctx = Context(dataset=ds, transformation=t, smoothing=smoothing, store=store, device=device,
                      data_root=data_root, offline=offline, profile={**profile.to_dict(), "surrogate_quality": False},
                      budgets=task.budgets)
        if task.dataset in train_cache:
            ctx._train = train_cache[task.dataset]
        defense.prepare(ctx)
        if ctx._train is not None:
            train_cache[task.dataset] = ctx._train


def train_suite(suite: Suite, datasets=None, defenses=None, transformations=None, device: str = "cpu",
                data_root: Path | None = None, offline: bool = False, write_zoo: bool = True) -> list[dict]:
    """Prepare every task with a store that trains what is missing; returns the models' provenance."""
    store = ModelStore(allow_train=True, write_zoo=write_zoo, device=device)
    prepare_suite(suite, store, datasets, defenses, transformations, device, data_root, offline)
    for p in store.provenance():
        print(f"{p['source']:>8}  {p['key']:<40} config {p['config_hash']}  sha256 {p['sha256'][:16]}", file=sys.stderr)
    return store.provenance()
