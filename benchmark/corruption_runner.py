"""Run a corruption suite: every defense's own prediction on CIFAR-10-C-layout data.

The unit of work is one test example of one task (dataset x corruption x defense): one
``predict`` call on the clean image and its five corrupted versions (severities 1..5), with
a generator seeded from (run seed, task hash, example id), so the table does not depend on
order, interruption or resumption. Rows go to the same run store as the semantic suite
(resumable, one flushed JSON line per example); abstaining counts as wrong.

A defense is prepared once per (defense, config, transformation) and reused by every
corruption mapped to that transformation. Corruptions the dataset does not provide
(digits-c builds 17 of 19) and held-out corruptions whose files are absent are skipped
and listed under the table.
"""
from __future__ import annotations

import time
from pathlib import Path

import torch

from benchmark.certify.smoothing import SmoothingParams
from benchmark.context import Context
from benchmark.corruption_report import build_corruption_summary, render_corruption_tables
from benchmark.datasets import get_dataset
from benchmark.datasets.base import test_subset
from benchmark.datasets.cifar10c import EXTRA_CORRUPTIONS
from benchmark.defenses import get_defense_class
from benchmark.errors import BenchError
from benchmark.io import config_hash
from benchmark.models.store import ModelStore
from benchmark.progress import progress_bar
from benchmark.report import write_reports
from benchmark.robustbench_adapter import CIFAR10C_DIRNAME
from benchmark.runner import RunOptions, _check_labels, _guard, example_seed, open_run, plan_run
from benchmark.suites.corruption_suite import SEVERITIES, CorruptionSuite, CorruptionTask
from benchmark.transformations import get_transformation
from benchmark.transformations.base import check_images



def run_corruption_suite(suite: CorruptionSuite, opts: RunOptions) -> Path:
    """Run (or resume) a corruption suite; returns the run folder and prints its tables.

    ``opts.transformations`` (``--transformation``) selects corruptions here.
    """
    log, profile, tasks, store = plan_run(suite, opts)
    run_config = {
        "suite": suite.name, "kind": suite.kind, "suite_source": suite.source, "suite_raw": suite.raw,
        "models_from": suite.models_from.name, "profile": profile.to_dict(), "seed": opts.seed,
        "datasets": opts.datasets or suite.datasets,
        "tasks": [{"hash": t.hash, "dataset": t.dataset, "corruption": t.corruption,
                   "transformation": t.transformation, "defense": t.defense, "config": t.defense_config,
                   "budgets": list(t.budgets)} for t in tasks],
    }
    models, done = open_run(store, run_config, opts, log)
    data = _Data(opts)
    prepared: dict[str, tuple] = {}
    task_info: dict[str, dict] = {}
    with store.open_for_append() as writer:
        for task in tasks:
            task_info[task.hash] = _run_task(task, opts, models, done, writer, data, prepared)
    store.write_json("models.json", models.provenance())
    store.write_json("tasks.json", task_info)
    summary = build_corruption_summary(suite.name, tasks, task_info, list(store.rows()))
    table = render_corruption_tables(summary, tasks, task_info)
    write_reports(store.folder, summary, table)
    print(table)
    log(f"wrote {store.folder / 'summary.csv'} and {store.folder / 'table.md'}")
    return store.folder


class _Data:
    """Test images of the selected examples: clean ones per dataset, the 5 severities of one corruption."""

    def __init__(self, opts: RunOptions):
        self.opts = opts
        self.clean: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        self.current: tuple | None = None  # ((dataset, corruption, indices), [5, N, C, H, W])

    def absent(self, dataset: str, corruption: str) -> str | None:
        """Why ``corruption`` cannot be evaluated on ``dataset`` (None if it can)."""
        ds = get_dataset(dataset)
        if corruption not in ds.corruptions:
            return f"not provided by {dataset}"
        if corruption in EXTRA_CORRUPTIONS:
            path = ds.root(self.opts.data_root, self.opts.offline) / CIFAR10C_DIRNAME / f"{corruption}.npy"
            if not path.is_file():
                return f"held-out corruption, {path} absent"
        return None

    def clean_split(self, dataset: str) -> tuple[torch.Tensor, torch.Tensor]:
        clean = get_dataset(dataset).clean_dataset
        if clean not in self.clean:
            x, y = get_dataset(clean).load("test", self.opts.data_root, self.opts.offline)
            check_images(x, f"dataset '{clean}' test images")
            self.clean[clean] = (x, y)
        return self.clean[clean]

    def corrupted(self, dataset: str, corruption: str, idx: list[int]) -> torch.Tensor:
        key = (dataset, corruption, tuple(idx))
        if self.current is None or self.current[0] != key:
            ds = get_dataset(dataset)
            _, y_clean = self.clean_split(dataset)
            blocks = []
            for s in SEVERITIES:
                x, y = ds.load("test", self.opts.data_root, self.opts.offline, corruption=corruption, severity=s)
                if len(x) != len(y_clean) or not torch.equal(y[idx], y_clean[idx]):
                    raise BenchError(f"{dataset}/{corruption} severity {s}: its {len(y)} labels do not match the "
                                     f"{len(y_clean)} clean test labels of {ds.clean_dataset}; the corrupted set must "
                                     "follow the clean test split's order.")
                check_images(x[idx], f"{dataset}/{corruption} severity {s}")
                blocks.append(x[idx])
            self.current = (key, torch.stack(blocks))
        return self.current[1]


