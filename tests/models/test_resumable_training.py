"""Resumable training (models/training.py ``epoch_checkpoints``, models/store.py): a training killed after epoch k
resumes from its last per-epoch state and ends with bit for bit the weights of an uninterrupted run."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import torch

from benchmark.models.architectures import build_classifier
from benchmark.models.determinism import weights_digest
from benchmark.models.store import ModelSpec, ModelStore
from benchmark.models.training import TrainConfig, train_classifier

#: TSS's schedule (SGD + momentum + step) with consistency training, on a few synthetic images
CFG = TrainConfig(epochs=4, batch_size=8, lr=0.05, weight_decay=1e-4, optimizer="sgd", momentum=0.9,
                  lr_schedule="step", lr_step=2, lr_gamma=0.5, consistency_lambda=5.0, noise_draws=2)


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    y = torch.arange(24) % 2
    x = 0.2 * torch.rand(24, 1, 28, 28, generator=g)
    x[y == 0, :, 4:12, 8:20] += 0.7
    x[y == 1, :, 16:24, 8:20] += 0.7
    return x.clamp(0, 1), y


def _spec(on_epoch=None) -> ModelSpec:
    x, y = _data()

    def augment(xb: torch.Tensor, g: torch.Generator) -> torch.Tensor:
        return xb + 0.3 * torch.randn(xb.shape, generator=g)

    return ModelSpec(key="test/resume", config={"test": "resume", "train": CFG.to_dict()},
                     build=lambda: build_classifier("small_cnn", 1, 2, 28, (0.5,), (0.5,)),
                     train=lambda m: train_classifier(m, x, y, CFG, augment, on_epoch=on_epoch))


def _store(tmp: Path) -> ModelStore:
    return ModelStore(cache_dir=tmp / "cache", zoo_dir=tmp / "zoo", log=lambda m: None)


class _Killed(Exception):
    pass


def test_resume_after_an_interrupted_epoch_gives_the_same_weights(tmp_path):
    torch.set_num_threads(1)
    straight = weights_digest(_store(tmp_path / "a").get(_spec()).model)

    def stop_after_2(epoch: int) -> None:
        if epoch == 2:
            raise _Killed

    store = _store(tmp_path / "b")
    try:
        store.get(_spec(stop_after_2))
    except _Killed:
        pass
    partial = list((tmp_path / "b" / "cache" / "checkpoints").glob("*.epochs.*.pt"))
    assert len(partial) == 1 and torch.load(partial[0], weights_only=False)["epoch"] == 2
    epochs_run = []
    resumed = _store(tmp_path / "b").get(_spec(epochs_run.append))
    assert epochs_run == [3, 4]  # epochs 1-2 were not trained again
    assert weights_digest(resumed.model) == straight
    assert resumed.source == "trained"
    assert not list((tmp_path / "b" / "cache" / "checkpoints").glob("*.epochs.*"))  # cleaned up once saved


def test_a_killed_process_resumes_bit_for_bit(tmp_path):
    """SIGKILL (no clean-up, no exception handler) after epoch 1, then a fresh process finishes the training."""
    torch.set_num_threads(1)
    straight = weights_digest(_store(tmp_path / "a").get(_spec()).model)
    script = textwrap.dedent(f"""
        import os, signal, sys, torch
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_resumable_training import _spec, _store
        from pathlib import Path
        torch.set_num_threads(1)
        kill = sys.argv[1] == "kill"
        def on_epoch(e):
            if kill and e == 1:
                os.kill(os.getpid(), signal.SIGKILL)
        from benchmark.models.determinism import weights_digest
        print(weights_digest(_store(Path({str(tmp_path / "b")!r})).get(_spec(on_epoch)).model))
    """)
    env = {**os.environ, "BENCH_QUIET": "1"}
    killed = subprocess.run([sys.executable, "-c", script, "kill"], capture_output=True, text=True, env=env)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    done = subprocess.run([sys.executable, "-c", script, "resume"], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == straight


def test_a_checkpoint_of_another_training_is_ignored(tmp_path):
    """A state file whose config differs (same path) is not resumed from: the training starts at epoch 1."""
    torch.set_num_threads(1)
    store = _store(tmp_path)
    spec = _spec()
    base = store._epochs_base(spec)
    base.parent.mkdir(parents=True)
    torch.save({"fingerprint": {"config": {}, "desc": "other", "n": 1}, "epoch": 3}, f"{base}.0.pt")
    epochs_run = []
    store.get(_spec(epochs_run.append))
    assert epochs_run == [1, 2, 3, 4]


def test_schedule_recorded_only_when_used():
    assert "optimizer" not in TrainConfig().to_dict() and "lr_schedule" not in TrainConfig().to_dict()
    d = CFG.to_dict()
    assert (d["optimizer"], d["momentum"], d["lr_schedule"], d["lr_step"], d["lr_gamma"]) == ("sgd", 0.9, "step", 2, 0.5)
