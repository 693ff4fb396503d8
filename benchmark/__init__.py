"""Semantic robustness benchmark: the harness (registry, data, models, certification, runner, reports).

Importing this package is cheap: submodules, defenses and optional heavy
dependencies are imported on first use.
"""
from benchmark.infra.version import __version__

__all__ = ["__version__", "evaluate", "Evaluation"]


def __getattr__(name: str):
    """``benchmark.evaluate`` and ``benchmark.Evaluation``, imported on first use (``import benchmark`` stays light)."""
    if name in ("evaluate", "Evaluation"):
        from benchmark import evaluation

        return getattr(evaluation, name)
    raise AttributeError(f"module 'benchmark' has no attribute {name!r}")
