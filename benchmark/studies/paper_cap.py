"""CERTIFY at the paper profile's caps on a handful of real examples: fixed n vs the sequential rule.

    python -m benchmark.studies.paper_cap [--defense tss gsmooth] [--transformation NAME ...] [--n-examples 2]
                                  [--json FILE] [--out FILE.md]

The paper profile (n = 100,000 estimation samples; TSS rotation/scaling 1,000 slices x 10,000 samples)
is too costly to run here, but its certification cost per example can be measured on a few examples
with the real models: for each (defense, transformation) the selected test examples are certified
twice, with the same per-example generator seed, once under ``certify: fixed`` and once under
``certify: sequential`` (benchmark/certify/sequential.py). The table gives the Monte-Carlo samples
CERTIFY drew per example (selection included), its seconds, how many (example, budget) decisions
agree, and the projected cost of certifying the paper profile's 500 images per task under each rule; and,
on the examples both rules certify (correct, smallest positive budget), the median CERTIFY seconds.
Only CERTIFY is measured: attacks and PREDICT are not part of this projection.

TSS slice certification (rotation, scaling) at the paper's settings draws up to (slices + 1) x n_slice =
10,010,000 samples per example under the fixed rule, hours per example here: it runs only with
``--fixed-slices``; otherwise its fixed cells say "not run" (nothing is extrapolated into the table).
``--profile`` measures another profile of the semantic suite instead (the tests use ``smoke``).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from benchmark.certify.smoothing import sample_ledger
from benchmark.defenses import get_defense_class
from benchmark.errors import BenchError
from benchmark.models.store import ModelStore
from benchmark.run.kinds.semantic import TestImages, build_context
from benchmark.run.options import RunOptions, example_seed
from benchmark.suites import load_suite
from benchmark.suites.loader import Profile
from benchmark.transformations import get_transformation

SLICED = ("rotation", "scaling")
PAPER_IMAGES = 500


@dataclass
class Measurement:
    """CERTIFY's cost and decisions on one example under one rule."""

    samples: int
    seconds: float
    decisions: list[bool]  # (label, budget) certified-and-correct flags, in a fixed order


def _certify_once(defense, transformation, x: torch.Tensor, y: int, budgets: list[float],
                  seed: int) -> Measurement:
    gen = torch.Generator().manual_seed(seed)
    with sample_ledger() as ledger:
        t0 = time.perf_counter()
        certs = defense.certify(x, transformation, budgets, gen)
        seconds = time.perf_counter() - t0
    decisions = [bool(c.prediction == y and c.to_json()["certified"][repr(b)]) for c in certs for b in budgets]
    return Measurement(int(ledger["certify"]), seconds, decisions)


def measure(defenses: list[str], transformations: list[str] | None, n_examples: int, fixed_slices: bool,
            seed: int = 0, device: str = "cpu", log=None, profile: str = "paper",
            rules: tuple[str, ...] = ("fixed", "sequential")) -> list[dict]:
    """One record per (defense, transformation): per-rule mean samples, seconds and decision agreement."""
    log = log or (lambda m: print(m, file=sys.stderr))
    suite = load_suite("semantic")
    base = suite.profile(profile)
    profiles = {rule: Profile(**{**base.to_dict(), "certify": rule, "n_examples": n_examples})
                for rule in rules}
    models = ModelStore(allow_train=False, device=device, log=log)
    records, images = [], None
    for task in suite.tasks(next(iter(profiles.values())), seed, None, defenses, transformations):
        t = get_transformation(task.transformation)
        cls = get_defense_class(task.defense)
        if not cls.certified or not cls(**task.defense_config).supports(t):
            continue
        budgets = [b for b in task.budgets if b > 0]
        rec = {"defense": task.defense, "transformation": task.transformation, "examples": n_examples,
               "budgets": budgets}
        per_rule: dict[str, list[Measurement]] = {}
        for rule, profile in profiles.items():
            if rule == "fixed" and task.transformation in SLICED and task.defense == "tss" and not fixed_slices:
                continue
            rtask = next(tt for tt in suite.tasks(profile, seed, [task.dataset], [task.defense],
                                                  [task.transformation]))
            opts = RunOptions(profile=profile, seed=seed, device=device, allow_train=False, log=log)
            defense = cls(**rtask.defense_config)
            defense.prepare(build_context(rtask, opts, models, t))
            images = images or TestImages(opts)
            (x_all, y_all), idx = images.get(rtask.dataset), images.examples(rtask)
            per_rule[rule] = []
            for i in idx:
                # the runner's CERTIFY stream of this example (depends on certify_key, not on the rule)
                m = _certify_once(defense, t, x_all[i:i + 1].to(device), int(y_all[i]), budgets,
                                  example_seed(seed, task.certify_key, i))
                per_rule[rule].append(m)
                log(f"{task.label} example {i} {rule}: {m.samples} samples, {m.seconds:.1f} s")
        for rule, ms in per_rule.items():
            samples = float(np.mean([m.samples for m in ms]))
            seconds = float(np.mean([m.seconds for m in ms]))
            rec[rule] = {"samples": samples, "seconds": seconds,
                         "certified": float(np.mean([np.mean(m.decisions) for m in ms])),
                         "paper_samples": samples * PAPER_IMAGES, "paper_seconds": seconds * PAPER_IMAGES}
        if "fixed" in per_rule and "sequential" in per_rule:
            pairs = [(a, b) for ma, mb in zip(per_rule["fixed"], per_rule["sequential"])
                     for a, b in zip(ma.decisions, mb.decisions)]
            rec["agree"] = f"{sum(a == b for a, b in pairs)}/{len(pairs)}"
            # examples certified (correct, smallest positive budget) under both rules: median CERTIFY seconds
            both = [i for i, (ma, mb) in enumerate(zip(per_rule["fixed"], per_rule["sequential"]))
                    if ma.decisions[:1] == mb.decisions[:1] == [True]]
            rec["certified_both"] = len(both)
            for rule, ms in per_rule.items():
                rec[rule]["median_seconds_certified"] = (float(np.median([ms[i].seconds for i in both]))
                                                         if both else float("nan"))
        records.append(rec)
    return records


