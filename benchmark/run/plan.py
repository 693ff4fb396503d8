"""Plan a run before anything touches the disk: resolve the profile, expand and describe the tasks,
check every name and option, and choose the run folder (created later by ``open_run``).

A typo in a name, a bad option or a missing dataset fails here, so no half-created folder is left
for a later bare ``--resume`` to pick up.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from benchmark.datasets import get_dataset
from benchmark.datasets import plugin_provenance as dataset_plugin
from benchmark.defenses import get_defense_class
from benchmark.defenses import plugin_provenance as defense_plugin
from benchmark.errors import BenchError, unknown_name
from benchmark.infra.environment import environment
from benchmark.infra.io import config_hash
from benchmark.run.identity import rows_identity
from benchmark.infra.progress import say
from benchmark.models.store import ModelStore
from benchmark.run.kinds import Kind, kind_of
from benchmark.run.options import EXECUTORS, RunOptions, parse_shard
from benchmark.run.store import RunStore
from benchmark.suites.profile import Profile
from benchmark.transformations import plugin_provenance as transformation_plugin


@dataclass
class Plan:
    """A validated run: its kind, profile, tasks (with their tasks.json info), config and folder."""

    suite: object
    kind: Kind
    profile: Profile
    tasks: list
    task_info: dict[str, dict]
    config: dict
    store: RunStore
    log: object


def resolve_profile(suite, opts: RunOptions) -> Profile:
    """The suite's profile with the command line's --certify and --n-examples applied."""
    p = suite.profile(opts.profile)
    if opts.certify is not None and opts.certify != p.certify:
        p = Profile(**{**p.to_dict(), "certify": opts.certify})
    if opts.n_examples is not None:
        if opts.n_examples < 1:
            raise BenchError(f"--n-examples must be at least 1, got {opts.n_examples}.")
        p = Profile(**{**p.to_dict(), "n_examples": opts.n_examples})
    return p


def run_prefix(suite, opts: RunOptions) -> str:
    """``<suite>-<datasets>-<profile>[-<certify>]-s<seed>[-shard<i>of<k>]``: the run folder name without its time."""
    ds = "+".join(_slug(d) for d in opts.datasets or suite.datasets)
    rule = f"-{opts.certify}" if opts.certify else ""
    shard = f"-shard{opts.shard[0]}of{opts.shard[1]}" if opts.shard else ""
    return f"{suite.name}-{ds}-{opts.profile}{rule}-s{opts.seed}{shard}"


def _slug(ref: str) -> str:
    """A dataset reference as part of a folder name: a plugin ``dir/file.py:Name`` -> ``file.py_Name``."""
    return re.sub(r"[^A-Za-z0-9_.+-]+", "_", Path(ref).name) if ("/" in ref or ":" in ref) else ref


def default_out(suite, opts: RunOptions) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{run_prefix(suite, opts)}-{stamp}"


def latest_run(suite, opts: RunOptions) -> Path:
    """The newest started run folder (one with a config.json) of this suite/dataset/profile/seed/shard."""
    found = sorted(p for p in Path("runs").glob(f"{run_prefix(suite, opts)}-*") if (p / "config.json").is_file())
    if not found:
        ds = "+".join(opts.datasets or suite.datasets)
        raise BenchError(f"--resume: no earlier run of suite '{suite.name}' ({ds}, profile {opts.profile}, "
                         f"seed {opts.seed}) under ./runs; pass --out DIR of the run to resume.")
    return found[-1]


def check_options(opts: RunOptions) -> None:
    """Names and options that do not need the suite: datasets, defenses, executor, shard."""
    for ds in opts.datasets or []:
        get_dataset(ds)  # unknown names fail with a close match; a plugin file is loaded and checked
    for d in opts.defenses or []:
        get_defense_class(d)  # unknown names fail with a close match
    if opts.executor not in EXECUTORS:
        raise unknown_name("executor", opts.executor, EXECUTORS)
    if opts.shard is not None:
        parse_shard("/".join(map(str, opts.shard)))  # the same checks as the command line's --shard
    if opts.only_examples is not None and opts.shard is not None:
        raise BenchError("--shard cannot be combined with a selection of example ids; drop one of them.")
    if opts.workers is not None and opts.workers < 1:
        raise BenchError(f"--workers must be at least 1, got {opts.workers}.")
    if opts.chunk < 1:
        raise BenchError(f"the chunk size must be at least 1, got {opts.chunk}.")
    if opts.gpus_per_worker < 0:
        raise BenchError(f"--gpus-per-worker must not be negative, got {opts.gpus_per_worker}.")
    if opts.executor != "ray" and (opts.address or opts.gpus_per_worker):
        raise BenchError("--address and --gpus-per-worker configure the Ray executor; add --executor ray.")


def run_folder(suite, opts: RunOptions) -> Path:
    """Where the run goes; ``--resume --out DIR`` needs DIR to exist, a fresh run needs it unused."""
    if opts.out is None:
        return latest_run(suite, opts) if opts.resume else default_out(suite, opts)
    out = Path(opts.out)
    if opts.resume and not out.is_dir():
        raise BenchError(f"--resume --out {out}: the folder does not exist; drop --resume to start a new run there.")
    if not opts.resume and (out / "config.json").exists():
        raise BenchError(f"run folder {out} already holds a run; pass --resume to continue it or --out DIR for a "
                         "new one.")
    return out


def plan_run(suite, opts: RunOptions) -> Plan:
    """Validate everything and expand the run; creates nothing on disk."""
    log = opts.log or say
    check_options(opts)
    profile = resolve_profile(suite, opts)
    tasks = suite.tasks(profile, opts.seed, opts.datasets, opts.defenses, opts.transformations)
    if opts.data_root is not None:
        unused = sorted({t.dataset for t in tasks if not get_dataset(t.dataset).uses_data_root})
        if unused:
            log(f"warning: --data-root {opts.data_root} is ignored: dataset(s) {', '.join(unused)} read nothing from "
                "it (digits ships with scikit-learn; digits-c is built into the cache).")
    kind = kind_of(getattr(suite, "kind", None))(opts, suite)
    config = kind.run_config(suite, profile, tasks)
    task_info = {t.hash: kind.describe(t) for t in tasks}  # defense configs and test data are checked here
    plugins = used_plugins(tasks, config.get("attack"))
    if plugins:
        config["plugins"] = plugins  # provenance: open_run keeps it out of the config hash, like the environment
    return Plan(suite, kind, profile, tasks, task_info, config, RunStore(run_folder(suite, opts)), log)


def used_plugins(tasks: list, attacks) -> list[dict]:
    """``{"kind", "ref", "path", "sha256"}`` of every plugin the tasks and attacks use (datasets, transformations,
    defenses, attacks given as ``file.py:Name``), once each, in task order; none for registered names."""
    from attacks import plugin_provenance as attack_plugin

    found: dict[tuple[str, str], dict] = {}
    for t in tasks:
        for p in (dataset_plugin(t.dataset), transformation_plugin(t.transformation), defense_plugin(t.defense)):
            if p:
                found.setdefault((p["kind"], p["ref"]), p)
    for a in attacks if isinstance(attacks, list) else []:
        p = attack_plugin(a["name"])
        if p:
            found.setdefault((p["kind"], p["ref"]), p)
    return list(found.values())


def _check_plugins(folder: Path, old: list[dict], new: list[dict]) -> None:
    """A resumed run's plugin files must be those it started with: its rows came from their code."""
    before = {(p["kind"], p["ref"]): p["sha256"] for p in old}
    for p in new:
        if before.get((p["kind"], p["ref"]), p["sha256"]) != p["sha256"]:
            raise BenchError(f"cannot resume {folder}: {p['kind']} plugin {p['path']} changed since the run started "
                             f"(sha256 {before[(p['kind'], p['ref'])][:12]}... then, {p['sha256'][:12]}... now); "
                             "restore it or use --out DIR for a new run.")


