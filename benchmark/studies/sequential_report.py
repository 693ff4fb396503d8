"""Fixed-n vs sequential certification, side by side from two run folders of the same suite and profile.

    bench run --suite semantic --out runs/fixed
    bench run --suite semantic --certify sequential --out runs/sequential
    python -m benchmark.studies.sequential_report runs/fixed runs/sequential [--out table.md]
    python -m benchmark.studies.sequential_report --project default     # no models: TSS's thresholds, synthetic p_A

Per (dataset, transformation, certificate label), on the examples both runs evaluated: certified accuracy
at each budget, the Monte-Carlo samples CERTIFY drew per example (selection included; every slice endpoint
for sliced TSS) and per certified example (correct and certified at the smallest positive budget), the
samples PREDICT drew per example (clean prediction and every attack candidate), mean seconds per example
(CERTIFY, PREDICT and the attacks) and the median seconds CERTIFY took per certified example.
Samples come from each row's ``samples`` ledger (benchmark/run/evaluate.py).
"""
from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

import numpy as np

Key = tuple[str, str, str, str]  # dataset, transformation, defense, label


def _rows(folder: Path) -> dict[tuple, dict]:
    """(dataset, transformation, defense, example) -> row (the last one written wins, as on --resume), with
    ``labels``: the table label of each certificate (from tasks.json)."""
    from benchmark.run.store import RunStore

    store = RunStore(Path(folder))
    labels = {h: info.get("labels", []) for h, info in (store.read_json("tasks.json") or {}).items()}
    return {(r["dataset"], r["transformation"], r["defense"], r["example"]): {**r, "labels": labels.get(r["task"], [])}
            for r in store.rows()}


def _stats(rows: list[dict], i: int) -> dict:
    """Certified accuracy per budget, samples and seconds of certificate ``i`` over ``rows``."""
    certs = [r["certificates"][i] for r in rows]
    budgets = sorted(float(b) for b in certs[0]["certified"])
    acc = {b: float(np.mean([c["correct"] and c["certified"][repr(b)] for c in certs])) for b in budgets}
    first = next((b for b in budgets if b > 0), budgets[0])
    cert_samples = np.array([r["samples"]["certify"] for r in rows], dtype=float)
    certified = np.array([c["correct"] and c["certified"][repr(first)] for c in certs])
    seconds = np.array([r["seconds"] for r in rows], dtype=float)
    cert_seconds = np.array([r["samples"].get("certify_seconds", np.nan) for r in rows], dtype=float)
    return {"accuracy": acc, "certify": cert_samples.mean(),
            "certify_certified": cert_samples[certified].mean() if certified.any() else float("nan"),
            "predict": float(np.mean([r["samples"]["predict"] for r in rows])),
            "seconds": float(seconds.mean()), "n_certified": int(certified.sum()),
            "seconds_certified": float(np.median(cert_seconds[certified])) if certified.any() else float("nan")}


def compare_runs(fixed: Path, sequential: Path) -> list[dict]:
    """One record per (dataset, transformation, label) with certificates in both runs."""
    a, b = _rows(fixed), _rows(sequential)
    groups: dict[tuple, list] = defaultdict(list)
    for key in sorted(a.keys() & b.keys()):
        if a[key].get("certificates") and "samples" in a[key] and "samples" in b[key]:
            groups[key[:3]].append(key)
    out = []
    for (ds, tname, defense), keys in groups.items():
        ra, rb = [a[k] for k in keys], [b[k] for k in keys]
        for i, cert in enumerate(ra[0]["certificates"]):
            labels = ra[0]["labels"]
            rec = {"dataset": ds, "transformation": tname, "defense": defense,
                   "label": labels[i] if i < len(labels) else cert.get("variant", "") or defense,
                   "examples": len(keys)}
            for name, s in (("fixed", _stats(ra, i)), ("sequential", _stats(rb, i))):
                rec.update({f"accuracy_{name}": s["accuracy"], f"certified_{name}": s["n_certified"],
                            f"certify_samples_{name}": s["certify"],
                            f"certify_samples_certified_{name}": s["certify_certified"],
                            f"predict_samples_{name}": s["predict"], f"seconds_{name}": s["seconds"],
                            f"median_seconds_certified_{name}": s["seconds_certified"]})
            out.append(rec)
    return out


def _ratio(x: float, y: float) -> str:
    return f"{x / y:.1f}x" if y > 0 and np.isfinite(x / y) else "--"


def _md(cells: list) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _pair(r: dict, metric: str, fmt: str = ".0f") -> list[str]:
    return [format(r[f"{metric}_fixed"], fmt), format(r[f"{metric}_sequential"], fmt)]


