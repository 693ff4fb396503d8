"""AugMix baseline: JS consistency loss, 1-channel AugMix views, the training loss hook, RobustBench loading."""
import pytest
import torch

from baselines.augmix import AugMix, augmix_views, js_consistency
from benchmark.errors import BenchError
from benchmark.models.training import TrainConfig, train_classifier


def test_js_zero_for_identical_positive_otherwise():
    z = torch.randn(5, 10, generator=torch.Generator().manual_seed(0))
    assert js_consistency([z, z.clone(), z + 3.0]).abs() < 1e-6  # softmax is shift invariant
    w = torch.randn(5, 10, generator=torch.Generator().manual_seed(1))
    js = js_consistency([z, z, w])
    assert js > 1e-3
    # bounded by log(3) for three distributions, symmetric under reordering
    assert js < torch.log(torch.tensor(3.0))
    assert torch.isclose(js, js_consistency([w, z, z]))


def test_augmix_views_one_channel_seeded_and_global_rng_untouched():
    from torchvision.transforms import AugMix as TVAugMix

    x = torch.rand(16, 1, 28, 28, generator=torch.Generator().manual_seed(0))
    aug = TVAugMix()
    torch.manual_seed(7)
    state = torch.get_rng_state()
    a = augmix_views(x, torch.Generator().manual_seed(5), aug)
    assert torch.equal(torch.get_rng_state(), state)
    b = augmix_views(x, torch.Generator().manual_seed(5), aug)
    assert a.shape == x.shape and a.dtype == x.dtype and torch.equal(a, b)
    assert 0 <= float(a.min()) and float(a.max()) <= 1
    assert (a - x).abs().mean() > 0.005
    # many chains on 1-channel images: every op in AugMix's space must accept them
    gen = torch.Generator().manual_seed(1)
    for _ in range(10):
        augmix_views(x, gen, aug)


def test_train_classifier_uses_loss_hook():
    calls = []

    def loss_fn(model, x, y, gen):
        calls.append(len(x))
        return torch.nn.functional.cross_entropy(model(x), y)

    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(4, 3))
    x, y = torch.rand(10, 1, 2, 2), torch.arange(10) % 3
    train_classifier(model, x, y, TrainConfig(epochs=2, batch_size=4), loss_fn=loss_fn)
    assert calls == [4, 4, 2, 4, 4, 2]


def _ctx(dataset, data_root):
    from benchmark.certify.smoothing import SmoothingParams
    from benchmark.context import Context
    from benchmark.datasets import get_dataset
    from benchmark.models.store import ModelStore
    from benchmark.transformations import get_transformation

    return Context(dataset=get_dataset(dataset), transformation=get_transformation("brightness"),
                   smoothing=SmoothingParams(n0=8, n=16, alpha=0.01, batch_size=8),
                   store=ModelStore(allow_train=False), data_root=data_root)


def test_robustbench_model_absent_is_a_clear_error(tmp_path):
    d = AugMix(robustbench_model="Hendrycks2020AugMix_ResNeXt")
    with pytest.raises(BenchError) as err:
        d.prepare(_ctx("cifar10", tmp_path))
    msg = str(err.value)
    want = tmp_path / "robustbench_models" / "cifar10" / "corruptions" / "Hendrycks2020AugMix_ResNeXt.pt"
    assert "not found" in msg and str(want) in msg
    with pytest.raises(BenchError, match="needs its checkpoint under --data-root"):
        d.prepare(_ctx("cifar10", None))
    with pytest.raises(BenchError, match="CIFAR-10 corruptions model"):
        d.prepare(_ctx("digits", tmp_path))


def test_zoo_model_predicts_and_is_plain(tmp_path):
    from benchmark.transformations import get_transformation

    d = AugMix()
    d.prepare(_ctx("digits", None))  # packaged zoo, no training
    x = torch.rand(3, 1, 28, 28)
    t = get_transformation("brightness")
    p = d.predict(x, t, torch.Generator())
    assert p.dtype == torch.int64 and p.shape == (3,)
    assert torch.equal(d.noisy_logits(x, t, torch.Generator()).argmax(1), p)
    assert not d.certified
