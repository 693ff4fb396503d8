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
           "  bench run --suite semantic --certify sequential  # anytime-valid early stopping, n as the cap\n"
           "  bench run --suite semantic --dataset cifar10 --data-root ~/data --profile paper --device cuda\n"
           "  bench run --suite semantic --executor ray --address auto   # on a Ray cluster\n"
           "  bench run --suite semantic --shard 2/8 --out runs/part2  # part 2 of 8 (then bench merge)",
    "merge": "bench merge runs/part1 runs/part2 --out runs/all   # the folders of bench run --shard 1/2, 2/2",
    "pack": "bench pack runs/part1 --out parts/part1   # config, task info and xz rows, to commit; merge reads it,\n"
            "  bench run ... --resume --out parts/part1        # a resumed run continues it",
    "train": "bench train --suite semantic                   # (re)build the packaged zoo for the suite's datasets\n"
             "  bench train --suite semantic --verify          # retrain into a temporary store, compare with the zoo",
    "list": "bench list transformations\n  bench list defenses\n  bench list datasets\n  bench list suites",
    "submit": "bench submit my_defense.py:MyDefense --suite semantic        # check, run, write the entry\n"
              "  bench submit tss --suite semantic --from-run runs/semantic-digits-default-s0-...  # reuse a run",
    "verify-entry": "bench verify-entry leaderboards/semantic/digits/tss.json --rerun 3",
    "leaderboard": "bench leaderboard --suite semantic --dataset digits --format md\n"
                   "  bench leaderboard --also my_boards      # your submission (--leaderboards my_boards) beside the built-ins\n"
                   "  bench leaderboard --suite semantic --dataset digits --format latex --table certified",
    "plot": "bench plot --suite semantic --dataset digits --out certified.png --defense tss --defense gsmooth",
    "template": "bench template my_defense.py                   # a complete one-file defense to start from",
    "table1": "bench table1 runs/table1 runs/table1-verifiers --out table1   # paper's Table 1 (MNIST) beside ours\n"
              "  bench table1 runs/t1o runs/t1o-verifiers --out table1-official --tss-results ~/src/tss  # official",
    "perf": "bench perf --defense gsmooth --transformation gaussian_blur --n 500 --n 10000 --json perf.json",
    "ablation": "bench ablation runs/gsmooth-ablation-digits-default-s0-... \\\n"
                "      --out leaderboards/gsmooth-ablation/digits/noise-grid   # the sigma1 x sigma2 grid",
}


PROFILES = ("smoke", "default", "paper", "table1", "leaderboard")  # table1: table1-mnist only; leaderboard: corruptions-mnist only
PERF_PROFILES = ("smoke", "default", "paper")
CERTIFY_RULES = ("fixed", "sequential")  # benchmark.certify.smoothing.RULES (not imported: --help stays torch-free)
SUITE_HELP = "suite name (bench list suites) or path to a suite YAML file (default: semantic)"
DEVICE_HELP = "cpu, cuda, cuda:N or auto (default: cpu)"
DATA_ROOT_HELP = ("folder with downloaded datasets (mnist, mnist-c, mnist-t10k, mnist-t10k-c, cifar10, cifar100, cifar10c); digits and digits-c "
                  "need none (default: $BENCH_DATA_ROOT)")
LEADERBOARDS_HELP = "entries folder (default: the repository's leaderboards/, or $BENCH_LEADERBOARDS)"
ALSO_HELP = ("another entries folder shown beside --leaderboards' (repeatable), e.g. the --leaderboards folder you "
             "submitted to, to see your entry beside the built-in ones")


