"""Pose estimators that move *equivariantly* with a geometric transformation, and canonicalisation.

GSmooth certifies the real transformation when the encoder F2 moves along A1 (a cheap direction of
the smoothing noise) and leaves the rest of the code still. For a geometric transformation that
means: estimate the pose p(x) so that p(T(x, xi)) = p(x) + xi, and encode the content in the
canonical frame, c(x) = T(x, -p(x)), which is then invariant: c(T(x, xi)) = T(T(x, xi), -p - xi) = c(x).
Both identities hold exactly for the continuous transformation; on pixels they hold up to
interpolation and cropping, which the certificate measures on the real transformation anyway.

* rotation (degrees, about the image centre): the principal axis of the intensity distribution,
  phi = 1/2 atan2(2 mu11, mu20 - mu02) from the central second moments, measured from the
  vertical so upright digits have phi ~ 0 (the 180-degree ambiguity wraps at a horizontal axis);
* scaling (log of the factor, about the image centre): log of an anisotropic radius of gyration
  about the image centre, r = sqrt(sum w (du^2 + a dv^2) / sum w) (exact under zoom about the centre
  for any a, since du and dv both scale). Digits fill the frame vertically, so zooming in crops
  rows and the vertical spread stops following the zoom: a small vertical weight a = 0.07 tracks
  log(1 + xi) about 3x more closely on held-out digits (90th percentile error 0.010 instead of 0.037
  at xi = 0.05) than the isotropic radius;
* translation (pixels, cyclic): the circular centroid, the phase of the first Fourier coefficient
  along each axis, which shifts exactly by an integer cyclic shift (no wrap-around error at all),
  with the content re-centred by an exact Fourier (cyclic, sub-pixel) shift;
* gaussian blur (kernel variance, the registry's exact Fourier blur): the pose is the spectral slope
  p = (mean log|X(f)|^2 over a low band - mean over a high band) / (4 pi^2 (mean f^2 high - mean f^2
  low)), which a blur of variance xi moves by exactly xi (log power drops by 4 pi^2 xi f^2, and the
  image's overall energy cancels); the code is the image blurred up to the fixed level V,
  G_{V - p(x)} x, which is exactly invariant while V - p - xi >= 0 (blurs compose exactly), so the
  code path is exactly linear in xi there;
* brightness x + b: pose = the image mean (moves by exactly b), content = x - mean (invariant);
* contrast and brightness exp(k) (x + b): pose = (log std, S0 mean / std), which move by exactly
  k and S0 b / std(x) (linear in theta; the affine group is not abelian, so no statistic moves by b
  for every image); content = S0 (x - mean) / std, exactly invariant (the transformation does not clip).
Rotation and scaling move content out of the frame (digits fill it vertically), which no pose
estimate can undo, so their code is masked in the canonical frame (``canonical_window``: a disk for
rotation, a horizontal band for scaling) to the part that stays in view over the budgets: on held-out
digits this halves the code's change at 5 degrees and cuts it 4-6x at a zoom of 1.05-1.1.
For the photometric kinds F2(T(x, theta)) - F2(x) is therefore an exact linear function of theta,
which is what lets the certificate bound its supremum in closed form (certificates.py).
"""
from __future__ import annotations

import math

import torch

from benchmark.api import fourier_gaussian_blur, rotate_images, zoom_images


def _weights(x: torch.Tensor) -> torch.Tensor:
    """Nonnegative intensity weights [B, H, W] (channel mean)."""
    return x.mean(1).clamp_min(0)


