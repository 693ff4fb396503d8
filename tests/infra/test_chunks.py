"""CPU slicing of inference (benchmark/infra/chunks.py): same rows, sliced only where it is meant to be."""
from __future__ import annotations

import torch

from baselines.gsmooth.surrogate import Surrogate
from benchmark.infra.chunks import CPU_ROWS, in_cpu_slices
from benchmark.models.architectures import build_classifier


def _sizes(calls: list[int]):
    def fn(x: torch.Tensor) -> torch.Tensor:
        calls.append(x.shape[0])
        return x * 2
    return fn


def test_slices_only_large_cpu_batches_without_autograd():
    calls: list[int] = []
    x = torch.arange(3 * CPU_ROWS + 5, dtype=torch.float32).view(-1, 1)
    with torch.no_grad():
        out = in_cpu_slices(_sizes(calls), x)
    assert calls == [CPU_ROWS, CPU_ROWS, CPU_ROWS, 5]
    assert torch.equal(out, x * 2)
    calls.clear()
    with torch.no_grad():
        in_cpu_slices(_sizes(calls), x[:CPU_ROWS])
    assert calls == [CPU_ROWS]
    calls.clear()
    with torch.enable_grad():
        in_cpu_slices(_sizes(calls), x.requires_grad_())
    assert calls == [len(x)]  # autograd sees the layer whole (training, attacks)


def test_classifier_and_decoder_rows_do_not_depend_on_the_batch():
    torch.manual_seed(0)
    model = build_classifier("small_cnn", 1, 10, 28, [0.5], [0.5]).eval()
    surrogate = Surrogate(1, 28, 1, 1.0, encoder="pose", kind="orientation").eval()
    x = torch.rand(300, 1, 28, 28)
    z = torch.rand(300, 2, 28, 28)
    with torch.inference_mode():
        logits = model(x)
        one_by_one = torch.cat([model(x[i:i + 1]) for i in range(0, 300, 37)])
        decoded = surrogate.H(z)
        decoded_rows = torch.cat([surrogate.H(z[i:i + 1]) for i in range(0, 300, 37)])
    torch.testing.assert_close(one_by_one, logits[::37], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(decoded_rows, decoded[::37], rtol=1e-5, atol=1e-5)
    with torch.enable_grad():
        torch.testing.assert_close(model(x), logits, rtol=1e-5, atol=1e-5)
