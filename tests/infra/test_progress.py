"""Progress a person can read: in a log, timed lines with done/total, rate, elapsed, ETA and what is running (an
injected clock, no sleeps); on a terminal, a tqdm bar whose postfix names the task; nothing under BENCH_QUIET=1;
--resume says what it skips."""
import io
import re
import sys
from types import SimpleNamespace

import pytest
from tqdm.auto import tqdm

from benchmark.infra.progress import (LineProgress, StageBar, format_rate, line_interval, progress_bar, say,
                                     task_label)
from benchmark.run.executors import bar as run_bar
from benchmark.run.executors.bar import RunProgress
from benchmark.run.units import Unit

TASKS = [SimpleNamespace(label="digits/rotation/tss", defense="tss"),
         SimpleNamespace(label="digits/brightness/vanilla", defense="vanilla")]


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def stderr_to(monkeypatch, terminal: bool = False) -> io.StringIO:
    """stderr becomes a StringIO (claiming to be a terminal if asked); BENCH_QUIET and BENCH_PROGRESS_EVERY unset.
    Called in the test body: pytest puts its own capture back on sys.stderr between a fixture and the test."""
    stream = io.StringIO()
    monkeypatch.delenv("BENCH_QUIET", raising=False)
    monkeypatch.delenv("BENCH_PROGRESS_EVERY", raising=False)
    monkeypatch.setattr(sys, "stderr", stream)
    if terminal:
        monkeypatch.setattr(stream, "isatty", lambda: True, raising=False)
    return stream


def test_log_lines_are_timed_and_say_rate_eta_and_label():
    out, clock = io.StringIO(), Clock()
    with LineProgress(8, "run", out, every=30, unit="ex", clock=clock) as bar:
        bar.set_postfix_str("digits/rotation/tss")
        clock.now = 10
        bar.update(1)  # 10 s since the first line: none due
        clock.now = 40
        bar.update(1)
        clock.now = 50
        bar.update(1)  # 10 s since the last line
        clock.now = 70
        bar.refresh()  # a wait without news still gets its line once due
        clock.now = 80
        bar.update(5)  # finished: the closing line says it
    text = out.getvalue()
    assert "\r" not in text
    assert text.splitlines() == [
        "run: 0/8, started",
        "run: 2/8 (25%), 20.0 s/ex, elapsed 00:40, ETA 02:00 | digits/rotation/tss",
        "run: 3/8 (37%), 23.3 s/ex, elapsed 01:10, ETA 01:56 | digits/rotation/tss",
        "run: 8/8 (100%) done in 01:20, 10.0 s/ex | digits/rotation/tss",
    ]


def test_a_defense_given_by_file_is_named_by_its_class():
    ref = "/tmp/x/my_defense.py:MyDefense"
    assert task_label(SimpleNamespace(label=f"digits/rotation/{ref}", defense=ref)) == "digits/rotation/MyDefense"
    assert task_label(TASKS[0]) == "digits/rotation/tss"


def test_a_fast_rate_is_per_second_and_an_early_end_says_stopped():
    assert format_rate(100, 40, "ex") == "2.50 ex/s" and format_rate(0, 40, "ex") == "? ex/s"
    out, clock = io.StringIO(), Clock()
    with pytest.raises(KeyboardInterrupt), LineProgress(10, "run", out, every=30, unit="ex", clock=clock) as bar:
        clock.now = 2
        bar.update(5)
        raise KeyboardInterrupt
    assert out.getvalue().splitlines()[-1] == "run: stopped, 5/10 (50%), 2.50 ex/s, elapsed 00:02, ETA 00:02"


def test_the_interval_comes_from_the_environment(monkeypatch):
    stderr_to(monkeypatch)
    assert line_interval() == 30
    monkeypatch.setenv("BENCH_PROGRESS_EVERY", "0.5")
    bar = progress_bar(total=3, desc="x")
    assert isinstance(bar, LineProgress) and bar.every == 0.5
    for bad in ("soon", "-1"):
        monkeypatch.setenv("BENCH_PROGRESS_EVERY", bad)
        assert line_interval() == 30


def test_quiet_prints_nothing(monkeypatch):
    log = stderr_to(monkeypatch)
    monkeypatch.setenv("BENCH_QUIET", "1")
    monkeypatch.setenv("BENCH_PROGRESS_EVERY", "0")
    with progress_bar(total=3, desc="x") as bar:
        bar.set_postfix_str("digits/rotation/tss")
        bar.update(3)
    with RunProgress(TASKS, [Unit(0, (0, 1))], "run") as progress:
        progress.started(0, 0)
        progress.rows(0, 2)
    with StageBar(["a", "b"], "verify") as stages:
        stages.enter("b")
    assert log.getvalue() == "" and not isinstance(progress_bar(total=1), LineProgress)


