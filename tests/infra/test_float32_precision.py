"""IEEE float32 arithmetic whenever certificates are computed: TF32 (cuDNN convolutions use it by default
on CUDA) and oneDNN's reduced precision are turned off, and the setting is recorded with every run."""
import pytest
import torch

from benchmark.infra.environment import environment, float32_precision, resolve_device, strict_float32


@pytest.fixture
def tf32_on():
    """Leave torch as a user script may have left it (TF32 everywhere), restore IEEE afterwards."""
    torch.backends.cuda.matmul.fp32_precision = "tf32"
    torch.backends.cudnn.conv.fp32_precision = "tf32"
    torch.set_float32_matmul_precision("high")
    yield
    strict_float32()


def _all_ieee(rec: dict) -> bool:
    return rec["matmul_precision"] == "highest" and all(v == "ieee" for k, v in rec.items() if k != "matmul_precision")


def test_every_command_that_runs_models_sets_ieee_float32(tf32_on):
    assert not _all_ieee(float32_precision())
    resolve_device("cpu")  # what every `bench` command that runs models calls first
    assert _all_ieee(float32_precision())


def test_a_run_worker_resets_what_a_defense_changed(tf32_on):
    from types import SimpleNamespace

    from benchmark.run.kinds.semantic import SemanticWorker

    def stop(dataset):
        raise RuntimeError("stop")

    worker = SemanticWorker(SimpleNamespace(images=SimpleNamespace(get=stop)), models=None, out_dir=None)
    worker.prepared = {"h": (None, None, None, None)}
    with pytest.raises(RuntimeError, match="stop"):
        worker.evaluate(SimpleNamespace(hash="h", dataset="digits"), 0)  # set before the example is touched
    assert _all_ieee(float32_precision())


def test_the_run_environment_records_the_precision():
    strict_float32()
    rec = environment("cpu")["float32"]
    assert _all_ieee(rec) and {"cuda.matmul", "cudnn.conv", "mkldnn.conv"} <= set(rec)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (TF32 exists only on CUDA devices)")
def test_cuda_convolution_and_matmul_are_ieee_float32():
    """With strict_float32 a CUDA convolution and matmul agree with float64 to float32 accuracy (TF32's
    10-bit mantissa would be off by ~1e-3 relative)."""
    strict_float32()
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(8, 16, 28, 28, generator=g), torch.randn(32, 16, 3, 3, generator=g)
    ref = torch.nn.functional.conv2d(x.double(), w.double())
    out = torch.nn.functional.conv2d(x.cuda(), w.cuda()).cpu().double()
    assert float((out - ref).abs().max() / ref.abs().max()) < 1e-5
    a, b = torch.randn(512, 512, generator=g), torch.randn(512, 512, generator=g)
    mm = (a.cuda() @ b.cuda()).cpu().double()
    assert float((mm - a.double() @ b.double()).abs().max() / (a.double() @ b.double()).abs().max()) < 1e-5
