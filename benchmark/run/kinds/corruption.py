"""Corruption tasks (``kind: corruptions``): a defense's prediction on [clean, severity 1..5] per example."""
from __future__ import annotations

import time
from pathlib import Path

import torch

from benchmark.certify.smoothing import SmoothingParams
from benchmark.context import Context
from benchmark.datasets import get_dataset
from benchmark.datasets.base import test_subset
from benchmark.datasets.cifar10c import EXTRA_CORRUPTIONS
from benchmark.defenses import get_defense_class
from benchmark.errors import BenchError
from benchmark.infra.io import config_hash
from benchmark.infra.robustbench import CIFAR10C_DIRNAME
from benchmark.models.store import ModelStore
from benchmark.run.guard import check_labels, guard
from benchmark.run.options import RunOptions, example_seed
from benchmark.run.store import RunStore
from benchmark.suites.corruption_suite import SEVERITIES, CorruptionSuite, CorruptionTask
from benchmark.transformations import get_transformation
from benchmark.transformations.base import check_images


class CorruptionImages:
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


def model_key(task: CorruptionTask) -> str:
    """Tasks with equal keys share one prepared defense (the corruptions mapped to one model task)."""
    return config_hash([task.defense, task.defense_config, task.transformation, list(task.budgets), task.dataset])


class CorruptionWorker:
    """Prepares each model task once (shared by its corruptions) and evaluates examples."""

    def __init__(self, kind: "CorruptionKind", models: ModelStore):
        self.kind, self.models = kind, models
        self.prepared: dict[str, tuple] = {}

    def prepare(self, task: CorruptionTask) -> dict:
        key = model_key(task)
        if key not in self.prepared:
            opts = self.kind.opts
            transformation = get_transformation(task.transformation)
            defense = get_defense_class(task.defense)(**task.defense_config)
            p = task.profile
            clean = get_dataset(get_dataset(task.dataset).clean_dataset)
            ctx = Context(dataset=clean, transformation=transformation, smoothing=SmoothingParams.from_profile(p),
                          store=self.models, device=opts.device, seed=opts.seed, data_root=opts.data_root,
                          offline=opts.offline, profile={**p.to_dict(), "surrogate_quality": False},
                          budgets=task.budgets)
            mark = len(self.models.accessed)
            guard(task, "prepare", lambda: defense.prepare(ctx))
            self.prepared[key] = (defense, transformation, self.models.provenance(since=mark))
        return {"models": self.prepared[key][2]}

    def evaluate(self, task: CorruptionTask, example: int) -> dict:
        """One predict call on [clean, severity 1..5] of one example; returns its row."""
        defense, transformation, _ = self.prepared[model_key(task)]
        images = self.kind.images
        x_clean, y_clean = images.clean_split(task.dataset)
        idx = test_subset(task.profile.n_examples, task.profile.skip, len(x_clean))
        x_corrupt = images.corrupted(task.dataset, task.corruption, idx)  # [5, len(idx), C, H, W]
        x = torch.cat([x_clean[example:example + 1], x_corrupt[:, idx.index(example)]])  # clean, severities 1..5
        y = int(y_clean[example])
        gen = torch.Generator().manual_seed(example_seed(task.seed, task.hash, example))
        start = time.perf_counter()
        pred = check_labels(task, guard(task, "predict", lambda: defense.predict(x, transformation, gen)), len(x))
        pred = [int(p) for p in pred]

        def cell(p: int) -> dict:
            return {"prediction": p, "correct": p == y, "abstained": p == -1}

        return {
            "task": task.hash, "example": example, "label": y, "dataset": task.dataset, "corruption": task.corruption,
            "transformation": task.transformation, "defense": task.defense, "clean": cell(pred[0]),
            "severities": {str(s): cell(p) for s, p in zip(SEVERITIES, pred[1:])},
            "seconds": time.perf_counter() - start,
        }


class CorruptionKind:
    """Corruption suites: accuracy per corruption and severity (prediction only, no certificates)."""

    def __init__(self, opts: RunOptions, suite: CorruptionSuite | None = None):
        self.opts, self.suite = opts, suite
        self.images = CorruptionImages(opts)

    def describe(self, task: CorruptionTask) -> dict:
        info = {"label": task.label, "defense": task.defense, "corruption": task.corruption,
                "transformation": task.transformation, "supported": True}
        reason = self.images.absent(task.dataset, task.corruption)
        if reason:
            info.update(supported=False, absent=reason)
            return info
        defense = get_defense_class(task.defense)(**task.defense_config)
        info["labels"] = defense.labels()[:1]
        info["certified"] = False  # the corruption suite evaluates predictions only
        if not defense.supports(get_transformation(task.transformation)):
            info.update(supported=False, models=[])
            return info
        info["examples"] = test_subset(task.profile.n_examples, task.profile.skip,
                                       len(self.images.clean_split(task.dataset)[0]))
        return info

    def run_config(self, suite: CorruptionSuite, profile, tasks: list[CorruptionTask]) -> dict:
        return {
            "suite": suite.name, "kind": suite.kind, "suite_source": suite.source, "suite_raw": suite.raw,
            "models_from": suite.models_from.name, "profile": profile.to_dict(), "seed": self.opts.seed,
            "datasets": self.opts.datasets or suite.datasets,
            "tasks": [{"hash": t.hash, "dataset": t.dataset, "corruption": t.corruption,
                       "transformation": t.transformation, "defense": t.defense, "config": t.defense_config,
                       "budgets": list(t.budgets)} for t in tasks],
        }

    def worker(self, models: ModelStore, out_dir: Path | None) -> CorruptionWorker:
        return CorruptionWorker(self, models)

    def report(self, config: dict, tasks: list[CorruptionTask], task_info: dict[str, dict], store: RunStore,
               log) -> str:
        # imported here for the reason given in SemanticKind.report (pandas stays out of the forked workers)
        from benchmark.reports.corruption import build_corruption_summary, render_corruption_tables
        from benchmark.reports.summary import write_reports

        summary = build_corruption_summary(config["suite"], tasks, task_info, list(store.rows()))
        table = render_corruption_tables(summary, tasks, task_info)
        write_reports(store.folder, summary, table)
        return table
