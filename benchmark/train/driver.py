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
from benchmark.infra.progress import progress_bar, task_label
from benchmark.models.store import ModelStore
from benchmark.suites.loader import Suite
from benchmark.transformations import get_transformation


def prepare_suite(suite: Suite, store: ModelStore, datasets=None, defenses=None, transformations=None,
                  device: str = "cpu", data_root: Path | None = None, offline: bool = False) -> None:
    """Run ``prepare`` of every supported task of the default profile against ``store``."""
    profile = suite.profile("default")
    smoothing = SmoothingParams(n0=profile.n0, n=profile.n, alpha=profile.alpha, batch_size=profile.batch_size)
    train_cache: dict[str, tuple] = {}
    tasks = suite.tasks(profile, 0, datasets, defenses, transformations)
    # one bar over the tasks, naming the one being prepared; each model trained gets its own bar below it
    with progress_bar(total=len(tasks), desc="prepare", unit="task") as bar:
        for task in tasks:
            bar.set_postfix_str(task_label(task))
            _prepare_task(task, profile, smoothing, store, train_cache, device, data_root, offline)
            bar.update(1)


def _prepare_task(task, profile, smoothing: SmoothingParams, store: ModelStore, train_cache: dict[str, tuple],
                  device: str, data_root: Path | None, offline: bool) -> None:
    """``prepare`` one task's defense (nothing when it does not support the transformation); the dataset's
    training split is loaded once and shared through ``train_cache``."""
    t = get_transformation(task.transformation)
    defense = get_defense_class(task.defense)(**task.defense_config)
    if not defense.supports(t):
        return
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
