"""The surrogate tau~(theta, x) = H(F1(theta) + F2(x)) of one transformation (GSmooth, section 3).

Semantic layer z = [code (C channels), parameter channels (m)] of the image size, n = (C + m) H W.
* F2(x): code = x + g(x), rescaled per image to ||x|| (the layer's scale is pinned, otherwise
  sigma2 would have no meaning); parameter channels = a small conv head p(x).
* F1(theta) = A1 theta (b1 = 0): A1 is *fixed*: theta_j / unit adds a constant map of ones to
  parameter channel j, where ``unit`` is the transformation's smoothing scale sigma1. So a real
  transformation that moves F2 exactly by A1 xi is smoothed like Cohen et al. with sigma1.
* F2 variant ``encoder="global"`` (for photometric transformations): the code is computed from the
  image centred and scaled to unit norm, then centred and rescaled to a fixed norm, so it is exactly
  invariant to x -> a (x + b) (brightness, contrast); the parameter channels are constant maps
  from a global head (mean, log std and pooled features), which can move along A1 by design.
* F2 variant ``encoder="pose"`` (for rotation, scaling, translation): an analytic, equivariant
  encoder (pose.py). The parameter channels hold the estimated pose p(x) / unit, which the real
  transformation moves by xi / unit, exactly along A1; the code is the image in the canonical
  frame T(x, -p(x)) (optionally Gaussian-blurred, which damps the interpolation error), which the
  real transformation leaves (nearly) unchanged. Its decoder first denoises the code with the
  U-Net, then moves it to the pose read off the parameter channels (their mean times ``unit``), so
  H(F2(x) + A1 theta) = T(x, theta) up to interpolation (log-scale for scaling: factor e^theta).
* F2 variant ``encoder="lowpass"`` (for blurs): a fixed linear low-pass filter, code = G_s * x (a
  Gaussian of ``content_blur`` px, nonnegative kernel) and parameter channels 0. Being linear and
  monotone, it maps the transformation's sound per-pixel bounds to sound code bounds exactly, which
  is what lets the certificate *prove* its supremum (certificates.py); the low-pass also damps the
  high-frequency change a blur makes.
* H: a small U-Net (GroupNorm, as in the paper; two downsamplings) with a residual output on the
  code channels, decoding z (possibly with semantic noise) to an image.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from baselines.gsmooth.pose import LEARNED_DECODE, POSE_KINDS, canonical, canonical_window, pose_to_image
from benchmark.api import in_cpu_slices


#: the analytic encoders (pose, lowpass) compute in float64 and round their output once to the input's
#: dtype: their proven supremum bounds are computed in float64, and the deployed float32 encoder then
#: differs from the bounded function by one output rounding (which the certificate adds, certificates.py)
#: instead of by the round-off of moments, atan2, logs of weak Fourier coefficients and resampling in
#: float32, which has no useful bound (the log of a float32 power spectrum jumps where it rounds to 0)
ANALYTIC_PRECISION = torch.float64


def _block(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.GroupNorm(4, cout), nn.SiLU(),
                         nn.Conv2d(cout, cout, 3, padding=1), nn.GroupNorm(4, cout), nn.SiLU())


class Encoder(nn.Module):
    """F2: image -> semantic layer [B, C + m, H, W]."""

    def __init__(self, channels: int, m: int, width: int = 16):
        super().__init__()
        self.g = nn.Sequential(_block(channels, width), nn.Conv2d(width, channels, 3, padding=1))
        self.p = nn.Sequential(_block(channels, width), nn.Conv2d(width, m, 3, padding=1))
        nn.init.zeros_(self.g[-1].weight), nn.init.zeros_(self.g[-1].bias)  # start as the identity code

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        code = x + self.g(x)
        scale = x.flatten(1).norm(dim=1) / code.flatten(1).norm(dim=1).clamp_min(1e-6)
        return torch.cat([code * scale.view(-1, 1, 1, 1), self.p(x)], 1)


class GlobalEncoder(nn.Module):
    """F2 for photometric transformations: a brightness/contrast-invariant code plus global parameters."""

    CODE_NORM_PER_PIXEL = 0.3  # fixed code scale (per pixel, like digits' ||x|| / sqrt(HW)) so sigma2 keeps a meaning

    def __init__(self, channels: int, m: int, width: int = 16):
        super().__init__()
        self.g = nn.Sequential(_block(channels, width), nn.Conv2d(width, channels, 3, padding=1))
        nn.init.zeros_(self.g[-1].weight), nn.init.zeros_(self.g[-1].bias)
        self.feat = _block(channels, width)
        self.head = nn.Sequential(nn.Linear(2 * channels + width, 32), nn.SiLU(), nn.Linear(32, m))

    @staticmethod
    def _unit(v: torch.Tensor) -> torch.Tensor:
        v = v - v.mean(dim=(1, 2, 3), keepdim=True)
        return v / v.flatten(1).norm(dim=1).clamp_min(1e-6).view(-1, 1, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        u = self._unit(x)
        code = self._unit(u + self.g(u)) * (self.CODE_NORM_PER_PIXEL * x[0].numel() ** 0.5)
        stats = torch.cat([x.mean(dim=(2, 3)), torch.log(x.std(dim=(2, 3)) + 1e-4), self.feat(u).mean(dim=(2, 3))], 1)
        p = self.head(stats)
        return torch.cat([code, p.view(*p.shape, 1, 1).expand(-1, -1, *x.shape[-2:])], 1)


class PoseEncoder(nn.Module):
    """F2 for geometric transformations: [canonical-frame code, pose / unit as constant maps] (no weights)."""

    def __init__(self, kind: str, unit: float, content_blur: float = 0.0):
        super().__init__()
        if kind not in POSE_KINDS:
            raise ValueError(f"the pose encoder supports {list(POSE_KINDS)}, not {kind!r}")
        self.kind, self.content_blur = kind, float(content_blur)
        self.register_buffer("unit", torch.tensor(float(unit)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Computed in float64 and rounded once to ``x``'s dtype (see :data:`ANALYTIC_PRECISION`)."""
        x64 = x.to(ANALYTIC_PRECISION)
        code, pose = canonical(self.kind, x64)
        window = canonical_window(self.kind, *x.shape[-2:], dtype=x64.dtype, device=x.device)
        if window is not None:
            code = code * window
        if self.content_blur > 0:
            code = gaussian_smooth(code, self.content_blur)
        maps = (pose / self.unit.to(x64.dtype)).view(*pose.shape, 1, 1).expand(-1, -1, *x.shape[-2:])
        return torch.cat([code, maps], 1).to(x.dtype)


