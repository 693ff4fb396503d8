"""Checkpoint store: config-hash keys, sha256 verification, zoo staleness."""
import json
import threading

import pytest
import torch
from torch import nn

from benchmark.errors import BenchError
from benchmark.infra.io import locked
from benchmark.models.store import ModelSpec, ModelStore


def _spec(lr=0.1, calls=None):
    def build():
        torch.manual_seed(0)
        return nn.Linear(3, 2)

    def train(m):
        if calls is not None:
            calls.append(1)
        with torch.no_grad():
            m.weight.fill_(lr)
        return m

    return ModelSpec(key="toy/linear", config={"lr": lr}, build=build, train=train)


def test_cache_roundtrip_and_corruption(tmp_path):
    calls = []
    store = ModelStore(cache_dir=tmp_path / "cache", zoo_dir=tmp_path / "zoo", log=lambda m: None)
    first = store.get(_spec(calls=calls))
    assert first.source == "trained" and len(calls) == 1
    again = ModelStore(cache_dir=tmp_path / "cache", zoo_dir=tmp_path / "zoo").get(_spec(calls=calls))
    assert again.source == "cache" and len(calls) == 1 and again.sha256 == first.sha256
    assert torch.equal(again.model.weight, first.model.weight)
    # a corrupt file is reported, never loaded
    pt = next((tmp_path / "cache" / "checkpoints").glob("*.pt"))
    pt.write_bytes(pt.read_bytes()[:-10] + b"0123456789")
    with pytest.raises(BenchError, match="corrupt"):
        ModelStore(cache_dir=tmp_path / "cache", zoo_dir=tmp_path / "zoo").get(_spec())


def test_zoo_write_load_and_stale(tmp_path):
    zoo = tmp_path / "zoo"
    writer = ModelStore(cache_dir=tmp_path / "c", zoo_dir=zoo, write_zoo=True, log=lambda m: None)
    writer.get(_spec(lr=0.1))
    manifest = json.loads((zoo / "manifest.json").read_text())
    assert manifest["entries"]["toy/linear"]["config"] == {"lr": 0.1}
    loaded = ModelStore(cache_dir=tmp_path / "c", zoo_dir=zoo, allow_train=False).get(_spec(lr=0.1))
    assert loaded.source == "zoo"
    # the code now asks for a different config: refused without training ...
    with pytest.raises(BenchError, match="config hash .*bench train"):
        ModelStore(cache_dir=tmp_path / "c", zoo_dir=zoo, allow_train=False).get(_spec(lr=0.2))
    # ... and retrained into the cache (with a note) when allowed
    notes = []
    m = ModelStore(cache_dir=tmp_path / "c", zoo_dir=zoo, log=notes.append).get(_spec(lr=0.2))
    assert m.source == "trained" and any("retraining" in n for n in notes)
    assert float(m.model.weight[0, 0].detach()) == pytest.approx(0.2)
    # once the cache holds it, the note says the cached checkpoint is used, not that it retrains
    notes.clear()
    again = ModelStore(cache_dir=tmp_path / "c", zoo_dir=zoo, log=notes.append).get(_spec(lr=0.2))
    assert again.source == "cache" and any("local cache" in n for n in notes)
    assert not any("retraining" in n for n in notes)
    # a corrupted zoo file is reported
    f = zoo / manifest["entries"]["toy/linear"]["file"]
    f.write_bytes(b"garbage")
    with pytest.raises(BenchError, match="corrupt"):
        ModelStore(cache_dir=tmp_path / "c", zoo_dir=zoo).get(_spec(lr=0.1))


def test_missing_model_without_training(tmp_path):
    with pytest.raises(BenchError, match="no trained model"):
        ModelStore(cache_dir=tmp_path / "c", zoo_dir=tmp_path / "z", allow_train=False).get(_spec())


def test_zoo_manifest_update_waits_for_the_lock(tmp_path):
    """A zoo write holds the folder's lock around its read-modify-write of the manifest, so a second
    `bench train` process cannot write back a manifest that drops the first one's entry."""
    zoo = tmp_path / "zoo"
    ModelStore(cache_dir=tmp_path / "c", zoo_dir=zoo, write_zoo=True, log=lambda m: None).get(_spec(lr=0.1))
    other = ModelSpec(key="toy/other", config={"lr": 0.2}, build=_spec().build, train=_spec(lr=0.2).train)
    writer = ModelStore(cache_dir=tmp_path / "c", zoo_dir=zoo, write_zoo=True, log=lambda m: None)
    with locked(zoo):  # another process mid-update
        t = threading.Thread(target=writer.get, args=(other,))
        t.start()
        t.join(timeout=0.5)
        assert t.is_alive(), "the zoo write did not wait for the manifest lock"
        assert "toy/other" not in json.loads((zoo / "manifest.json").read_text())["entries"]
    t.join(timeout=30)
    entries = json.loads((zoo / "manifest.json").read_text())["entries"]
    assert set(entries) == {"toy/linear", "toy/other"}


def test_float16_storage_is_what_every_run_evaluates(tmp_path):
    """``config["storage"] = "float16"`` halves the checkpoint; the model right after training, from the cache
    and from the zoo holds exactly the stored float16 values (evaluated as stored), and the hash records it."""
    def spec(storage):
        def train(m):
            with torch.no_grad():
                m.weight.copy_(torch.tensor([[0.1, 1 / 3, 2 ** -20], [1.0001, -0.7, 3.14159]]))
            return m
        base = _spec()
        config = {"lr": 0.1, **({"storage": storage} if storage else {})}
        return ModelSpec(key="toy/linear", config=config, build=base.build, train=train)

    half = spec("float16")
    assert half.config_hash != spec(None).config_hash
    fresh = ModelStore(cache_dir=tmp_path / "c", zoo_dir=tmp_path / "zoo", log=lambda m: None).get(half)
    pt = next((tmp_path / "c" / "checkpoints").glob("*.pt"))
    stored = torch.load(pt, weights_only=True)
    assert stored["weight"].dtype == torch.float16 and stored["bias"].dtype == torch.float16
    expected = stored["weight"].float()
    assert not torch.equal(expected, torch.tensor([[0.1, 1 / 3, 2 ** -20], [1.0001, -0.7, 3.14159]]))
    assert fresh.model.weight.dtype == torch.float32 and torch.equal(fresh.model.weight.detach(), expected)
    again = ModelStore(cache_dir=tmp_path / "c", zoo_dir=tmp_path / "zoo").get(half)
    assert again.source == "cache" and torch.equal(again.model.weight.detach(), expected)
    ModelStore(cache_dir=tmp_path / "c", zoo_dir=tmp_path / "zoo", write_zoo=True, log=lambda m: None).get(half)
    zoo = ModelStore(cache_dir=tmp_path / "c2", zoo_dir=tmp_path / "zoo", allow_train=False).get(half)
    assert zoo.source == "zoo" and torch.equal(zoo.model.weight.detach(), expected)
    with pytest.raises(BenchError, match="unknown checkpoint storage 'bfloat13'"):
        spec("bfloat13").stored_state(nn.Linear(3, 2))
