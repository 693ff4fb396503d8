"""Build, write and read leaderboard entries from a finished run folder.

An entry holds one defense's numbers on one (suite, dataset), the protocol, the tasks (with their
hashes, so the numbers can be tied to configs), provenance and flags. Its per-example rows are
written beside it as compressed JSON lines (``benchmark.reports.rows_file``: deterministic bytes, sha256
recorded in the entry), so ``bench verify-entry`` can recompute every number from them.
"""
from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

from benchmark.audit.checker import HIGH_ABSTAIN
from benchmark.errors import BenchError
from benchmark.infra.io import atomic_write_bytes, atomic_write_json, config_hash
from benchmark.leaderboard.schema import SCHEMA_VERSION, validate_entry
from benchmark.reports import rows_file
from benchmark.run.results import RunData, compute_results, entry_survival


def flag_entry(results: list[dict], violations: dict[tuple, int], randomized_without_certificate: bool,
               warnings: list[str], unverified: list[str] | None = None) -> dict:
    """Flags in the spirit of RobustBench/AutoAttack; ``invalid`` hides nothing, it marks the entry.
    ``unverified``: ``transformation/label`` cells whose deterministic certificates the harness could not
    check (outside code); they are shown marked and never ranked."""
    high = sorted({f"{r['transformation']}/{r['label']}" for r in results if r["abstain_rate"] > HIGH_ABSTAIN})
    n_viol = int(sum(violations.values()))
    return {"invalid": n_viol > 0, "consistency_violations": n_viol, "high_abstain": high,
            "randomized_without_certificate": bool(randomized_without_certificate), "warnings": list(warnings),
            "unverified": sorted(unverified or [])}


def rows_bytes(rows: list[dict]) -> bytes:
    """The rows file's deterministic bytes (``rows_file.encode``), so the sha256 is reproducible."""
    return rows_file.encode(rows)


def read_rows(path: Path) -> list[dict]:
    """The rows of an entry's rows file (this format or an older entry's gzip)."""
    return rows_file.read(path)


_ROWS_CACHE: dict[tuple[str, str], list[dict]] = {}


def entry_rows(entry: dict) -> list[dict] | None:
    """The per-example rows an entry was computed from, or None when they cannot be read as the entry's own:
    ``provenance.rows_file`` is not an absolute path (entries read by ``load_entries`` have one), the file is
    missing, or its sha256 is not the one the entry records. Cached per (file, sha256)."""
    prov = entry.get("provenance") or {}
    path = Path(prov.get("rows_file") or "")
    if not path.is_absolute() or not path.is_file() or not prov.get("rows_sha256"):
        return None
    key = (str(path), prov["rows_sha256"])
    if key not in _ROWS_CACHE:
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() != prov["rows_sha256"]:
            return None
        _ROWS_CACHE[key] = rows_file.decode(data)
    return _ROWS_CACHE[key]


def entry_paths(root: Path, suite: str, dataset: str, name: str) -> tuple[Path, Path]:
    """``<root>/<suite>/<dataset>/<name>.json`` and the rows file a new entry gets (``rows_file.SUFFIX``)."""
    entry_json = Path(root) / suite / dataset / f"{name}.json"
    return entry_json, rows_file.siblings(entry_json)[0]


def build_entry(run: RunData, defense_ref: str, dataset: str, checker: dict,
                randomized_without_certificate: bool = False, warnings: list[str] | None = None,
                data_root: Path | None = None) -> tuple[dict, bytes]:
    """The entry of ``defense_ref`` on ``dataset`` in ``run`` and the rows file's bytes it is computed from
    (``data_root``: where the test images are, for the checks of smoothing mechanisms)."""
    from benchmark.audit.proofs import unverified
    from benchmark.defenses import get_defense_class

    cls = get_defense_class(defense_ref)
    tasks = [t for t in run.tasks if t.defense == defense_ref and t.dataset == dataset]
    sub = RunData(run.folder, run.config, tasks, run.task_info, run.rows)
    tasks, results, violations = compute_results(sub, defense_ref)
    hashes = {t.hash for t in tasks}
    data = rows_bytes([r for r in run.rows if r["task"] in hashes])
    cfg, prof = run.config, run.config["profile"]
    checkpoints: dict[str, str] = {}
    for t in tasks:
        for m in run.task_info[t.hash].get("models", []):
            checkpoints[m["key"]] = m["sha256"]
    examples = sorted({e for t in tasks for e in run.task_info[t.hash].get("examples", [])})
    labels = next((run.task_info[t.hash]["labels"] for t in tasks), [cls.name])
    name = cls.name or defense_ref
    env = cfg.get("environment", {})
    entry = {
        "schema_version": SCHEMA_VERSION,
        "defense": {"name": name, "ref": defense_ref, "labels": labels, "certified": bool(cls.certified),
                    "description": cls.description, "paper": cls.paper, "code": cls.code},
        "suite": cfg["suite"], "kind": cfg.get("kind", "semantic"), "dataset": dataset,
        "protocol": {"profile": str(prof["name"]), "n0": int(prof["n0"]),
                     "n": int(prof["n"]), "alpha": float(prof["alpha"]),
                     "n_predict": None if prof.get("n_predict") is None else int(prof["n_predict"]),
                     "n_examples": len(examples), "examples": examples, "seed": int(cfg["seed"]),
                     "attack": cfg.get("attack"), "profile_settings": prof},
        "tasks": [{"hash": t.hash, "transformation": getattr(t, "corruption", t.transformation),
                   "models_transformation": t.transformation, "config": t.defense_config,
                   "budgets": list(t.budgets), "supported": bool(run.task_info[t.hash].get("supported")),
                   "certified": bool(run.task_info[t.hash].get("certified")),
                   "labels": run.task_info[t.hash].get("labels", labels),
                   "examples": run.task_info[t.hash].get("examples", []),
                   "models": run.task_info[t.hash].get("models", [])} for t in tasks],
        "results": results,
        "provenance": {"package_version": str(env.get("package_version", "")), "git_commit": env.get("git_commit"),
                       "config_hash": config_hash([{"hash": t.hash} for t in tasks]),
                       "run_config_hash": cfg["config_hash"], "checkpoints": checkpoints, "environment": env,
                       "created": cfg.get("created", ""),
                       "rows_file": entry_paths(Path("."), cfg["suite"], dataset, name)[1].name,
                       "rows_sha256": hashlib.sha256(data).hexdigest()},
        "flags": flag_entry(results, violations, randomized_without_certificate, warnings or [],
                            unverified(defense_ref, [r for r in run.rows if r["task"] in hashes],
                                       {t.hash: run.task_info[t.hash].get("labels", labels) for t in tasks},
                                       data_root)),
        "checker": checker,
    }
    survival = entry_survival(run, tasks)
    if survival:
        entry["survival"] = survival
    _check_numbers(entry)
    validate_entry(entry, f"entry for '{name}'")
    return entry, data


