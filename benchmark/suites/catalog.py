"""Load a suite of any kind by name or path: the one place that knows every kind of suite."""
from __future__ import annotations

from benchmark.suites.corruption_suite import CorruptionSuite, parse_corruption_suite
from benchmark.suites.loader import Suite, parse_suite, read_suite_file


def load_suite(name_or_path: str) -> Suite | CorruptionSuite:
    """Load a packaged suite by name, or a YAML file by path (``kind: corruptions`` -> a corruption suite)."""
    raw, path = read_suite_file(name_or_path)
    if isinstance(raw, dict) and raw.get("kind") == "corruptions":
        return parse_corruption_suite(raw, str(path))
    return parse_suite(raw, str(path))