class LowpassEncoder(nn.Module):
    """F2 = [G_s * x, zero parameter maps] (no weights): linear and monotone in x."""

    def __init__(self, m: int, content_blur: float):
        super().__init__()
        if not content_blur > 0:
            raise ValueError("the lowpass encoder needs content_blur > 0 (the filter's standard deviation in px)")
        self.m, self.content_blur = m, float(content_blur)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Computed in float64 and rounded once to ``x``'s dtype (see :data:`ANALYTIC_PRECISION`)."""
        code = gaussian_smooth(x.to(ANALYTIC_PRECISION), self.content_blur)
        return torch.cat([code, code.new_zeros(code.shape[0], self.m, *code.shape[-2:])], 1).to(x.dtype)


def gaussian_smooth(x: torch.Tensor, sigma: float) -> torch.Tensor:
    """Depthwise Gaussian blur with standard deviation ``sigma`` px (kernel radius 3 sigma, zero padding)."""
    r = max(1, int(math.ceil(3 * sigma)))
    k = torch.exp(-torch.arange(-r, r + 1, dtype=x.dtype, device=x.device) ** 2 / (2 * sigma ** 2))
    k = k / k.sum()
    c = x.shape[1]
    x = F.conv2d(x, k.view(1, 1, 1, -1).expand(c, 1, 1, -1), padding=(0, r), groups=c)
    return F.conv2d(x, k.view(1, 1, -1, 1).expand(c, 1, -1, 1), padding=(r, 0), groups=c)


