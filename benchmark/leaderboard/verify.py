"""``bench verify-entry``: recompute an entry from its rows, and optionally re-run a random subset of examples.

Recomputation is exact (same code, same rows) and covers every field the rows and run config determine:
results, flags, the protocol and checkpoints (``fields.py``), and every certificate's statistics, replayed
by the submission checker's ``statistics`` rule (``benchmark.audit.statistics``: Clopper-Pearson or
sequential bound from the recorded counts, abstention, radius or thresholds, flags, the task's protocol),
and under the sequential PREDICT every row's PREDICT records against its clean prediction and empirical
decisions (``benchmark.audit.predict_replay``).
A re-run evaluates ``k`` randomly chosen examples again
with the recorded suite, profile, seed and defense (same per-example seeds), then compares each
decision (clean prediction, certificate per budget, empirical robustness per budget) with the stored
row. On the same software and hardware they agree exactly; across hardware, float round-off can flip
a Monte-Carlo count next to a threshold, so the re-run passes when the fraction of differing
decisions is at most ``tolerance`` (default 5%). The certificates' Monte-Carlo counts are compared too
(a defense drawing noise from a global generator changes counts long before it flips a decision), with
the same tolerance on the fraction of certificates whose counts differ. Deterministic certificates of the re-run examples are
also re-verified from their recorded proofs and the model alone (``proof_rerun.py``).
"""
from __future__ import annotations

import hashlib
import math
import random
import tempfile
from pathlib import Path

from benchmark.audit.checker import MAX_LISTED, row_problems
from benchmark.audit.proofs import unverified
from benchmark.errors import BenchError
from benchmark.leaderboard.entry import load_entry, read_rows
from benchmark.leaderboard.fields import checkpoint_problems, flag_problems, protocol_problems
from benchmark.run.entry_part import entry_run_files
from benchmark.run.results import RunData, compute_results, entry_survival, tasks_from_config

DEFAULT_TOLERANCE = 0.05
#: the stages of ``bench verify-entry`` its progress bar names (``rerun`` enters the last two)
RECOMPUTE, RERUN, PROOFS = "recompute from rows", "re-run examples", "re-verify proofs"


def _entry_run(entry: dict, rows: list[dict], folder: Path) -> RunData:
    config, info = entry_run_files(entry)
    return RunData(folder, config, tasks_from_config(config), info, rows)


def recompute(path: Path) -> list[str]:
    """Problems found recomputing the entry at ``path`` from its rows (empty = verified)."""
    entry = load_entry(path)
    rows_path = Path(path).with_name(entry["provenance"]["rows_file"])
    if not rows_path.exists():
        return [f"rows file {rows_path} is missing."]
    digest = hashlib.sha256(rows_path.read_bytes()).hexdigest()
    if digest != entry["provenance"]["rows_sha256"]:
        return [f"rows file {rows_path} has sha256 {digest}, the entry records {entry['provenance']['rows_sha256']}."]
    rows = read_rows(rows_path)
    try:
        run = _entry_run(entry, rows, Path(path).parent)
    except BenchError as exc:  # a task hash that the entry's own fields no longer reproduce
        return [str(exc)]
    ref = entry["defense"]["ref"]
    _, results, violations = compute_results(run, ref)
    problems = protocol_problems(entry, rows) + checkpoint_problems(entry)
    problems += [f"statistics: {m}" for m in row_problems(run, ref)[:MAX_LISTED]]
    labels = {t["hash"]: t["labels"] for t in entry["tasks"]}
    problems += flag_problems(entry, results, unverified(ref, rows, labels))
    key = lambda r: (r["transformation"], r["label"], float(r["budget"]))  # noqa: E731
    stored = {key(r): r for r in entry["results"]}
    got = {key(r): r for r in results}
    if set(stored) != set(got):
        problems.append(f"result cells differ: only in entry {sorted(set(stored) - set(got))}, "
                        f"only in rows {sorted(set(got) - set(stored))}.")
    for k in sorted(set(stored) & set(got)):
        for metric, v in got[k].items():
            w = stored[k].get(metric)
            if isinstance(v, str) or metric == "seconds_per_example":
                continue
            same = (v is None and w is None) or (v is not None and w is not None and math.isclose(v, w, abs_tol=1e-12))
            if not same:
                problems.append(f"{k} {metric}: entry {w}, recomputed {v}.")
    survival = entry_survival(run, run.tasks)
    if survival != entry.get("survival", []):
        problems.append(f"survival table: entry {entry.get('survival', [])}, recomputed {survival}.")
    n_viol = int(sum(violations.values()))
    if n_viol != entry["flags"]["consistency_violations"]:
        problems.append(f"consistency violations: entry {entry['flags']['consistency_violations']}, "
                        f"recomputed {n_viol}.")
    if n_viol and not entry["flags"]["invalid"]:
        problems.append("the rows contain consistency violations but the entry is not flagged invalid.")
    return problems


