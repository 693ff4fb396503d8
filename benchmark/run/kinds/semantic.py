"""Transformation tasks (``benchmark.suites.loader.Task``): certificates and attacks per example."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import torch

from attacks import build_attack
from benchmark.run import grid_cache
from benchmark.certify.smoothing import SmoothingParams
from benchmark.context import Context
from benchmark.datasets import get_dataset
from benchmark.datasets.base import test_subset
from benchmark.defenses import get_defense_class, split_tag
from benchmark.infra.environment import strict_float32
from benchmark.models.store import ModelStore
from benchmark.run.evaluate import evaluate_example
from benchmark.run.guard import guard
from benchmark.run.options import RunOptions
from benchmark.run.store import RunStore
from benchmark.suites.loader import Suite, Task
from benchmark.transformations import get_transformation
from benchmark.transformations.base import check_images


class TestImages:
    """Test split per dataset, loaded once per process (the driver's and the local worker's share it)."""

    def __init__(self, opts: RunOptions):
        self.opts = opts
        self.cache: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}

    def get(self, dataset: str) -> tuple[torch.Tensor, torch.Tensor]:
        if dataset not in self.cache:
            x, y = get_dataset(dataset).load("test", self.opts.data_root, self.opts.offline)
            check_images(x, f"dataset '{dataset}' test images")
            self.cache[dataset] = (x, y)
        return self.cache[dataset]

    def examples(self, task) -> list[int]:
        """The task's example ids (the profile's subset of the test split)."""
        return test_subset(task.profile.n_examples, task.profile.skip, len(self.get(task.dataset)[0]))


def build_context(task: Task, opts: RunOptions, models: ModelStore, transformation) -> Context:
    """The Context a defense is prepared with for ``task`` (also used by the submission checker)."""
    p = task.profile
    smoothing = SmoothingParams.from_profile(p)
    return Context(dataset=get_dataset(task.dataset), transformation=transformation, smoothing=smoothing,
                   store=models, device=opts.device, seed=opts.seed, data_root=opts.data_root,
                   offline=opts.offline, profile=p.to_dict(), budgets=task.budgets,
                   artifacts_dir=opts.out_dir / "artifacts" / task.transformation / task.defense if opts.out_dir
                   else None)


def table_labels(task: Task, defense) -> list[str]:
    """The defense's labels, with a ``@tag`` of a tagged defense reference inserted after the name."""
    tag = split_tag(task.defense)[1]
    if not tag:
        return defense.labels()
    return [f"{lab.split(':')[0]}@{tag}" + lab[len(lab.split(':')[0]):] for lab in defense.labels()]


class SemanticWorker:
    """Prepares a transformation task's defense once and evaluates its examples."""

    #: prepared defenses kept at once: executors hand a worker the units of one task in a row, and a task's
    #: models, surrogates and caches are dropped once newer tasks are prepared (memory stays flat)
    KEEP_PREPARED = 2

    def __init__(self, kind: "SemanticKind", models: ModelStore, out_dir: Path | None):
        self.kind, self.models, self.out_dir = kind, models, out_dir
        self.prepared: dict[str, tuple] = {}
        grid_cache.share_in(Path(out_dir) / "grid-cache" if out_dir is not None else None)

    def prepare(self, task: Task) -> dict:
        if task.hash in self.prepared:
            self.prepared[task.hash] = self.prepared.pop(task.hash)  # most recently used last
            return self.prepared[task.hash][3]
        while len(self.prepared) >= self.KEEP_PREPARED:
            self.prepared.pop(next(iter(self.prepared)))
        strict_float32()
        opts = self.kind.opts
        transformation = get_transformation(task.transformation)
        defense = get_defense_class(task.defense)(**task.defense_config)
        ctx = build_context(task, replace(opts, out_dir=self.out_dir, log=None), self.models, transformation)
        mark = len(self.models.accessed)
        guard(task, "prepare", lambda: defense.prepare(ctx))
        info: dict = {"models": self.models.provenance(since=mark)}
        report = guard(task, "prepare_report", defense.prepare_report)
        if report:
            info["prepare"] = report
        attacks = [build_attack(spec) for spec in self.kind.attack_specs(task)]
        self.prepared[task.hash] = (defense, transformation, attacks, info)
        return info

    def evaluate(self, task: Task, example: int) -> dict:
        defense, transformation, attacks, _ = self.prepared[task.hash]
        strict_float32()  # again: a defense's prepare() may have changed it
        x_all, y_all = self.kind.images.get(task.dataset)
        return evaluate_example(task, defense, transformation, attacks, x_all[example:example + 1],
                                int(y_all[example]), example)


