"""Pixel-space l-infinity / l2 attacks through torchattacks: a sanity reference for undefended models.

Not a semantic threat model: it checks that the harness's models and data behave as expected under a
standard attack (an undefended CNN collapses at large eps and is unchanged at eps = 0). Run it as

    python -m benchmark.studies.pixel_attack --dataset digits --eps 0 0.05 0.1 0.2 --norm linf --attack pgd

which loads the suite's ``vanilla`` model (packaged zoo, no training) and prints robust accuracy per eps.
torchattacks is imported lazily (only when an attack runs).
"""
from __future__ import annotations

import argparse
import sys

import torch
from torch import nn

from benchmark.errors import BenchError

ATTACKS = ("pgd", "eotpgd", "autoattack")
NORMS = ("linf", "l2")


def make_attack(model: nn.Module, eps: float, norm: str = "linf", attack: str = "pgd", steps: int = 20,
                step_size: float | None = None, eot_iter: int = 4, n_classes: int = 10, seed: int = 0):
    """A torchattacks attack object; ``step_size`` defaults to 2.5 * eps / steps (Madry et al.)."""
    import torchattacks  # lazy: heavy import and only needed here

    if norm not in NORMS:
        raise BenchError(f"pixel attack: norm must be one of {NORMS}, got '{norm}'.")
    if attack not in ATTACKS:
        raise BenchError(f"pixel attack: attack must be one of {ATTACKS}, got '{attack}'.")
    alpha = 2.5 * eps / steps if step_size is None else step_size
    if attack == "pgd":
        if norm == "linf":
            return torchattacks.PGD(model, eps=eps, alpha=alpha, steps=steps, random_start=True)
        return torchattacks.PGDL2(model, eps=eps, alpha=alpha, steps=steps, random_start=True)
    if attack == "eotpgd":
        if norm != "linf":
            raise BenchError("pixel attack: torchattacks' EOTPGD is l-infinity only; use --norm linf or --attack pgd.")
        return torchattacks.EOTPGD(model, eps=eps, alpha=alpha, steps=steps, eot_iter=eot_iter, random_start=True)
    return torchattacks.AutoAttack(model, norm="Linf" if norm == "linf" else "L2", eps=eps, version="standard",
                                   n_classes=n_classes, seed=seed)


def pixel_robust_accuracy(model: nn.Module, images: torch.Tensor, labels: torch.Tensor, eps: float,
                          norm: str = "linf", attack: str = "pgd", steps: int = 20, step_size: float | None = None,
                          eot_iter: int = 4, seed: int = 0, batch_size: int = 256) -> float:
    """Fraction of ``images [N,C,H,W]`` in [0,1] still classified as ``labels`` after the attack at ``eps``.

    ``model`` maps [0,1] images to logits (normalisation inside, as every harness model does).
    torchattacks draws its random starts from torch's global generator, so the attack runs inside
    ``torch.random.fork_rng`` seeded with ``seed``: reproducible, and the caller's RNG state is untouched.
    """
    if eps < 0:
        raise BenchError(f"pixel attack: eps must be >= 0, got {eps}.")
    model = model.eval()
    n_classes = int(model(images[:1]).shape[1])
    atk = make_attack(model, eps, norm, attack, steps, step_size, eot_iter, n_classes, seed)
    correct = 0
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for i in range(0, len(images), batch_size):
            xb, yb = images[i:i + batch_size], labels[i:i + batch_size]
            adv = atk(xb, yb)
            with torch.no_grad():
                correct += int((model(adv).argmax(1) == yb).sum())
    return correct / len(images)


def vanilla_model(dataset: str, data_root=None, offline: bool = False, device: str = "cpu") -> nn.Module:
    """The suite's ``vanilla`` classifier for ``dataset`` (packaged zoo or cache; never trains)."""
    from baselines.vanilla import Vanilla
    from benchmark.certify.smoothing import SmoothingParams
    from benchmark.context import Context
    from benchmark.datasets import get_dataset
    from benchmark.models.store import ModelStore
    from benchmark.transformations import get_transformation

    ctx = Context(dataset=get_dataset(dataset), transformation=get_transformation("brightness"),
                  smoothing=SmoothingParams(), store=ModelStore(allow_train=False, device=device, log=lambda m: None),
                  device=device, data_root=data_root, offline=offline)
    defense = Vanilla()
    defense.prepare(ctx)
    return defense.model


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmark.studies.pixel_attack``: robust accuracy of the vanilla model per eps, as a small table."""
    from tabulate import tabulate

    from benchmark.datasets import get_dataset
    from benchmark.datasets.base import test_subset
    from benchmark.infra.environment import configure_threads

    p = argparse.ArgumentParser(prog="python -m benchmark.studies.pixel_attack", description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="digits")
    p.add_argument("--eps", type=float, nargs="+", default=[0.0, 0.05, 0.1, 0.2, 0.3])
    p.add_argument("--norm", choices=NORMS, default="linf")
    p.add_argument("--attack", choices=ATTACKS, default="pgd")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--n-examples", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-root", default=None)
    p.add_argument("--offline", action="store_true")
    args = p.parse_args(argv)
    try:
        configure_threads()
        model = vanilla_model(args.dataset, args.data_root, args.offline)
        x, y = get_dataset(args.dataset).load("test", args.data_root, args.offline)
        idx = test_subset(args.n_examples, 0, len(x))
        x, y = x[idx], y[idx]
        rows = [[f"{e:g}", f"{100 * pixel_robust_accuracy(model, x, y, e, args.norm, args.attack, args.steps, seed=args.seed):.1f}"]
                for e in args.eps]
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"### {args.dataset}: vanilla model, pixel-space {args.attack} ({args.norm}), {len(x)} test examples")
    print(tabulate(rows, headers=["eps", "robust accuracy (%)"], tablefmt="github"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