def _sub(sub, name: str, help_text: str) -> argparse.ArgumentParser:
    # help is %-formatted by argparse (a literal % must be %%), the description is printed as written
    return sub.add_parser(name, help=help_text.replace("%", "%%"), description=help_text,
                          epilog="examples:\n  " + EXAMPLES[name],
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def _data_options(sp: argparse.ArgumentParser, defense: bool = True) -> None:
    """What to evaluate and where the data is: shared by run, train and submit."""
    sp.add_argument("--suite", default="semantic", help=SUITE_HELP)
    sp.add_argument("--dataset", action="append", metavar="NAME",
                    help="restrict to this dataset (repeatable; digits, digits-c, mnist, mnist-c, mnist-t10k, mnist-t10k-c, cifar10, cifar100, cifar10c)")
    sp.add_argument("--transformation", action="append", metavar="NAME",
                    help="restrict to this transformation (repeatable; bench list transformations)")
    if defense:
        sp.add_argument("--defense", action="append", metavar="REF",
                        help="restrict to this defense (repeatable): a name, file.py:Class or pkg.mod:Class")
    sp.add_argument("--data-root", type=Path, default=os.environ.get("BENCH_DATA_ROOT"), metavar="DIR",
                    help=DATA_ROOT_HELP)
    sp.add_argument("--device", default="cpu", help=DEVICE_HELP)
    sp.add_argument("--offline", action="store_true", help="never touch the network; missing data is an error")


def _run_options(sp: argparse.ArgumentParser) -> None:
    """Profile, seed and run folder: shared by run and submit."""
    sp.add_argument("--profile", default="default", choices=PROFILES,
                    help="Monte-Carlo and attack sizes: smoke (seconds), default (minutes), paper (GPU); table1: the "
                         "table1-mnist suite's paper-protocol profile; leaderboard: the corruptions-mnist suite's committed run (default: default)")
    sp.add_argument("--seed", type=int, default=0, help="run seed (default 0): same seed, same table")
    sp.add_argument("--n-examples", type=int, metavar="N", help="number of test examples (overrides the profile)")
    sp.add_argument("--no-train", action="store_true", help="fail instead of training a missing model")
    sp.add_argument("--certify", choices=CERTIFY_RULES,
                    help="Monte-Carlo rule of CERTIFY and PREDICT, overriding the profile's `certify` (the semantic "
                         "suite's default profile: sequential; see the suite's YAML): fixed n, or anytime-valid "
                         "sequential stopping with n and n_predict as the caps")


def _cluster_options(sp: argparse.ArgumentParser) -> None:
    """Shards and executors of bench run (benchmark/run)."""
    sp.add_argument("--shard", metavar="I/K",
                    help="run only part I of K disjoint parts (1-based: 1/K ... K/K) into its own folder; join the "
                         "folders with bench merge")
    sp.add_argument("--executor", choices=["local", "ray"], default="local",
                    help="local (this machine: --workers processes, default) or ray (a Ray cluster; "
                         "pip install -e '.[ray]')")
    sp.add_argument("--address", metavar="auto|HOST:PORT",
                    help="Ray cluster to join (default: start a local Ray on this machine)")
    sp.add_argument("--workers", type=int, metavar="N",
                    help="worker processes (local: default $BENCH_WORKERS, else one per CPU, 1 on a GPU; 1 = this "
                         "process; ray: default one per CPU of the cluster)")
    sp.add_argument("--gpus-per-worker", type=float, default=0.0, metavar="F",
                    help="GPUs each Ray worker reserves, fractions allowed (default 0)")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bench", description="Certified and empirical robustness against semantic transformations.",
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="examples:\n  " + "\n  ".join(EXAMPLES.values()))
    sub = p.add_subparsers(dest="command", required=True)

    run = _sub(sub, "run", "run a suite and print its table")
    _data_options(run)
    _run_options(run)
    run.add_argument("--out", type=Path, metavar="DIR",
                     help="run folder (default: runs/<suite>-<dataset>-<profile>[-<certify>]-s<seed>-<time>)")
    run.add_argument("--resume", action="store_true",
                     help="continue the latest run of this suite/dataset/profile/certify/seed (or --out DIR), skipping "
                          "finished examples")
    _cluster_options(run)

    mg = _sub(sub, "merge", "join the folders of a sharded run (bench run --shard), or runs of different "
                            "transformations / defenses of one suite and protocol, into one run folder")
    mg.add_argument("folders", nargs="+", type=Path, metavar="RUN",
                    help="the shards' run folders (packed ones too, bench pack), or leaderboard entries NAME.json")
    mg.add_argument("--out", type=Path, required=True, metavar="DIR", help="the merged run folder (must be new)")

    pk = _sub(sub, "pack", "a run folder, finished or not, as config.json, tasks.json and rows.jsonl.xz: small enough "
                           "to commit, read by bench merge, continued by bench run --resume")
    pk.add_argument("folder", type=Path, metavar="RUN", help="the run folder")
    pk.add_argument("--out", type=Path, required=True, metavar="DIR",
                    help="the packed folder: new, an earlier packing of the same run (updated), or RUN itself")

    tr = _sub(sub, "train", "train every model a suite needs into the packaged zoo")
    _data_options(tr)
    tr.add_argument("--cache-only", action="store_true",
                    help="train into the user cache ($BENCH_CACHE, default ~/.cache/semantic-bench) instead of the "
                         "packaged zoo")
    tr.add_argument("--verify", action="store_true",
                    help="retrain the selected zoo entries into a temporary store and report, per entry, identical / "
                         "different (max weight difference) / not comparable (other training environment) / stale")

    sm = _sub(sub, "submit", "check a defense, run the suite on it and write its leaderboard entry")
    sm.add_argument("defense_ref", metavar="DEFENSE",
                    help="name, file.py:Class or pkg.mod:Class (file.py alone lists the classes in the file)")
    _data_options(sm, defense=False)
    _run_options(sm)
    sm.add_argument("--out", type=Path, metavar="DIR", help="run folder (default: as bench run)")
    sm.add_argument("--from-run", type=Path, metavar="DIR",
                    help="use this finished run's rows instead of running the suite")
    sm.add_argument("--strict", action="store_true", help="treat warnings as errors")
    sm.add_argument("--report", type=Path, metavar="FILE",
                    help="where to write the JSON report (default: submission_report-<Class>.json in the run folder, "
                         "else runs/submission_report-<Class>-<time>.json)")
    sm.add_argument("--leaderboards", type=Path, metavar="DIR", help=LEADERBOARDS_HELP)

    ve = _sub(sub, "verify-entry", "recompute a leaderboard entry from its rows (and re-run a subset)")
    ve.add_argument("entry", type=Path, help="path to <defense>.json")
    ve.add_argument("--rerun", type=int, default=0, metavar="K", help="also re-run K random examples (default 0)")
    ve.add_argument("--seed", type=int, default=0, help="which random examples to re-run (default 0)")
    ve.add_argument("--tolerance", type=float, default=None, metavar="FRACTION",
                    help="allowed fraction of differing re-run decisions (default: 0.05, i.e. 5%%)")
    ve.add_argument("--device", default="cpu", help=DEVICE_HELP)
    ve.add_argument("--data-root", type=Path, default=os.environ.get("BENCH_DATA_ROOT"), metavar="DIR",
                    help=DATA_ROOT_HELP)

    lb = _sub(sub, "leaderboard", "render the committed leaderboard entries as tables")
    lb.add_argument("--suite", default="semantic", help="suite of the entries (default: semantic)")
    lb.add_argument("--dataset", default="digits", help="dataset of the entries (default: digits)")
    lb.add_argument("--format", choices=["md", "latex", "csv", "html"], default="md",
                    help="output format (default: md; html is a self-contained page)")
    lb.add_argument("--table", action="append", choices=["certified", "attacked", "corruptions", "survival"],
                    help="which table (repeatable; default: all that have rows)")
    lb.add_argument("--leaderboards", type=Path, metavar="DIR", help=LEADERBOARDS_HELP)
    lb.add_argument("--also", action="append", type=Path, default=[], metavar="DIR", help=ALSO_HELP)
    lb.add_argument("--output", type=Path, metavar="FILE", help="write to this file instead of stdout")
    lb.add_argument("--all", action="store_true", help="every suite and dataset found under the entries folder")

    pl = _sub(sub, "plot", "plot certified accuracy against radius from leaderboard entries")
    pl.add_argument("--suite", default="semantic", help="suite of the entries (default: semantic)")
    pl.add_argument("--dataset", default="digits", help="dataset of the entries (default: digits)")
    pl.add_argument("--defense", action="append", metavar="NAME",
                    help="defense to include (repeatable; default: all certified)")
    pl.add_argument("--transformation", action="append", metavar="NAME",
                    help="transformation to draw (repeatable; default: all)")
    pl.add_argument("--leaderboards", type=Path, metavar="DIR", help=LEADERBOARDS_HELP)
    pl.add_argument("--also", action="append", type=Path, default=[], metavar="DIR", help=ALSO_HELP)
    pl.add_argument("--out", type=Path, required=True, help="output .png or .pdf")

    tp = _sub(sub, "template", "write the one-file defense template to start a submission from")
    tp.add_argument("path", type=Path, help="where to write it (refuses to overwrite)")

    pf = _sub(sub, "perf", "time certification against the bare forward passes of the same networks")
    pf.add_argument("--defense", action="append", metavar="NAME", help="smoothing defense (repeatable; tss, gsmooth, spt)")
    pf.add_argument("--transformation", action="append", metavar="NAME",
                    help="transformation (repeatable; default: gaussian_blur, rotation, pixelate, translation)")
    pf.add_argument("--n", action="append", type=int, metavar="N",
                    help="Monte-Carlo samples n (repeatable; default: the profile's; also TSS's samples per slice)")
    pf.add_argument("--profile", default="default", choices=PERF_PROFILES, help="n0, alpha, batch size (default: default)")
    pf.add_argument("--n-examples", type=int, default=3, metavar="K", help="test images timed (default 3)")
    pf.add_argument("--repeats", type=int, default=3, metavar="R", help="interleaved repeats per image (default 3)")
    pf.add_argument("--json", type=Path, metavar="FILE", help="also write the rows as JSON here")
    pf.add_argument("--device", default="cpu", help=DEVICE_HELP)

    t1 = _sub(sub, "table1", "the GSmooth paper's Table 1 (MNIST rows) beside a run of the table1-mnist-official or the "
                             "retired table1-mnist suite (the protocol follows the results' dataset, mnist or "
                             "mnist-t10k): markdown, CSV and a plot with 95 % Clopper-Pearson intervals")
    t1.add_argument("sources", nargs="+", type=Path, metavar="RUN_OR_ENTRIES",
                    help="run folders of bench run --suite table1-mnist or table1-mnist-official, leaderboard entry "
                         "files or folders of them, all of one protocol; a later one replaces an earlier one's "
                         "(transformation, defense) numbers")
    t1.add_argument("--out", type=Path, required=True, help="folder for table1.md, table1.csv and table1.png")
    t1.add_argument("--tss-results", type=Path, metavar="DIR",
                    help="official protocol only: your checkout of TSS's repository (AI-secure/semantic-randomized-"
                         "smoothing; its root or new_data/mnist/mnist_43), whose released per-image results add a "
                         "'TSS released' column beside the paper's TSS number and the image-by-image agreement")

    ab = _sub(sub, "ablation", "GSmooth's sigma1 x sigma2 ablation (paper Table 3 shape) from a run of the "
                               "gsmooth-ablation (digits) or gsmooth-ablation-mnist suite: its rows, provenance, "
                               "tables and heat map")
    ab.add_argument("run", type=Path, metavar="RUN", help="a finished run folder of bench run --suite "
                                                          "gsmooth-ablation or gsmooth-ablation-mnist (or their "
                                                          "parts joined by bench merge)")
    ab.add_argument("--out", type=Path, required=True,
                    help="folder for grid.csv, provenance.json, grid.md and heatmap.png (the committed study: "
                         "leaderboards/gsmooth-ablation/<dataset>/noise-grid)")
    ab.add_argument("--transformation", default="rotational_blur", help="the swept transformation (default: "
                                                                       "rotational_blur)")

    ls = _sub(sub, "list", "list transformations, defenses, datasets or suites")
    ls.add_argument("what", choices=["transformations", "defenses", "datasets", "suites"], help="what to list")
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