def render(table: list[dict]) -> str:
    """Markdown: samples and time per certificate, then certified accuracy per budget."""
    head = ["transformation", "certificate", "n", "certify samples/ex fixed", "sequential", "fewer",
            "per certified ex fixed", "sequential", "predict samples/ex fixed", "sequential", "fewer",
            "s/ex fixed", "sequential", "median CERTIFY s/certified ex fixed", "sequential"]
    lines = [_md(head), _md(["---"] * len(head))]
    for r in table:
        lines.append(_md([r["transformation"], r["label"], r["examples"], *_pair(r, "certify_samples"),
                          _ratio(r["certify_samples_fixed"], r["certify_samples_sequential"]),
                          *_pair(r, "certify_samples_certified"), *_pair(r, "predict_samples"),
                          _ratio(r["predict_samples_fixed"], r["predict_samples_sequential"]),
                          *_pair(r, "seconds", ".2f"), *_pair(r, "median_seconds_certified", ".2f")]))
    if table:
        cf, cs = (float(np.mean([r[f"certify_samples_{k}"] for r in table])) for k in ("fixed", "sequential"))
        lines.append(f"\nmean certify samples per example over the certificates: fixed {cf:.0f}, "
                     f"sequential {cs:.0f} ({_ratio(cf, cs)} fewer)")
    head = ["transformation", "certificate", "budget", "certified fixed", "sequential", "difference"]
    lines += ["", _md(head), _md(["---"] * len(head))]
    for r in table:
        for b, v in r["accuracy_fixed"].items():
            w = r["accuracy_sequential"].get(b, float("nan"))
            lines.append(_md([r["transformation"], r["label"], f"{b:g}", f"{v:.3f}", f"{w:.3f}",
                              f"{100 * (w - v):+.1f} pt"]))
    return "\n".join(lines)


def project_tss(profile: str, p_values: tuple[float, ...] = (1.0, 0.99, 0.95, 0.9), trials: int = 4000,
                suite: str = "semantic") -> str:
    """Expected CERTIFY estimation samples of TSS's parameter-smoothing tasks under the sequential rule, for
    synthetic true p_A (Bernoulli streams, the tasks' real thresholds and the profile's cap and alpha),
    against the fixed n. Slicing is left out: its thresholds depend on each image's interpolation bound."""
    from baselines.common import contrast
    from baselines.tss import TSS
    from benchmark.certify import parameter_lattice, sequential
    from benchmark.certify.radii import radius_threshold
    from benchmark.suites import load_suite
    from benchmark.transformations import get_transformation

    s = load_suite(suite)
    prof = s.profile(profile)
    settings = sequential.SequentialSettings.from_dict(prof.sequential)
    rng = np.random.default_rng(0)
    lines = [_md(["transformation", "p_A thresholds", *(f"p_A={p}" for p in p_values)]),
             _md(["---"] * (2 + len(p_values)))]
    for name in ("gaussian_blur", "translation", "brightness", "contrast_brightness"):
        cfg = (s.transformations[name].get("defenses") or {}).get("tss", {})
        budgets = [b for b in s.budgets(name, s.datasets[0]) if b > 0]
        d = TSS(**cfg)
        d._t = get_transformation(name)
        if name == "contrast_brightness":  # the certificates' own thresholds (grid parameter noise, version 2)
            d.sk = float(cfg.get("scale") or 0.2)
            d.sb = float(cfg.get("scale_b") or d.sk)
            need = [parameter_lattice.composed_threshold(contrast.required_probability(b, d.sk, d.sb), (d.sk, d.sb),
                                                         d._lattice) for b in budgets]
        else:
            d.noise = noise = d.noise_for(d._t, (1, 28, 28))
            rec = d._lattice  # brightness's per-image reach left out: it binds on no image of the suite
            need = [radius_threshold(lambda p: parameter_lattice.radius(noise.kind, noise.scale, p, rec), b)
                    for b in budgets]
        tables = sequential.plan(settings, prof.n, prof.alpha, need)  # CERTIFY's schedule for these thresholds
        sched = tables.schedule
        cells = []
        for p in p_values:
            s_k = rng.binomial(np.diff((0, *sched.looks)), p, size=(trials, len(sched.looks))).cumsum(1)
            stop, _ = sequential.run_rule(s_k, tables)
            used = float(np.asarray(sched.looks)[stop].mean())
            cells.append(f"{used:.0f} ({_ratio(prof.n, used)} fewer)")
        lines.append(_md([name, ", ".join(f"{x:.3f}" for x in need), *cells]))
    looks = sequential.schedule(settings, prof.n, prof.alpha).looks
    return f"profile {profile}: fixed n = {prof.n}, alpha = {prof.alpha}, looks {list(looks)}\n\n" + "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("fixed", type=Path, nargs="?", help="run folder of the fixed-n run")
    ap.add_argument("sequential", type=Path, nargs="?", help="run folder of the --certify sequential run")
    ap.add_argument("--out", type=Path, help="also write the markdown here")
    ap.add_argument("--project", metavar="PROFILE", help="instead: expected TSS samples at synthetic p_A")
    args = ap.parse_args(argv)
    if args.project:
        text = project_tss(args.project)
    elif args.fixed and args.sequential:
        text = render(compare_runs(args.fixed, args.sequential))
    else:
        ap.error("give two run folders, or --project PROFILE")
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
