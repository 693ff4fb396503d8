"""Suites: YAML files expanding to tasks dataset x transformation x defense x budgets."""
from benchmark.suites.catalog import load_suite
from benchmark.suites.loader import Profile, Suite, Task, suite_names

__all__ = ["Profile", "Suite", "Task", "load_suite", "suite_names"]
