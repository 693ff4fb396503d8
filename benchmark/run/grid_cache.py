"""Dense-grid outcomes shared by deterministic defenses that predict with the same classifier.

The suite's verifiers (semanify, interval, enumeration, deepg) predict with the vanilla CNN, so the dense
grid of an image, transformation and budget is evaluated once for all of them: in memory within a process,
and through files in a folder of the run (``share_in``) between the worker processes of one run, which may
evaluate the vanilla task and a verifier's task apart. Only defenses whose ``predict`` is
``ClassifierDefense.predict`` (the argmax of ``model``) share outcomes; the key holds a digest of the
model's weights, so two checkpoints never share. An outcome depends on its key alone, so a file written by
another worker, or by an earlier invocation of a resumed run, is the outcome this worker would compute.
"""
from __future__ import annotations

import dataclasses
import hashlib
import pickle
import weakref
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

import torch

from attacks.base import AttackResult
from attacks.grid import share_outcomes
from benchmark.defense import ClassifierDefense
from benchmark.infra import sandbox
from benchmark.infra.io import atomic_write_bytes

MAX_ENTRIES = 2_000
_RESULTS: OrderedDict[tuple, AttackResult] = OrderedDict()
_DIGESTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_SHARED: list[Path] = []  # the folder outcomes are also kept in (none: this process only)


def share_in(folder: Path | None) -> None:
    """Share dense grid outcomes through :func:`cached` (installed in ``attacks.grid``): in memory within this
    process, and also as files in ``folder`` (harness-owned, inside the run folder; None: memory only), read by
    every worker."""
    _SHARED[:] = [Path(folder)] if folder is not None else []
    share_outcomes(cached)


def _load(name: str) -> AttackResult | None:
    if not _SHARED:
        return None
    with sandbox.harness():  # the run folder is closed to defense code, not to the harness
        try:
            return pickle.loads((_SHARED[0] / name).read_bytes())
        except (OSError, EOFError, pickle.UnpicklingError):
            return None


def _save(name: str, res: AttackResult) -> None:
    if _SHARED:
        with sandbox.harness():
            _SHARED[0].mkdir(parents=True, exist_ok=True)
            # a cache: _load recomputes a missing or unreadable file, so no fsync (it was ~6 % of vanilla's rows)
            atomic_write_bytes(_SHARED[0] / name, pickle.dumps(res), durable=False)


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
        name = hashlib.sha256(repr(key).encode()).hexdigest()[:32] + ".pkl"
        res = _load(name)
        if res is None:
            res = run()
            _save(name, res)
        _RESULTS[key] = res
        if len(_RESULTS) > MAX_ENTRIES:
            _RESULTS.popitem(last=False)
    res = _RESULTS[key]
    return dataclasses.replace(res, theta=list(res.theta), info=dict(res.info), predict=list(res.predict))
