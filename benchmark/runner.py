"""Run a suite: expand tasks, prepare each defense, evaluate every example, write rows and the summary.

One example of one task is the unit of work. Its random generator is seeded
from (run seed, task hash, example id), so results do not depend on the order
of work, on interruption or on resumption.
"""
from __future__ import annotations

import hashlib
import math
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import torch

from attacks import build_attack
from attacks.base import ParameterAttack
from benchmark.certify.certificate import is_surrogate_only
from benchmark.certify.smoothing import SmoothingParams, ledger_snapshot, sample_ledger
from benchmark.context import Context
from benchmark.datasets import get_dataset
from benchmark.datasets.base import defense_code, test_subset
from benchmark.defenses import get_defense_class, split_tag
from benchmark.environment import environment
from benchmark.errors import BenchError
from benchmark.io import config_hash
from benchmark.models.store import ModelStore
from benchmark.progress import progress_bar
from benchmark.report import (build_summary, consistency_violations, render_diagnostics, render_prepare_reports,
                              render_table, write_reports)
from benchmark.store import RunStore
from benchmark.survival import Evidence, check_survival
from benchmark.survival_report import render_survival, survival_records, write_survival_csv
from benchmark.sweep_report import render_sweeps
from benchmark.suites.loader import Profile, Suite, Task
from benchmark.transformations import get_transformation
from benchmark.transformations.base import check_images


@dataclass
class RunOptions:
    """Everything a run depends on besides the suite file."""

    profile: str = "default"
    seed: int = 0
    device: str = "cpu"
    datasets: list[str] | None = None
    defenses: list[str] | None = None
    transformations: list[str] | None = None
    n_examples: int | None = None
    data_root: Path | None = None
    offline: bool = False
    allow_train: bool = True
    out: Path | None = None
    resume: bool = False
    only_examples: list[int] | None = None  # evaluate just these example ids (bench verify-entry --rerun)
    certify: str | None = None  # overrides the profile's certify rule (fixed | sequential)
    print_table: bool = True
    log: object = field(default=None, repr=False)
    out_dir: Path | None = field(default=None, repr=False)  # the resolved run folder (set by run_suite)


def example_seed(seed: int, task_hash: str, example: int) -> int:
    digest = hashlib.sha256(f"{seed}:{task_hash}:{example}".encode()).hexdigest()
    return int(digest[:15], 16)


def _profile(suite: Suite, opts: RunOptions) -> Profile:
    p = suite.profile(opts.profile)
    if opts.certify is not None and opts.certify != p.certify:
        p = Profile(**{**p.to_dict(), "certify": opts.certify})
    if opts.n_examples is not None:
        if opts.n_examples < 1:
            raise BenchError(f"--n-examples must be at least 1, got {opts.n_examples}.")
        p = Profile(**{**p.to_dict(), "n_examples": opts.n_examples})
    return p


def _run_prefix(suite: Suite, opts: RunOptions) -> str:
    """``<suite>-<datasets>-<profile>[-<certify override>]-s<seed>``: the run folder name without its time."""
    ds = "+".join(opts.datasets or suite.datasets)
    rule = f"-{opts.certify}" if opts.certify else ""
    return f"{suite.name}-{ds}-{opts.profile}{rule}-s{opts.seed}"


def default_out(suite: Suite, opts: RunOptions) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{_run_prefix(suite, opts)}-{stamp}"


def latest_run(suite: Suite, opts: RunOptions) -> Path:
    ds = "+".join(opts.datasets or suite.datasets)
    found = sorted(Path("runs").glob(f"{_run_prefix(suite, opts)}-*"))
    if not found:
        raise BenchError(f"--resume: no earlier run of suite '{suite.name}' ({ds}, profile {opts.profile}, "
                         f"seed {opts.seed}) under ./runs; pass --out DIR of the run to resume.")
    return found[-1]


