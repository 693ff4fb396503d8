"""``benchmark.evaluate``: run a suite on one defense from Python (e.g. a notebook) and get its summary.

It runs what ``bench run`` runs, through the same code path (``benchmark.run.driver.run_suite``): the same run
folder (config.json, rows.jsonl, summary.csv, table.md, ...), the same seeds, so the same numbers as
``bench run --defense REF`` with the same options. See docs/python-api.md.
"""
from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from benchmark.errors import BenchError

if TYPE_CHECKING:  # pragma: no cover - typing only
    import pandas as pd

    from benchmark.defense import Defense


@dataclass(frozen=True)
class Evaluation:
    """What ``evaluate`` returns: the run's summary (summary.csv as a DataFrame) and its run folder."""

    summary: pd.DataFrame
    folder: Path

    @property
    def table(self) -> str:
        """The run's table as ``bench run`` prints it (table.md)."""
        return (self.folder / "table.md").read_text()


def evaluate(defense: Defense | str, suite: str = "semantic", transformations: str | list[str] | None = None,
             profile: str | None = None, *, datasets: str | list[str] | None = None, n_examples: int | None = None,
             seed: int = 0, device: str = "cpu", certify: str | None = None, out: str | Path | None = None,
             resume: bool = False, workers: int | None = None, data_root: str | Path | None = None,
             offline: bool = False, allow_train: bool = True, print_table: bool = False) -> Evaluation:
    """Run ``suite`` on ``defense`` as ``bench run`` does and return its summary and run folder.

    Args:
        defense: a registered name (``"vanilla"``), a plugin reference (``"my_defense.py:MyDefense"``,
            ``"pkg.mod:Class"``), or a ``benchmark.defense.Defense`` instance. An instance is evaluated as it is
            (the suite's config for its name is not applied), under its ``name``, in this process only: pass
            ``workers`` 1 or None (worker processes could not share the object).
        suite: a packaged suite's name or a suite YAML file (``bench list suites``).
        transformations: restrict to these (``--transformation``); datasets: restrict to these (``--dataset``).
        profile: ``smoke``, ``default`` (None), ``paper``, ...; the other keywords are ``bench run``'s options.

    Returns:
        ``Evaluation(summary, folder)``: ``summary`` equals ``pandas.read_csv(folder / "summary.csv")``.
    """
    import pandas as pd

    from benchmark.defense import Defense
    from benchmark.defenses import using_instance
    from benchmark.infra.environment import configure_threads, resolve_device
    from benchmark.run.driver import run_suite
    from benchmark.run.options import RunOptions
    from benchmark.suites import load_suite

    if isinstance(defense, Defense):
        if workers not in (None, 1):
            raise BenchError(f"a Defense instance runs in this process only; pass workers=1 (got {workers}), or "
                             "give its name or 'file.py:Class' to use worker processes.")
        workers, bound = 1, using_instance(defense)
    elif isinstance(defense, str):
        bound = nullcontext(defense)
    else:
        raise BenchError(f"defense must be a benchmark.defense.Defense instance, a registered name (bench list "
                         f"defenses) or 'file.py:Class', got {type(defense).__name__}.")
    configure_threads()
    loaded = load_suite(suite)
    with bound as ref:
        opts = RunOptions(profile=profile or "default", seed=seed, device=resolve_device(device),
                          datasets=_listed(datasets), defenses=[ref], transformations=_listed(transformations),
                          n_examples=n_examples, data_root=Path(data_root) if data_root is not None else None,
                          offline=offline, allow_train=allow_train and not offline, out=Path(out) if out else None,
                          resume=resume, certify=certify, workers=workers, print_table=print_table)
        folder = run_suite(loaded, opts)
    return Evaluation(pd.read_csv(folder / "summary.csv"), Path(folder))


def _listed(value: str | list[str] | None) -> list[str] | None:
    """One name or several, as the run options take them."""
    return [value] if isinstance(value, str) else (list(value) if value is not None else None)
