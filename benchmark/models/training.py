"""One training loop for every classifier; each defense passes its own augmentation.

The augmentation is a callable ``augment(x, generator) -> x'`` applied to every
batch (e.g. Gaussian pixel noise, random transformation parameters, or a
surrogate's semantic noise), so a smoothed classifier's base model is trained
on the distribution it will be queried under. A defense whose objective is not
plain cross-entropy (AugMix's consistency loss) passes ``loss_fn`` instead.

``TrainConfig.consistency_lambda`` / ``noise_draws`` switch on consistency regularisation over the smoothing
distribution as TSS trains its MNIST models (Li et al., CCS 2021, ``semantic/train.py``; after Jeong & Shin,
NeurIPS 2020): every image gets ``noise_draws`` independent augmentations, the loss is the cross-entropy of all of
them plus lambda times :func:`consistency_loss`.
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
    #: consistency regularisation (TSS): weight lambda of :func:`consistency_loss` and augmented copies per image
    consistency_lambda: float = 0.0
    noise_draws: int = 1

    def __post_init__(self) -> None:
        if not self.consistency_lambda >= 0 or self.noise_draws < 1:
            raise BenchError(f"consistency training needs consistency_lambda >= 0 and noise_draws >= 1, got "
                             f"{self.consistency_lambda} and {self.noise_draws}.")

    @property
    def consistency(self) -> bool:
        """Whether the consistency objective (several draws per image, or lambda > 0) is on."""
        return self.consistency_lambda > 0 or self.noise_draws > 1

    def to_dict(self) -> dict:
        """The config-hash record: the consistency keys only when it is on, so every existing hash stays."""
        d = asdict(self)
        if not self.consistency:
            del d["consistency_lambda"], d["noise_draws"]
        return d


def consistency_loss(logits: torch.Tensor, draws: int) -> torch.Tensor:
    """TSS's consistency term on ``logits [draws * B, K]`` (copy-major: rows ``i*B .. (i+1)*B`` are draw ``i``).

    Mean over draws i and images of KL(p_mean || p_i) + H, where p_mean is the images' mean softmax over the draws.
    H is computed as TSS's code does (``_entropy(avg_softmax)``, inherited from Jeong & Shin's code): the entropy of
    softmax(p_mean), i.e. p_mean treated as logits, kept as is so the objective is TSS's.
    """
    chunks = logits.chunk(draws, dim=0)
    mean_p = torch.stack([F.softmax(c, dim=1) for c in chunks]).mean(0)
    entropy = -(F.softmax(mean_p, dim=1) * F.log_softmax(mean_p, dim=1)).sum(1)
    kl = [F.kl_div(F.log_softmax(c, dim=1), mean_p, reduction="none").sum(1) + entropy for c in chunks]
    return (sum(kl) / draws).mean()


def train_classifier(model: nn.Module, x: torch.Tensor, y: torch.Tensor, cfg: TrainConfig,
                     augment: Augment | None = None, device: str = "cpu", desc: str = "train",
                     loss_fn: LossFn | None = None) -> nn.Module:
    """Train ``model`` with Adam and cross-entropy (or ``loss_fn``) on (augmented) batches; returns it in eval mode.

    With ``cfg.consistency`` each batch is repeated ``cfg.noise_draws`` times (each copy augmented independently)
    and the loss is cross-entropy over all copies + ``cfg.consistency_lambda`` * :func:`consistency_loss`; an epoch
    then costs ``noise_draws`` forward/backward passes per image (as in TSS, whose ``--batch`` counts the copies).

    Shuffling and augmentation noise come from one generator seeded by ``cfg.seed``; parameter
    initialisation and anything drawn from torch's global generator (dropout) are seeded by the
    model store (``determinism.seeded_training``), which is how every checkpoint is trained.
    """
    if cfg.consistency and loss_fn is not None:
        raise BenchError(f"{desc}: consistency training (consistency_lambda / noise_draws) replaces the loss; it "
                         "cannot be combined with a defense's own loss_fn.")
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
                if cfg.consistency:
                    xb, yb = xb.repeat(cfg.noise_draws, *[1] * (xb.dim() - 1)), yb.repeat(cfg.noise_draws)
                if augment is not None:
                    xb = augment(xb, gen)
                if cfg.consistency:
                    logits = model(xb.to(device))
                    loss = F.cross_entropy(logits, yb.to(device)) \
                        + cfg.consistency_lambda * consistency_loss(logits, cfg.noise_draws)
                elif loss_fn is not None:
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