def run_suite(suite: Suite, opts: RunOptions) -> Path:
    """Run (or resume) ``suite``; returns the run folder. Prints the table at the end."""
    if getattr(suite, "kind", "") == "corruptions":
        from benchmark.corruption_runner import run_corruption_suite

        return run_corruption_suite(suite, opts)
    log, profile, tasks, store = plan_run(suite, opts)
    run_config = {
        "suite": suite.name, "suite_source": suite.source, "suite_raw": suite.raw, "profile": profile.to_dict(),
        "seed": opts.seed, "datasets": opts.datasets or suite.datasets, "attack": suite.attacks(profile),
        "tasks": [{"hash": t.hash, "dataset": t.dataset, "transformation": t.transformation,
                   "defense": t.defense, "config": t.defense_config, "budgets": list(t.budgets)} for t in tasks],
    }
    models, done = open_run(store, run_config, opts, log)
    # what earlier invocations learned while preparing (models used, surrogate fit) survives a resume
    previous: dict[str, dict] = store.read_json("tasks.json") or {}
    task_info: dict[str, dict] = {}
    test_cache: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    with store.open_for_append() as writer:
        for task in tasks:
            info = _run_task(task, opts, models, done, writer, test_cache, suite, log)
            task_info[task.hash] = {**previous.get(task.hash, {}), **info}
            store.write_json("tasks.json", {**previous, **task_info})
    store.write_json("models.json", models.provenance())
    rows = list(store.rows())
    summary = build_summary(suite.name, tasks, task_info, rows)
    violations = consistency_violations(tasks, task_info, rows)
    store.write_json("consistency.json", [{"dataset": k[0], "transformation": k[1], "defense": k[2], "budget": k[3],
                                           "violations": v} for k, v in sorted(violations.items())])
    table = render_table(summary, tasks, task_info, violations, attacks=[a["name"] for a in suite.attacks(profile)],
                         contradicted=consistency_violations(tasks, task_info, rows, surrogate_only=True))
    diagnostics = render_diagnostics(tasks, task_info, rows)
    quality = render_prepare_reports(task_info)
    sweeps = render_sweeps(summary, tasks, task_info, store.folder)
    survival = survival_records(tasks, task_info, rows)
    if survival:
        log(f"wrote {write_survival_csv(store.folder, survival)}")
    table = "\n".join(part for part in (table, sweeps, diagnostics, render_survival(survival), quality) if part)
    write_reports(store.folder, summary, table)
    if opts.print_table:
        print(table)
    log(f"wrote {store.folder / 'summary.csv'} and {store.folder / 'table.md'}")
    return store.folder


def plan_run(suite, opts: RunOptions) -> tuple:
    """The logger, resolved profile, expanded tasks and run folder of a run (any kind of suite)."""
    log = opts.log or (lambda m: print(m, file=sys.stderr))
    profile = _profile(suite, opts)
    tasks = suite.tasks(profile, opts.seed, opts.datasets, opts.defenses, opts.transformations)
    if opts.data_root is not None:
        unused = sorted({t.dataset for t in tasks if not get_dataset(t.dataset).uses_data_root})
        if unused:
            log(f"warning: --data-root {opts.data_root} is ignored: dataset(s) {', '.join(unused)} read nothing from "
                "it (digits ships with scikit-learn; digits-c is built into the cache).")
    out = opts.out or (latest_run(suite, opts) if opts.resume else default_out(suite, opts))
    return log, profile, tasks, RunStore(out)


