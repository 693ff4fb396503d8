"""``bench submit``: check a defense, run the suite on it, and write its leaderboard entries if it passes.

A failing submission gets a JSON report and no entry. Finished rows of the run are kept either way
(a submission that raises mid-run can be fixed and resumed with ``bench run --resume --out DIR``).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

from benchmark.errors import BenchError
from benchmark.io import atomic_write_json
from benchmark.submission.checker import CHECK_IMAGES, CheckReport, check_api, check_outputs, check_run


def precheck(cls, ref: str, suite, opts, report: CheckReport) -> None:
    """Prepare the defense on its first supported task and exercise its outputs on a few test images."""
    from benchmark.datasets import get_dataset
    from benchmark.models.store import ModelStore
    from benchmark.runner import _profile, build_context
    from benchmark.transformations import get_transformation

    report.ran("prepare")
    profile = _profile(suite, opts)
    tasks = suite.tasks(profile, opts.seed, opts.datasets, [ref], opts.transformations)
    defense = cls(**{})
    for task in tasks:
        try:
            defense = cls(**task.defense_config)
            t = get_transformation(task.transformation)
            if not defense.supports(t):
                continue
        except Exception as exc:  # noqa: BLE001 - the submission's failure, reported
            report.add("prepare", "error", f"{task.label}: constructing or supports() raised "
                                           f"{type(exc).__name__}: {exc}")
            return
        models = ModelStore(allow_train=opts.allow_train, device=opts.device, log=lambda m: None)
        ctx = build_context(task, opts, models, t)
        if getattr(task, "corruption", None):  # corruption suites prepare on the clean dataset
            ctx.dataset = get_dataset(get_dataset(task.dataset).clean_dataset)
        # a small Monte-Carlo protocol: these checks test behaviour, not numbers
        ctx.smoothing = dataclasses.replace(ctx.smoothing, n0=min(ctx.smoothing.n0, 16), n=min(ctx.smoothing.n, 100),
                                            n_predict=min(ctx.smoothing.n_predict or 100, 100))
        try:
            defense.prepare(ctx)
        except BenchError as exc:
            report.add("prepare", "error", f"{task.label}: {exc}")
            return
        except Exception as exc:  # noqa: BLE001
            report.add("prepare", "error", f"{task.label}: prepare() raised {type(exc).__name__}: {exc}")
            return
        ds = ctx.dataset
        x, _ = ds.load("test", opts.data_root, opts.offline)
        check_outputs(defense, x[:CHECK_IMAGES], t, list(task.budgets), ds.spec.num_classes, opts.seed, report)
        return
    report.add("prepare", "error", f"'{ref}' supports none of the suite's transformations "
                                   f"{sorted({t.transformation for t in tasks})}.")


def submit(ref: str, suite, opts, strict: bool = False, root: Path | None = None, from_run: Path | None = None,
           report_path: Path | None = None, log=print) -> CheckReport:
    """Run the checker and, if it passes, the suite; write entries under ``root``. Returns the report."""
    from benchmark.leaderboard.entry import build_entry, default_root, load_run, write_entry
    from benchmark.runner import run_suite

    report = CheckReport(ref, strict)
    cls = check_api(ref, report)
    if cls is not None:
        precheck(cls, ref, suite, opts, report)
    run = None
    if report.passed:
        report.ran("run")
        try:
            if from_run is not None:
                folder = Path(from_run)
            else:
                folder = run_suite(suite, dataclasses.replace(opts, defenses=[ref]))
            report.run_folder = str(folder)
            run = load_run(folder)
        except BenchError as exc:
            report.add("run", "error", str(exc))
        if run is not None:
            try:
                check_run(run, ref, report)
            except BenchError as exc:
                report.add("run", "error", str(exc))
    if report.passed and run is not None:
        root = Path(root) if root is not None else default_root()
        datasets = list(dict.fromkeys(t.dataset for t in run.tasks if t.defense == ref))
        for ds in datasets:
            entry, data = build_entry(run, ref, ds, checker=report.to_json(), warnings=report.warnings(),
                                      randomized_without_certificate=report.randomized and not cls.certified)
            report.entries.append(str(write_entry(root, entry, data)))
    out = Path(report_path) if report_path else _default_report_path(ref, report)
    atomic_write_json(out, report.to_json())
    log(report.render())
    log(f"report: {out}")
    for e in report.entries:
        log(f"entry: {e}")
    return report


def _default_report_path(ref: str, report: CheckReport) -> Path:
    """Beside the run's rows, or ``runs/submission-<name>-<time>.json`` when the run never started."""
    import re
    from datetime import datetime

    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", ref.rsplit(":", 1)[-1])
    if report.run_folder:
        return Path(report.run_folder) / f"submission_report-{stem}.json"
    return Path("runs") / f"submission-{stem}-{datetime.now().strftime('%Y%m%d-%H%M%S')}.json"
