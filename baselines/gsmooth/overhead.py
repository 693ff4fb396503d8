"""Benchmark: GSmooth certification time vs bare surrogate+classifier forward passes on the same batches.

    python -m baselines.gsmooth.overhead --transformation gaussian_blur --n-examples 10 [--n 10000]

Both are measured side by side in one process, interleaved per example, so the ratio is robust to
machine noise; absolute seconds are not reported as results.
"""
from __future__ import annotations

import argparse
import time

import torch

from baselines.gsmooth.defense import GSmooth
from benchmark.certify.smoothing import SmoothingParams
from benchmark.context import Context
from benchmark.datasets import get_dataset
from benchmark.environment import configure_threads
from benchmark.models.store import ModelStore
from benchmark.suites import load_suite
from benchmark.transformations import get_transformation


def measure(transformation: str, n_examples: int, profile: str = "default", n: int | None = None) -> dict:
    """Side-by-side certify vs bare timing; ``n`` overrides the profile's Monte-Carlo sample count."""
    import dataclasses

    suite = load_suite("semantic")
    p = suite.profile(profile)
    task_profile = p
    if n is not None:
        p = dataclasses.replace(p, n=n)
    task = suite.tasks(task_profile, 0, transformations=[transformation], defenses=["gsmooth"])[0]
    t = get_transformation(transformation)
    smoothing = SmoothingParams(n0=p.n0, n=p.n, alpha=p.alpha, batch_size=p.batch_size, n_predict=p.n_predict)
    ctx = Context(dataset=get_dataset("digits"), transformation=t, smoothing=smoothing,
                  store=ModelStore(allow_train=False), budgets=task.budgets, profile={"surrogate_quality": False})
    d = GSmooth(**task.defense_config)
    d.prepare(ctx)
    x, _ = get_dataset("digits").load("test")
    sizes = []
    for total in (p.n0, p.n):
        sizes += [p.batch_size] * (total // p.batch_size) + ([total % p.batch_size] if total % p.batch_size else [])
    t_cert = t_bare = 0.0
    gen = torch.Generator().manual_seed(0)
    for i in range(n_examples):
        xi = x[i:i + 1]
        start = time.perf_counter()
        d.certify(xi, t, list(task.budgets), gen)
        t_cert += time.perf_counter() - start
        with torch.no_grad():
            z0 = d.surrogate.F2(xi)
            etas = [d._eta(k, gen) for k in sizes]  # noise drawn outside the timed bare loop
            start = time.perf_counter()
            z0 = d.surrogate.F2(xi)
            for eta in etas:
                d.model(d.surrogate.H(z0.expand(len(eta), -1, -1, -1) + eta)).argmax(1)
            t_bare += time.perf_counter() - start
    return {"transformation": transformation, "examples": n_examples, "samples_per_example": p.n0 + p.n,
            "ratio_certify_over_bare": t_cert / t_bare}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--transformation", action="append", default=None)
    ap.add_argument("--n-examples", type=int, default=10)
    ap.add_argument("--n", type=int, default=None, help="Monte-Carlo samples (default: the profile's)")
    args = ap.parse_args()
    configure_threads()
    for name in args.transformation or ["gaussian_blur", "rotation", "pixelate"]:
        print(measure(name, args.n_examples, n=args.n))


if __name__ == "__main__":
    main()
