"""TSS's consistency training (models/training.py, recipes.py): objective, config record, loss drop, seeds."""
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from benchmark.errors import BenchError
from benchmark.models.architectures import build_classifier
from benchmark.models.determinism import weights_digest
from benchmark.models.store import ModelStore
from benchmark.models.training import TrainConfig, consistency_loss, train_classifier
from benchmark.recipes import classifier_spec


def _data(n: int = 48) -> tuple[torch.Tensor, torch.Tensor]:
    """Two synthetic 28x28 classes (ink in the top or the bottom half) plus pixel noise: learnable in a few steps."""
    g = torch.Generator().manual_seed(0)
    y = torch.arange(n) % 2
    x = 0.2 * torch.rand(n, 1, 28, 28, generator=g)
    x[y == 0, :, 4:12, 8:20] += 0.7
    x[y == 1, :, 16:24, 8:20] += 0.7
    return x.clamp(0, 1), y


def _noise(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    return x + 0.3 * torch.randn(x.shape, generator=g)


def test_consistency_loss_is_tss_objective():
    logits = torch.randn(2 * 5, 10, generator=torch.Generator().manual_seed(1))
    a, b = logits.chunk(2)
    pa, pb = F.softmax(a, 1), F.softmax(b, 1)
    mean = (pa + pb) / 2
    kl = lambda p: (mean * (mean.log() - p.log())).sum(1)  # noqa: E731  KL(mean || p)
    ent = -(F.softmax(mean, 1) * F.log_softmax(mean, 1)).sum(1)  # TSS's _entropy(avg_softmax)
    expected = ((kl(pa) + ent + kl(pb) + ent) / 2).mean()
    assert torch.allclose(consistency_loss(logits, 2), expected, atol=1e-6)
    # identical draws: the KL part vanishes, only TSS's entropy term is left
    same = torch.cat([a, a])
    assert torch.allclose(consistency_loss(same, 2), (-(F.softmax(pa, 1) * F.log_softmax(pa, 1)).sum(1)).mean(),
                          atol=1e-6)


def test_consistency_config_recorded_only_when_on():
    assert set(TrainConfig().to_dict()) == {"epochs", "batch_size", "lr", "weight_decay", "seed"}  # old hashes stay
    on = TrainConfig(consistency_lambda=10.0, noise_draws=2).to_dict()
    assert on["consistency_lambda"] == 10.0 and on["noise_draws"] == 2
    with pytest.raises(BenchError, match="noise_draws >= 1"):
        TrainConfig(noise_draws=0)
    with pytest.raises(BenchError, match="cannot be combined"):
        train_classifier(build_classifier("conv4fc3", 1, 2, 28, [0.5], [0.5]), *_data(8),
                         TrainConfig(epochs=1, noise_draws=2), loss_fn=lambda m, x, y, g: x.sum())


def _ctx(x: torch.Tensor, y: torch.Tensor) -> SimpleNamespace:
    spec = SimpleNamespace(name="synthetic-28", version=1, shape=(1, 28, 28), num_classes=2, mean=[0.5], std=[0.5])
    return SimpleNamespace(dataset=SimpleNamespace(spec=spec), train_data=lambda: (x, y), device="cpu")


def test_recipe_records_arch_and_consistency_in_the_hash():
    ctx = _ctx(*_data(8))
    plain = classifier_spec(ctx, "tss/x", {"name": "noise"}, _noise)
    tss = classifier_spec(ctx, "tss/x", {"name": "noise"}, _noise, arch="conv4fc3", consistency_lambda=10.0,
                          noise_draws=2)
    assert plain.config["arch"] == "small_cnn" and "noise_draws" not in plain.config["train"]
    assert tss.config["arch"] == "conv4fc3"
    assert tss.config["train"]["consistency_lambda"] == 10.0 and tss.config["train"]["noise_draws"] == 2
    assert len({plain.config_hash, tss.config_hash,
                classifier_spec(ctx, "tss/x", {"name": "noise"}, _noise, arch="conv4fc3", consistency_lambda=10.0,
                                noise_draws=3).config_hash}) == 3


def _objective(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    """(cross-entropy, 10 * consistency) on two fixed noise draws of (x, y)."""
    xx = _noise(torch.cat([x, x]), torch.Generator().manual_seed(5))
    with torch.no_grad():
        logits = model(xx)
        return float(F.cross_entropy(logits, torch.cat([y, y]))), float(10.0 * consistency_loss(logits, 2))


def test_consistency_training_lowers_the_objective_and_is_seeded(tmp_path):
    x, y = _data()
    ctx = _ctx(x, y)
    spec = classifier_spec(ctx, "tss/consistency-test", {"name": "noise", "sigma": 0.3}, _noise, arch="conv4fc3",
                           consistency_lambda=10.0, noise_draws=2)
    spec = type(spec)(key=spec.key, config={**spec.config, "train": {**spec.config["train"], "epochs": 4}},
                      build=spec.build, train=lambda m: train_classifier(
                          m, x, y, TrainConfig(epochs=4, batch_size=16, lr=1e-3, consistency_lambda=10.0,
                                               noise_draws=2), _noise))
    torch.manual_seed(0)
    before = _objective(spec.build().eval(), x, y)
    digests = []
    for i in range(2):
        torch.manual_seed(100 + i)  # the global generator's state must not matter
        loaded = ModelStore(cache_dir=tmp_path / f"c{i}", zoo_dir=tmp_path / "zoo", log=lambda m: None).get(spec)
        digests.append(weights_digest(loaded.model))
    assert digests[0] == digests[1]
    after = _objective(loaded.model, x, y)
    # TSS's entropy term has a floor (2 classes: 10 * H(softmax([1, 0])) = 5.8), so the cross-entropy carries the drop
    assert sum(after) < sum(before) - 1.5 and after[0] < 0.1 and after[1] < before[1], (before, after)


def test_consistency_loss_gradient_stays_finite_when_softmax_underflows():
    """A confident model's softmax underflows to 0 in float32; the objective's value is unchanged but its gradient
    must stay finite (TSS's F.kl_div form has log p_mean + 1 = -inf in it: the NaN seen training gaussian_blur)."""
    for draws in (1, 2):
        logits = torch.tensor([[200.0, 0.0, -5.0]] * draws * 2, requires_grad=True)
        assert (F.softmax(logits, 1) == 0).any()
        loss = consistency_loss(logits, draws)
        loss.backward()
        assert torch.isfinite(loss) and torch.isfinite(logits.grad).all()
        with torch.no_grad():  # the value is TSS's: KL 0 (identical draws) + entropy of softmax(p_mean)
            p = F.softmax(logits[:2], 1)
            assert float(loss) == pytest.approx(float(-(F.softmax(p, 1) * F.log_softmax(p, 1)).sum(1).mean()), abs=1e-6)
