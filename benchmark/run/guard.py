"""Running defense code: its exceptions become one clear error, its outputs are checked."""
from __future__ import annotations

import torch

from benchmark.datasets.base import defense_code
from benchmark.errors import BenchError


def guard(task, what: str, fn):
    """Run defense code; turn its exceptions into one clear error (finished rows stay on disk)."""
    try:
        with defense_code(task.defense):
            return fn()
    except BenchError:
        raise
    except Exception as exc:
        raise BenchError(f"defense '{task.defense}' raised during {what} on {task.label}: "
                         f"{type(exc).__name__}: {exc}. Finished rows are kept; fix the defense and rerun "
                         "with --resume.") from exc


def check_labels(task, pred, n: int) -> torch.Tensor:
    """``pred`` if it is an int tensor of shape (n,), else a clear error naming the defense."""
    if not torch.is_tensor(pred) or pred.shape != (n,) or pred.is_floating_point():
        shape = tuple(pred.shape) if torch.is_tensor(pred) else type(pred).__name__
        raise BenchError(f"defense '{task.defense}' predict() must return an int64 tensor of shape ({n},), "
                         f"got {shape}{'' if not torch.is_tensor(pred) else ' ' + str(pred.dtype)}.")
    return pred
