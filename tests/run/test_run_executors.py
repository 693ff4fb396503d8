"""Every executor gives the local executor's rows and table: shard + merge, Ray, and a run SIGKILLed at
random moments and resumed. Also the checks made before a run folder is created."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from benchmark.errors import BenchError
from benchmark.run.driver import run_suite
from benchmark.run.merge import merge_runs
from benchmark.run.options import RunOptions
from benchmark.run.pack import pack_run
from benchmark.run.store import RunStore
from benchmark.run.units import Unit, pending_units, shard_pairs
from benchmark.suites import load_suite

from tests.repo import REPO

SELECT = dict(profile="smoke", transformations=["brightness", "translation"], defenses=["vanilla", "tss"],
              n_examples=3, allow_train=False)
CLI_SELECT = ["--profile", "smoke", "--transformation", "brightness", "--transformation", "translation",
              "--defense", "vanilla", "--defense", "tss", "--n-examples", "3", "--no-train"]
TIMING = {"seconds", "certify_seconds"}


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Every run of this module on one torch thread, as each of the Ray test's 2 workers on 2 CPUs: float
    sums (PGD's recorded losses) depend on the thread count at the 1e-7 level, and rows are compared exactly.
    ``BENCH_THREADS`` is pinned to 1 too, so that pool and Ray workers do not take a thread count from the caller's
    environment (with ``BENCH_THREADS=2`` they ran 2 threads and their rows differed from the local run's)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BENCH_THREADS", "1")
        yield
    torch.set_num_threads(threads)


def _run(out: Path, **kw) -> Path:
    return run_suite(load_suite("semantic"), RunOptions(**SELECT, out=out, log=lambda m: None, print_table=False, **kw))


def _strip(obj):
    """A row without its wall-clock fields."""
    if isinstance(obj, dict):
        return {k: _strip(v) for k, v in obj.items() if k not in TIMING}
    if isinstance(obj, list):
        return [_strip(v) for v in obj]
    return obj


def rows(folder: Path) -> list[dict]:
    """The complete rows of a run folder, timing aside, in (task, example) order."""
    lines = (folder / "rows.jsonl").read_text().splitlines()
    return sorted((_strip(json.loads(x)) for x in lines if x.endswith("}")), key=lambda r: (r["task"], r["example"]))


def assert_same_run(a: Path, b: Path) -> None:
    ra, rb = rows(a), rows(b)
    keys = [(r["task"], r["example"]) for r in rb]
    assert len(keys) == len(set(keys)), "an example was written twice"
    assert ra == rb
    assert (a / "table.md").read_text() == (b / "table.md").read_text()
    summary = lambda f: [line for line in (f / "summary.csv").read_text().splitlines()  # noqa: E731
                         if "seconds_per_example" not in line]
    assert summary(a) == summary(b)


@pytest.fixture(scope="module")
def local_run(tmp_path_factory, one_thread) -> Path:
    folder = _run(tmp_path_factory.mktemp("local") / "run")
    assert len(rows(folder)) == 2 * 2 * 3  # 2 transformations x 2 defenses x 3 examples
    return folder


# ------------------------------------------------------------------ units and shards
def test_shards_are_disjoint_and_cover_the_plan():
    pairs = [(t, i) for t in range(3) for i in range(5)]
    parts = [shard_pairs(pairs, (i, 4)) for i in range(1, 5)]
    assert sorted(p for part in parts for p in part) == sorted(pairs)
    assert sum(len(p) for p in parts) == len(pairs)

    class T:
        def __init__(self, h):
            self.hash = h

    tasks = [T("a"), T("b"), T("c")]
    units = pending_units(pairs, tasks, done={("a", 1), ("b", 0)}, chunk=2)
    assert units[:3] == [Unit(0, (0, 2)), Unit(0, (3, 4)), Unit(1, (1, 2))]
    assert sum(len(u.examples) for u in units) == len(pairs) - 2


def test_shard_merge_equals_the_local_run(local_run, tmp_path):
    parts = [_run(tmp_path / f"part{i}", shard=(i, 2)) for i in (1, 2)]
    assert 0 < len(rows(parts[0])) < len(rows(local_run))
    merged = merge_runs(parts, tmp_path / "merged", log=lambda m: None, print_table=False)
    assert_same_run(local_run, merged)
    cfg = json.loads((merged / "config.json").read_text())
    assert cfg["config_hash"] == json.loads((local_run / "config.json").read_text())["config_hash"]
    assert "shard" not in cfg and json.loads((parts[1] / "config.json").read_text())["shard"] == {"index": 2, "count": 2}
    # a missing shard, a duplicated one, a different configuration: each one clear error
    with pytest.raises(BenchError, match=r"example\(s\) are missing: digits/.* #\d"):
        merge_runs(parts[:1], tmp_path / "m1", log=lambda m: None)
    with pytest.raises(BenchError, match=r"in more than one of the folders: digits/"):
        merge_runs([parts[0], parts[0], parts[1]], tmp_path / "m2", log=lambda m: None)
    other = _run(tmp_path / "seed1", shard=(2, 2), seed=1)
    with pytest.raises(BenchError, match="different configurations"):
        merge_runs([parts[0], other], tmp_path / "m3", log=lambda m: None)
    assert not (tmp_path / "m1").exists() and not (tmp_path / "m3").exists()
    # resuming a shard's folder with another shard is refused
    with pytest.raises(BenchError, match="holds shard 1/2"):
        _run(parts[0], shard=(2, 2), resume=True)


def test_runs_of_different_transformations_merge_into_the_run_of_their_union(local_run, tmp_path):
    """``--transformation brightness`` (in two shards) and ``--transformation translation``, same protocol: one
    run of both, rows, table and summary equal to the local run's; the union's order is the suite's. A part of
    another protocol (n_examples) is refused, and so is a missing part."""
    def part(out: Path, transformation: str, **kw) -> Path:
        opts = {**SELECT, "transformations": [transformation], **kw}
        return run_suite(load_suite("semantic"), RunOptions(**opts, out=out, log=lambda m: None, print_table=False))

    bright = [part(tmp_path / f"b{i}", "brightness", shard=(i, 2)) for i in (1, 2)]
    trans = part(tmp_path / "t", "translation")
    merged = merge_runs([trans, *bright], tmp_path / "merged", log=lambda m: None, print_table=False)
    assert_same_run(local_run, merged)
    cfg = lambda f: json.loads((f / "config.json").read_text())  # noqa: E731
    assert [t["hash"] for t in cfg(merged)["tasks"]] == [t["hash"] for t in cfg(local_run)["tasks"]]
    assert cfg(merged)["union_of"] == sorted({cfg(trans)["config_hash"], cfg(bright[0])["config_hash"]})
    with pytest.raises(BenchError, match=r"example\(s\) are missing: digits/brightness"):
        merge_runs([trans, bright[0]], tmp_path / "m1", log=lambda m: None)
    other = part(tmp_path / "t4", "translation", n_examples=4)
    with pytest.raises(BenchError, match="different configurations"):
        merge_runs([other, *bright], tmp_path / "m2", log=lambda m: None)


def test_a_shard_resumes_and_merges_across_an_edit_to_tasks_it_does_not_hold(local_run, tmp_path):
    """The suite file read from another path, with another defense's config changed (gsmooth, not selected):
    the config hash differs (it covers the whole file), yet the rows' tasks are the same, so a shard made from it
    resumes a folder started from the packaged suite and merges with the packaged suite's other shard into the
    local run; another seed (other tasks) is still refused."""
    text = (REPO / "benchmark" / "suites" / "semantic.yaml").read_text()
    edited = tmp_path / "elsewhere" / "semantic.yaml"
    edited.parent.mkdir()
    assert "gsmooth: {slices: 20, sigma1: 10.0" in text  # rotation's gsmooth task, not selected here
    edited.write_text(text.replace("gsmooth: {slices: 20, sigma1: 10.0", "gsmooth: {slices: 22, sigma1: 10.0", 1))

    def run(folder: Path, suite, **kw) -> Path:
        return run_suite(suite, RunOptions(**SELECT, out=folder, log=lambda m: None, print_table=False, **kw))

    first = run(tmp_path / "part1", load_suite("semantic"), shard=(1, 2))
    lines = (first / "rows.jsonl").read_text().splitlines(keepends=True)
    (first / "rows.jsonl").write_text("".join(lines[:2]))  # killed after two rows
    run(first, load_suite(str(edited)), shard=(1, 2), resume=True)
    second = run(tmp_path / "part2", load_suite(str(edited)), shard=(2, 2))
    cfg = lambda f: json.loads((f / "config.json").read_text())  # noqa: E731
    assert cfg(second)["config_hash"] != cfg(first)["config_hash"]
    merged = merge_runs([first, second], tmp_path / "merged", log=lambda m: None, print_table=False)
    assert_same_run(local_run, merged)
    with pytest.raises(BenchError, match="cannot resume"):
        run(first, load_suite(str(edited)), shard=(1, 2), resume=True, seed=1)


def test_a_packed_shard_merges_as_it_is_and_resumes_where_it_stopped(local_run, tmp_path):
    """``bench pack``: a shard killed after two rows, packed (config, task info, xz rows: the same rows give the
    same bytes), resumes from the packed folder to the whole shard, is packed again in place, and merges with the
    other shard, packed, into the local run: no row lost or written twice. Packing over a packed folder updates
    it only with the same run and every row it holds."""
    first = _run(tmp_path / "part1", shard=(1, 2))
    whole = rows(first)
    lines = (first / "rows.jsonl").read_text().splitlines(keepends=True)
    (first / "rows.jsonl").write_text("".join(lines[:2]))  # killed after two rows
    packed, n = pack_run(first, tmp_path / "packed1")
    assert n == 2 and sorted(p.name for p in packed.iterdir()) == ["config.json", "rows.jsonl.xz", "tasks.json"]
    again, _ = pack_run(first, tmp_path / "again")
    assert (again / "rows.jsonl.xz").read_bytes() == (packed / "rows.jsonl.xz").read_bytes()
    pack_run(first, packed)  # an earlier packing of the same run is updated
    _run(packed, shard=(1, 2), resume=True)
    assert rows(packed) == whole and not (packed / "rows.jsonl.xz").exists()
    pack_run(packed, packed)
    assert not (packed / "rows.jsonl").exists() and len(list(RunStore(packed).rows())) == len(whole)
    with pytest.raises(BenchError, match=r"holds \d+ row\(s\) the run being packed lacks"):
        pack_run(first, packed)  # the killed copy would undo the resumed rows
    with pytest.raises(BenchError, match="holds another run"):
        pack_run(_run(tmp_path / "seed1", shard=(1, 2), seed=1), packed)
    second, _ = pack_run(_run(tmp_path / "part2", shard=(2, 2)), tmp_path / "packed2")
    merged = merge_runs([packed, second], tmp_path / "merged", log=lambda m: None, print_table=False)
    assert_same_run(local_run, merged)
    with pytest.raises(BenchError, match="not a started run folder"):
        pack_run(tmp_path / "nothing", tmp_path / "p")


def test_an_entry_merges_as_the_run_it_was_written_from(local_run, tmp_path):
    """A column that grows after its first rows were committed: tss's entry (written from a tss-only run) and a
    vanilla-only run join, in either order, into the local run of both; an entry whose rows file changed is
    refused by name."""
    from benchmark.leaderboard.entry import build_entry, write_entry
    from benchmark.run.results import load_run

    def part(out: Path, defense: str) -> Path:
        opts = {**SELECT, "defenses": [defense]}
        return run_suite(load_suite("semantic"), RunOptions(**opts, out=out, log=lambda m: None, print_table=False))

    entry, data = build_entry(load_run(part(tmp_path / "tss", "tss")), "tss", "digits", checker={})
    entry_path = write_entry(tmp_path / "boards", entry, data)
    vanilla = part(tmp_path / "vanilla", "vanilla")
    for i, parts in enumerate([[entry_path, vanilla], [vanilla, entry_path]]):
        merged = merge_runs(parts, tmp_path / f"merged{i}", log=lambda m: None, print_table=False)
        assert_same_run(local_run, merged)
        assert json.loads((merged / "config.json").read_text())["suite_raw"]  # the run's config, not the entry's
    rows_path = entry_path.with_name(entry["provenance"]["rows_file"])
    rows_path.write_bytes(rows_path.read_bytes() + b"\0")
    with pytest.raises(BenchError, match="is not the rows file"):
        merge_runs([entry_path, vanilla], tmp_path / "m", log=lambda m: None)


# ------------------------------------------------------------------ checks before the folder exists
@pytest.mark.parametrize("bad, message", [
    (dict(defenses=["tsss"]), "Unknown defense 'tsss'"),
    (dict(datasets=["digitz"]), "Unknown dataset 'digitz'"),
    (dict(transformations=["rotaton"]), "Unknown transformation 'rotaton'"),
    (dict(shard=(3, 2)), "between 1 and 2"),
    (dict(gpus_per_worker=1.0), "add --executor ray"),
    (dict(workers=0), "at least 1"),
    (dict(n_examples=0), "at least 1"),
])
def test_bad_names_and_options_create_no_folder(tmp_path, bad, message):
    opts = {**SELECT, "out": tmp_path / "run", "log": lambda m: None, **bad}
    with pytest.raises(BenchError, match=message):
        run_suite(load_suite("semantic"), RunOptions(**opts))
    assert not (tmp_path / "run").exists()


def test_resume_needs_an_existing_folder(tmp_path, monkeypatch):
    with pytest.raises(BenchError, match="does not exist; drop --resume"):
        _run(tmp_path / "nowhere", resume=True)
    assert not (tmp_path / "nowhere").exists()
    # a bare --resume never picks a half-created folder (no config.json)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs" / "semantic-digits-smoke-s0-20990101-000000").mkdir(parents=True)
    with pytest.raises(BenchError, match="no earlier run of suite 'semantic'"):
        run_suite(load_suite("semantic"), RunOptions(**SELECT, resume=True, log=lambda m: None))


# ------------------------------------------------------------------ Ray
def test_ray_executor_equals_the_local_run(local_run, tmp_path):
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install -e '.[ray]')")
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    except Exception as exc:  # pragma: no cover - depends on the sandbox
        pytest.skip(f"Ray cannot start here: {type(exc).__name__}: {exc}")
    try:
        folder = _run(tmp_path / "ray", executor="ray", workers=2, chunk=2)
    finally:
        ray.shutdown()
    assert_same_run(local_run, folder)


def test_process_pool_equals_the_local_run(local_run, tmp_path, monkeypatch, capsys):
    """Two worker processes of this machine (the default on a 2-core CPU) give the in-process rows; every row a
    worker finishes reaches the driver's progress bar (a log line per row here), which names its task."""
    monkeypatch.delenv("BENCH_QUIET", raising=False)
    monkeypatch.setenv("BENCH_PROGRESS_EVERY", "0")
    assert_same_run(local_run, _run(tmp_path / "pool", workers=2))
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("run (2 workers): ")]
    assert [x.split()[3] for x in lines[1:-1]] == [f"{n}/12" for n in range(1, 12)]
    assert lines[-1].startswith("run (2 workers): 12/12 (100%) done in ")
    assert {x.rsplit(" | ", 1)[1].split(" (+")[0] for x in lines[1:]} == {  # each row's line names its task
        f"digits/{t}/{d}" for t in SELECT["transformations"] for d in SELECT["defenses"]}


