"""One training loop for every classifier; each defense passes its own augmentation.

The augmentation is a callable ``augment(x, generator) -> x'`` applied to every
batch (e.g. Gaussian pixel noise, random transformation parameters, or a
surrogate's semantic noise), so a smoothed classifier's base model is trained
on the distribution it will be queried under. A defense whose objective is not
plain cross-entropy (AugMix's consistency loss) passes ``loss_fn`` instead.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn

from benchmark.errors import BenchError
from benchmark.infra.progress import progress_bar

Augment = Callable[[torch.Tensor, torch.Generator], torch.Tensor]
#: ``loss_fn(model, x, y, generator) -> scalar loss`` on one (augmented) batch
LossFn = Callable[[nn.Module, torch.Tensor, torch.Tensor, torch.Generator], torch.Tensor]


@dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters of the classifier training loop (part of every checkpoint's config hash)."""

    epochs: int = 10
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 0.0
    seed: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


def train_classifier(model: nn.Module, x: torch.Tensor, y: torch.Tensor, cfg: TrainConfig,
                     augment: Augment | None = None, device: str = "cpu", desc: str = "train",
                     loss_fn: LossFn | None = None) -> nn.Module:
    """Train ``model`` with Adam and cross-entropy (or ``loss_fn``) on (augmented) batches; returns it in eval mode.

    Shuffling and augmentation noise come from one generator seeded by ``cfg.seed``; parameter
    initialisation and anything drawn from torch's global generator (dropout) are seeded by the
    model store (``determinism.seeded_training``), which is how every checkpoint is trained.
    """
    gen = torch.Generator().manual_seed(cfg.seed)
    model.to(device).train()
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    n = len(x)
    steps = cfg.epochs * ((n + cfg.batch_size - 1) // cfg.batch_size)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(steps, 1))
    step = 0
    with progress_bar(total=steps, desc=desc, unit="step") as bar:
        for epoch in range(cfg.epochs):
            perm = torch.randperm(n, generator=gen)
            for i in range(0, n, cfg.batch_size):
                idx = perm[i:i + cfg.batch_size]
                xb, yb = x[idx], y[idx]
                if augment is not None:
                    xb = augment(xb, gen)
                if loss_fn is not None:
                    loss = loss_fn(model, xb.to(device), yb.to(device), gen)
                else:
                    loss = F.cross_entropy(model(xb.to(device)), yb.to(device))
                if not torch.isfinite(loss):  # the step would spread it into every weight: never save such a model
                    raise BenchError(f"{desc}: the training loss became {loss.item()} at step {step + 1} of {steps}; "
                                     "no checkpoint was written. Lower the learning rate or fix the loss (a softmax "
                                     "underflowing to 0 inside a log is the usual cause), then train again.")
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                sched.step()
                step += 1
                # the postfix first, not redrawn: update redraws at tqdm's pace (and a due log line shows it)
                bar.set_postfix_str(f"epoch {epoch + 1}/{cfg.epochs}, loss {loss.item():.3f}", refresh=False)
                bar.update(1)
    return model.eval()


@torch.no_grad()
def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch_size: int = 512, device: str = "cpu") -> float:
    """Plain accuracy of ``model`` on (x, y)."""
    model.eval()
    correct = 0
    for i in range(0, len(x), batch_size):
        correct += (model(x[i:i + batch_size].to(device)).argmax(1).cpu() == y[i:i + batch_size]).sum().item()
    return correct / max(len(x), 1)
