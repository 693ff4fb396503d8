"""Provenance recorded with every run: versions, git commit, hardware, threads."""
from __future__ import annotations

import os
import platform
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import torch

import benchmark

PACKAGES = ("torch", "torchvision", "kornia", "numpy", "scipy", "pandas", "scikit-learn", "robustbench", "torchattacks")


def _version(pkg: str) -> str | None:
    try:
        return version(pkg)
    except PackageNotFoundError:
        return None


def git_commit() -> str | None:
    """Commit of the source tree the package runs from, when it is a git checkout."""
    root = Path(benchmark.__file__).resolve().parent.parent
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


def environment(device: str) -> dict:
    return {
        "package_version": benchmark.__version__,
        "git_commit": git_commit(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "device": device,
        "cuda": torch.cuda.get_device_name(0) if device.startswith("cuda") and torch.cuda.is_available() else None,
        "versions": {p: _version(p) for p in PACKAGES},
    }


def resolve_device(device: str) -> str:
    """'auto' -> cuda when available, else cpu; a requested but missing CUDA is an error."""
    from benchmark.errors import BenchError

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise BenchError(f"--device {device} requested but CUDA is not available here; use --device cpu.")
    return device
