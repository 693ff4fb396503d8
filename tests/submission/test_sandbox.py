"""Defense code cannot read the evaluation data, write outside its run or reach the network, and existing
leaderboard entries survive a submission (``benchmark.infra.sandbox``, ``benchmark.submission.entries_guard``)."""
import hashlib
import shutil
from pathlib import Path

import pytest

from tests.repo import REPO
from tests.submission.test_submission import _submit, _write

REPO_BOARDS = REPO / "leaderboards" / "semantic" / "digits"

# a nearest-neighbour lookup of the test split read from the dataset's own file; the lookup survives the
# noise canaries, so only refusing the file stops it (it swallows the refusal and falls back to its model)
NEAREST_FROM_FILE = '''
from benchmark.datasets.digits import Digits
class D(Base):
    name = "nearest_from_file"
    def prepare(self, ctx):
        super().prepare(ctx)
        try:
            self.xs, self.ys = Digits.load.__wrapped__(Digits(), "test")   # around the harness's guard
        except Exception:
            self.xs = None
    def predict(self, x, t, g):
        if self.xs is None:
            return super().predict(x, t, g)
        return self.ys[torch.cdist(x.flatten(1), self.xs.flatten(1)).argmin(1)]
'''

# the same lookup on the test split found in the harness's memory (its callers' frames): the lookup traps
NEAREST_FROM_MEMORY = '''
def test_split_in_memory():
    f = sys._getframe()
    while f is not None:
        for xs, ys in (("x", "y"), ("x_all", "y_all")):
            a, b = f.f_locals.get(xs), f.f_locals.get(ys)
            if torch.is_tensor(a) and torch.is_tensor(b) and a.dim() == 4 and len(a) == 397 and b.shape == (397,):
                return a, b
        f = f.f_back
    return None


class D(Base):
    name = "nearest_from_memory"
    def predict(self, x, t, g):
        found = test_split_in_memory()
        if found is None:
            return super().predict(x, t, g)
        return found[1][torch.cdist(x.flatten(1), found[0].flatten(1)).argmin(1)]
'''


def _errors(report, rule):
    return [f["message"] for f in report["findings"] if f["rule"] == rule and f["level"] == "error"]


def test_a_defense_reading_the_dataset_file_itself_is_rejected_naming_the_file(tmp_path):
    rc, report, lb = _submit(tmp_path, _write(tmp_path, "nearest_from_file", NEAREST_FROM_FILE))
    assert rc == 1 and not list(lb.rglob("*.json"))
    messages = _errors(report, "test_split")
    assert any("digits.csv.gz" in m and "tried to open" in m for m in messages), report["findings"]


def test_a_nearest_neighbour_lookup_from_memory_fails_the_lookup_traps(tmp_path):
    rc, report, lb = _submit(tmp_path, _write(tmp_path, "nearest_from_memory", NEAREST_FROM_MEMORY))
    assert rc == 1 and not list(lb.rglob("*.json"))
    assert any("lookup traps" in m for m in _errors(report, "test_split")), report["findings"]
    canary = report["canary"]
    assert canary["real_accuracy"] == 1.0 and canary["canary_accuracy"] == 1.0  # noise does not disturb it
    # the canary noise comes from a fresh secret each run, so a lookup lands on a trap's own label now and then
    # (measured over 13 runs: 0-2 of 16 right, 14-16 of 16 answered with the nearest test image's label)
    assert canary["traps"] == 16 and canary["trap_accuracy"] <= 0.25 and canary["lookup_match"] >= 0.75


