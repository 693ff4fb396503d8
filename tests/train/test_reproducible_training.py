"""Reproducible models: the same config trains bitwise the same weights; `bench train --verify` proves the zoo."""
import json

import pytest
import torch

from benchmark.datasets import get_dataset
from benchmark.models.architectures import build_classifier
from benchmark.models.determinism import comparable, max_weight_difference, training_environment, weights_digest
from benchmark.models.store import ZOO_DIR, ModelSpec, ModelStore
from benchmark.models.training import TrainConfig, train_classifier


def _data():
    x, y = get_dataset("digits").load("train")
    return x[:256], y[:256]


def _spec(seed: int = 0) -> ModelSpec:
    """A small digits CNN trained for one epoch with noise augmentation (every random source in play)."""
    spec = get_dataset("digits").spec
    cfg = TrainConfig(epochs=1, batch_size=64, lr=2e-3, seed=seed)

    def build():  # initialisation draws from torch's global generator, as every architecture does
        return build_classifier("small_cnn", 1, spec.num_classes, spec.shape[1], spec.mean, spec.std)

    def train(model):
        x, y = _data()
        return train_classifier(model, x, y, cfg, lambda xb, g: xb + 0.2 * torch.randn(xb.shape, generator=g),
                                desc="repro")

    return ModelSpec(key="digits/test-repro", config={"arch": "small_cnn", "train": cfg.to_dict(), "noise": 0.2},
                     build=build, train=train)


def test_same_config_same_weights_in_fresh_caches(tmp_path):
    digests = []
    for i in range(2):
        torch.manual_seed(1000 + i)  # whatever state the global generator is in must not matter
        store = ModelStore(cache_dir=tmp_path / f"cache{i}", zoo_dir=tmp_path / "zoo", log=lambda m: None)
        loaded = store.get(_spec())
        assert loaded.source == "trained"
        digests.append(weights_digest(loaded.model))
        meta = json.loads(next((tmp_path / f"cache{i}" / "checkpoints").glob("*.json")).read_text())
        assert meta["weights_sha256"] == digests[-1]
        assert meta["environment"] == training_environment("cpu")
    assert digests[0] == digests[1]
    # another seed in the config gives other weights (the digest sees the tensors)
    other = ModelStore(cache_dir=tmp_path / "cache-other", zoo_dir=tmp_path / "zoo", log=lambda m: None).get(_spec(1))
    assert weights_digest(other.model) != digests[0]


def test_training_leaves_global_generators_untouched(tmp_path):
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    was = torch.are_deterministic_algorithms_enabled()
    ModelStore(cache_dir=tmp_path / "c", zoo_dir=tmp_path / "zoo", log=lambda m: None).get(_spec())
    assert torch.equal(torch.rand(3), expected)
    assert torch.are_deterministic_algorithms_enabled() == was


def test_digest_and_difference_helpers():
    a = {"w": torch.zeros(2, 2), "b": torch.ones(2)}
    b = {"w": torch.zeros(2, 2), "b": torch.tensor([1.0, 1.5])}
    assert weights_digest(a) == weights_digest({k: v.clone() for k, v in a.items()})
    assert weights_digest(a) != weights_digest(b)
    assert max_weight_difference(a, b) == pytest.approx(0.5)
    assert max_weight_difference(a, {"w": a["w"]}) == float("inf")
    env = training_environment("cpu")
    assert comparable(env, dict(env)) and not comparable({**env, "threads": env["threads"] + 1}, env)
    assert not comparable(None, env)


def test_verify_reports_packaged_vanilla(monkeypatch):
    """Retrain the packaged digits/vanilla like `bench train --verify --defense vanilla` and compare.

    Where the packaged entry was trained in this environment (same torch, CPU instruction set and
    thread count), the retrained weights must be bitwise identical; elsewhere the verdict must say so.
    """
    from benchmark.suites import load_suite
    from benchmark.train.zoo_verify import verify_zoo

    entry = json.loads((ZOO_DIR / "manifest.json").read_text())["entries"]["digits/vanilla"]
    recorded = entry.get("environment") or {}
    threads = torch.get_num_threads()
    if recorded.get("threads"):
        torch.set_num_threads(int(recorded["threads"]))
    try:
        checks = verify_zoo(load_suite("semantic"), defenses=["vanilla"], log=lambda m: None)
        env = training_environment("cpu")
    finally:
        torch.set_num_threads(threads)
    [check] = checks
    assert check.key == "digits/vanilla"
    if comparable(recorded, env):
        assert check.status == "identical", check.line()
    else:
        assert check.status in ("identical", "not comparable"), check.line()