def open_run(store: RunStore, run_config: dict, opts: RunOptions, log) -> tuple[ModelStore, set]:
    """Stamp the config (hash, time, environment; the shard and the plugins' files are outside the hash), start or
    resume the run folder; the model store and the (task, example) keys already done."""
    plugins = run_config.pop("plugins", None)
    run_config["config_hash"] = config_hash(run_config)
    run_config["created"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    run_config["environment"] = environment(opts.device)
    if plugins:
        run_config["plugins"] = plugins
    if opts.shard is not None:
        run_config["shard"] = {"index": opts.shard[0], "count": opts.shard[1]}
    old = store.read_json("config.json") if opts.resume else None
    same = old is not None and rows_identity(old) == rows_identity(run_config)
    if same and old.get("shard") != run_config.get("shard"):
        raise BenchError(f"cannot resume {store.folder}: it holds shard {_shard_text(old.get('shard'))}, this command "
                         f"runs shard {_shard_text(run_config.get('shard'))}; pass the matching --shard or another "
                         "--out DIR.")
    if same:
        _check_plugins(store.folder, old.get("plugins") or [], plugins or [])
    store.start(run_config, opts.resume)
    opts.out_dir = store.folder
    log(f"run folder: {store.folder}")
    done = store.done_keys()
    if opts.resume:
        planned = {t["hash"] for t in run_config["tasks"]}
        log(f"resuming: {sum(1 for h, _ in done if h in planned)} finished example(s) are skipped")
    return ModelStore(allow_train=opts.allow_train, device=opts.device, log=log), done


def _shard_text(shard: dict | None) -> str:
    return "none (a whole run)" if shard is None else f"{shard['index']}/{shard['count']}"