def open_run(store: RunStore, run_config: dict, opts: RunOptions, log) -> tuple[ModelStore, set]:
    """Stamp the config (hash, time, environment), start or resume the run folder; the model store and
    the (task, example) keys already done. Shared by every kind of suite."""
    run_config["config_hash"] = config_hash(run_config)
    run_config["created"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    run_config["environment"] = environment(opts.device)
    store.start(run_config, opts.resume)
    opts.out_dir = store.folder
    log(f"run folder: {store.folder}")
    done = store.done_keys()
    if opts.resume:
        planned = {t["hash"] for t in run_config["tasks"]}
        log(f"resuming: {sum(1 for h, _ in done if h in planned)} finished example(s) are skipped")
    return ModelStore(allow_train=opts.allow_train, device=opts.device, log=log), done


def _load_test(task: Task, opts: RunOptions, cache: dict) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    ds = get_dataset(task.dataset)
    if task.dataset not in cache:
        x, y = ds.load("test", opts.data_root, opts.offline)
        check_images(x, f"dataset '{task.dataset}' test images")
        cache[task.dataset] = (x, y)
    x, y = cache[task.dataset]
    idx = test_subset(task.profile.n_examples, task.profile.skip, len(x))
    return x, y, idx


def _run_task(task: Task, opts: RunOptions, models: ModelStore, done: set, writer, test_cache: dict,
              suite: Suite, log) -> dict:
    transformation = get_transformation(task.transformation)
    cls = get_defense_class(task.defense)
    defense = cls(**task.defense_config)
    tag = split_tag(task.defense)[1]
    labels = [f"{lab.split(':')[0]}@{tag}" + lab[len(lab.split(':')[0]):] for lab in defense.labels()] if tag \
        else defense.labels()
    info = {"label": task.label, "defense": task.defense, "labels": labels,
            "certified": bool(cls.certified), "supported": True}
    if not defense.supports(transformation):
        info["supported"] = False
        return info
    x_all, y_all, idx = _load_test(task, opts, test_cache)
    todo = [i for i in idx if (task.hash, i) not in done
            and (opts.only_examples is None or i in opts.only_examples)]
    info["examples"] = idx
    if not todo:
        return info
    p = task.profile
    ctx = build_context(task, opts, models, transformation)
    mark = len(models.accessed)
    _guard(task, "prepare", lambda: defense.prepare(ctx))
    info["models"] = models.provenance(since=mark)
    report = _guard(task, "prepare_report", defense.prepare_report)
    if report:
        info["prepare"] = report
    attacks = [build_attack(spec) for spec in suite.attacks(p)]
    with progress_bar(total=len(todo), desc=task.label) as bar:
        for i in todo:
            row = evaluate_example(task, defense, transformation, attacks, x_all[i:i + 1], int(y_all[i]), i)
            writer.append(row)
            bar.update(1)
    return info


def build_context(task: Task, opts: RunOptions, models: ModelStore, transformation) -> Context:
    """The Context a defense is prepared with for ``task`` (also used by the submission checker)."""
    p = task.profile
    smoothing = SmoothingParams.from_profile(p)
    return Context(dataset=get_dataset(task.dataset), transformation=transformation, smoothing=smoothing,
                   store=models, device=opts.device, seed=opts.seed, data_root=opts.data_root,
                   offline=opts.offline, profile=p.to_dict(), budgets=task.budgets,
                   artifacts_dir=opts.out_dir / "artifacts" / task.transformation / task.defense if opts.out_dir
                   else None)


def _guard(task: Task, what: str, fn):
    """Run defense code; turn its exceptions into one clear error (finished rows stay on disk)."""
    try:
        with defense_code(task.defense):
            return fn()
    except BenchError:
        raise
    except Exception as exc:
        raise BenchError(f"defense '{task.defense}' raised during {what} on {task.label}: "
                         f"{type(exc).__name__}: {exc}. Finished rows are kept; fix the defense and rerun "
                         "with --resume.") from exc


def _check_labels(task: Task, pred, n: int) -> torch.Tensor:
    if not torch.is_tensor(pred) or pred.shape != (n,) or pred.is_floating_point():
        shape = tuple(pred.shape) if torch.is_tensor(pred) else type(pred).__name__
        raise BenchError(f"defense '{task.defense}' predict() must return an int64 tensor of shape ({n},), "
                         f"got {shape}{'' if not torch.is_tensor(pred) else ' ' + str(pred.dtype)}.")
    return pred


def evaluate_example(task: Task, defense, transformation, attacks: list[ParameterAttack] | ParameterAttack,
                     x: torch.Tensor, y: int, example: int) -> dict:
    """Clean prediction, certificates and attacks for one example; returns its row (see ``_evaluate``).

    ``row["samples"]``: the Monte-Carlo samples the defense's CERTIFY and PREDICT drew (survival checks
    excluded), the number of PREDICT calls, the rule (fixed | sequential) and CERTIFY's seconds.
    """
    with sample_ledger():
        return _evaluate(task, defense, transformation, attacks, x, y, example)


def _evaluate(task: Task, defense, transformation, attacks: list[ParameterAttack] | ParameterAttack,
              x: torch.Tensor, y: int, example: int) -> dict:
    """Clean prediction, certificates and attacks for one example; returns its row.

    At each budget the attacks run in order; the example is empirically robust only if it is robust
    under all of them, and the first that breaks it ends the search, except when that break is only
    an abstention on an example some certificate certifies at the budget: then the remaining attacks
    still look for a confident wrong label (the certified-vs-empirical consistency check). An attack
    that fell back to another one (PGD -> worst_of_k on pixelate) counts as having run both.
    """
    attacks = [attacks] if isinstance(attacks, ParameterAttack) else list(attacks)
    # separate streams: certificates depend only on task.certify_key, not on the attack or subset size
    gen_cert = torch.Generator().manual_seed(example_seed(task.seed, task.certify_key, example))
    gen = torch.Generator().manual_seed(example_seed(task.seed, task.hash + ":predict", example))
    gen_survival = torch.Generator().manual_seed(example_seed(task.seed, task.hash + ":survival", example))
    start = time.perf_counter()
    clean = int(_check_labels(task, _guard(task, "predict", lambda: defense.predict(x, transformation, gen)), 1)[0])
    certificates, certify_seconds = [], 0.0
    if defense.certified:
        t0 = time.perf_counter()
        certs = _guard(task, "certify", lambda: defense.certify(x, transformation, list(task.budgets), gen_cert))
        certify_seconds = time.perf_counter() - t0
        for c in certs:
            if c.radius is not None and isinstance(c.radius, float) and math.isnan(c.radius):
                raise BenchError(f"defense '{task.defense}' returned a NaN radius on {task.label} example {example}.")
            d = c.to_json()
            d["correct"] = c.prediction == y
            certificates.append(d)
    # empirical[b]: robust under the attack (abstain = wrong); broken[b]: a confident wrong label was found
    empirical, broken, attacked, state = {}, {}, {}, {}
    for b in task.budgets:
        key = repr(b)
        if b == 0 or clean != y:
            empirical[key] = clean == y
            broken[key] = clean not in (y, -1)
            if b == 0 or broken[key]:
                continue
        state[b] = {"certified": any(c["correct"] and c["certified"][key] for c in certificates),
                    "robust": True, "confident": False, "runs": [], "ran": set(), "first": None, "open": True,
                    "wrong_theta": None}
    # attacks in order, each over every budget still open in one call (PGD batches the budgets)
    for attack in attacks:
        todo = [b for b, st in state.items() if st["open"] and attack.name not in st["ran"]]
        if not todo:
            continue
        results = _guard(task, "attack", lambda a=attack: a.run_budgets(defense, x, y, transformation, todo, gen))
        for b, res in zip(todo, results):
            st = state[b]
            st["ran"].update({attack.name, res.fallback} - {None})
            run = {"attack": attack.name, "robust": res.robust, "theta": res.theta, "queries": res.queries}
            if res.fallback:
                run["fallback"] = res.fallback
            if res.info:
                run["info"] = res.info
            st["runs"].append(run)
            st["robust"] &= res.robust
            st["confident"] |= res.confident_wrong
            if res.confident_wrong and st["wrong_theta"] is None:
                st["wrong_theta"] = res.theta
            if not res.robust and st["first"] is None:
                st["first"] = run
            if st["confident"] or (not st["robust"] and not st["certified"]):
                st["open"] = False
    for b, st in state.items():
        key, first = repr(b), st["first"]
        empirical[key] = st["robust"] and clean == y
        broken[key] = st["confident"]
        attacked[key] = {"attack": None if first is None else first["attack"],
                         "theta": None if first is None else first["theta"],
                         "queries": sum(r["queries"] for r in st["runs"]), "runs": st["runs"]}
    row = {
        "task": task.hash, "example": example, "label": y, "dataset": task.dataset,
        "transformation": task.transformation, "defense": task.defense,
        "clean": {"prediction": clean, "correct": clean == y, "abstained": clean == -1},
        "certificates": certificates, "empirical": empirical, "broken": broken, "attacks": attacked,
        "seconds": time.perf_counter() - start,  # the defense's cost, without the survival check below
        "samples": {**ledger_snapshot(), "rule": task.profile.certify, "certify_seconds": certify_seconds},
    }
    if any(is_surrogate_only(c) for c in certificates):
        evidence: Evidence = {repr(b): ("attack", st["wrong_theta"]) for b, st in state.items()
                              if st["wrong_theta"] is not None}
        if clean not in (y, -1):
            evidence = {repr(b): ("clean", transformation.identity()[0].tolist()) for b in task.budgets if b > 0}
        row["survival"] = _guard(task, "predict", lambda: check_survival(
            defense, transformation, x, y, certificates, evidence, task.profile.survival_points, gen_survival))
    return row