def test_local_workers_default(monkeypatch):
    monkeypatch.delenv("BENCH_WORKERS", raising=False)
    assert RunOptions(workers=3).local_workers() == 3
    assert RunOptions(device="cuda").local_workers() == 1
    assert RunOptions().local_workers() == len(os.sched_getaffinity(0))
    monkeypatch.setenv("BENCH_WORKERS", "1")
    assert RunOptions().local_workers() == 1


# ------------------------------------------------------------------ SIGKILL and resume
def _cli(out: Path, resume: bool, extra: list[str]) -> subprocess.Popen:
    env = {**os.environ, "BENCH_QUIET": "1", "BENCH_THREADS": "1", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "benchmark.cli", "run", *CLI_SELECT, "--out", str(out), *extra]
    return subprocess.Popen(cmd + (["--resume"] if resume else []), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def kill_and_resume(out: Path, kills: int, seed: int, extra: list[str] = ()) -> list[int]:
    """Start the run, SIGKILL it ``kills`` times at random moments (resuming each time), then let it finish;
    the number of finished rows after each kill."""
    rng = random.Random(seed)
    moments, finished = [], []
    for _ in range(kills):
        proc = _cli(out, (out / "config.json").exists(), list(extra))
        moments.append(rng.uniform(2.0, 9.0))
        try:
            proc.wait(timeout=moments[-1])
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        finished.append(len(rows(out)) if (out / "rows.jsonl").exists() else 0)
    proc = _cli(out, (out / "config.json").exists(), list(extra))
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    return finished


def test_sigkill_at_random_moments_then_resume_gives_the_same_run(local_run, tmp_path):
    out = tmp_path / "killed"
    finished = kill_and_resume(out, kills=4, seed=13)
    assert any(0 < n < 12 for n in finished), finished  # some kill landed mid-run, with rows on disk
    assert_same_run(local_run, out)


def _running_on(out: Path) -> list[int]:
    """Processes whose command line names ``out`` (forked workers keep their driver's command line)."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and str(out) in (proc / "cmdline").read_bytes().decode(errors="replace"):
                pids.append(int(proc.name))
        except OSError:
            pass
    return pids


def test_sigkill_with_worker_processes_then_resume_gives_the_same_run(local_run, tmp_path):
    out = tmp_path / "killed-pool"
    kill_and_resume(out, kills=2, seed=5, extra=["--workers", "2"])
    assert_same_run(local_run, out)
    deadline = time.monotonic() + 60
    while _running_on(out) and time.monotonic() < deadline:  # a killed driver's workers finish their example
        time.sleep(1)
    assert _running_on(out) == []


@pytest.mark.slow
def test_sigkill_under_ray_then_resume_gives_the_same_run(local_run, tmp_path):
    pytest.importorskip("ray", reason="Ray is not installed (pip install -e '.[ray]')")
    out = tmp_path / "killed-ray"
    kill_and_resume(out, kills=2, seed=7, extra=["--executor", "ray", "--workers", "2"])
    assert_same_run(local_run, out)