def cmd_run(args) -> int:
    from benchmark.infra.environment import configure_threads, resolve_device
    from benchmark.run.driver import run_suite
    from benchmark.run.options import RunOptions, parse_shard
    from benchmark.suites import load_suite

    configure_threads()
    suite = load_suite(args.suite)
    opts = RunOptions(profile=args.profile, seed=args.seed, device=resolve_device(args.device), datasets=args.dataset,
                      defenses=args.defense, transformations=args.transformation, n_examples=args.n_examples,
                      data_root=args.data_root, offline=args.offline, allow_train=not (args.no_train or args.offline),
                      out=args.out, resume=args.resume, certify=args.certify,
                      shard=parse_shard(args.shard) if args.shard else None, executor=args.executor,
                      address=args.address, workers=args.workers, gpus_per_worker=args.gpus_per_worker)
    folder = run_suite(suite, opts)
    failures = read_consistency(folder)
    if failures:
        print(f"consistency check FAILED: {failures} certified example(s) were broken by the attack with a confident "
              f"wrong label (see {folder / 'consistency.json'}); a sound certificate makes this (almost) impossible.",
              file=sys.stderr)
        return 1
    return 0


def cmd_merge(args) -> int:
    from benchmark.run.merge import merge_runs

    folder = merge_runs(args.folders, args.out)
    return 1 if read_consistency(folder) else 0