def test_an_honest_classifier_weak_on_the_traps_is_not_taken_for_a_lookup():
    """Traps are atypical images: a weak honest classifier may get most of them wrong (the built-in spt
    answers about a third right). Only answering them with the nearest test image's label rejects."""
    import torch

    from benchmark.audit.canary import check_canary
    from benchmark.audit.checker import CheckReport

    g = torch.Generator().manual_seed(0)
    x, y = torch.rand(8, 1, 4, 4, generator=g), torch.arange(8) % 10
    xt, yt = torch.rand(16, 1, 4, 4, generator=g), torch.arange(16) % 10
    looked_up = (yt + 1) % 10

    class Stub:
        def __init__(self, on_traps):
            self.on_traps = on_traps

        def predict(self, images, t, generator):
            return self.on_traps if len(images) == 16 else y[:len(images)]  # the traps: 16 images

    weak = torch.where(torch.arange(16) < 4, yt, (yt + 2) % 10)  # 25% right, the rest wrong but no lookup
    for on_traps, rejected in ((weak, False), (looked_up, True)):
        report = CheckReport("stub")
        result = check_canary(Stub(on_traps), None, x, y, 0, report, (xt, yt, looked_up))
        assert bool(report.errors()) is rejected, (result, report.render())
    assert result["trap_accuracy"] == 0.0 and result["lookup_match"] == 1.0


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_defense_overwriting_leaderboard_entries_is_rejected_and_they_survive(tmp_path):
    lb = tmp_path / "lb"
    shutil.copytree(REPO_BOARDS, lb / "semantic" / "digits",
                    ignore=lambda d, names: [n for n in names if not n.startswith("vanilla.")])
    before = _digest(lb)
    assert "semantic/digits/vanilla.json" in before
    body = f'''
from pathlib import Path
class D(Base):
    name = "vandal"
    def prepare(self, ctx):
        super().prepare(ctx)
        for p in {[str(lb / k) for k in before]!r}:   # listing the folder is refused too; it knows the names
            try:
                p = Path(p)
                p.write_text("{{}}")
            except OSError:
                pass
'''
    rc, report, _ = _submit(tmp_path, _write(tmp_path, "vandal", body))
    assert rc == 1 and not report["passed"]
    assert _digest(lb) == before, "existing entries must be unchanged"
    messages = _errors(report, "sandbox")
    assert len(messages) == len(before)  # one per entry file it tried to overwrite
    assert any("tried to open for writing" in m and str(lb / "semantic" / "digits" / "vanilla.json") in m
               for m in messages), messages


@pytest.mark.parametrize("name,body,tried", [
    ("writes_beside_itself", '''
from pathlib import Path
class D(Base):
    name = "writes_beside_itself"
    def prepare(self, ctx):
        super().prepare(ctx)
        (Path(__file__).parent / "stolen.txt").write_text("x")
''', "tried to open for writing"),
    ("opens_socket", '''
import socket
class D(Base):
    name = "opens_socket"
    def predict(self, x, t, g):
        socket.socket().close()
        return super().predict(x, t, g)
''', "socket.__new__"),
    ("runs_a_process", '''
import subprocess
class D(Base):
    name = "runs_a_process"
    def prepare(self, ctx):
        super().prepare(ctx)
        subprocess.run(["true"])
''', "subprocess.Popen"),
    ("import_time_write", '''
from pathlib import Path
(Path(__file__).parent / "at_import.txt").write_text("x")   # module code of the submission is defense code
class D(Base):
    name = "import_time_write"
''', "at_import.txt"),
])
def test_writes_outside_the_run_sockets_and_processes_are_rejected_naming_them(tmp_path, name, body, tried):
    rc, report, lb = _submit(tmp_path, _write(tmp_path, name, body))
    assert rc == 1 and not list(lb.rglob("*.json"))
    assert any(tried in m for m in _errors(report, "sandbox")), report["findings"]
    assert not (tmp_path / "stolen.txt").exists() and not (tmp_path / "at_import.txt").exists()


def test_the_harness_is_not_confined_outside_defense_code(tmp_path):
    from benchmark.datasets import get_dataset
    from benchmark.datasets.base import defense_code
    from benchmark.infra import sandbox

    x, _ = get_dataset("digits").load("train")  # the harness reads the data; the hook is idle
    (tmp_path / "ok.txt").write_text("harness")
    with sandbox.protect([tmp_path]), defense_code("probe"):
        x_train, _ = get_dataset("digits").load("train")  # ctx.train_data(): the harness reads for the defense
        with pytest.raises(PermissionError):
            (tmp_path / "ok.txt").read_text()
    assert x_train.shape == x.shape
    assert [rule for rule, _ in sandbox.take_attempts()] == ["sandbox"]
    assert (tmp_path / "ok.txt").read_text() == "harness"
