"""Provenance recorded with every run: versions, git commit, hardware, threads."""
from __future__ import annotations

import os
import platform
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import torch

from benchmark.infra.version import __version__

PACKAGES = ("torch", "torchvision", "kornia", "numpy", "scipy", "pandas", "scikit-learn", "robustbench", "torchattacks")


def _version(pkg: str) -> str | None:
    try:
        return version(pkg)
    except PackageNotFoundError:
        return None


def git_commit() -> str | None:
    """Commit of the source tree the package runs from, when it is a git checkout."""
    root = Path(__file__).resolve().parents[2]  # benchmark/infra/environment.py -> the checkout
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def configure_threads(processes: int = 1) -> int:
    """Use cores / processes torch threads (oversubscription on small machines costs 20-40x)."""
    n = int(os.environ.get("BENCH_THREADS", 0)) or max(1, (os.cpu_count() or 1) // max(processes, 1))
    torch.set_num_threads(n)
    return n


def _fp32_backends() -> dict:
    """The backends with a float32 precision setting (TF32 on CUDA matmuls and cuDNN convolutions and RNNs,
    reduced precision in oneDNN on CPUs that have it)."""
    b = torch.backends
    return {"default": b, "cuda.matmul": b.cuda.matmul, "cudnn": b.cudnn, "cudnn.conv": b.cudnn.conv,
            "cudnn.rnn": b.cudnn.rnn, "mkldnn": b.mkldnn, "mkldnn.matmul": b.mkldnn.matmul,
            "mkldnn.conv": b.mkldnn.conv, "mkldnn.rnn": b.mkldnn.rnn}


def float32_precision() -> dict:
    """What float32 arithmetic torch is set to use (recorded with every run)."""
    return {**{name: m.fp32_precision for name, m in _fp32_backends().items()},
            "matmul_precision": torch.get_float32_matmul_precision()}


def strict_float32() -> dict:
    """IEEE float32 everywhere: TF32 off for CUDA matmuls and cuDNN convolutions (cuDNN convolutions use
    TF32 by default), and oneDNN's reduced precision off. The pixel-bound slacks, GSmooth's float32 terms
    and the verifiers' margin tolerances assume float32 round-off; TF32 keeps 10 mantissa bits, ~1e-3.
    Called whenever certificates may be computed (every CLI command that runs models, every run worker).
    Uses only torch's fp32_precision API (mixing it with the legacy allow_tf32 flags is an error in torch)."""
    torch.set_float32_matmul_precision("highest")
    for m in _fp32_backends().values():
        m.fp32_precision = "ieee"
    return float32_precision()


def environment(device: str) -> dict:
    return {
        "package_version": __version__,
        "git_commit": git_commit(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "device": device,
        "cuda": torch.cuda.get_device_name(0) if device.startswith("cuda") and torch.cuda.is_available() else None,
        "versions": {p: _version(p) for p in PACKAGES},
        "float32": float32_precision(),
    }


def resolve_device(device: str) -> str:
    """'auto' -> cuda when available, else cpu; a requested but missing CUDA is an error. Also sets
    IEEE float32 arithmetic (:func:`strict_float32`): every command that runs models resolves its device."""
    from benchmark.errors import BenchError

    strict_float32()

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise BenchError(f"--device {device} requested but CUDA is not available here; use --device cpu.")
    return device