def cmd_pack(args) -> int:
    from benchmark.run.pack import pack_run

    folder, n = pack_run(args.folder, args.out)
    print(f"packed {n} row(s) of {args.folder} into {folder}")
    return 0


def read_consistency(folder: Path) -> int:
    """Number of consistency violations a finished run recorded (0 when the file is absent)."""
    import json

    path = Path(folder) / "consistency.json"
    return sum(v["violations"] for v in json.loads(path.read_text())) if path.exists() else 0


def cmd_train(args) -> int:
    from benchmark.infra.environment import configure_threads, resolve_device
    from benchmark.suites import load_suite
    from benchmark.train.driver import train_suite

    configure_threads()
    if args.verify:
        from benchmark.train.zoo_verify import verify_zoo

        checks = verify_zoo(load_suite(args.suite), datasets=args.dataset, defenses=args.defense,
                            transformations=args.transformation, device=resolve_device(args.device),
                            data_root=args.data_root, offline=args.offline)
        for c in checks:
            print(c.line())
        counts = {s: sum(c.status == s for c in checks) for s in dict.fromkeys(c.status for c in checks)}
        print(", ".join(f"{n} {s}" for s, n in counts.items()) or "no zoo entries selected")
        return 1 if any(c.status in ("different", "stale", "missing") for c in checks) else 0
    train_suite(load_suite(args.suite), datasets=args.dataset, defenses=args.defense,
                transformations=args.transformation, device=resolve_device(args.device), data_root=args.data_root,
                offline=args.offline, write_zoo=not args.cache_only)
    return 0


