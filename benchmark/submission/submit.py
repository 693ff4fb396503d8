"""``bench submit``: check a defense, run the suite on it, and write its leaderboard entries if it passes.

A failing submission gets a JSON report and no entry. Finished rows of the run are kept either way
(a submission that raises mid-run can be fixed and resumed with ``bench run --resume --out DIR``).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

from benchmark.errors import BenchError
from benchmark.io import atomic_write_json
from benchmark.datasets.base import TestSplitAccess
from benchmark.submission.checker import CheckReport, check_api, check_run
from benchmark.submission.precheck import precheck
from benchmark.submission.proofs import check_deterministic


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
        except TestSplitAccess as exc:
            report.add("test_split", "error", str(exc))
        except BenchError as exc:
            report.add("run", "error", str(exc))
        if run is not None:
            try:
                check_run(run, ref, report)
                check_deterministic(run, ref, opts, report)
            except BenchError as exc:
                report.add("run", "error", str(exc))
    if report.passed and run is not None:
        root = Path(root) if root is not None else default_root()
        datasets = list(dict.fromkeys(t.dataset for t in run.tasks if t.defense == ref))
        for ds in datasets:
            entry, data = build_entry(run, ref, ds, checker=report.to_json(), warnings=report.warnings(),
                                      randomized_without_certificate=report.randomized and not cls.certified,
                                      data_root=opts.data_root)
            report.entries.append(str(write_entry(root, entry, data)))
    out = Path(report_path) if report_path else _default_report_path(ref, report, opts.out or from_run)
    atomic_write_json(out, report.to_json())
    log(report.render())
    log(f"report: {out}")
    for e in report.entries:
        log(f"entry: {e}")
    return report


def _default_report_path(ref: str, report: CheckReport, out: Path | None = None) -> Path:
    """``submission_report-<Class>.json`` in the run folder (``--out``, ``--from-run`` or the new run's), or
    ``runs/submission_report-<Class>-<time>.json`` when no run folder was given and the run never started."""
    import re
    from datetime import datetime

    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", ref.rsplit(":", 1)[-1])
    folder = report.run_folder or out
    if folder:
        return Path(folder) / f"submission_report-{stem}.json"
    return Path("runs") / f"submission_report-{stem}-{datetime.now().strftime('%Y%m%d-%H%M%S')}.json"
