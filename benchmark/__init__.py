"""Semantic robustness benchmark: the harness (registry, data, models, certification, runner, reports).

Importing this package is cheap: submodules, defenses and optional heavy
dependencies are imported on first use.
"""
__version__ = "0.1.0"
