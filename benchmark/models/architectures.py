"""Classifier architectures used in the paper, each with input normalisation as its first layer.

Normalisation inside the model keeps every image and every noise level in [0,1]
pixel units, as in Cohen et al. (2019).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from benchmark.errors import unknown_name
from benchmark.infra.chunks import in_cpu_slices


class Normalize(nn.Module):
    """(x - mean) / std per channel; a fixed buffer, not a learned layer."""

    def __init__(self, mean: Sequence[float], std: Sequence[float]):
        super().__init__()
        self.register_buffer("mean", torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1))
        self.register_buffer("std", torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.std


class SmallCNN(nn.Module):
    """Two conv blocks and two dense layers: the digits/MNIST classifier (220,234 parameters at 28x28)."""

    def __init__(self, in_channels: int, num_classes: int, image_size: int = 28, width: int = 32):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )
        side = image_size // 4
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(2 * width * side * side, 64), nn.ReLU(), nn.Linear(64, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled() or x.shape[-1] % 4 or x.shape[-2] % 4:
            return self.classifier(self.features(x))
        # Inference, faster: relu and 2x2 max commute exactly (relu is monotone), and the max of four strided
        # views equals MaxPool2d's; PyTorch's CPU MaxPool2d on NCHW tensors is ~10x slower than two elementwise
        # maximums. Only without autograd, so gradients (training, PGD) keep MaxPool2d's ties.
        return in_cpu_slices(self._infer, x)

    def _infer(self, x: torch.Tensor) -> torch.Tensor:
        conv1, conv2 = self.features[0], self.features[3]
        if x.device.type == "cpu":
            # channels-last convolutions (oneDNN's NHWC kernels): measured on the suite's 2-core machine, one
            # thread, slices of 64 rows: the 1-channel first convolution 4.5 -> 0.8 ms, the network 1.8x faster,
            # the default run's row-seconds 0.86x. The sums run in another order, so logits move by float32
            # round-off (~1e-7 relative; the default run's rows, Monte-Carlo counts included, were unchanged)
            h = _max_pool_2x2(F.conv2d(x, _nhwc(conv1.weight), conv1.bias, padding=1)).relu_()
            h = _max_pool_2x2(F.conv2d(h, _nhwc(conv2.weight), conv2.bias, padding=1)).relu_()
        else:
            h = _max_pool_2x2(conv1(x)).relu_()
            h = _max_pool_2x2(conv2(h)).relu_()
        return self.classifier(h)


def _nhwc(w: torch.Tensor) -> torch.Tensor:
    """``w`` [O, I, kh, kw] stored channels-last, strides set explicitly: ``contiguous(memory_format=
    torch.channels_last)`` leaves a 1-input-channel weight as it is (both layouts coincide), and oneDNN then
    picks its slow NCHW kernel."""
    o, i, kh, kw = w.shape
    return w.permute(0, 2, 3, 1).contiguous().as_strided(w.shape, (kh * kw * i, 1, kw * i, i))


def _max_pool_2x2(h: torch.Tensor) -> torch.Tensor:
    """``MaxPool2d(2)`` of an [N, C, H, W] tensor with even H and W, as two elementwise maximums."""
    n, c, hh, ww = h.shape
    rows = h.view(n, c, hh // 2, 2, ww)
    r = torch.maximum(rows[:, :, :, 0], rows[:, :, :, 1]).view(n, c, hh // 2, ww // 2, 2)
    return torch.maximum(r[..., 0], r[..., 1])


class _BasicBlock(nn.Module):
    """Post-activation residual block of the CIFAR ResNets (He et al. 2016)."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.short = nn.Sequential()
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + self.short(x))


class CifarResNet(nn.Module):
    """CIFAR ResNet of depth 6n+2 (ResNet-110: n=18), widths 16/32/64, as used by Cohen et al. and GSmooth."""

    def __init__(self, depth: int = 110, num_classes: int = 10, in_channels: int = 3):
        super().__init__()
        if (depth - 2) % 6:
            raise ValueError(f"CIFAR ResNet depth must be 6n+2, got {depth}")
        n = (depth - 2) // 6
        self.stem = nn.Sequential(nn.Conv2d(in_channels, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        layers, cin = [], 16
        for cout, stride in ((16, 1), (32, 2), (64, 2)):
            for i in range(n):
                layers.append(_BasicBlock(cin, cout, stride if i == 0 else 1))
                cin = cout
        self.layers = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.layers(self.stem(x)))


class _PreActBlock(nn.Module):
    """Pre-activation residual block (He et al. 2016, identity mappings)."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.short = None
        if stride != 1 or cin != cout:
            self.short = nn.Conv2d(cin, cout, 1, stride, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(x))
        short = self.short(out) if self.short is not None else x
        out = self.conv1(out)
        out = self.conv2(torch.relu(self.bn2(out)))
        return out + short


class PreActResNet18(nn.Module):
    """PreAct ResNet-18 for 32x32 inputs (widths 64..512)."""

    def __init__(self, num_classes: int = 10, in_channels: int = 3):
        super().__init__()
        self.stem = nn.Conv2d(in_channels, 64, 3, 1, 1, bias=False)
        layers, cin = [], 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            layers += [_PreActBlock(cin, cout, stride), _PreActBlock(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.BatchNorm2d(512), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                  nn.Linear(512, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.layers(self.stem(x)))


class Conv4FC3(nn.Module):
    """TSS's MNIST classifier (Li et al., CCS 2021; their ``mnist_43``): four convolutions and three dense layers.

    conv 3x3 (32) / conv 4x4 stride 2 (32) / conv 3x3 (64) / conv 4x4 stride 2 (64), each with ReLU, then dense
    3136 -> 512 -> 512 -> 10: 1,974,762 parameters for one 28x28 input channel, ~20x the small CNN. Registered so
    TSS's Table 1 rows can be retrained on the base network TSS used (docs/tss-mnist-protocol.md).
    """

    def __init__(self, in_channels: int = 1, num_classes: int = 10, image_size: int = 28):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 32, 3, stride=1, padding=1), nn.ReLU(),
            nn.Conv2d(32, 32, 4, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(32, 64, 3, stride=1, padding=1), nn.ReLU(),
            nn.Conv2d(64, 64, 4, stride=2, padding=1), nn.ReLU(),
        )
        side = image_size // 4
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(64 * side * side, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
            nn.Linear(512, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


ARCHITECTURES = ("small_cnn", "resnet110", "preresnet18", "conv4fc3")


def build_classifier(arch: str, in_channels: int, num_classes: int, image_size: int,
                     mean: Sequence[float], std: Sequence[float]) -> nn.Module:
    """``Normalize`` followed by the named architecture."""
    if arch == "small_cnn":
        body = SmallCNN(in_channels, num_classes, image_size)
    elif arch == "resnet110":
        body = CifarResNet(110, num_classes, in_channels)
    elif arch == "preresnet18":
        body = PreActResNet18(num_classes, in_channels)
    elif arch == "conv4fc3":
        body = Conv4FC3(in_channels, num_classes, image_size)
    else:
        raise unknown_name("architecture", arch, ARCHITECTURES)
    return nn.Sequential(Normalize(mean, std), body)


def default_architecture(image_size: int) -> str:
    """The paper's choice: a small CNN for 28x28 digits/MNIST, ResNet-110 for 32x32 CIFAR."""
    return "small_cnn" if image_size <= 28 else "resnet110"
