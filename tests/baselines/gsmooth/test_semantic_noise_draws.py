"""GSmooth's semantic-layer noise draws: F1(theta) added in place gives F1(theta) + eps bit for bit."""
from __future__ import annotations

import pytest
import torch

from tests.gsmooth_zoo import prepared_gsmooth


@pytest.mark.parametrize("name", ["rotation", "contrast_brightness", "gaussian_blur"])  # m = 1, m = 2, lowpass
def test_eta_is_f1_of_theta_plus_eps(name: str) -> None:
    d, _, _ = prepared_gsmooth(name)
    sur = d.surrogate
    gen, again = torch.Generator().manual_seed(4), torch.Generator().manual_seed(4)
    eta = d._eta(300, gen)
    theta = d.theta_noise.sample(300, sur.m, again)
    eps = torch.randn(300, sur.channels + sur.m, sur.size, sur.size, generator=again) * d.sigma2
    assert torch.equal(eta, sur.F1(theta) + eps)
