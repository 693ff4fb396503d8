"""Progress in logs is a line per step, not carriage-return redraws; --resume says what it skips."""
import io
import sys

from benchmark.infra.progress import LineProgress, progress_bar


def test_progress_in_a_log_is_plain_lines(monkeypatch):
    log = io.StringIO()
    monkeypatch.delenv("BENCH_QUIET", raising=False)
    monkeypatch.setattr(sys, "stderr", log)
    with progress_bar(total=8, desc="digits/rotation/tss") as bar:
        for _ in range(8):
            bar.update(1)
    text = log.getvalue()
    assert "\r" not in text
    lines = text.splitlines()
    assert lines[0] == "digits/rotation/tss: 0/8"
    assert lines[1:4] == ["digits/rotation/tss: 2/8 (25%)", "digits/rotation/tss: 4/8 (50%)",
                          "digits/rotation/tss: 6/8 (75%)"]
    assert lines[4].startswith("digits/rotation/tss: 8/8 done in ") and len(lines) == 5


def test_quiet_prints_nothing_and_a_terminal_gets_a_bar(monkeypatch):
    log = io.StringIO()
    monkeypatch.setattr(sys, "stderr", log)
    monkeypatch.setenv("BENCH_QUIET", "1")
    with progress_bar(total=3, desc="x") as bar:
        bar.update(3)
    assert log.getvalue() == "" and not isinstance(progress_bar(total=1), LineProgress)
    monkeypatch.delenv("BENCH_QUIET")
    monkeypatch.setattr(log, "isatty", lambda: True, raising=False)
    assert not isinstance(progress_bar(total=1), LineProgress)


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
