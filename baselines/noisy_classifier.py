"""Deprecated path: the smoothing-classifier mix-in moved to ``baselines.common.noisy_classifier``.

Kept for one release so that defenses written against the old path still load; importing it warns.
"""
from __future__ import annotations

import warnings

from baselines.common.noisy_classifier import NoisyClassifier

warnings.warn("baselines.noisy_classifier moved to baselines.common.noisy_classifier; this path goes in the next "
              "release", DeprecationWarning, stacklevel=2)

__all__ = ["NoisyClassifier"]