def test_the_run_bar_names_the_latest_task_and_the_others_running(monkeypatch):
    log = stderr_to(monkeypatch)
    """As the pool executor reports: units handed out, rows back, a worker going idle."""
    monkeypatch.setenv("BENCH_PROGRESS_EVERY", "0")  # a line at every update
    with RunProgress(TASKS, [Unit(0, (0, 1)), Unit(1, (0, 1))], "run (2 workers)") as progress:
        progress.started(0, 0)
        progress.started(1, 1)
        assert progress.label() == "digits/brightness/vanilla (+1 more task)"
        progress.rows(0)
        progress.rows(0)
        progress.finished(0)
        assert progress.label() == "digits/rotation/tss (+1 more task)"  # worker 1 is still on the other task
        progress.rows(1, 2)
        assert progress.label() == "digits/brightness/vanilla"  # worker 0 is idle
        progress.finished(1)
    lines = log.getvalue().splitlines()
    assert lines[1].startswith("run (2 workers): 1/4 (25%), ") and "ETA " in lines[1]
    assert lines[1].endswith(" | digits/rotation/tss (+1 more task)")
    assert lines[-1].startswith("run (2 workers): 4/4 (100%) done in ")
    assert lines[-1].endswith(" | digits/brightness/vanilla")


def test_pool_workers_rows_and_output_reach_the_driver(monkeypatch):
    """run_pool's driver side, the workers played by a fake inbox: every row counts on the driver's bar, and what a
    worker writes on its stderr (a model it trains, that bar's lines) is printed by the driver, whole lines."""
    import queue

    from benchmark.run.executors.pool import _ToDriver, run_pool

    log = stderr_to(monkeypatch)
    monkeypatch.setenv("BENCH_PROGRESS_EVERY", "0")
    outbox: queue.Queue = queue.Queue()
    worker_stderr = _ToDriver(outbox, 0)

    class Inbox:
        def send(self, unit: Unit) -> None:
            worker_stderr.write("training 'digits/tss' ...\ntrain tss: 0/4, sta")
            worker_stderr.write("rted\n")
            outbox.put(("prepared", 0, unit.task, {}))
            for i in unit.examples:
                outbox.put(("row", 0, unit.task, {"example": i}))
            outbox.put(("done", 0, unit.task, None))

    pool = SimpleNamespace(procs=[SimpleNamespace(is_alive=lambda: True)], inboxes=[Inbox()], outbox=outbox,
                           close=lambda: None)
    rows: list[dict] = []
    run_pool(pool, SimpleNamespace(tasks=TASKS), [Unit(0, (0, 1)), Unit(1, (2,))],
             SimpleNamespace(prepared=lambda task, info: None, row=rows.append))
    lines = log.getvalue().splitlines()
    assert rows == [{"example": 0}, {"example": 1}, {"example": 2}]
    assert lines.count("training 'digits/tss' ...") == 2 and lines.count("train tss: 0/4, started") == 2
    assert [x.split(" | ")[1] for x in lines if x.startswith("run (1 workers): ") and "%)," in x] == [
        "digits/rotation/tss", "digits/rotation/tss"]
    assert lines[-1].startswith("run (1 workers): 3/3 (100%) done in ") and lines[-1].endswith(
        " | digits/brightness/vanilla")


def test_on_a_terminal_the_local_run_bar_is_tqdm_with_the_running_task(monkeypatch):
    terminal = stderr_to(monkeypatch, terminal=True)
    """run_local's bar, seen from inside each evaluation: a tqdm bar whose postfix is that task's label."""
    from benchmark.run.executors.local import run_local

    bars: list = []
    monkeypatch.setattr(run_bar, "progress_bar", lambda **kw: bars.append(progress_bar(**kw)) or bars[-1])
    seen: list[tuple[str, str]] = []
    worker = SimpleNamespace(prepare=lambda task: {},
                             evaluate=lambda task, i: seen.append((task.label, bars[0].postfix)))
    plan = SimpleNamespace(kind=SimpleNamespace(worker=lambda models, folder: worker),
                           store=SimpleNamespace(folder=None), tasks=TASKS)
    sink = SimpleNamespace(prepared=lambda task, info: None, row=lambda row: None)
    run_local(plan, [Unit(0, (0, 1)), Unit(1, (3,))], None, sink)
    assert len(bars) == 1 and isinstance(bars[0], tqdm) and not isinstance(bars[0], LineProgress)
    assert bars[0].smoothing == 0  # rate and ETA averaged since the start, as in the log lines
    assert seen == [(t.label, t.label) for t in (TASKS[0], TASKS[0], TASKS[1])]
    assert bars[0].total == 3 and "ex/s" in terminal.getvalue() and "digits/brightness/vanilla" in terminal.getvalue()