def _decisions(row: dict) -> dict:
    d = {("clean",): row["clean"]["prediction"]}
    for c in row.get("certificates", []):
        d[("cert", c["variant"], "prediction")] = c["prediction"]
        for b, v in c["certified"].items():
            d[("cert", c["variant"], b)] = v
    for b, v in row.get("empirical", {}).items():
        d[("emp", b)] = v
    return d


def _counts(row: dict) -> dict:
    """Per certificate variant, the Monte-Carlo counts it was decided from (selection, estimation, slice
    endpoints): what a noise source other than the per-example generator changes even when no decision flips."""
    out = {}
    for c in row.get("certificates", []):
        s = c.get("stats") or {}
        if "counts_selection" in s or "endpoints" in s:
            out[c["variant"]] = [s.get("counts_selection"), s.get("counts_estimation"),
                                 [e.get("count") for e in s.get("endpoints", [])]]
    return out


def rerun(path: Path, k: int, seed: int = 0, tolerance: float = DEFAULT_TOLERANCE, device: str = "cpu",
          data_root: Path | None = None, log=print, stage=lambda name: None) -> list[str]:
    """Re-run ``k`` random examples of the entry and compare decisions with the stored rows; ``stage(RERUN)`` and
    ``stage(PROOFS)`` say which part runs (``bench verify-entry``'s progress bar)."""
    from benchmark.audit.proof_rerun import reverify_proofs
    from benchmark.run.driver import run_suite
    from benchmark.run.options import RunOptions
    from benchmark.run.plan import resolve_profile
    from benchmark.run.store import RunStore
    from benchmark.suites import load_suite

    entry = load_entry(path)
    stored = {(r["task"], r["example"]): r for r in read_rows(Path(path).with_name(entry["provenance"]["rows_file"]))}
    p = entry["protocol"]
    examples = sorted(random.Random(seed).sample(p["examples"], min(k, len(p["examples"]))))
    suite = load_suite(entry["suite"])
    with tempfile.TemporaryDirectory(prefix="bench-verify-") as tmp:
        opts = RunOptions(profile=p["profile"], seed=p["seed"], device=device, datasets=[entry["dataset"]],
                          defenses=[entry["defense"]["ref"]], n_examples=p["profile_settings"]["n_examples"],
                          data_root=data_root, out=Path(tmp) / "run", only_examples=examples, log=lambda m: None,
                          print_table=False, certify=p["profile_settings"].get("certify", "fixed"))
        hashes = {t["hash"] for t in entry["tasks"]}
        names = [t["transformation"] for t in entry["tasks"]]
        opts.transformations = names
        tasks = suite.tasks(resolve_profile(suite, opts), p["seed"], [entry["dataset"]], [entry["defense"]["ref"]], names)
        if {t.hash for t in tasks} != hashes:
            raise BenchError(f"the installed suite '{entry['suite']}' no longer gives the entry's task hashes "
                             "(suite, budgets or defense config changed); re-run needs the version in "
                             f"provenance.git_commit ({entry['provenance']['git_commit']}).")
        stage(RERUN)
        run_suite(suite, opts)
        fresh = list(RunStore(Path(tmp) / "run").rows())
        stage(PROOFS)
        proofs = reverify_proofs(tasks, stored, examples, opts, log)
    compared = differing = certs = certs_differing = 0
    problems = list(proofs)
    for r in fresh:
        old = stored.get((r["task"], r["example"]))
        if old is None:
            problems.append(f"example {r['example']} of task {r['task']} is not in the stored rows.")
            continue
        a, b = _decisions(old), _decisions(r)
        for key in a.keys() | b.keys():
            compared += 1
            differing += a.get(key) != b.get(key)
        a, b = _counts(old), _counts(r)
        for key in a.keys() | b.keys():
            certs += 1
            certs_differing += a.get(key) != b.get(key)
    rate = differing / compared if compared else 0.0
    count_rate = certs_differing / certs if certs else 0.0
    log(f"re-ran examples {examples}: {compared} decisions compared, {differing} differ ({100 * rate:.1f}%; "
        f"tolerance {100 * tolerance:.1f}%); {certs} certificates' counts compared, {certs_differing} differ")
    if count_rate > tolerance:
        problems.append(f"{certs_differing} of {certs} re-run certificates have other Monte-Carlo counts than the "
                        f"stored rows ({100 * count_rate:.1f}% > tolerance {100 * tolerance:.1f}%): the defense's noise "
                        "does not come only from the recorded per-example seeds.")
    if rate > tolerance:
        problems.append(f"{differing} of {compared} re-run decisions differ from the stored rows "
                        f"({100 * rate:.1f}% > tolerance {100 * tolerance:.1f}%).")
    return problems