def _offsets(h: int, w: int, ref: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Column and row offsets from the image centre ((W-1)/2, (H-1)/2), each [H, W]."""
    v = torch.arange(h, dtype=ref.dtype, device=ref.device) - (h - 1) / 2
    u = torch.arange(w, dtype=ref.dtype, device=ref.device) - (w - 1) / 2
    return u[None, :].expand(h, w), v[:, None].expand(h, w)


def orientation(x: torch.Tensor) -> torch.Tensor:
    """Principal-axis angle in degrees, in (-90, 90], 0 = vertical, equivariant with rotate_images."""
    w = _weights(x)
    u, v = _offsets(*w.shape[-2:], w)
    m = w.sum((1, 2)).clamp_min(1e-8)
    cu, cv = (w * u).sum((1, 2)) / m, (w * v).sum((1, 2)) / m
    du, dv = u - cu[:, None, None], v - cv[:, None, None]
    mu20 = (w * du * du).sum((1, 2)) / m
    mu02 = (w * dv * dv).sum((1, 2)) / m
    mu11 = (w * du * dv).sum((1, 2)) / m
    # axis angle from the vertical in the displayed (rows-down) frame; the sign makes it follow
    # rotate_images' counter-clockwise convention (checked in tests)
    return torch.rad2deg(0.5 * torch.atan2(2 * mu11, mu02 - mu20))


def log_radius(x: torch.Tensor) -> torch.Tensor:
    """log of the anisotropic radius of gyration about the image centre (px): + log(s) under zoom by s."""
    w = _weights(x)
    u, v = _offsets(*w.shape[-2:], w)
    m = w.sum((1, 2)).clamp_min(1e-8)
    return 0.5 * torch.log(((w * (u * u + VERTICAL_WEIGHT * v * v)).sum((1, 2)) / m).clamp_min(1e-8))


def circular_centroid(x: torch.Tensor) -> torch.Tensor:
    """[B, 2] (dx, dy): phase of the first Fourier coefficient along columns / rows, in pixels,
    relative to the image centre; a cyclic shift by integers (a, b) adds exactly (a, b), and so does a
    Fourier shift by reals (the first Fourier coefficient is only multiplied by a phase), which is
    why the weights are not clamped at 0 here (a Fourier-shifted image rings slightly below 0)."""
    w = x.mean(1)
    h, wd = w.shape[-2:]
    u, v = _offsets(h, wd, w)
    zx = (w * torch.exp(1j * 2 * math.pi * u / wd)).sum((1, 2))
    zy = (w * torch.exp(1j * 2 * math.pi * v / h)).sum((1, 2))
    return torch.stack([torch.angle(zx) * wd / (2 * math.pi), torch.angle(zy) * h / (2 * math.pi)], 1)


def fourier_shift(x: torch.Tensor, dx: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    """Cyclic sub-pixel shift of ``x [B,C,H,W]`` by ``(dx, dy) [B]`` (right, down) via the DFT.

    Shifts compose exactly (phases add), and an integer shift equals ``torch.roll``; the output is
    real (the Nyquist term is symmetrised so that odd-sized and even-sized images both stay real).
    """
    h, w = x.shape[-2:]
    fy = torch.fft.fftfreq(h, device=x.device, dtype=x.dtype)
    fx = torch.fft.rfftfreq(w, device=x.device, dtype=x.dtype)
    phase = -2 * math.pi * (dy.view(-1, 1, 1, 1) * fy.view(1, 1, -1, 1) + dx.view(-1, 1, 1, 1) * fx.view(1, 1, 1, -1))
    out = torch.fft.irfft2(torch.fft.rfft2(x) * torch.polar(torch.ones_like(phase), phase), s=(h, w))
    return out


def blur_bands(h: int, w: int, dtype=torch.float64, device=None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float]:
    """(f^2 on the rfft grid, low band mask, high band mask, c = 4 pi^2 (mean f^2 high - mean f^2 low))."""
    fy = torch.fft.fftfreq(h, dtype=dtype, device=device)
    fx = torch.fft.rfftfreq(w, dtype=dtype, device=device)
    f2 = fy[:, None] ** 2 + fx[None, :] ** 2
    f = f2.sqrt()
    low, high = (f > BLUR_BANDS[0]) & (f <= BLUR_BANDS[1]), (f > BLUR_BANDS[2]) & (f <= BLUR_BANDS[3])
    return f2, low, high, 4 * math.pi ** 2 * float(f2[high].mean() - f2[low].mean())


def blur_level(x: torch.Tensor) -> torch.Tensor:
    """The spectral slope of the channel-mean image (px^2): + xi exactly under a Fourier Gaussian blur of variance xi."""
    _, low, high, c = blur_bands(*x.shape[-2:], dtype=x.dtype, device=x.device)
    logp = torch.log(torch.fft.rfft2(x.mean(1)).abs() ** 2 + LOG_FLOOR)
    return (logp[:, low].mean(1) - logp[:, high].mean(1)) / c


def canonical(kind: str, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(content in the canonical frame [B,C,H,W], pose [B, m]) for the pose design ``kind`` (POSE_KINDS)."""
    if kind == "orientation":
        p = orientation(x)
        return rotate_images(x, -p), p[:, None]
    if kind == "log_radius":
        p = log_radius(x)
        return zoom_images(x, torch.exp(LOG_R0 - p)), p[:, None]
    if kind == "centroid":
        p = circular_centroid(x)
        return fourier_shift(x, -p[:, 0], -p[:, 1]), p
    if kind == "spectral_slope":
        p = blur_level(x)
        return fourier_gaussian_blur(x, (BLUR_LEVEL - p).clamp_min(0)), p[:, None]
    if kind == "mean":
        m = x.mean(dim=(1, 2, 3))
        return x - m.view(-1, 1, 1, 1), m[:, None]
    if kind == "mean_std":
        m, s = x.mean(dim=(1, 2, 3)), x.std(dim=(1, 2, 3)).clamp_min(1e-6)
        code = (x - m.view(-1, 1, 1, 1)) / s.view(-1, 1, 1, 1) * S0
        return code, torch.stack([torch.log(s), S0 * m / s], 1)
    raise ValueError(f"no pose estimator for {kind!r}")


def pose_to_image(kind: str, content: torch.Tensor, pose: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`canonical`: the content moved to ``pose [B, m]``."""
    if kind == "orientation":
        return rotate_images(content, pose[:, 0])
    if kind == "log_radius":
        return zoom_images(content, torch.exp(pose[:, 0] - LOG_R0))
    if kind == "centroid":
        return fourier_shift(content, pose[:, 0], pose[:, 1])
    if kind == "mean":  # the mean of the decoded code does not depend on theta: re-encoding moves by theta
        return content + pose[:, 0].view(-1, 1, 1, 1)
    if kind == "mean_std":
        # re-standardise the (decoded, possibly denoised) code first, so that re-encoding the output
        # returns exactly this pose: the surrogate's own transformation then moves F2 along A1
        c = content - content.mean(dim=(1, 2, 3), keepdim=True)
        c = c / c.std(dim=(1, 2, 3), keepdim=True).clamp_min(1e-6) * S0
        s = torch.exp(pose[:, 0]).view(-1, 1, 1, 1)
        return s * (c / S0 + pose[:, 1].view(-1, 1, 1, 1) / S0)
    raise ValueError(f"no pose estimator for {kind!r}")


def canonical_window(kind: str, h: int, w: int, dtype=torch.float32, device=None) -> torch.Tensor | None:
    """0/1 mask [1, 1, H, W] of the canonical frame kept in the code (None: keep everything).

    rotation: the disk of radius 13/14 of the half-size about the centre (corners rotate out);
    scaling: rows within 10/14 of the half-height (zooming in crops the top and bottom rows).
    """
    v = (torch.arange(h, dtype=dtype, device=device) - (h - 1) / 2).view(-1, 1)
    u = (torch.arange(w, dtype=dtype, device=device) - (w - 1) / 2).view(1, -1)
    if kind == "orientation":
        keep = (u * u + v * v).sqrt() <= 13 / 14 * min(h, w) / 2
    elif kind == "log_radius":
        keep = (v.abs() <= 10 / 14 * h / 2).expand(h, w)
    else:
        return None
    return keep.to(dtype).view(1, 1, h, w)


#: weight of the vertical spread in the scale estimate (see the module docstring)
VERTICAL_WEIGHT = 0.07
#: canonical log radius (px) that scaling canonicalises to (digits' median is 5.25: the canonical
#: code is slightly smaller than a typical digit, so zooming it back rarely crops)
LOG_R0 = math.log(4.5)
#: frequency bands (cycles/px) of the blur level: low (a, b], high (c, d]
BLUR_BANDS = (0.03, 0.12, 0.15, 0.30)
#: floor inside the blur level's log power, log(|X|^2 + LOG_FLOOR) (finite where a coefficient is 0)
LOG_FLOOR = 1e-30
#: canonical blur level (px^2): digits measure 2.6-3.6 (5th-99th percentile), plus the largest budget 4
BLUR_LEVEL = 8.0
#: reference pixel std (digits' median is 0.32): the photometric code's per-pixel scale
S0 = 0.3
#: the pose designs, named by what they estimate; a transformation chooses one with its suggested gsmooth
#: setting ``pose`` (``Transformation.defaults_for("gsmooth")``), which must move by +theta in its units:
#: orientation (rotation, degrees), log_radius (scaling, log of the factor), centroid (cyclic translation, px),
#: spectral_slope (Gaussian blur, kernel variance), mean (brightness), mean_std (contrast+brightness)
POSE_KINDS = ("orientation", "log_radius", "centroid", "spectral_slope", "mean", "mean_std")
#: kinds whose code moves by an exact linear function of theta (closed-form supremum)
LINEAR_KINDS = ("mean", "mean_std", "spectral_slope")
#: revisions of a kind's decoder (pose_to_image) since SURROGATE_RECIPE 2, recorded in the surrogate's
#: config so that a change of the decoder retrains exactly the checkpoints it affects
DECODER_REVISION = {"mean_std": 2}  # 2: the decoded code is re-standardised
#: kinds whose decoder cannot move the code back to a pose (a blur cannot be undone): H decodes it
LEARNED_DECODE = ("spectral_slope",)
