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

``TrainConfig.optimizer`` / ``momentum`` / ``lr_schedule`` select TSS's schedule (SGD with momentum, the learning rate
cut by ``lr_gamma`` every ``lr_step`` epochs) instead of Adam with a cosine schedule; recorded only when used.

Resumable training: inside :func:`epoch_checkpoints` (the model store opens it around every training),
:func:`train_classifier` writes its whole state after every epoch (weights, optimiser, scheduler, its own and the
global generators) atomically, and a later call under the same path resumes from the last epoch written, with the
same final weights as an uninterrupted run.
"""
from __future__ import annotations

import contextlib
import io
import math
import random
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

import torch
import torch.nn.functional as F
from torch import nn

from benchmark.errors import BenchError
from benchmark.infra.io import atomic_write_bytes
from benchmark.infra.progress import progress_bar, say

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
    #: optimiser and learning-rate schedule: adam + cosine (per step, to 0), or TSS's sgd + step (x lr_gamma every
    #: lr_step epochs); non-default values only enter the config record
    optimizer: str = "adam"
    momentum: float = 0.0
    lr_schedule: str = "cosine"
    lr_step: int = 30
    lr_gamma: float = 0.1

    def __post_init__(self) -> None:
        if not self.consistency_lambda >= 0 or self.noise_draws < 1:
            raise BenchError(f"consistency training needs consistency_lambda >= 0 and noise_draws >= 1, got "
                             f"{self.consistency_lambda} and {self.noise_draws}.")
        if self.optimizer not in OPTIMIZERS or self.lr_schedule not in LR_SCHEDULES:
            raise BenchError(f"training: optimizer must be one of {OPTIMIZERS} and lr_schedule one of {LR_SCHEDULES}, "
                             f"got {self.optimizer!r} and {self.lr_schedule!r}.")
        if self.lr_step < 1 or not self.momentum >= 0 or (self.momentum and self.optimizer != "sgd"):
            raise BenchError(f"training: lr_step must be >= 1 and momentum >= 0 (sgd only), got lr_step {self.lr_step}, "
                             f"momentum {self.momentum} with {self.optimizer}.")

    @property
    def consistency(self) -> bool:
        """Whether the consistency objective (several draws per image, or lambda > 0) is on."""
        return self.consistency_lambda > 0 or self.noise_draws > 1

    def to_dict(self) -> dict:
        """The config-hash record: the consistency keys only when it is on, the optimiser / schedule keys only when
        they differ from Adam + cosine, so every existing hash stays."""
        d = asdict(self)
        if not self.consistency:
            del d["consistency_lambda"], d["noise_draws"]
        if self.optimizer == "adam":
            del d["optimizer"], d["momentum"]
        if self.lr_schedule == "cosine":
            del d["lr_schedule"], d["lr_step"], d["lr_gamma"]
        return d


OPTIMIZERS = ("adam", "sgd")
LR_SCHEDULES = ("cosine", "step")


def consistency_loss(logits: torch.Tensor, draws: int) -> torch.Tensor:
    """TSS's consistency term on ``logits [draws * B, K]`` (copy-major: rows ``i*B .. (i+1)*B`` are draw ``i``).

    Mean over draws i and images of KL(p_mean || p_i) + H, where p_mean is the images' mean softmax over the draws.
    H is computed as TSS's code does (``_entropy(avg_softmax)``, inherited from Jeong & Shin's code): the entropy of
    softmax(p_mean), i.e. p_mean treated as logits, kept as is so the objective is TSS's.
    """
    chunks = logits.chunk(draws, dim=0)
    log_p = torch.stack([F.log_softmax(c, dim=1) for c in chunks])  # [draws, B, K]
    # log p_mean in log space: TSS's F.kl_div(log p_i, p_mean) has the gradient log p_mean + 1 in its target, which
    # is -inf (and the step NaN) once a confident model's softmax underflows to 0 (measured: gaussian_blur at
    # lr 0.1 went NaN at step 81). Same value, finite gradient: d/dl [e^l (l - log p_i)] = e^l (l - log p_i + 1).
    log_mean_p = torch.logsumexp(log_p, dim=0) - math.log(draws)
    mean_p = log_mean_p.exp()
    entropy = -(F.softmax(mean_p, dim=1) * F.log_softmax(mean_p, dim=1)).sum(1)
    kl = [(mean_p * (log_mean_p - lp)).sum(1) + entropy for lp in log_p]
    return (sum(kl) / draws).mean()


class EpochCheckpoints:
    """Where :func:`train_classifier` keeps its per-epoch state: ``<base>.<i>.pt`` for its i-th call within one
    training (a defense may train more than one network under one model spec), each call taking the next i."""

    def __init__(self, base: Path):
        self.base = Path(base)
        self.calls = 0

    def next_path(self) -> Path:
        """The state file of the next :func:`train_classifier` call."""
        path = self.base.with_name(f"{self.base.name}.{self.calls}.pt")
        self.calls += 1
        return path

    def files(self) -> list[Path]:
        """Every state file written under this base (removed once the final checkpoint is saved)."""
        return sorted(self.base.parent.glob(f"{self.base.name}.*.pt"))


_CHECKPOINTS: ContextVar[EpochCheckpoints | None] = ContextVar("epoch_checkpoints", default=None)


@contextlib.contextmanager
def epoch_checkpoints(base: Path | None) -> Iterator[EpochCheckpoints | None]:
    """Within the block, :func:`train_classifier` saves its state after every epoch under ``base`` and resumes from
    it (``None``: no checkpoints). The model store opens this around each training, keyed by the config hash."""
    ckpt = EpochCheckpoints(base) if base is not None else None
    token = _CHECKPOINTS.set(ckpt)
    try:
        yield ckpt
    finally:
        _CHECKPOINTS.reset(token)


def _rng_state() -> dict:
    """The global generators (torch CPU and CUDA, numpy, Python): training may draw from them (dropout)."""
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    return {"torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
            "numpy": [kind, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, gauss],
            "python": random.getstate()}


def _set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    kind, keys, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
    random.setstate(state["python"])


def _save_state(path: Path, fingerprint: dict, epoch: int, model: nn.Module, opt: torch.optim.Optimizer,
                sched: torch.optim.lr_scheduler.LRScheduler, gen: torch.Generator) -> None:
    """Everything the rest of the training depends on after ``epoch`` epochs, written atomically."""
    buf = io.BytesIO()
    torch.save({"fingerprint": fingerprint, "epoch": epoch, "model": model.state_dict(), "opt": opt.state_dict(),
                "sched": sched.state_dict(), "gen": gen.get_state(), "rng": _rng_state()}, buf)
    atomic_write_bytes(path, buf.getvalue())


def _load_state(path: Path, fingerprint: dict, device: str, desc: str) -> dict | None:
    """The state saved at ``path`` when it belongs to this training (same fingerprint), else None."""
    if not path.exists():
        return None
    try:
        state = torch.load(path, map_location=device, weights_only=False)  # our own file, in the user's cache
    except Exception as exc:  # an atomic write leaves no torn file; anything else: train from the start
        say(f"{desc}: ignoring unreadable epoch checkpoint {path} ({type(exc).__name__}); training from epoch 1")
        return None
    if state.get("fingerprint") != fingerprint:
        say(f"{desc}: epoch checkpoint {path} belongs to another training; training from epoch 1")
        return None
    return state


def _optimizer(model: nn.Module, cfg: TrainConfig) -> torch.optim.Optimizer:
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
    return torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)


def train_classifier(model: nn.Module, x: torch.Tensor, y: torch.Tensor, cfg: TrainConfig,
                     augment: Augment | None = None, device: str = "cpu", desc: str = "train",
                     loss_fn: LossFn | None = None,
                     on_epoch: Callable[[int], None] | None = None) -> nn.Module:
    """Train ``model`` with cross-entropy (or ``loss_fn``) on (augmented) batches; returns it in eval mode.

    Optimiser and schedule from ``cfg``: Adam with a per-step cosine schedule (default), or SGD with momentum and a
    step schedule (x ``lr_gamma`` every ``lr_step`` epochs, TSS's ``StepLR``).
    With ``cfg.consistency`` each batch is repeated ``cfg.noise_draws`` times (each copy augmented independently)
    and the loss is cross-entropy over all copies + ``cfg.consistency_lambda`` * :func:`consistency_loss`; an epoch
    then costs ``noise_draws`` forward/backward passes per image (as in TSS, whose ``--batch`` counts the copies).

    Shuffling and augmentation noise come from one generator seeded by ``cfg.seed``; parameter
    initialisation and anything drawn from torch's global generator (dropout) are seeded by the
    model store (``determinism.seeded_training``), which is how every checkpoint is trained.
    Inside :func:`epoch_checkpoints` the state is saved after every epoch and a rerun resumes after the last
    saved epoch; ``on_epoch(epoch)`` is called after each epoch's state is saved (tests interrupt there).
    """
    if cfg.consistency and loss_fn is not None:
        raise BenchError(f"{desc}: consistency training (consistency_lambda / noise_draws) replaces the loss; it "
                         "cannot be combined with a defense's own loss_fn.")
    gen = torch.Generator().manual_seed(cfg.seed)
    model.to(device).train()
    opt = _optimizer(model, cfg)
    n = len(x)
    per_epoch = (n + cfg.batch_size - 1) // cfg.batch_size
    steps = cfg.epochs * per_epoch
    if cfg.lr_schedule == "step":  # stepped once per epoch, as TSS's StepLR
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=cfg.lr_step, gamma=cfg.lr_gamma)
    else:
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(steps, 1))
    ckpt = _CHECKPOINTS.get()
    path = ckpt.next_path() if ckpt is not None else None
    fingerprint = {"config": cfg.to_dict(), "desc": desc, "n": n}
    first = 0
    state = _load_state(path, fingerprint, device, desc) if path is not None else None
    if state is not None:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"])
        gen.set_state(state["gen"])
        _set_rng_state(state["rng"])
        first = state["epoch"]
        say(f"{desc}: resuming after epoch {first} of {cfg.epochs} ({path.name})")
    step = first * per_epoch
    # after a resume the bar counts the remaining steps only, so its rate and ETA are this process's
    with progress_bar(total=steps - step, desc=desc if not first else f"{desc} (from epoch {first + 1})",
                      unit="step") as bar:
        for epoch in range(first, cfg.epochs):
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
                if cfg.lr_schedule == "cosine":
                    sched.step()
                step += 1
                # the postfix first, not redrawn: update redraws at tqdm's pace (and a due log line shows it)
                bar.set_postfix_str(f"epoch {epoch + 1}/{cfg.epochs}, loss {loss.item():.3f}", refresh=False)
                bar.update(1)
            if cfg.lr_schedule == "step":
                sched.step()
            if path is not None:
                _save_state(path, fingerprint, epoch + 1, model, opt, sched, gen)
            if on_epoch is not None:
                on_epoch(epoch + 1)
    return model.eval()


@torch.no_grad()
def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch_size: int = 512, device: str = "cpu") -> float:
    """Plain accuracy of ``model`` on (x, y)."""
    model.eval()
    correct = 0
    for i in range(0, len(x), batch_size):
        correct += (model(x[i:i + batch_size].to(device)).argmax(1).cpu() == y[i:i + batch_size]).sum().item()
    return correct / max(len(x), 1)