def _check_numbers(entry: dict) -> None:
    for r in entry["results"]:
        for k, v in r.items():
            if isinstance(v, float) and not math.isfinite(v):
                raise BenchError(f"entry for '{entry['defense']['name']}': {k} of {r['transformation']} at budget "
                                 f"{r['budget']} is {v}; a defense returned non-finite output.")


def write_entry(root: Path, entry: dict, data: bytes) -> Path:
    """Write rows first, then the entry (each atomically): a reader never sees an entry without its rows. An
    older entry's rows file in the previous format (``rows_file.LEGACY_SUFFIX``) goes once the new entry is in."""
    entry_path, rows_path = entry_paths(root, entry["suite"], entry["dataset"], entry["defense"]["name"])
    rows_path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(rows_path, data)
    atomic_write_json(entry_path, entry)
    rows_file.siblings(entry_path)[1].unlink(missing_ok=True)
    return entry_path


def load_entry(path: Path) -> dict:
    """Read and validate one entry file."""
    path = Path(path)
    if not path.exists():
        raise BenchError(f"leaderboard entry {path} does not exist.")
    try:
        entry = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise BenchError(f"leaderboard entry {path} is not valid JSON: {exc}.") from exc
    validate_entry(entry, str(path))
    return entry


def load_entries(root: Path, suite: str, dataset: str) -> list[dict]:
    """Every entry of (suite, dataset) under ``root``, sorted by defense name. Each entry's ``rows_file`` is
    made absolute in memory (the file beside it), so its rows can be read wherever it is rendered."""
    folder = Path(root) / suite / dataset
    if not folder.is_dir():
        raise BenchError(f"no leaderboard entries for suite '{suite}' on '{dataset}' under {root} "
                         f"(expected {folder}/<defense>.json); create them with `bench submit`.")
    entries = [load_entry(p) for p in folder.glob("*.json")]
    for e in entries:
        e["provenance"]["rows_file"] = str((folder / e["provenance"]["rows_file"]).resolve())
    return sorted(entries, key=lambda e: e["defense"]["name"])


def load_entries_from(roots: list[Path], suite: str, dataset: str) -> list[dict]:
    """Entries of (suite, dataset) under several folders side by side (``bench leaderboard --also``): every
    folder that has them; a defense name in two folders is an error. Entries of the later folders get an
    absolute ``rows_file`` (as every entry ``load_entries`` reads) so their rows are read from where they are."""
    found = [(i, Path(r)) for i, r in enumerate(roots) if (Path(r) / suite / dataset).is_dir()]
    if not found:
        return load_entries(roots[0], suite, dataset)  # its error names the expected folder
    out: dict[str, tuple[Path, dict]] = {}
    for i, root in found:
        for e in load_entries(root, suite, dataset):
            name = e["defense"]["name"]
            if name in out:
                raise BenchError(f"defense '{name}' has entries in both {out[name][0]} and {root}; show one of them.")
            out[name] = (root, e)
    return sorted((e for _, e in out.values()), key=lambda e: e["defense"]["name"])


def default_root() -> Path:
    """The repository's ``leaderboards/`` (beside the installed source), else ``./leaderboards``."""
    import os

    import benchmark

    env = os.environ.get("BENCH_LEADERBOARDS")
    if env:
        return Path(env)
    here = Path(benchmark.__file__).resolve().parent.parent / "leaderboards"
    return here if here.is_dir() else Path("leaderboards")
