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


def _js_before_the_fix(logits):
    """The loss as first written: the KL's target is the softmax itself."""
    import torch.nn.functional as F
    probs = [F.softmax(z, dim=1) for z in logits]
    log_mix = torch.clamp(torch.stack(probs).mean(dim=0), 1e-7, 1.0).log()
    return sum(F.kl_div(log_mix, p, reduction="batchmean") for p in probs) / len(probs)


def test_js_gradient_stays_finite_when_a_softmax_underflows_and_is_unchanged_otherwise():
    """A confident model's softmax is exactly 0 for some classes (logit gap > ~104 in float32): the loss as
    first written had a NaN gradient there (the 60-epoch MNIST AugMix model became all NaN). Where every
    probability is positive, value and gradient are bit for bit those of the first form (the zoo's AugMix
    checkpoints stay reproducible)."""
    gen = torch.Generator().manual_seed(0)
    normal = [torch.randn(6, 10, generator=gen, requires_grad=True) for _ in range(3)]
    twins = [z.detach().clone().requires_grad_() for z in normal]
    new, old = js_consistency(normal), _js_before_the_fix(twins)
    new.backward(), old.backward()
    assert torch.equal(new, old) and all(torch.equal(a.grad, b.grad) for a, b in zip(normal, twins))

    confident = torch.zeros(4, 10)
    confident[:, 0] = 300.0  # softmax: exactly 1 and 0 in float32
    logits = [(confident + 0.01 * torch.randn(4, 10, generator=gen)).requires_grad_() for _ in range(3)]
    twins = [z.detach().clone().requires_grad_() for z in logits]
    assert (torch.softmax(logits[0], 1) == 0).any()
    js_consistency(logits).backward()
    assert all(torch.isfinite(z.grad).all() for z in logits)
    _js_before_the_fix(twins).backward()
    assert any(torch.isnan(z.grad).any() for z in twins)  # what the fix is for


def test_training_stops_with_a_clear_error_on_a_non_finite_loss():
    """A NaN loss is never stepped into the weights (no checkpoint of NaNs is written)."""
    x, y = torch.rand(64, 1, 8, 8), torch.randint(0, 3, (64,))
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 3))
    calls = []

    def loss_fn(m, xb, yb, gen):
        calls.append(1)
        out = torch.nn.functional.cross_entropy(m(xb), yb)
        return out * float("nan") if len(calls) == 3 else out

    with pytest.raises(BenchError, match="training loss became nan at step 3"):
        train_classifier(model, x, y, TrainConfig(epochs=2, batch_size=16), loss_fn=loss_fn)


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


def test_loading_the_zoo_model_does_not_import_torchvision():
    """torchvision's AugMix is needed only to train; its import (~1.7 s, ~170 MB: it pulls in torch._dynamo)
    stays out of every run worker that loads the packaged model."""
    import subprocess
    import sys

    code = ("import sys\n"
            "from tests.baselines.test_augmix import AugMix, _ctx\n"
            "AugMix().prepare(_ctx('digits', None))\n"
            "print('torchvision' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "False"
