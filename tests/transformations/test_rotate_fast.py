"""The untracked rotation (no autograd) gives kornia's ``rotate`` bit for bit, and gradients keep kornia's graph."""
from __future__ import annotations

import pytest
import torch
from kornia.geometry.transform import rotate

from benchmark.transformations.geometric import _rotate_untracked, rotate_images


def _kornia(x: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
    return rotate(x, angle.to(x.dtype), mode="bilinear", padding_mode="zeros", align_corners=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("batch", [1, 5, 300])
def test_untracked_rotation_is_kornias_bit_for_bit(dtype: torch.dtype, batch: int) -> None:
    gen = torch.Generator().manual_seed(batch)
    x = torch.rand(batch, 2, 28, 23, generator=gen, dtype=dtype)
    for angle in (torch.rand(batch, generator=gen, dtype=dtype) * 360 - 180,
                  torch.linspace(-20, 20, batch, dtype=dtype),
                  torch.tensor([7.3], dtype=dtype),  # one angle shared by the batch
                  torch.tensor([-31.7], dtype=dtype).expand(batch)):  # one angle expanded over the batch
        assert torch.equal(_rotate_untracked(x, angle), _kornia(x, angle))
        with torch.no_grad():
            assert torch.equal(rotate_images(x, angle), _kornia(x, angle))


def test_tracked_rotation_keeps_kornias_gradient() -> None:
    x = torch.rand(4, 1, 28, 28, dtype=torch.float64)
    angle = torch.tensor([3.0, -5.0, 10.0, 0.5], dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(rotate_images(x, angle).square().sum(), angle)
    ref = angle.detach().clone().requires_grad_(True)
    (g_ref,) = torch.autograd.grad(_kornia(x, ref).square().sum(), ref)
    assert torch.equal(g, g_ref)


def test_forward_mode_keeps_kornias_path() -> None:
    x = torch.rand(3, 1, 28, 28, dtype=torch.float64)
    angle = torch.tensor([1.0, 2.0, -4.0], dtype=torch.float64)

    def rotated(a: torch.Tensor) -> torch.Tensor:
        return rotate_images(x, a)

    try:
        _, tangent = torch.func.jvp(rotated, (angle,), (torch.ones_like(angle),))
    except (NotImplementedError, RuntimeError):
        pytest.skip("no forward-mode derivative of grid_sample in this torch")
    _, ref = torch.func.jvp(lambda a: _kornia(x, a), (angle,), (torch.ones_like(angle),))
    assert torch.equal(tangent, ref)


def test_a_kornia_without_the_closed_form_inverse_keeps_its_rotate(monkeypatch) -> None:
    from benchmark.transformations import geometric

    monkeypatch.setattr(geometric, "_kornia_inverse", lambda: None)
    x, angle = torch.rand(3, 1, 28, 28), torch.tensor([1.0, 5.0, -9.0])
    assert _rotate_untracked(x, angle) is None
    with torch.no_grad():
        assert torch.equal(rotate_images(x, angle), _kornia(x, angle))
