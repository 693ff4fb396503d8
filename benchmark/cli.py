"""The ``bench`` command line: run suites, train the model zoo, list registries."""
from __future__ import annotations

import argparse
import os
import sys
import textwrap
from pathlib import Path

from benchmark.errors import BenchError

EXAMPLES = {
    "run": "bench run --suite semantic\n  bench run --suite semantic --profile smoke --n-examples 5 --out runs/try\n"
           "  bench run --suite semantic --resume            # continue the latest interrupted run\n"
           "  bench run --suite semantic --dataset cifar10 --data-root ~/data --profile paper --device cuda",
    "train": "bench train --suite semantic                   # (re)build the packaged zoo for the suite's datasets",
    "list": "bench list transformations\n  bench list defenses\n  bench list datasets\n  bench list suites",
}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bench", description="Certified and empirical robustness against semantic transformations.",
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="examples:\n  " + "\n  ".join(EXAMPLES.values()))
    sub = p.add_subparsers(dest="command", required=True)

    def common(sp):
        sp.add_argument("--suite", default="semantic", help="suite name or path to a suite YAML (default: semantic)")
        sp.add_argument("--dataset", action="append", help="restrict to this dataset (repeatable)")
        sp.add_argument("--data-root", type=Path, default=os.environ.get("BENCH_DATA_ROOT"),
                        help="folder with downloaded datasets (MNIST, CIFAR, CIFAR-10-C)")
        sp.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto (default: cpu)")
        sp.add_argument("--offline", action="store_true", help="never touch the network; missing data is an error")
        sp.add_argument("--defense", action="append", help="restrict to this defense (name, file.py:Class or pkg.mod:Class)")
        sp.add_argument("--transformation", action="append", help="restrict to this transformation (repeatable)")

    run = sub.add_parser("run", help="run a suite and print its table", epilog="examples:\n  " + EXAMPLES["run"],
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    common(run)
    run.add_argument("--profile", default="default", help="smoke | default | paper (default: default)")
    run.add_argument("--out", type=Path, help="run folder (default: runs/<suite>-<dataset>-<profile>-s<seed>-<time>)")
    run.add_argument("--resume", action="store_true", help="continue a run, skipping finished examples")
    run.add_argument("--seed", type=int, default=0, help="run seed (default 0): same seed, same table")
    run.add_argument("--n-examples", type=int, help="number of test examples (overrides the profile)")
    run.add_argument("--no-train", action="store_true", help="fail instead of training a missing model")

    tr = sub.add_parser("train", help="train every model a suite needs into the packaged zoo",
                        epilog="examples:\n  " + EXAMPLES["train"], formatter_class=argparse.RawDescriptionHelpFormatter)
    common(tr)
    tr.add_argument("--cache-only", action="store_true", help="train into the user cache instead of the packaged zoo")

    ls = sub.add_parser("list", help="list transformations, defenses, datasets or suites",
                        epilog="examples:\n  " + EXAMPLES["list"], formatter_class=argparse.RawDescriptionHelpFormatter)
    ls.add_argument("what", choices=["transformations", "defenses", "datasets", "suites"])
    return p


def cmd_list(what: str) -> None:
    from tabulate import tabulate

    if what == "transformations":
        from benchmark.transformations import get_transformation, transformation_names

        rows = [get_transformation(n).describe() for n in transformation_names()]
        print(tabulate(rows, headers="keys", tablefmt="github"))
    elif what == "defenses":
        from benchmark.defenses import defense_names, get_defense_class

        rows = []
        for n in defense_names():
            cls = get_defense_class(n)
            rows.append({"name": n, "certified": "yes" if cls.certified else "no",
                         "variants": ", ".join(cls(**{}).labels()), "description": cls.description})
        print(tabulate(rows, headers="keys", tablefmt="github"))
    elif what == "datasets":
        from benchmark.datasets import dataset_names, get_dataset

        rows = []
        for n in dataset_names():
            s = get_dataset(n).spec
            rows.append({"name": n, "version": s.version, "classes": s.num_classes, "shape": "x".join(map(str, s.shape)),
                         "description": s.description})
        print(tabulate(rows, headers="keys", tablefmt="github"))
    else:
        from benchmark.suites import load_suite, suite_names

        rows = [{"name": n, "description": load_suite(n).description} for n in suite_names()]
        print(tabulate(rows, headers="keys", tablefmt="github"))


def cmd_run(args) -> None:
    from benchmark.environment import configure_threads, resolve_device
    from benchmark.runner import RunOptions, run_suite
    from benchmark.suites import load_suite

    configure_threads()
    suite = load_suite(args.suite)
    opts = RunOptions(profile=args.profile, seed=args.seed, device=resolve_device(args.device), datasets=args.dataset,
                      defenses=args.defense, transformations=args.transformation, n_examples=args.n_examples,
                      data_root=args.data_root, offline=args.offline, allow_train=not (args.no_train or args.offline),
                      out=args.out, resume=args.resume)
    run_suite(suite, opts)


def cmd_train(args) -> None:
    from benchmark.environment import configure_threads, resolve_device
    from benchmark.training_driver import train_suite
    from benchmark.suites import load_suite

    configure_threads()
    train_suite(load_suite(args.suite), datasets=args.dataset, defenses=args.defense,
                transformations=args.transformation, device=resolve_device(args.device), data_root=args.data_root,
                offline=args.offline, write_zoo=not args.cache_only)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "list":
            cmd_list(args.what)
        elif args.command == "run":
            cmd_run(args)
        elif args.command == "train":
            cmd_train(args)
    except BenchError as exc:
        print("error: " + "\n       ".join(textwrap.wrap(str(exc), 100)), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: finished rows are saved; rerun with --resume to continue.", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
