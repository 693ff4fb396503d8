"""The classifiers of the deterministic verifiers.

``verifier_spec``: what semanify, interval, deepg and enumeration verify today, the suite's CNN
trained as the ``vanilla`` defense (same ModelSpec, so the same checkpoint): the table then compares
every defense on one architecture. Bound propagation on it: baselines/deepg/.

The rest of this module is the former verification MLP (kept for its bound tests and as an option):

A small ReLU MLP (Normalize, Flatten, 784-128-64-K) trained with Adam under the dataset's standard
schedule plus light augmentation by the transformations it is verified against. An MLP rather than
the zoo's max-pooling CNN: max-pooling needs its own relaxation, and CROWN's cost grows with the
product of layer widths, so a small dense network keeps the default profile cheap. The model is
also available as a chain of float64 affine maps for bound propagation (the Normalize layer is an
affine map and is folded into the first Linear layer exactly).
"""
from __future__ import annotations

import torch
from torch import nn

from benchmark.context import Context
from benchmark.errors import BenchError
from benchmark.models.architectures import Normalize
from benchmark.models.recipes import RECIPE_VERSION, classifier_spec, train_config
from benchmark.models.store import ModelSpec
from benchmark.models.training import train_classifier
from benchmark.transformations import get_transformation

HIDDEN = (128, 64)
#: light training augmentation: (transformation, budget) applied in this order to half of each batch
AUGMENTATION = (("rotation", 10.0), ("scaling", 0.1), ("contrast_brightness", 0.1), ("translation", 1.0))


def build_mlp(in_shape: tuple[int, ...], num_classes: int, mean, std, hidden=HIDDEN) -> nn.Sequential:
    """Normalize -> Flatten -> [Linear -> ReLU]* -> Linear."""
    layers: list[nn.Module] = [Normalize(mean, std), nn.Flatten()]
    width = int(torch.tensor(in_shape).prod())
    for h in hidden:
        layers += [nn.Linear(width, h), nn.ReLU()]
        width = h
    layers.append(nn.Linear(width, num_classes))
    return nn.Sequential(*layers)


def augment(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Apply the light augmentation chain to a random half of the batch (parameters from ``gen``)."""
    mask = torch.rand(len(x), generator=gen) < 0.5
    if not mask.any():
        return x
    xa = x[mask]
    for name, budget in AUGMENTATION:
        t = get_transformation(name)
        xa = t.apply(xa, t.sample(len(xa), budget, gen).to(xa.dtype))
    out = x.clone()
    out[mask] = xa
    return out


def verifier_spec(ctx: Context) -> ModelSpec:
    """The suite's CNN as trained for the ``vanilla`` defense (identical spec, hence the same zoo model)."""
    return classifier_spec(ctx, "vanilla", {"name": "none"}, None)


def semanify_spec(ctx: Context) -> ModelSpec:
    """The ModelSpec of the shared verification classifier for ``ctx.dataset``."""
    spec = ctx.dataset.spec
    cfg = train_config(spec.name)
    config = {
        "recipe": RECIPE_VERSION, "kind": "classifier", "arch": {"name": "mlp", "hidden": list(HIDDEN)},
        "dataset": {"name": spec.name, "version": spec.version}, "train": cfg.to_dict(),
        "augmentation": {"name": "semanify-light", "chain": [list(a) for a in AUGMENTATION], "fraction": 0.5},
    }

    def build() -> nn.Module:
        return build_mlp(spec.shape, spec.num_classes, spec.mean, spec.std)

    def train(model: nn.Module) -> nn.Module:
        x, y = ctx.train_data()
        return train_classifier(model, x, y, cfg, augment, device=ctx.device, desc="train semanify mlp")

    return ModelSpec(key=f"{spec.name}/semanify", config=config, build=build, train=train)


def affine_chain(model: nn.Module) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The model as float64 affine maps ``[(W1, b1), ..., (WL, bL)]`` with ReLU between them.

    Accepts Normalize, Flatten, Linear and ReLU layers (as built by :func:`build_mlp`); the
    Normalize layer ((x - mean) / std per channel) is folded into the first Linear layer.
    """
    mods = list(model.children()) if isinstance(model, nn.Sequential) else [model]
    scale = shift = None
    chain: list[tuple[torch.Tensor, torch.Tensor]] = []
    expect_linear = True
    for m in mods:
        if isinstance(m, Normalize) and not chain:
            std, mean = m.std.detach().cpu().double().flatten(), m.mean.detach().cpu().double().flatten()
            scale, shift = 1 / std, -mean / std
        elif isinstance(m, nn.Flatten):
            continue
        elif isinstance(m, nn.Linear) and expect_linear:
            w = m.weight.detach().cpu().double()
            b = m.bias.detach().cpu().double() if m.bias is not None else torch.zeros(w.shape[0], dtype=torch.float64)
            if not chain and scale is not None:
                per = w.shape[1] // scale.numel()  # pixels per channel (channel-major flatten)
                s, t = scale.repeat_interleave(per), shift.repeat_interleave(per)
                b = b + w @ t
                w = w * s[None]
            chain.append((w, b))
            expect_linear = False
        elif isinstance(m, nn.ReLU) and not expect_linear:
            expect_linear = True
        else:
            raise BenchError(f"semanify: cannot verify a model with layer {type(m).__name__} at this position; "
                             "the verifier takes Normalize, Flatten, then alternating Linear and ReLU layers.")
    if not chain or expect_linear:
        raise BenchError("semanify: the model must end with a Linear layer.")
    return chain
