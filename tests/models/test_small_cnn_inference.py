"""SmallCNN's inference path (pool before relu, 2x2 max as two elementwise maximums) gives exactly the
numbers of its layers run in order, and gradients keep MaxPool2d's path."""
import torch

from benchmark.models.architectures import SmallCNN, build_classifier
from benchmark.models.store import ZOO_DIR


def _zoo_vanilla() -> torch.nn.Module:
    m = build_classifier("small_cnn", 1, 10, 28, (0.5,), (0.5,)).eval()
    m.load_state_dict(torch.load(ZOO_DIR / "files" / "digits__vanilla.pt", weights_only=False))
    return m


def test_inference_equals_the_layers_exactly():
    m = _zoo_vanilla()
    g = torch.Generator().manual_seed(0)
    x = torch.cat([torch.rand(20, 1, 28, 28, generator=g), torch.randn(20, 1, 28, 28, generator=g),
                   torch.zeros(2, 1, 28, 28)])
    body = m[1]
    with torch.no_grad():
        fast = m(x)
        layers = body.classifier(body.features(m[0](x)))
    assert torch.equal(fast, layers)


def test_gradients_use_the_module_path():
    m = SmallCNN(1, 10).eval()
    x = torch.rand(3, 1, 28, 28, requires_grad=True)
    out = m(x)
    assert out.grad_fn is not None
    out.sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()


def test_odd_sizes_fall_back_to_the_layers():
    m = SmallCNN(1, 10, image_size=30).eval()  # 30 is not a multiple of 4: MaxPool2d's floor semantics
    x = torch.rand(2, 1, 30, 30)
    with torch.no_grad():
        assert torch.equal(m(x), m.classifier(m.features(x)))