class Decoder(nn.Module):
    """H: semantic layer -> image, a two-level U-Net with GroupNorm and a residual on the code channels."""

    def __init__(self, channels: int, m: int, width: int = 16):
        super().__init__()
        cin = channels + m
        self.channels = channels
        self.d0 = _block(cin, width)
        self.d1 = _block(width, 2 * width)
        self.d2 = _block(2 * width, 2 * width)
        self.u1 = _block(4 * width, width)
        self.u0 = _block(2 * width, width)
        self.out = nn.Conv2d(width, channels, 3, padding=1)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return in_cpu_slices(self._unet, z)  # GSmooth's sampling cost is this U-Net: slices run it 2x faster

    def _unet(self, z: torch.Tensor) -> torch.Tensor:
        h0 = self.d0(z)
        h1 = self.d1(_down(h0))
        h2 = self.d2(_down(h1))
        u1 = self.u1(_up_cat(h2, h1))
        u0 = _first_conv_as_laid_out(self.u0, _up_cat(u1, h0, nhwc=z.device.type == "cpu"))
        return z[:, :self.channels] + self.out(u0)


def _first_conv_as_laid_out(block: nn.Sequential, x: torch.Tensor) -> torch.Tensor:
    """``block(x)``, its first convolution on ``x`` as laid out and the rest on NCHW tensors.

    On the CPU ``_up_cat`` lays the top level's concatenation (2 x width channels at full size) out
    channels-last, where oneDNN's NHWC kernel runs that convolution about twice as fast as its NCHW one
    (measured with width 8: 3.7 -> 1.9 ms per 64 rows, bit-identical outputs on the suite's machine);
    GroupNorm, SiLU and the other convolutions are as fast or faster in NCHW, so the output goes back to it.
    """
    h = block[0](x).contiguous()
    for layer in block[1:]:
        h = layer(h)
    return h


