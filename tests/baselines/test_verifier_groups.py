"""The verifiers' margin bounds do not depend on how many boxes are bounded together (``MAX_BOXES``)."""
import pytest
import torch

import benchmark.verification.margins as verifier
from benchmark.verification.network import cnn_layers, margin_layers
from benchmark.transformations import get_transformation
from tests.baselines.test_deepg import _image, _tiny


@pytest.mark.parametrize("method", verifier.METHODS)
@pytest.mark.parametrize("name,width", [("rotation", 2.0), ("brightness", 0.05), ("contrast_brightness", 0.04)])
def test_margin_bounds_are_the_same_in_groups(monkeypatch, method, name, width):
    t, x = get_transformation(name), _image(1)
    layers = margin_layers(cnn_layers(_tiny(2), tuple(x.shape[1:])), 3)
    n = 11  # groups of 4, 4 and 3 boxes below
    starts = torch.linspace(-5 * width, 4 * width, n, dtype=torch.float64)[:, None].expand(n, t.dim)
    lo, hi = starts.clone(), starts + width
    if name == "contrast_brightness":
        lo, hi = lo / 4, hi / 4
    monkeypatch.setattr(verifier, "MAX_BOXES", n)
    whole = verifier.margin_bounds(method, layers, t, x, lo, hi, pieces=2, tol=0.5)
    monkeypatch.setattr(verifier, "MAX_BOXES", 4)
    grouped = verifier.margin_bounds(method, layers, t, x, lo, hi, pieces=2, tol=0.5)
    assert grouped.shape == whole.shape == (n, len(whole[0]))
    assert torch.allclose(grouped, whole, rtol=1e-12, atol=1e-12)