def _prepare(task: CorruptionTask, opts: RunOptions, models: ModelStore, prepared: dict) -> tuple:
    """The defense for ``task``'s model task (prepared once, shared by the corruptions mapped to it)."""
    key = config_hash([task.defense, task.defense_config, task.transformation, list(task.budgets), task.dataset])
    if key not in prepared:
        transformation = get_transformation(task.transformation)
        defense = get_defense_class(task.defense)(**task.defense_config)
        supported = defense.supports(transformation)
        if supported:
            p = task.profile
            clean = get_dataset(get_dataset(task.dataset).clean_dataset)
            ctx = Context(dataset=clean, transformation=transformation,
                          smoothing=SmoothingParams.from_profile(p),
                          store=models, device=opts.device, seed=opts.seed, data_root=opts.data_root,
                          offline=opts.offline, profile={**p.to_dict(), "surrogate_quality": False},
                          budgets=task.budgets)
            mark = len(models.accessed)
            _guard(task, "prepare", lambda: defense.prepare(ctx))
            used = models.provenance(since=mark)
        else:
            used = []
        prepared[key] = (defense, transformation, supported, used)
    return prepared[key]


def _run_task(task: CorruptionTask, opts: RunOptions, models: ModelStore, done: set, writer, data: _Data,
              prepared: dict) -> dict:
    info = {"label": task.label, "defense": task.defense, "corruption": task.corruption,
            "transformation": task.transformation, "supported": True}
    reason = data.absent(task.dataset, task.corruption)
    if reason:
        info.update(supported=False, absent=reason)
        return info
    defense, transformation, supported, used = _prepare(task, opts, models, prepared)
    info["labels"] = defense.labels()[:1]
    info["certified"] = False  # the corruption suite evaluates predictions only
    info["models"] = used
    if not supported:
        info["supported"] = False
        return info
    x_clean, y_clean = data.clean_split(task.dataset)
    idx = test_subset(task.profile.n_examples, task.profile.skip, len(x_clean))
    info["examples"] = idx
    todo = [k for k, i in enumerate(idx) if (task.hash, i) not in done]
    if not todo:
        return info
    x_corrupt = data.corrupted(task.dataset, task.corruption, idx)  # [5, len(idx), C, H, W]
    with progress_bar(total=len(todo), desc=task.label) as bar:
        for k in todo:
            i = idx[k]
            x = torch.cat([x_clean[i:i + 1], x_corrupt[:, k]])  # clean, severities 1..5
            writer.append(_evaluate(task, defense, transformation, x, int(y_clean[i]), i))
            bar.update(1)
    return info


def _evaluate(task: CorruptionTask, defense, transformation, x: torch.Tensor, y: int, example: int) -> dict:
    """One predict call on [clean, severity 1..5] of one example; returns its row."""
    gen = torch.Generator().manual_seed(example_seed(task.seed, task.hash, example))
    start = time.perf_counter()
    pred = _check_labels(task, _guard(task, "predict", lambda: defense.predict(x, transformation, gen)), len(x))
    pred = [int(p) for p in pred]

    def cell(p: int) -> dict:
        return {"prediction": p, "correct": p == y, "abstained": p == -1}

    return {
        "task": task.hash, "example": example, "label": y, "dataset": task.dataset, "corruption": task.corruption,
        "transformation": task.transformation, "defense": task.defense, "clean": cell(pred[0]),
        "severities": {str(s): cell(p) for s, p in zip(SEVERITIES, pred[1:])},
        "seconds": time.perf_counter() - start,
    }
