"""Reproducible training: every random draw seeded by the model's config, and a digest of the weights.

A checkpoint is keyed by the hash of its training config; the same config must give the same
weights. Training loops draw shuffling and augmentation noise from their own ``torch.Generator``
(seeded by the config), but model construction (parameter initialisation), dropout and any library
code that reaches for torch's *global* generator would otherwise depend on whatever ran before.
:func:`seeded_training` therefore runs ``build`` + ``train`` with torch's global generator (CPU and
CUDA), numpy's and Python's forked and seeded from the config hash, and with
``torch.use_deterministic_algorithms(True)``, so an op without a deterministic kernel raises
instead of silently changing the weights.

What is promised: bitwise-identical weights for the same config on the same *training
environment* (:func:`training_environment`: torch version, device, CPU instruction set or GPU
model, thread count). Across environments floating-point reductions may be ordered differently,
so weights differ slightly and tables agree only within sampling error; ``bench train --verify``
reports such entries as "not comparable" rather than "different".
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import random
from collections.abc import Iterator

import numpy as np
import torch
from torch import nn


def seed_from_hash(config_hash: str) -> int:
    """A 63-bit seed derived from a config hash (hex), so each config has its own random stream."""
    return int(config_hash[:15], 16)


@contextlib.contextmanager
def seeded_training(seed: int, device: str = "cpu") -> Iterator[None]:
    """Run a block with all global generators seeded by ``seed`` and deterministic kernels enforced.

    The caller's generator states and determinism setting are restored afterwards, so training a
    model never perturbs the random stream of whatever runs next (e.g. a certification).
    """
    cuda = str(device).startswith("cuda") and torch.cuda.is_available()
    if cuda:
        # cuBLAS needs a fixed workspace to be deterministic; must be set before its first use
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    was_deterministic = torch.are_deterministic_algorithms_enabled()
    was_warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    py_state, np_state = random.getstate(), np.random.get_state()
    devices = list(range(torch.cuda.device_count())) if cuda else []
    try:
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(seed)  # seeds CPU and every CUDA device
            random.seed(seed)
            np.random.seed(seed % 2 ** 32)
            torch.use_deterministic_algorithms(True)
            yield
    finally:
        torch.use_deterministic_algorithms(was_deterministic, warn_only=was_warn_only)
        random.setstate(py_state)
        np.random.set_state(np_state)


def weights_digest(model_or_state: nn.Module | dict) -> str:
    """sha256 over the tensors of a state dict (names, dtypes, shapes and values in key order).

    Unlike the checkpoint file's sha256 this does not depend on how ``torch.save`` lays out the
    file, so it identifies the weights themselves.
    """
    state = model_or_state.state_dict() if isinstance(model_or_state, nn.Module) else model_or_state
    h = hashlib.sha256()
    for name in sorted(state):
        t = state[name].detach().to("cpu").contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def max_weight_difference(a: dict, b: dict) -> float:
    """Largest absolute difference between two state dicts (inf when their keys or shapes differ)."""
    if set(a) != set(b):
        return float("inf")
    worst = 0.0
    for k in a:
        ta, tb = a[k].detach().cpu(), b[k].detach().cpu()
        if ta.shape != tb.shape:
            return float("inf")
        if ta.numel() and ta.is_floating_point():
            worst = max(worst, float((ta.double() - tb.double()).abs().max()))
        elif not torch.equal(ta, tb):
            return float("inf")
    return worst


def training_environment(device: str = "cpu") -> dict:
    """What bitwise reproducibility of training depends on (recorded with every checkpoint)."""
    dev = str(device)
    if dev.startswith("cuda") and torch.cuda.is_available():
        hardware = torch.cuda.get_device_name(torch.device(dev))
    else:
        hardware = torch.backends.cpu.get_cpu_capability()
    return {"torch": torch.__version__, "device": dev.split(":")[0], "hardware": hardware,
            "machine": platform.machine(), "threads": torch.get_num_threads()}


#: keys of :func:`training_environment` that must agree for weights to be compared bitwise
COMPARABLE_KEYS = ("torch", "device", "hardware", "machine", "threads")


def comparable(recorded: dict | None, current: dict) -> bool:
    """Whether weights trained under ``recorded`` can be expected to equal those trained under ``current``."""
    return recorded is not None and all(recorded.get(k) == current.get(k) for k in COMPARABLE_KEYS)
