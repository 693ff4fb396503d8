"""Dense-grid outcomes shared by deterministic defenses that predict with the same classifier.

The suite's verifiers (semanify, interval, enumeration, deepg) predict with the vanilla CNN, so in one
process the dense grid of an image, transformation and budget is evaluated once for all of them. Only
defenses whose ``predict`` is ``ClassifierDefense.predict`` (the argmax of ``model``) share outcomes;
the key holds a digest of the model's weights, so two checkpoints never share.
"""
from __future__ import annotations

import dataclasses
import hashlib
import weakref
from collections import OrderedDict
from collections.abc import Callable

import torch

from attacks.base import AttackResult
from benchmark.defense import ClassifierDefense

MAX_ENTRIES = 20_000
_RESULTS: OrderedDict[tuple, AttackResult] = OrderedDict()
_DIGESTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def model_digest(model: torch.nn.Module) -> str:
    """sha256 of the model's parameters and buffers (computed once per model object)."""
    if model not in _DIGESTS:
        h = hashlib.sha256()
        for name, t in model.state_dict().items():
            h.update(name.encode())
            h.update(t.detach().cpu().contiguous().numpy().tobytes())
        _DIGESTS[model] = h.hexdigest()
    return _DIGESTS[model]


def cached(defense, x: torch.Tensor, transformation, budget: float, points, run: Callable[[], AttackResult]
           ) -> AttackResult:
    """``run()``'s outcome, shared between defenses predicting with the same classifier's argmax."""
    if not isinstance(defense, ClassifierDefense) or type(defense).predict is not ClassifierDefense.predict:
        return run()
    key = (model_digest(defense.model), transformation.name, float(budget), repr(points),
           hashlib.sha256(x.detach().cpu().contiguous().numpy().tobytes()).hexdigest())
    if key not in _RESULTS:
        _RESULTS[key] = run()
        if len(_RESULTS) > MAX_ENTRIES:
            _RESULTS.popitem(last=False)
    res = _RESULTS[key]
    return dataclasses.replace(res, theta=list(res.theta), info=dict(res.info), predict=list(res.predict))
