"""``bench submit``: check a defense, run the suite on it, and write its leaderboard entries if it passes.

A failing submission gets a JSON report and no entry. Finished rows of the run are kept either way
(a submission that raises mid-run can be fixed and resumed with ``bench run --resume --out DIR``).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

from benchmark.audit.abstentions import check_abstentions
from benchmark.audit.checker import CheckReport, check_api, check_run
from benchmark.audit.proofs import check_deterministic
from benchmark.datasets import evaluation_data
from benchmark.datasets.base import TestSplitAccess
from benchmark.errors import BenchError
from benchmark.infra import sandbox
from benchmark.infra.io import atomic_write_json
from benchmark.submission import entries_guard
from benchmark.submission.precheck import precheck


def submit(ref: str, suite, opts, strict: bool = False, root: Path | None = None, from_run: Path | None = None,
           report_path: Path | None = None, log=print) -> CheckReport:
    """Run the checker and, if it passes, the suite; write entries under ``root``. Returns the report.

    Throughout, defense code may read neither the evaluation data nor any leaderboard folder
    (``benchmark.infra.sandbox``), and the leaderboard folders are hashed before and after: a change rejects."""
    from benchmark.leaderboard.entry import default_root

    ref = absolute_ref(ref, from_run)
    root = Path(root) if root is not None else default_root()
    boards = list(dict.fromkeys(p.resolve() for p in (root, default_root())))
    data = evaluation_data(opts.datasets or suite.datasets, opts.data_root)
    before = entries_guard.snapshot(boards)
    with sandbox.protect(data, "test_split"), sandbox.protect([*boards, Path("runs")]):
        report, run, cls = _check_and_run(ref, suite, opts, strict, from_run)
    report.ran("sandbox")
    for rule, what in sandbox.take_attempts():
        report.add(rule, "error", what)
    touched = entries_guard.changed(before, entries_guard.snapshot(boards))
    if touched:
        report.add("sandbox", "error", f"leaderboard files changed during the submission: {', '.join(touched)}.")
    if report.passed and run is not None:
        _write_entries(run, ref, cls, report, root, opts.data_root)
    out = Path(report_path) if report_path else _default_report_path(ref, report, opts.out or from_run)
    atomic_write_json(out, report.to_json())
    log(report.render())
    log(f"report: {out}")
    for e in report.entries:
        log(f"entry: {e}")
    return report


def absolute_ref(ref: str, from_run: Path | None = None) -> str:
    """``file.py:Class`` with the file's absolute path (so ``verify-entry --rerun`` works from anywhere);
    kept as given when ``from_run``'s tasks name it that way, and for names and modules."""
    module, sep, cls = ref.rpartition(":")
    if not sep or not module.endswith(".py") or Path(module).is_absolute():
        return ref
    if from_run is not None:
        from benchmark.run.results import load_run

        if any(t.defense == ref for t in load_run(Path(from_run)).tasks):
            return ref
    return f"{Path(module).expanduser().resolve()}:{cls}"


def _check_and_run(ref: str, suite, opts, strict: bool, from_run: Path | None) -> tuple[CheckReport, object, type]:
    """The pre-run rules, the run (or ``from_run``) and the post-run rules: (report, run or None, class)."""
    from benchmark.run.driver import run_suite
    from benchmark.run.results import load_run

    report = CheckReport(ref, strict)
    cls = check_api(ref, report)
    if cls is not None:
        precheck(cls, ref, suite, opts, report)
    for rule, what in sandbox.take_attempts():
        report.add(rule, "error", what)
    run = None
    if report.passed:
        report.ran("run")
        try:
            folder = Path(from_run) if from_run is not None else run_suite(suite, dataclasses.replace(opts, defenses=[ref]))
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
                if not any(f.level == "error" for f in report.findings):
                    check_abstentions(run, ref, opts, report)
            except BenchError as exc:
                report.add("run", "error", str(exc))
    return report, run, cls


def _write_entries(run, ref: str, cls: type, report: CheckReport, root: Path, data_root) -> None:
    from benchmark.leaderboard.entry import build_entry, write_entry

    for ds in dict.fromkeys(t.dataset for t in run.tasks if t.defense == ref):
        entry, data = build_entry(run, ref, ds, checker=report.to_json(), warnings=report.warnings(),
                                  randomized_without_certificate=report.randomized and not cls.certified,
                                  data_root=data_root)
        report.entries.append(str(write_entry(root, entry, data)))


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