def test_a_message_during_a_live_bar_gets_a_line_of_its_own(monkeypatch):
    """A model store's "training ..." while the run's bar is drawn: not glued to the end of the bar's line."""
    terminal = stderr_to(monkeypatch, terminal=True)
    with progress_bar(total=2, desc="run", mininterval=0) as bar:
        bar.update(1)
        say("training 'digits/vanilla' ...")
        bar.update(1)
    out = terminal.getvalue()
    assert "1/2" in out and out[:out.index("training")].endswith("\r")


def test_stage_bar_counts_stages_and_says_where_it_stopped(monkeypatch):
    log = stderr_to(monkeypatch)
    monkeypatch.setenv("BENCH_PROGRESS_EVERY", "0")
    with StageBar(["recompute", "re-run", "proofs"], "verify tss.json") as stages:
        stages.enter("re-run")
        stages.enter("proofs")
    lines = log.getvalue().splitlines()
    assert lines[0] == "verify tss.json: 0/3, started | recompute"
    assert lines[1].startswith("verify tss.json: 1/3 (33%), ") and lines[1].endswith(" | re-run")
    assert lines[-1].startswith("verify tss.json: 3/3 (100%) done in ") and lines[-1].endswith(" | proofs")
    log.truncate(0)
    with StageBar(["recompute", "re-run", "proofs"], "verify tss.json"):
        pass  # problems found while recomputing: no re-run
    assert log.getvalue().splitlines()[-1].startswith("verify tss.json: stopped, 0/3 (0%), ")


def test_training_lines_name_the_model_epoch_and_loss(monkeypatch):
    import torch

    from benchmark.models.training import TrainConfig, train_classifier

    log = stderr_to(monkeypatch)
    monkeypatch.setenv("BENCH_PROGRESS_EVERY", "0")
    x, y = torch.rand(8, 1, 4, 4), torch.randint(0, 3, (8,))
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 3))
    train_classifier(model, x, y, TrainConfig(epochs=2, batch_size=4), desc="train tiny")
    lines = log.getvalue().splitlines()
    assert lines[0] == "train tiny: 0/4, started"
    assert [x.split(" | ")[1][:len("epoch 1/2, loss ")] for x in lines[1:]] == ["epoch 1/2, loss "] * 2 + [
        "epoch 2/2, loss "] * 2
    assert re.match(r"train tiny: 1/4 \(25%\), (\d+\.\d\d step/s|\d+\.\d s/step), elapsed 00:00, ETA 00:00 \| ",
                    lines[1])


def test_bench_train_bar_names_the_task_being_prepared(monkeypatch):
    from benchmark.suites import load_suite
    from benchmark.train import driver

    stderr_to(monkeypatch, terminal=True)
    bars: list = []
    monkeypatch.setattr(driver, "progress_bar", lambda **kw: bars.append(progress_bar(**kw)) or bars[-1])
    seen: list[tuple[str, str]] = []
    monkeypatch.setattr(driver, "_prepare_task", lambda task, *a: seen.append((task.label, bars[0].postfix)))
    driver.prepare_suite(load_suite("semantic"), None, ["digits"], ["vanilla", "tss"], ["rotation"])
    assert seen == [("digits/rotation/vanilla",) * 2, ("digits/rotation/tss",) * 2]
    assert isinstance(bars[0], tqdm) and bars[0].n == bars[0].total == 2


def test_resume_says_how_many_finished_examples_it_skips(tmp_path):
    from benchmark.run.options import RunOptions
    from benchmark.run.plan import open_run
    from benchmark.run.store import RunStore

    def config():
        return {"suite": "s", "tasks": [{"hash": "a"}, {"hash": "b"}]}

    said: list[str] = []
    store = RunStore(tmp_path / "run")
    open_run(store, config(), RunOptions(out=store.folder), said.append)
    with store.open_for_append() as w:
        for task, example in (("a", 0), ("a", 5), ("b", 0)):
            w.append({"task": task, "example": example})
    said.clear()
    _, done = open_run(store, config(), RunOptions(out=store.folder, resume=True), said.append)
    assert len(done) == 3
    assert "resuming: 3 finished example(s) are skipped" in said
