"""Architectures (shapes, normalisation first) and the defense registry (built-in, file path, errors)."""
import subprocess
import sys
import textwrap

import pytest
import torch

from benchmark.defenses import get_defense_class
from benchmark.errors import BenchError
from benchmark.models.architectures import Normalize, build_classifier


@pytest.mark.parametrize("arch,c,s", [("small_cnn", 1, 28), ("resnet110", 3, 32), ("preresnet18", 3, 32),
                                     ("conv4fc3", 1, 28)])
def test_architectures(arch, c, s):
    m = build_classifier(arch, c, 10, s, [0.5] * c, [0.25] * c).eval()
    assert isinstance(m[0], Normalize)
    with torch.no_grad():
        out = m(torch.rand(2, c, s, s))
    assert out.shape == (2, 10)
    with pytest.raises(BenchError, match="Did you mean 'resnet110'"):
        build_classifier("resnet11", c, 10, s, [0.5] * c, [0.25] * c)


def test_conv4fc3_is_tss_mnist_network():
    """TSS's archs/mnist_conv.py Conv4FC3: 320 + 16,416 + 18,496 + 65,600 + 1,606,144 + 262,656 + 5,130."""
    m = build_classifier("conv4fc3", 1, 10, 28, [0.5], [0.5])
    assert sum(p.numel() for p in m.parameters()) == 1_974_762
    assert [x.kernel_size for x in m.modules() if isinstance(x, torch.nn.Conv2d)] == [(3, 3), (4, 4), (3, 3), (4, 4)]


def test_resnet110_depth():
    m = build_classifier("resnet110", 3, 10, 32, [0.5] * 3, [0.25] * 3)
    convs = sum(isinstance(x, torch.nn.Conv2d) and x.kernel_size == (3, 3) for x in m.modules())
    assert convs + 1 == 110  # 109 3x3 convs + the final linear layer


def test_defense_lookup(tmp_path):
    assert get_defense_class("tss").name == "tss"
    with pytest.raises(BenchError, match="Did you mean 'vanilla'"):
        get_defense_class("vanila")
    f = tmp_path / "mydef.py"
    f.write_text(textwrap.dedent('''
        import torch
        from benchmark.defense import Defense
        class Mine(Defense):
            name = "mine"
            def prepare(self, ctx): pass
            def predict(self, x, t, g): return torch.zeros(len(x), dtype=torch.int64)
        class NotADefense: pass
    '''))
    assert get_defense_class(f"{f}:Mine").name == "mine"
    with pytest.raises(BenchError, match="not a subclass"):
        get_defense_class(f"{f}:NotADefense")
    with pytest.raises(BenchError, match="has no attribute"):
        get_defense_class(f"{f}:Missing")
    with pytest.raises(BenchError, match="does not exist"):
        get_defense_class(f"{tmp_path}/nope.py:X")


def test_importing_benchmark_is_light():
    code = ("import sys, benchmark, benchmark.defenses, benchmark.transformations, benchmark.datasets;"
            "bad=[m for m in ('baselines','kornia','robustbench','autoattack','torchvision','sklearn') if m in sys.modules];"
            "print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
