"""GSmooth's noise ablation (paper Table 3 shape) as a committed study: the sigma1 x sigma2 grid of one run.

    bench ablation RUN --out leaderboards/gsmooth-ablation/<dataset>/noise-grid [--transformation rotational_blur]

From a finished run of one of :data:`SUITES` (``gsmooth-ablation`` on the embedded digits,
``gsmooth-ablation-mnist`` on the official MNIST protocol, possibly joined from parts by ``bench merge``), for the
transformation whose gsmooth sweep varies exactly two keys, it writes:

* ``grid.csv``: the run's summary rows of the sweep's tasks, the table's only input;
* ``provenance.json``: suite, profile, seed, run config hash, git commit, versions and every model's sha256;
* ``grid.md``: one table per budget (rows sigma1, columns sigma2), then the legend (protocol, provenance);
* ``heatmap.png``: the same numbers as a heat map, one panel per budget.

``grid.md`` is a pure function of ``grid.csv`` and ``provenance.json`` (:func:`render_grid`), so a test can
check that the committed page is what the code writes, and ``bench leaderboard --all`` appends it.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
from tabulate import tabulate

from benchmark.defenses import split_tag
from benchmark.errors import BenchError
from benchmark.infra.io import atomic_write_json, atomic_write_text
from benchmark.reports.legend import LEGEND_TITLE
from benchmark.reports.sweep import grid_heatmap, varying_keys
from benchmark.suites import load_suite
from benchmark.suites.loader import Task

SUITE = "gsmooth-ablation"
#: the suites whose runs hold a sigma1 x sigma2 grid; every study is written under ``<root>/gsmooth-ablation/<dataset>``
SUITES = (SUITE, "gsmooth-ablation-mnist")
DEFAULT_TRANSFORMATION = "rotational_blur"
FILES = ("grid.csv", "provenance.json", "grid.md", "heatmap.png")


def _grid_tasks(provenance: dict) -> list[Task]:
    """The tagged gsmooth tasks of the recorded transformation, as the suite defines them today."""
    suite = load_suite(provenance["suite"])
    profile = suite.profile(provenance["profile"])
    tasks = suite.tasks(profile, provenance["seed"], datasets=[provenance["dataset"]],
                        transformations=[provenance["transformation"]])
    return [t for t in tasks if split_tag(t.defense)[0] == "gsmooth" and split_tag(t.defense)[1]]


def _short(commit: str | None) -> str:
    """A commit's first 10 hex digits, keeping the run's ``+dirty`` mark (uncommitted changes when it ran)."""
    if not commit:
        return "unknown"
    return commit[:10] + ("+dirty" if commit.endswith("+dirty") else "")


def _is_grid(tasks: list[Task]) -> bool:
    """Whether ``tasks`` are a sigma1 x sigma2 grid: both vary, and each (sigma1, sigma2) is exactly one task. Other
    keys may vary with the cell (the MNIST grid's slices follow sigma2); :func:`_per_column` names them."""
    pairs = [(t.defense_config.get("sigma1"), t.defense_config.get("sigma2")) for t in tasks]
    return ({"sigma1", "sigma2"} <= set(varying_keys(tasks)) and len(set(pairs)) == len(pairs)
            and len(set(pairs)) == len({p[0] for p in pairs}) * len({p[1] for p in pairs}))


def _per_column(tasks: list[Task]) -> str:
    """The legend's sentence on the settings that vary with the cell besides sigma1 and sigma2 (empty if none)."""
    parts = []
    for key in (k for k in varying_keys(tasks) if k not in ("sigma1", "sigma2")):
        by_s2: dict[float, set] = {}
        for t in tasks:
            by_s2.setdefault(t.defense_config["sigma2"], set()).add(repr(t.defense_config.get(key)))
        if all(len(v) == 1 for v in by_s2.values()):
            parts.append(f"{key} per column (" + ", ".join(f"σ2 = {s2:g}: {next(iter(v))}"
                                                           for s2, v in sorted(by_s2.items())) + ")")
        else:
            parts.append(f"{key} per cell (the suite file)")
    return f" Also set per cell: {'; '.join(parts)}." if parts else ""


def render_grid(summary: pd.DataFrame, provenance: dict) -> str:
    """The page, in the leaderboards' layout: one table of certified accuracy (%) per budget (rows sigma1,
    columns sigma2), then the legend (protocol, provenance, how to regenerate)."""
    tasks = _grid_tasks(provenance)
    rows_v = sorted({t.defense_config["sigma1"] for t in tasks})
    cols_v = sorted({t.defense_config["sigma2"] for t in tasks})
    cert = {(r.defense, float(r.budget)): float(r.value) for r in summary.itertuples()}
    blocks = []
    for b in [b for b in tasks[0].budgets if b > 0]:
        body = []
        for s1 in rows_v:
            cells = [next(t for t in tasks if t.defense_config["sigma1"] == s1 and t.defense_config["sigma2"] == s2)
                     for s2 in cols_v]
            body.append([f"σ1 = {s1:g}", *(f"{100 * cert[t.defense, b]:.1f}" if (t.defense, b) in cert else "--"
                                            for t in cells)])
        blocks.append(f"### Certified accuracy (%) at budget {b:g}\n\n"
                      + tabulate(body, headers=["σ1 \\ σ2", *[f"σ2 = {c:g}" for c in cols_v]], tablefmt="github",
                                 disable_numparse=True) + "\n")
    n = sorted({int(v) for v in summary.n_examples})
    cap = " as the cap of the sequential rule" if provenance["certify"] == "sequential" else ", fixed"
    legend = (f"### {LEGEND_TITLE}\n\n"
              f"GSmooth's σ1 × σ2 ablation (paper Table 3 shape) on {provenance['transformation']} "
              f"({provenance['dataset']}): certified accuracy of the sound `gsmooth` certificate at each budget "
              f"(the transformation's units), rows σ1 (parameter noise), columns σ2 (semantic noise); "
              f"{'/'.join(map(str, n))} test images per cell, profile `{provenance['profile']}` (n = "
              f"{provenance['n']}{cap}, α = {provenance['alpha']}), seed {provenance['seed']}, run config "
              f"{provenance['config_hash']}, commit {_short(provenance['git_commit'])}. Regenerate: `bench run "
              f"--suite {provenance['suite']} --dataset {provenance['dataset']} --transformation "
              f"{provenance['transformation']}`, then `bench ablation RUN --out DIR`; the heat map is "
              f"`heatmap.png` beside `grid.md`.{_per_column(tasks)}\n")
    return "\n".join(blocks) + "\n" + legend


def write_ablation(run: Path, out: Path, transformation: str = DEFAULT_TRANSFORMATION) -> dict[str, Path]:
    """Write the study's four files (module docstring) from a finished run folder."""
    run, out = Path(run), Path(out)
    try:
        config = json.loads((run / "config.json").read_text())
        summary = pd.read_csv(run / "summary.csv")
        models = json.loads((run / "models.json").read_text())
    except FileNotFoundError as e:
        raise BenchError(f"bench ablation: {run} is not a finished run folder ({e.filename} is missing); "
                         f"run `bench run --suite {SUITE}` to the end first.") from None
    if config["suite"] not in SUITES:
        raise BenchError(f"bench ablation: {run} is a run of suite {config['suite']!r}, not one of "
                         f"{', '.join(map(repr, SUITES))}.")
    if len(config["datasets"]) != 1:
        raise BenchError(f"bench ablation: {run} ran {config['datasets']}; run one dataset (--dataset NAME).")
    p = config["profile"]
    provenance = {"suite": config["suite"], "dataset": config["datasets"][0], "transformation": transformation,
                  "profile": p["name"], "seed": config["seed"], "n": p["n"], "alpha": p["alpha"],
                  "certify": p.get("certify") or "fixed", "config_hash": config["config_hash"],
                  "git_commit": config["environment"]["git_commit"], "versions": config["environment"]["versions"],
                  "models": [m for m in models if f"/{transformation}" in m["key"]]}
    tasks = _grid_tasks(provenance)
    if not _is_grid(tasks):
        varying = varying_keys(tasks)
        raise BenchError(f"bench ablation: the gsmooth sweep of {config['suite']} on {transformation!r} varies "
                         f"{sorted(varying) or 'nothing'}, not sigma1 and sigma2; pass the transformation of the "
                         f"sigma1 x sigma2 grid (--transformation {DEFAULT_TRANSFORMATION}).")
    labels = {t.defense for t in tasks}
    rows = summary[(summary.transformation == transformation) & summary.defense.isin(labels)
                   & (summary.metric == "certified_accuracy")]
    if set(rows.defense) != labels:
        raise BenchError(f"bench ablation: {run} has no certified rows for {sorted(labels - set(rows.defense))}; "
                         f"finish the run (bench run --resume --out {run}).")
    out.mkdir(parents=True, exist_ok=True)
    rows = rows.sort_values(["defense", "budget"]).reset_index(drop=True)
    atomic_write_text(out / "grid.csv", rows.to_csv(index=False))
    atomic_write_json(out / "provenance.json", provenance)
    summary = pd.read_csv(out / "grid.csv")  # the page is rendered from what was written, as the test re-renders it
    atomic_write_text(out / "grid.md", render_grid(summary, provenance))
    keys = ["sigma1", "sigma2"]
    budgets = [b for b in tasks[0].budgets if b > 0]
    tmp = grid_heatmap(summary, tasks, {t.hash: t.defense for t in tasks}, keys, budgets,
                       out / "heatmap.tmp-src.png", f"gsmooth on {transformation} ({provenance['dataset']})")
    shutil.move(tmp, out / "heatmap.png")
    return {name: out / name for name in FILES}


def ablation_section(root: Path) -> str:
    """The committed ablation pages under ``root`` for ``bench leaderboard --all`` (empty without any)."""
    return "".join(f"\n## GSmooth's noise ablation ({page.parent.parent.name})\n\n{page.read_text()}"
                   for page in sorted(Path(root).glob(f"{SUITE}/*/noise-grid/grid.md")))