# Inference shortcuts of the U-Net's resampling, the same numbers as the ops they replace and 3-4x faster on
# the CPU (about a quarter of GSmooth's sampling time went to avg_pool2d, nearest interpolate and cat on its
# small activations). Under autograd the ops are kept as written, so training and Jacobians are unchanged;
# tests/baselines/gsmooth/test_unet_resampling.py checks the values bit for bit.
def _down(h: torch.Tensor) -> torch.Tensor:
    """``avg_pool2d(h, 2, ceil_mode=True)``: on even sizes, the 2x2 sum in the kernel's order, divided by 4."""
    n, c, height, width = h.shape
    if torch.is_grad_enabled() or height % 2 or width % 2:
        return F.avg_pool2d(h, 2, ceil_mode=True)
    v = h.view(n, c, height // 2, 2, width // 2, 2)
    s = v[:, :, :, 0, :, 0] + v[:, :, :, 0, :, 1]
    s += v[:, :, :, 1, :, 0]
    s += v[:, :, :, 1, :, 1]
    return s.div_(4)


def _up_cat(h: torch.Tensor, skip: torch.Tensor, nhwc: bool = False) -> torch.Tensor:
    """``cat([interpolate(h, size=skip's, mode="nearest"), skip], 1)``: at exactly twice the size each value
    is copied to its 2x2 block (along the width by ``repeat_interleave``, then each row twice: 1.5x faster than
    one copy with an inner dimension of 2), written straight into the concatenated tensor, laid out
    channels-last if ``nhwc`` (the same values)."""
    n, c, height, width = h.shape
    size = skip.shape[-2:]
    if torch.is_grad_enabled() or tuple(size) != (2 * height, 2 * width):
        return torch.cat([F.interpolate(h, size=size, mode="nearest"), skip], 1)
    layout = torch.channels_last if nhwc else torch.contiguous_format
    out = torch.empty(n, c + skip.shape[1], *size, dtype=h.dtype, device=h.device, memory_format=layout)
    wide = h.repeat_interleave(2, dim=-1)
    out[:, :c].view(n, c, height, 2, 2 * width).copy_(wide[:, :, :, None].expand(n, c, height, 2, 2 * width))
    out[:, c:].copy_(skip)
    return out


class PoseDecoder(nn.Module):
    """H for the pose encoder: denoise the canonical code with the U-Net, then move it to the decoded pose.

    The U-Net sees only the code channels, so the decoded content does not depend on theta: the
    surrogate's transformation then moves F2's code only through interpolation, which is what keeps
    Corollary 1's ||dF2(H(.))/dxi - A1|| small.
    """

    def __init__(self, channels: int, m: int, width: int, kind: str, unit: float):
        super().__init__()
        self.learned = kind in LEARNED_DECODE  # a blur's code cannot be moved back: the U-Net decodes it all
        self.refine = Decoder(channels, m if self.learned else 0, width)
        self.kind, self.channels = kind, channels
        self.register_buffer("unit", torch.tensor(float(unit)))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        if self.learned:
            return self.refine(z)
        return self.moved(self.refine(z[:, :self.channels]), z)

    def moved(self, content: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """The decoded ``content`` moved to the pose read off ``z``'s parameter channels (not learned kinds)."""
        pose = z[:, self.channels:].mean(dim=(2, 3)) * self.unit
        return pose_to_image(self.kind, content, pose)


class Surrogate(nn.Module):
    """tau~(theta, x) = H(A1 theta + F2(x)) for an m-parameter transformation, A1 fixed (see module doc)."""

    def __init__(self, channels: int, size: int, m: int, unit: float, width: int = 16, encoder: str = "local",
                 kind: str = "", content_blur: float = 0.0):
        super().__init__()
        self.channels, self.size, self.m = channels, size, m
        self.register_buffer("unit", torch.tensor(float(unit)))
        encoders = {"local": Encoder, "global": GlobalEncoder}
        if encoder == "lowpass":
            self.F2 = LowpassEncoder(m, content_blur)
            self.H = Decoder(channels, m, width)
            return
        if encoder == "pose":
            self.F2 = PoseEncoder(kind, unit, content_blur)
            self.H = PoseDecoder(channels, m, width, kind, unit)
            return
        if encoder not in encoders:
            raise ValueError(f"surrogate encoder must be one of {[*encoders, 'pose', 'lowpass']}, got {encoder!r}")
        self.F2 = encoders[encoder](channels, m, width)
        self.H = Decoder(channels, m, width)

    @property
    def n(self) -> int:
        return (self.channels + self.m) * self.size * self.size

    def F1(self, theta: torch.Tensor) -> torch.Tensor:
        """A1 theta as a semantic-layer tensor [B, C + m, H, W]."""
        z = theta.new_zeros(theta.shape[0], self.channels + self.m, self.size, self.size)
        z[:, self.channels:] = self.parameter_maps(theta).to(z.dtype)
        return z

    def parameter_maps(self, theta: torch.Tensor) -> torch.Tensor:
        """F1(theta)'s parameter channels, ``[B, m, 1, 1]`` (constant maps; F1 is zero on the code channels)."""
        return (theta / self.unit).view(theta.shape[0], self.m, 1, 1)

    def A1(self) -> torch.Tensor:
        """A1 as a dense [n, m] matrix (flattened in the semantic layer's C-order)."""
        eye = torch.eye(self.m, dtype=torch.float64, device=self.unit.device)
        return self.F1(eye).reshape(self.m, -1).T.contiguous()

    def forward(self, theta: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return self.H(self.F1(theta) + self.F2(x))
