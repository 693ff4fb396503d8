"""What the harness hands a defense in ``prepare``: data, transformation, models, protocol."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from benchmark.certify.smoothing import SmoothingParams
from benchmark.datasets.base import Dataset
from benchmark.models.store import ModelSpec, ModelStore
from benchmark.transformations.base import Transformation


@dataclass
class Context:
    """Everything a defense may use to get ready for one task: never the test split or its labels.

    Attributes:
        dataset: the dataset (``dataset.spec`` has classes, shape, mean/std); while defense code runs it
            loads the ``train`` split only (``train_data()``), the test split is refused.
        transformation: the task's transformation.
        smoothing: the profile's Monte-Carlo protocol (n0, n, alpha, batch size).
        store: resolves model specs to weights (zoo, cache or training).
        device: torch device string.
        seed: the run seed (training seeds are part of model configs instead).
        profile: the profile name and its extra settings (e.g. training epochs).
    """

    dataset: Dataset
    transformation: Transformation
    smoothing: SmoothingParams
    store: ModelStore
    device: str = "cpu"
    seed: int = 0
    data_root: Path | None = None
    offline: bool = False
    profile: dict[str, Any] = field(default_factory=dict)
    budgets: tuple[float, ...] = ()  # the task's budgets (0 included), in the transformation's units
    artifacts_dir: Path | None = None  # where a defense may write pictures or logs for this run
    _train: tuple[torch.Tensor, torch.Tensor] | None = None

    def train_data(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The training split (loaded once, only when a model actually has to be trained)."""
        if self._train is None:
            self._train = self.dataset.load("train", self.data_root, self.offline)
        return self._train

    def model(self, spec: ModelSpec) -> nn.Module:
        """Load (zoo/cache) or train the model described by ``spec``, on ``self.device``."""
        return self.store.get(spec).model.to(self.device).eval()