def cmd_submit(args) -> int:
    from benchmark.infra.environment import configure_threads, resolve_device
    from benchmark.infra.progress import say
    from benchmark.run.options import RunOptions
    from benchmark.submission.submit import submit
    from benchmark.suites import load_suite

    configure_threads()
    opts = RunOptions(profile=args.profile, seed=args.seed, device=resolve_device(args.device), datasets=args.dataset,
                      transformations=args.transformation, n_examples=args.n_examples, data_root=args.data_root,
                      offline=args.offline, allow_train=not (args.no_train or args.offline), out=args.out,
                      certify=args.certify)
    report = submit(args.defense_ref, load_suite(args.suite), opts, strict=args.strict, root=args.leaderboards,
                    from_run=args.from_run, report_path=args.report, log=say)
    return 0 if report.passed else 1


def cmd_verify_entry(args) -> int:
    from benchmark.infra.environment import configure_threads, resolve_device
    from benchmark.infra.progress import StageBar, say
    from benchmark.leaderboard.verify import DEFAULT_TOLERANCE, PROOFS, RECOMPUTE, RERUN, recompute, rerun

    stages = [RECOMPUTE] + ([RERUN, PROOFS] if args.rerun else [])
    with StageBar(stages, f"verify {args.entry.name}") as bar:
        problems = recompute(args.entry)
        if not problems and args.rerun:
            configure_threads()
            tol = DEFAULT_TOLERANCE if args.tolerance is None else args.tolerance
            problems = rerun(args.entry, args.rerun, args.seed, tol, resolve_device(args.device), args.data_root,
                             log=say, stage=bar.enter)
    for p in problems:
        print(f"MISMATCH: {p}", file=sys.stderr)
    print(f"{args.entry}: {'verified' if not problems else 'NOT verified'}", file=sys.stderr)
    return 0 if not problems else 1


def _table1_section(root: Path) -> str:
    """The GSmooth paper's Table 1 beside the ``table1-mnist`` entries under ``root``, then beside the
    ``table1-mnist-official`` ones (one section per protocol with entries; empty without any)."""
    from benchmark.reports.table1 import PROTOCOLS, T10K, read_limits, read_results, render_markdown, table1_cells

    out = ""
    for proto in PROTOCOLS:
        folder = Path(root) / proto.suite / proto.dataset
        if not list(folder.glob("*.json")):
            continue
        header = (f"The `{proto.suite}` entries above beside the paper's numbers (`bench table1 "
                  f"{folder.parent.parent.name}/{proto.suite}/{proto.dataset} --out DIR` writes the same table as CSV "
                  "and a plot with interval whiskers).")
        cells = table1_cells(read_results([folder], proto), read_limits([folder]), proto)
        title = "" if proto is T10K else ", official protocol"
        out += (f"\n## GSmooth paper's Table 1 (MNIST{title}) side by side\n\n"
                f"{render_markdown(cells, header, legend_below=True, protocol=proto)}")
    return out


