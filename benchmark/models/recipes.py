"""Deprecated path: the classifier recipes moved to ``benchmark.recipes`` (and the face, ``benchmark.api``).

Kept for one release so that a defense written against the earlier submission template (``from
benchmark.models.recipes import classifier_spec``) still loads; importing it warns.
"""
from __future__ import annotations

import warnings

from benchmark.recipes import RECIPE_VERSION, classifier_spec, train_config

warnings.warn("benchmark.models.recipes moved to benchmark.recipes; import classifier_spec from benchmark.api "
              "(this path goes in the next release)", DeprecationWarning, stacklevel=2)

__all__ = ["RECIPE_VERSION", "classifier_spec", "train_config"]