class SemanticKind:
    """Transformation suites: certified and empirical accuracy per budget."""

    def __init__(self, opts: RunOptions, suite: Suite | None = None):
        self.opts, self.suite = opts, suite
        self.images = TestImages(opts)
        self.attacks: list[dict] | None = None

    def attack_specs(self, task: Task) -> list[dict]:
        if self.attacks is None:
            self.attacks = self.suite.attacks(task.profile)
        return self.attacks

    def describe(self, task: Task) -> dict:
        cls = get_defense_class(task.defense)
        defense = cls(**task.defense_config)
        info = {"label": task.label, "defense": task.defense, "labels": table_labels(task, defense),
                "certified": bool(cls.certified), "supported": True}
        if not defense.supports(get_transformation(task.transformation)):
            info["supported"] = False
            return info
        info["examples"] = self.images.examples(task)
        return info

    def run_config(self, suite: Suite, profile, tasks: list[Task]) -> dict:
        return {
            "suite": suite.name, "suite_source": suite.source, "suite_raw": suite.raw, "profile": profile.to_dict(),
            "seed": self.opts.seed, "datasets": self.opts.datasets or suite.datasets, "attack": suite.attacks(profile),
            "tasks": [{"hash": t.hash, "dataset": t.dataset, "transformation": t.transformation,
                       "defense": t.defense, "config": t.defense_config, "budgets": list(t.budgets)} for t in tasks],
        }

    def worker(self, models: ModelStore, out_dir: Path | None) -> SemanticWorker:
        return SemanticWorker(self, models, out_dir)

    def report(self, config: dict, tasks: list[Task], task_info: dict[str, dict], store: RunStore, log) -> str:
        # imported here, not with the module: the driver imports every kind before it forks its workers, which
        # then carry whatever it holds; the reports' pandas (30 MB resident per process) is only needed now
        from benchmark.reports.summary import (build_summary, consistency_violations, render_diagnostics,
                                               render_prepare_reports, render_table, write_reports)
        from benchmark.reports.survival import render_survival, survival_records, write_survival_csv
        from benchmark.reports.sweep import render_sweeps

        rows = list(store.rows())
        summary = build_summary(config["suite"], tasks, task_info, rows)
        violations = consistency_violations(tasks, task_info, rows)
        store.write_json("consistency.json", [{"dataset": k[0], "transformation": k[1], "defense": k[2],
                                               "budget": k[3], "violations": v} for k, v in sorted(violations.items())])
        table = render_table(summary, tasks, task_info, violations, attacks=[a["name"] for a in config["attack"]],
                             contradicted=consistency_violations(tasks, task_info, rows, surrogate_only=True))
        diagnostics = render_diagnostics(tasks, task_info, rows)
        quality = render_prepare_reports(task_info)
        sweeps = render_sweeps(summary, tasks, task_info, store.folder)
        survival = survival_records(tasks, task_info, rows)
        if survival:
            log(f"wrote {write_survival_csv(store.folder, survival)}")
        table = "\n".join(part for part in (table, sweeps, diagnostics, render_survival(survival), quality) if part)
        write_reports(store.folder, summary, table)
        return table
