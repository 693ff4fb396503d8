"""What every smoothed classifier of the form "base model on one noise draw" shares (TSS, SPT).

A defense mixing this in provides ``self.model``, ``self.device``, ``self.num_classes``, ``self.smoothing``
and ``_noisy(z, gen)`` (one noise draw per row of ``z``: the base classifier's inputs); this gives the
Monte-Carlo label sampler that CERTIFY/PREDICT consume, ``noisy_logits`` for the attacks and PREDICT
per image. One place, so the hot sampling path is written (and optimised) once.
"""
from __future__ import annotations

from collections.abc import Callable

import torch

from benchmark.api import Transformation, predict_many


class NoisyClassifier:
    """Sampler, noisy logits and PREDICT from ``_noisy`` and ``model``."""

    def _sampler(self, x: torch.Tensor, t: Transformation | None = None) -> Callable[[int, torch.Generator],
                                                                                   torch.Tensor]:
        """Labels of the base model on ``k`` noise draws of the single image ``x [1,C,H,W]`` (``t``: unused,
        kept so callers can name the transformation the noise belongs to)."""
        x = x.to(self.device)

        @torch.no_grad()
        def sample_labels(k: int, gen: torch.Generator) -> torch.Tensor:
            return self.model(self._noisy(x.expand(k, -1, -1, -1), gen)).argmax(1)

        return sample_labels

    def _multi_sampler(self, images: torch.Tensor) -> Callable[[list[tuple[int, int]], torch.Generator],
                                                                torch.Tensor]:
        """Labels of the base model on noise draws of several images ``[K,C,H,W]`` in one batch: ``pieces``
        = [(image index, copies), ...] (``benchmark.certify.smoothing.sample_counts_many``)."""
        images = images.to(self.device)

        @torch.no_grad()
        def sample_labels(pieces: list[tuple[int, int]], gen: torch.Generator) -> torch.Tensor:
            x = torch.cat([images[i:i + 1].expand(k, -1, -1, -1) for i, k in pieces])
            return self.model(self._noisy(x, gen)).argmax(1)

        return sample_labels

    def noisy_logits(self, x: torch.Tensor, transformation: Transformation,
                     generator: torch.Generator) -> torch.Tensor:
        """One smoothing-noise draw per image (differentiable in x)."""
        return self.model(self._noisy(x.to(self.device), generator))

    def predict(self, x: torch.Tensor, transformation: Transformation, generator: torch.Generator) -> torch.Tensor:
        """PREDICT of the smoothed classifier per image (abstain = -1); the images' samples share batches."""
        out = [label for label, _ in predict_many(self._multi_sampler(x), len(x), self.num_classes,
                                                  self.smoothing, generator)]
        return torch.tensor(out, dtype=torch.int64)
