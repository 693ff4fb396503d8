"""Proven supremum of the Gaussian-blur pose encoder's shift, for the pipeline as executed in float32.

Exact arithmetic. The registry's blur multiplies every DFT coefficient by a_f(xi) = exp(-2 pi^2 xi |f|^2),
so the pose (the spectral slope, pose.blur_level) of tau(xi, x) is exactly p*(0) + xi and the code
G_{V - p}(tau(xi, x)) is exactly G_{V - p*(0)}(x) while V - p*(0) - xi >= 0: the exact path is
z*(xi) = z*(0) + xi A1 e1, so d*(xi) = xi ||A1 e1||_{Sigma^-1} (no vertex evaluation is needed).

What runs differs from it in two ways, bounded here (both verified against dense grids of the float32
pipeline on every test image by tests/test_gsmooth_float32_bounds.py):

1. The transformed image is the float64 blur rounded once to float32 (gaussian_blur.py): per pixel
   |y_i - y*_i| <= U32 |v_i| + (float64 FFT error), so every DFT coefficient of the channel-mean image
   moves by at most E = mean_c ||e_c||_1 (a coefficient is a unit-modulus combination of pixels), plus
   the encoder's own float64 FFT error rho. A coefficient of exact magnitude m then has a log power
   log(|Y_f|^2 + phi) within delta(m, E) of log m^2, with
       delta = max( log((m + E)^2 + phi) - log m^2,  log m^2 - log((m - E)^2) )   for m > E
   (the first term falls with m, the second too: the worst m over xi in [0, b] is the smallest,
   m_lo = (|X_f| - rho) a_f(b)), and delta <= log(m_hi^2 / phi) once m_lo <= E (the 1e-30 floor phi of
   pose.blur_level caps the log from below). The pose, a difference of band means of these logs over
   4 pi^2 (mean f^2 high - mean f^2 low), is then off by at most D = (mean_low delta + mean_high delta)/c.
   A weak coefficient is where float32 breaks the exact linearity (the cause of the certificates this
   replaces: their vertex evaluation in float64 did not see the jump of a float32 power spectrum).
2. The code G_{V - p}(y) is computed with the deployed pose: per channel its distance to the exact
   code is at most ||e_c||_2 (the blur does not expand) plus
   || X_f e^{-a_f (V - p*(0))} (e^{a_f D} - 1) || / sqrt(N)   (Parseval, a_f = 2 pi^2 |f|^2),
   since |p - p*| <= D, the exact code's spectrum is X_f e^{-a_f (V - p*(0))}, and the blur level never
   falls below 0 (the room condition, checked: otherwise the bound is not proven).

The distance then follows by the triangle inequality in the Mahalanobis metric (block diagonal: the
code channels in sigma2^2 I, the pose channels along A1):
    d(xi) <= xi ||A1 e1|| + dev(xi) + dev(0),   dev = sqrt((C / sigma2)^2 + (D ||A1 e1||)^2),
where dev(0) is the same bound for z0 = F2(x) itself (no rounding of the input, only float64 FFTs).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from benchmark.api import U32, fft_slack
from baselines.gsmooth.pose import BLUR_LEVEL, LOG_FLOOR, blur_bands, blur_level

#: the floor inside pose.blur_level's log (log(|X|^2 + PHI))
PHI = LOG_FLOOR
#: absolute allowance for the float64 logs, means and products of the pose and of this bound (~1e-14)
F64_POSE = 1e-9


@dataclass(frozen=True)
class BlurDeviation:
    """Bounds on how far the deployed encoder output is from the exact path (see the module docstring)."""

    pose: float  # D: |p_deployed - p*| over the budget, px^2
    code: float  # C: ||code_deployed - code*||_2 over the budget
    pose0: float  # D and C of z0 = F2(x)
    code0: float
    room: float  # V - p*(0) - b - D (>= 0 required)

    def mahalanobis(self, per_unit: float, sigma2: float) -> float:
        """dev(xi) + dev(0) in Sigma^-1 units."""
        return (math.hypot(self.code / sigma2, self.pose * per_unit)
                + math.hypot(self.code0 / sigma2, self.pose0 * per_unit))


def _log_deviation(m_lo: torch.Tensor, m_hi: torch.Tensor, err: float) -> torch.Tensor:
    """Per coefficient, sup of |log(|Y|^2 + PHI) - log m^2| over exact magnitudes m in [m_lo, m_hi]
    and perturbations |Y - m e^{i.}| <= err (module docstring, step 1); inf where m_lo = 0."""
    up = torch.log((m_lo + err) ** 2 + PHI) - torch.log(m_lo ** 2)
    down = torch.where(m_lo > err, torch.log(m_lo ** 2) - torch.log((m_lo - err) ** 2),
                       torch.log(m_hi ** 2 / PHI))
    out = torch.maximum(up, down)
    return torch.where(m_lo > 0, out, torch.full_like(out, math.inf))


def _pose_deviation(mag: torch.Tensor, rho: float, err: float, b: float, f2, low, high, c: float) -> float:
    """D over xi in [0, b]: exact magnitudes |X_f| a_f(xi), known to +-rho, perturbed by err."""
    a_b = torch.exp(-2 * math.pi ** 2 * b * f2)
    m_lo = (mag - rho).clamp_min(0) * a_b
    m_hi = mag + rho
    dev = _log_deviation(m_lo, m_hi, err)
    return float((dev[low].mean() + dev[high].mean()) / c) + F64_POSE


def blur_deviation(x: torch.Tensor, b: float, level: float = BLUR_LEVEL) -> BlurDeviation | None:
    """Deviation bounds for ``x [1,C,H,W]`` over blur variances [0, b]; None where not proven
    (a band coefficient indistinguishable from 0, or too little room below the canonical level)."""
    x64 = x.detach().to("cpu", torch.float64)  # the bound is computed on the CPU whatever the device
    _, _, h, w = x64.shape
    n = h * w
    fs = fft_slack(h, w)  # float64 FFT round-off per unit of a channel's l2 norm
    norms = x64[0].flatten(1).norm(dim=1)  # ||x_c||_2 [C]; the blur never increases them
    mean_img = x64[0].mean(0)
    f2, low, high, c = blur_bands(h, w)
    mag = torch.fft.rfft2(mean_img).abs()
    # a coefficient's float64 FFT error, in our X and in the deployed encoder's FFT of y (l2 of the whole
    # spectrum error <= fs * sqrt(n) * ||mean image||_2, with 1% for the rounding of y itself)
    rho = fs * math.sqrt(n) * 1.01 * float(mean_img.norm())
    # step 1: per channel ||e_c||_1 <= sqrt(n) ||e_c||_2 with ||e_c||_2 <= U32 ||v_c||_2 + (1 + U32) fs ||x_c||_2
    e2 = U32 * (1 + fs) * norms + (1 + U32) * fs * norms  # [C]
    err = float((math.sqrt(n) * e2).mean()) + rho
    pose = _pose_deviation(mag, rho, err, b, f2, low, high, c)
    pose0 = _pose_deviation(mag, rho, rho, 0.0, f2, low, high, c)
    p0 = float(blur_level(x64)[0])
    room = level - (p0 + pose0) - b - pose
    if not (math.isfinite(pose) and math.isfinite(pose0)) or room < 0:
        return None
    # step 2: the code's spectrum, full DFT grid (Parseval), exact level V - p*(0) >= V - p0 - pose0
    fy = torch.fft.fftfreq(h, dtype=torch.float64)
    fx = torch.fft.fftfreq(w, dtype=torch.float64)
    a = 2 * math.pi ** 2 * (fy[:, None] ** 2 + fx[None, :] ** 2)
    spec = torch.fft.fft2(x64[0]).abs() + rho  # [C, H, W]
    base = spec * torch.exp(-a * (level - p0 - pose0))

    def code_dev(d: float, round_off: torch.Tensor) -> float:
        moved = (base * torch.expm1(a * d)).flatten(1).norm(dim=1) / math.sqrt(n)  # [C]
        per_channel = round_off + moved + 2 * fs * 1.01 * norms  # + the encoder's own float64 FFTs
        return float(per_channel.norm()) + F64_POSE

    return BlurDeviation(pose=pose, code=code_dev(pose, e2), pose0=pose0, code0=code_dev(pose0, torch.zeros_like(e2)),
                         room=room)
