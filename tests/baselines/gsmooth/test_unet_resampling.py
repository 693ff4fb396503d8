"""The U-Net's inference resampling shortcuts give the numbers of the ops they replace, bit for bit, and its
inference path the module's numbers."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from baselines.gsmooth.surrogate import Decoder, _down, _up_cat


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("size", [28, 14, 7, 32])
def test_down_and_up_cat_match_the_ops_they_replace(dtype: torch.dtype, size: int) -> None:
    gen = torch.Generator().manual_seed(size)
    h = torch.randn(5, 3, size, size, generator=gen, dtype=dtype)
    skip = torch.randn(5, 2, 2 * size, 2 * size, generator=gen, dtype=dtype)
    with torch.no_grad():
        assert torch.equal(_down(h), F.avg_pool2d(h, 2, ceil_mode=True))
        ref = torch.cat([F.interpolate(h, size=skip.shape[-2:], mode="nearest"), skip], 1)
        assert torch.equal(_up_cat(h, skip), ref)
        nhwc = _up_cat(h, skip, nhwc=True)
        assert torch.equal(nhwc, ref) and nhwc.is_contiguous(memory_format=torch.channels_last)


def test_decoder_inference_is_unchanged() -> None:
    """Up to float32 round-off: the top level's first convolution runs channels-last at inference (bit-identical
    on the machine it was measured on; another CPU's oneDNN kernel may sum in another order)."""
    torch.manual_seed(0)
    dec = Decoder(1, 1, 8).eval()
    z = torch.randn(100, 2, 28, 28)
    with torch.no_grad():
        fast = dec(z)
    with torch.enable_grad():  # the ops as written (autograd keeps them)
        ref = torch.cat([dec._unet(part) for part in z.split(64)]).detach()
    torch.testing.assert_close(fast, ref, rtol=1e-5, atol=1e-5)