def render(records: list[dict]) -> str:
    """Markdown: samples and seconds per example under each rule, ratio, agreement, paper projection."""
    head = ["defense", "transformation", "examples", "samples/ex fixed", "sequential", "fewer",
            "s/ex fixed", "sequential", "decisions agree", "paper (500 img) hours here, fixed", "sequential"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in records:
        f, s = r.get("fixed"), r.get("sequential")
        if s is None:
            continue
        ratio = f"{f['samples'] / s['samples']:.1f}x" if f else "--"
        out.append("| " + " | ".join([
            r["defense"], r["transformation"], str(r["examples"]),
            f"{f['samples']:.0f}" if f else "not run", f"{s['samples']:.0f}", ratio,
            f"{f['seconds']:.2f}" if f else "--", f"{s['seconds']:.2f}", r.get("agree", "--"),
            f"{f['paper_seconds'] / 3600:.2f}" if f else "--", f"{s['paper_seconds'] / 3600:.2f}"]) + " |")
    both = [r for r in records if r.get("fixed")]
    if both:
        tf = sum(r["fixed"]["samples"] for r in both)
        ts = sum(r["sequential"]["samples"] for r in both)
        out.append(f"\nover the {len(both)} tasks run under both rules: {tf / ts:.1f}x fewer CERTIFY samples "
                   f"in total ({tf:.0f} vs {ts:.0f} per example summed over tasks)")
    timed = [r for r in records if r.get("certified_both")]
    if timed:
        out += ["", "| defense | transformation | certified under both | median s/certified ex fixed | sequential "
                "| faster |", "|---|---|---|---|---|---|"]
        for r in timed:
            f, s = r["fixed"]["median_seconds_certified"], r["sequential"]["median_seconds_certified"]
            out.append(f"| {r['defense']} | {r['transformation']} | {r['certified_both']} | {f:.3f} | {s:.3f} "
                       f"| {f / s:.1f}x |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--defense", nargs="+", default=["tss", "gsmooth"], help="certified defenses to measure")
    ap.add_argument("--transformation", nargs="+", help="transformations (default: all the suite has)")
    ap.add_argument("--n-examples", type=int, default=2, help="test examples per task (evenly spaced)")
    ap.add_argument("--fixed-slices", action="store_true",
                    help="also run TSS rotation/scaling slicing under the fixed rule (10M samples per example)")
    ap.add_argument("--rules", nargs="+", choices=("fixed", "sequential"), default=["fixed", "sequential"],
                    help="rules to run (the fixed rule always draws n0 + n per CERTIFY call)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--profile", default="paper", help="profile of the semantic suite to measure")
    ap.add_argument("--json", type=Path, help="write the records here")
    ap.add_argument("--out", type=Path, help="write the markdown table here")
    args = ap.parse_args(argv)
    if args.n_examples < 1:
        raise BenchError(f"--n-examples must be at least 1, got {args.n_examples}.")
    records = measure(args.defense, args.transformation, args.n_examples, args.fixed_slices, device=args.device,
                      profile=args.profile, rules=tuple(args.rules))
    text = render(records)
    print(text)
    if args.json:
        args.json.write_text(json.dumps({"rows": records}, indent=2) + "\n")
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
