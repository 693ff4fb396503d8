"""Replay the sequential PREDICT records of a row: the clean prediction and every attack decision.

Under ``predict: sequential`` each PREDICT call of a row keeps its record (``row["clean"]["predict"]``, and
``predict`` of every attack run: one record per query). ``sequential.recompute_predict`` replays each
record (schedule, counts, stop, label); this module checks the records against the task's protocol and the
row's decisions: the clean prediction, each run's ``robust``, and per budget ``empirical`` and ``broken``;
the records must account for every PREDICT call and sample the row's ledger counts.
"""
from __future__ import annotations

from benchmark.certify import sequential
from benchmark.certify.smoothing import SmoothingParams

ABSTAIN = -1


def _protocol(params: SmoothingParams) -> tuple:
    """(settings, cap, alpha) of the task's sequential PREDICT."""
    return params.sequential, params.n_predict or params.n, params.alpha


def _record_problems(rec: dict, params: SmoothingParams, where: str) -> tuple[int, int, list[str]]:
    """(label, -1 = abstain; samples drawn; problems) of one record, replayed under the task's protocol."""
    label, problems = sequential.recompute_predict(rec, *_protocol(params))
    if problems:
        return ABSTAIN, 0, [f"{where}: {m}" for m in problems]
    return ABSTAIN if label is None else label, int(rec["n"]), []


def predict_problems(row: dict, params: SmoothingParams) -> list[str]:
    """Everything in ``row`` its PREDICT records (under the sequential PREDICT) do not reproduce."""
    samples = row.get("samples") or {}
    calls = int(samples.get("predict_calls", 0))
    if params.predict_rule_used != "sequential" or calls == 0:
        return []
    y, out, n_records, n_samples = row["label"], [], 0, 0
    clean = row["clean"].get("predict")
    if clean is None:
        return ["the clean prediction has no sequential PREDICT record."]
    label, n_samples, problems = _record_problems(clean, params, "clean PREDICT")
    out += problems
    n_records = 1
    if not problems and label != row["clean"]["prediction"]:
        out.append(f"clean prediction {row['clean']['prediction']} but its PREDICT record gives {label}.")
    for key, attacked in (row.get("attacks") or {}).items():
        labels: list[int] = []
        for i, run in enumerate(attacked.get("runs", [])):
            recs = run.get("predict") or []
            n_records += len(recs)
            if len(recs) != run.get("queries"):
                out.append(f"budget {key} run {i} ({run.get('attack')}): {run.get('queries')} queries but "
                           f"{len(recs)} PREDICT records.")
                continue
            got = []
            for j, rec in enumerate(recs):
                lab, n, problems = _record_problems(rec, params, f"budget {key} run {i} query {j}")
                out += problems
                n_samples += n
                got.append(lab)
            if all(lab == y for lab in got) != bool(run.get("robust")):
                out.append(f"budget {key} run {i} ({run.get('attack')}): robust = {run.get('robust')} but its "
                           f"PREDICT records give labels {got} (label {y}).")
            labels += got
        robust = row["clean"]["prediction"] == y and all(lab == y for lab in labels)
        if bool((row.get("empirical") or {}).get(key)) != robust:
            out.append(f"budget {key}: empirical = {row['empirical'].get(key)} but the PREDICT records give {robust}.")
        confident = any(lab not in (y, ABSTAIN) for lab in labels)
        if bool((row.get("broken") or {}).get(key)) != confident:
            out.append(f"budget {key}: broken = {row['broken'].get(key)} but the PREDICT records give {confident}.")
    if n_records != calls or n_samples != int(samples.get("predict", -1)):
        out.append(f"the PREDICT records account for {n_records} calls and {n_samples} samples, the row's ledger "
                   f"for {calls} and {samples.get('predict')}.")
    return out
