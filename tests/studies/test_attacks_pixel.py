"""Pixel-space sanity reference: the vanilla model loses accuracy under a large l-inf/l2 PGD, none at eps = 0."""
import ast
from pathlib import Path

import pytest
import torch

from benchmark.datasets import get_dataset
from benchmark.errors import BenchError
from benchmark.studies.pixel_attack import main, pixel_robust_accuracy, vanilla_model


@pytest.fixture(scope="module")
def model_and_data():
    x, y = get_dataset("digits").load("test")
    return vanilla_model("digits"), x[:32], y[:32]


def test_pixel_pgd_reduces_accuracy_only_with_budget(model_and_data):
    model, x, y = model_and_data
    with torch.no_grad():
        clean = float((model(x).argmax(1) == y).float().mean())
    state = torch.random.get_rng_state()
    assert pixel_robust_accuracy(model, x, y, 0.0, "linf", steps=5) == pytest.approx(clean)
    assert torch.equal(state, torch.random.get_rng_state())  # the caller's global RNG is untouched
    big = pixel_robust_accuracy(model, x, y, 0.3, "linf", steps=5)
    assert clean > 0.9 and big < 0.5 * clean
    assert pixel_robust_accuracy(model, x, y, 3.0, "l2", steps=5) < 0.5 * clean
    again = pixel_robust_accuracy(model, x, y, 0.3, "linf", steps=5)
    assert again == big  # seeded


def test_pixel_errors(model_and_data):
    model, x, y = model_and_data
    with pytest.raises(BenchError, match="norm"):
        pixel_robust_accuracy(model, x, y, 0.1, "l1")
    with pytest.raises(BenchError, match="l-infinity only"):
        pixel_robust_accuracy(model, x, y, 0.1, "l2", attack="eotpgd")


def test_pixel_cli_prints_table(capsys):
    assert main(["--eps", "0", "0.3", "--n-examples", "16", "--steps", "3"]) == 0
    out = capsys.readouterr().out
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in out.splitlines() if line.startswith("|")]
    assert rows[0] == ["eps", "robust accuracy (%)"] and [r[0] for r in rows[2:]] == ["0", "0.3"]
    assert float(rows[2][1]) > float(rows[3][1])


def test_torchattacks_is_imported_lazily():
    """No module of the attacks package (nor the pixel reference) imports torchattacks at module level."""
    import attacks
    import benchmark.studies.pixel_attack as pixel

    pkg = Path(attacks.__file__).parent
    for f in [*pkg.glob("*.py"), Path(pixel.__file__)]:
        for node in ast.parse(f.read_text()).body:
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not any(n.split(".")[0] == "torchattacks" for n in names), f.name
    assert "import torchattacks" in Path(pixel.__file__).read_text()