def cmd_leaderboard(args) -> None:
    from benchmark.infra.io import atomic_write_text
    from benchmark.leaderboard.entry import default_root, load_entries_from
    from benchmark.leaderboard.formats import render
    from benchmark.leaderboard.render import TABLES

    root = args.leaderboards or default_root()
    roots = [root, *args.also]
    pairs = [(args.suite, args.dataset)]
    if args.all:
        pairs = sorted({(p.parent.parent.name, p.parent.name) for r in roots for p in Path(r).glob("*/*/*.json")},
                       key=lambda pair: (pair[0] != "semantic", pair))  # the main suite first
        if not pairs:
            raise BenchError(f"no leaderboard entries under {root}; create them with `bench submit`.")
    tables = args.table or list(TABLES)
    if args.format == "html":
        from benchmark.leaderboard.page import page, section_html

        text = page([section_html(load_entries_from(roots, suite, ds), Path(root) / suite / ds, tables,
                                  f"{suite} suite on {ds}") for suite, ds in pairs], "Leaderboards")
    else:
        text = "\n".join(render(load_entries_from(roots, suite, ds), args.format, tables, f"{suite} suite on {ds}")
                          for suite, ds in pairs)
    if args.all and args.format == "md":
        # the tables lead; what the file is comes last, below every table and its legend
        from benchmark.reports.ablation import ablation_section

        text = "# Leaderboards\n\n" + text + _table1_section(root) + ablation_section(root) + (
            "\n## About this file\n\nRendered by `bench leaderboard --all --format md` from the entries in this "
            "folder (one JSON per defense, with its per-example rows; `bench verify-entry` recomputes them).\n")
    if args.output:
        atomic_write_text(args.output, text)
    else:
        print(text)


def cmd_plot(args) -> None:
    from benchmark.errors import unknown_name
    from benchmark.leaderboard.entry import default_root, load_entries_from
    from benchmark.leaderboard.plot import plot

    root = args.leaderboards or default_root()
    entries = load_entries_from([root, *args.also], args.suite, args.dataset)
    if args.defense:
        names = [e["defense"]["name"] for e in entries]
        for d in args.defense:
            if d not in names:
                raise unknown_name("leaderboard defense", d, names)
        entries = [e for e in entries if e["defense"]["name"] in args.defense]
    out = plot(entries, root / args.suite / args.dataset, args.transformation, args.out)
    print(f"wrote {out}", file=sys.stderr)


def cmd_template(args) -> None:
    from benchmark.submission import template_defense

    if args.path.exists():
        raise BenchError(f"{args.path} already exists; choose another path.")
    args.path.write_text(Path(template_defense.__file__).read_text())
    print(f"wrote {args.path}; next: bench run --suite semantic --defense {args.path}:BrightnessSmoothing "
          "--transformation brightness", file=sys.stderr)


def cmd_perf(args) -> int:
    from benchmark.infra.environment import configure_threads, environment, resolve_device
    from benchmark.studies.perf import HEADER, run_perf, write_json

    configure_threads()
    device = resolve_device(args.device)
    print(HEADER)
    rows = run_perf(args.defense, args.transformation, args.n, args.n_examples, args.repeats, args.profile, device,
                    log=print)
    if args.json:
        write_json(rows, args.json, environment(device))
    return 0


def cmd_table1(args) -> None:
    from benchmark.reports.table1 import write_table1

    for kind, path in write_table1(args.sources, args.out, args.tss_results).items():
        print(f"wrote {path} ({kind})")


def cmd_ablation(args) -> None:
    from benchmark.reports.ablation import write_ablation

    for name, path in write_ablation(args.run, args.out, args.transformation).items():
        print(f"wrote {path} ({name})")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "list":
            cmd_list(args.what)
        elif args.command == "run":
            return cmd_run(args)
        elif args.command == "merge":
            return cmd_merge(args)
        elif args.command == "pack":
            return cmd_pack(args)
        elif args.command == "train":
            return cmd_train(args)
        elif args.command == "submit":
            return cmd_submit(args)
        elif args.command == "verify-entry":
            return cmd_verify_entry(args)
        elif args.command == "leaderboard":
            cmd_leaderboard(args)
        elif args.command == "plot":
            cmd_plot(args)
        elif args.command == "template":
            cmd_template(args)
        elif args.command == "perf":
            return cmd_perf(args)
        elif args.command == "table1":
            cmd_table1(args)
        elif args.command == "ablation":
            cmd_ablation(args)
    except BenchError as exc:
        print("error: " + "\n       ".join(textwrap.wrap(str(exc), 100)), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: finished rows are saved; rerun with --resume to continue.", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
