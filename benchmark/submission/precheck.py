"""The checker's pre-run rules: prepare the defense on its first supported task and exercise it on test images.

Defense code runs inside ``defense_code`` (datasets refuse the test split, the sandbox refuses their files);
the harness loads the test images and the lookup traps' training images itself, before. A small Monte-Carlo protocol is used: these checks test behaviour, not numbers.
"""
from __future__ import annotations

import dataclasses

from benchmark.audit.canary import CANARY_IMAGES, check_canary, lookup_traps
from benchmark.audit.checker import CHECK_IMAGES, CheckReport, check_outputs
from benchmark.audit.statistics import Protocol
from benchmark.datasets.base import TestSplitAccess, defense_code, test_subset
from benchmark.errors import BenchError
from benchmark.infra import sandbox


def _first_supported(cls, tasks: list, report: CheckReport) -> tuple | None:
    """(defense, task, transformation) of the first task the defense supports, or None (reported)."""
    from benchmark.transformations import get_transformation

    for task in tasks:
        try:
            defense = cls(**task.defense_config)
            t = get_transformation(task.transformation)
            if defense.supports(t):
                return defense, task, t
        except Exception as exc:  # noqa: BLE001 - the submission's failure, reported
            report.add("prepare", "error", f"{task.label}: constructing or supports() raised "
                                           f"{type(exc).__name__}: {exc}")
            return None
    report.add("prepare", "error", f"'{cls.__name__}' supports none of the suite's transformations "
                                   f"{sorted({t.transformation for t in tasks})}.")
    return None


def _context(task, t, opts):
    from benchmark.datasets import get_dataset
    from benchmark.models.store import ModelStore
    from benchmark.run.kinds.semantic import build_context

    models = ModelStore(allow_train=opts.allow_train, device=opts.device, log=lambda m: None)
    ctx = build_context(task, opts, models, t)
    if getattr(task, "corruption", None):  # corruption suites prepare on the clean dataset
        ctx.dataset = get_dataset(get_dataset(task.dataset).clean_dataset)
    ctx.smoothing = dataclasses.replace(ctx.smoothing, n0=min(ctx.smoothing.n0, 16), n=min(ctx.smoothing.n, 100),
                                        n_predict=min(ctx.smoothing.n_predict or 100, 100))
    return ctx


def _prepare(defense, ctx, label: str, report: CheckReport) -> bool:
    try:
        defense.prepare(ctx)
        return True
    except TestSplitAccess as exc:
        report.add("test_split", "error", f"{label}: {exc}")
    except BenchError as exc:
        report.add("prepare", "error", f"{label}: {exc}")
    except Exception as exc:  # noqa: BLE001
        report.add("prepare", "error", f"{label}: prepare() raised {type(exc).__name__}: {exc}")
    return False


def precheck(cls, ref: str, suite, opts, report: CheckReport) -> None:
    """Rules prepare, outputs, statistics, determinism, randomized and test_split on the first supported task."""
    from benchmark.run.plan import resolve_profile

    report.ran("prepare")
    report.ran("test_split")
    profile = resolve_profile(suite, opts)
    found = _first_supported(cls, suite.tasks(profile, opts.seed, opts.datasets, [ref], opts.transformations), report)
    if found is None:
        return
    defense, task, t = found
    ctx = _context(task, t, opts)
    x, y = ctx.dataset.load("test", opts.data_root, opts.offline)  # the harness's, before any defense code runs
    canary_idx = sorted(set(test_subset(task.profile.n_examples, task.profile.skip, len(x)))
                        | set(test_subset(CANARY_IMAGES, task.profile.skip, len(x))))
    traps = lookup_traps(x, y, *ctx.dataset.load("train", opts.data_root, opts.offline))
    protocol = Protocol.of(ctx.smoothing)
    with sandbox.allow_writes([ctx.store.cache_dir / "checkpoints"]), defense_code(ref):
        if not _prepare(defense, ctx, task.label, report):
            return
        check_outputs(defense, x[:CHECK_IMAGES], t, list(task.budgets), ctx.dataset.spec.num_classes, opts.seed,
                      report, protocol)
        if report.errors():
            return
        try:
            report.canary = check_canary(defense, t, x[canary_idx], y[canary_idx], opts.seed, report, traps)
        except TestSplitAccess as exc:
            report.add("test_split", "error", str(exc))
        except Exception as exc:  # noqa: BLE001
            report.add("outputs", "error", f"predict() raised {type(exc).__name__} on the canary images: {exc}")

