"""SmallCNN's inference path (channels-last convolutions, pool before relu, 2x2 max as two elementwise
maximums) gives exactly the numbers of its layers run in order on the same convolutions, and gradients keep
the module's path."""
import torch
import torch.nn.functional as F

from benchmark.models.architectures import SmallCNN, _nhwc, build_classifier
from benchmark.models.store import ZOO_DIR


def _zoo_vanilla() -> torch.nn.Module:
    m = build_classifier("small_cnn", 1, 10, 28, (0.5,), (0.5,)).eval()
    m.load_state_dict(torch.load(ZOO_DIR / "files" / "digits__vanilla.pt", weights_only=False))
    return m


def test_inference_equals_the_layers_exactly():
    """The pooling shortcut is exact: the layers run in order on the same (channels-last) convolutions give
    the same bits; against the module path (NCHW convolutions) the logits agree to float32 round-off."""
    m = _zoo_vanilla()
    g = torch.Generator().manual_seed(0)
    x = torch.cat([torch.rand(20, 1, 28, 28, generator=g), torch.randn(20, 1, 28, 28, generator=g),
                   torch.zeros(2, 1, 28, 28)])
    body = m[1]
    conv1, conv2 = body.features[0], body.features[3]
    with torch.no_grad():
        fast = m(x)
        h = body.features[2](body.features[1](F.conv2d(m[0](x), _nhwc(conv1.weight), conv1.bias, padding=1)))
        h = body.features[5](body.features[4](F.conv2d(h, _nhwc(conv2.weight), conv2.bias, padding=1)))
        assert torch.equal(fast, body.classifier(h))
        layers = body.classifier(body.features(m[0](x)))
    torch.testing.assert_close(fast, layers, rtol=1e-5, atol=1e-5)
    assert torch.equal(fast.argmax(1), layers.argmax(1))


def test_weights_are_stored_channels_last_even_with_one_input_channel():
    """oneDNN picks its channels-last kernel from the strides; a 1-input-channel weight made with
    ``contiguous(memory_format=channels_last)`` keeps NCHW strides (both layouts coincide), which took the
    first convolution back to the slow kernel."""
    for shape in [(32, 1, 3, 3), (64, 32, 3, 3)]:
        w = torch.randn(*shape)
        w_cl = _nhwc(w)
        assert torch.equal(w_cl, w)
        assert w_cl.stride() == (shape[1] * 9, 1, 3 * shape[1], shape[1])


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
