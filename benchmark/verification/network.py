"""The suite's CNN (Normalize + SmallCNN) as a float64 chain of affine, ReLU and 2x2 max-pool layers.

Why our own code rather than a library: the bound-propagation package (PyPI 0.4.7) has no
Conv2d or MaxPool layers, and converting SmallCNN's convolutions to dense Linear layers gives
784 x 25088 and 6272 x 12544 float64 matrices (~0.8 GB) through which its CROWN back-substitutes
every intermediate neuron: far beyond the default run's budget. Here every affine layer keeps its
structure (convolutions run as ``torch.nn.functional.conv2d`` and their adjoint ``conv_transpose2d``),
which is all that interval, forward-linear and backward (CROWN-style) bound propagation need.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from benchmark.errors import BenchError
from benchmark.models.architectures import Normalize, SmallCNN


@dataclass
class Affine:
    """y = lin(x) + bias for one of three structured linear maps (``kind``): ``scale`` (per channel,
    weight [C,1,1]), ``conv`` (stride 1, weight [O,I,k,k]) or ``dense`` (flattens its input, weight [O,I])."""

    kind: str
    weight: torch.Tensor
    bias: torch.Tensor  # out_shape
    in_shape: tuple[int, ...]
    out_shape: tuple[int, ...]
    padding: int = 0

    def __post_init__(self) -> None:
        self.pos, self.neg, self.abs = self.weight.clamp(min=0), self.weight.clamp(max=0), self.weight.abs()

    def lin(self, x: torch.Tensor, w: torch.Tensor | None = None) -> torch.Tensor:
        """The linear part (no bias) with weight ``w`` (default the layer's) on a batch ``[B, *in_shape]``."""
        w = self.weight if w is None else w
        if self.kind == "scale":
            return x * w
        if self.kind == "conv":
            return F.conv2d(x, w, None, padding=self.padding)
        return x.flatten(1) @ w.T

    def lin_t(self, y: torch.Tensor) -> torch.Tensor:
        """The adjoint of ``lin`` on a batch ``[B, *out_shape]``: <lin(x), y> = <x, lin_t(y)>."""
        if self.kind == "scale":
            return y * self.weight
        if self.kind == "conv":
            return F.conv_transpose2d(y, self.weight, None, padding=self.padding)
        return (y @ self.weight).view(-1, *self.in_shape)


@dataclass
class ReLU:
    """Elementwise max(x, 0)."""

    shape: tuple[int, ...]


@dataclass
class MaxPool:
    """Non-overlapping 2x2 max pooling (stride 2) of ``in_shape`` [C, H, W] with even H, W."""

    in_shape: tuple[int, ...]

    @property
    def out_shape(self) -> tuple[int, ...]:
        c, h, w = self.in_shape
        return (c, h // 2, w // 2)


Layer = Affine | ReLU | MaxPool


def cnn_layers(model: nn.Module, in_shape: tuple[int, ...]) -> list[Layer]:
    """The layers of ``Normalize -> SmallCNN``-like models (Normalize, Conv2d stride 1 with same padding,
    ReLU, MaxPool2d(2), Flatten, Linear) as float64 :class:`Layer` objects on the CPU."""
    mods: list[nn.Module] = []

    def walk(m: nn.Module) -> None:
        if isinstance(m, (nn.Sequential, SmallCNN)):
            for c in m.children():
                walk(c)
        else:
            mods.append(m)

    walk(model)
    layers: list[Layer] = []
    shape = tuple(in_shape)
    for m in mods:
        if isinstance(m, Normalize):
            scale = (1 / m.std.detach().double().cpu()).view(-1, 1, 1)
            bias = (-m.mean.detach().double().cpu().view(-1, 1, 1) * scale).expand(*shape).clone()
            layers.append(Affine("scale", scale, bias, shape, shape))
        elif isinstance(m, nn.Conv2d):
            k = m.kernel_size[0]
            if m.stride != (1, 1) or m.kernel_size != (k, k) or m.padding != ((k - 1) // 2,) * 2 or k % 2 == 0:
                raise BenchError("deepg: only stride-1 'same' convolutions with odd square kernels are supported.")
            out = (m.out_channels, *shape[1:])
            b = m.bias.detach().double().cpu() if m.bias is not None else torch.zeros(m.out_channels, dtype=torch.float64)
            layers.append(Affine("conv", m.weight.detach().double().cpu(), b.view(-1, 1, 1).expand(*out).clone(),
                                 shape, out, (k - 1) // 2))
            shape = out
        elif isinstance(m, nn.ReLU):
            layers.append(ReLU(shape))
        elif isinstance(m, nn.MaxPool2d):
            if m.kernel_size not in (2, (2, 2)) or m.stride not in (2, (2, 2)) or shape[1] % 2 or shape[2] % 2:
                raise BenchError("deepg: only 2x2 max pooling with stride 2 on even sizes is supported.")
            layers.append(MaxPool(shape))
            shape = layers[-1].out_shape
        elif isinstance(m, nn.Flatten):
            continue
        elif isinstance(m, nn.Linear):
            b = m.bias.detach().double().cpu() if m.bias is not None else torch.zeros(m.out_features, dtype=torch.float64)
            layers.append(Affine("dense", m.weight.detach().double().cpu(), b, shape, (m.out_features,)))
            shape = (m.out_features,)
        else:
            raise BenchError(f"deepg: cannot bound a model with layer {type(m).__name__}.")
    if not layers or not isinstance(layers[-1], Affine) or layers[-1].kind != "dense":
        raise BenchError("deepg: the model must end with a Linear layer.")
    return layers


def margin_layers(layers: list[Layer], label: int) -> list[Layer]:
    """``layers`` with the specification folded into the last Linear layer: its outputs become the
    margins logit_label - logit_j for every j != label (exact composition of affine maps)."""
    last = layers[-1]
    k = last.weight.shape[0]
    spec = torch.eye(k, dtype=torch.float64)[label][None] - torch.eye(k, dtype=torch.float64)
    spec = torch.cat([spec[:label], spec[label + 1:]])
    folded = Affine("dense", spec @ last.weight, spec @ last.bias, last.in_shape, (k - 1,))
    return [*layers[:-1], folded]
