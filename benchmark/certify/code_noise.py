"""GSmooth's semantic-layer ("code") noise on a lattice, sound in floating point, and the rule that pays for it.

Why: GSmooth's smoothed classifier is ``G(x) = P(f(H(z + eta)) = c)`` with the code ``z = F2(x)`` and
``eta = A1 theta + theta'`` (``theta ~ N(0, s1^2 I_m)``, ``theta' ~ N(0, s2^2 I_n)``; baselines/gsmooth). With
``z + eta`` formed in float32 the rounding depends on z, so the noisy codes around ``F2(x)`` and around the code
of a transformed image are not translated copies of each other, and a base classifier reading the low-order
bits of its input tells them apart (tests/certify/test_code_noise_exploit.py: a certified budget with a wrong
label inside it). This is lattice_noise's argument (Voráček & Hein, ICLR 2023) extended to GSmooth's
anisotropic noise. The semantic layer has ``n = (C + m) P`` coordinates (``P = H W``); its last m channels are
the pose channels, and ``A1 = B / unit`` with B the 0/1 matrix that puts ``v_j`` on every entry of pose channel
j, so ``eta = B v + theta'`` with ``v = theta / unit ~ N(0, tau^2 I_m)``, ``tau = s1 / unit`` (``sigma_shift``).

1. **Grid.** The code is quantised to ``Z = round(z / Q)`` with ``Q = 2**-grid_bits`` chosen from s2 so that
   ``s = s2 / Q`` lies in ``[2**12, 2**13)`` (:func:`grid_bits`): the grid's cost below is then between
   2**-13 and 2**-12 of ``sqrt(n)`` in Sigma^-1 units whatever s2, and codes up to ``2**12 s2`` stay exact.
2. **Noise.** ``K = round(s G)`` on every coordinate and ``T = round(t G')`` per pose channel,
   ``t = tau / Q``, G, G' standard normal: integers from 53 fair bits each through lattice_noise's table
   (``lattice_noise.draw``); no floating-point operation touches them.
3. **Exact sum.** The decoder gets ``Q (Z + K + B T)``, an integer below 2**24 times a power of two (checked,
   :func:`check_range`), formed in int64 on the CPU and converted once: exact in float32, and the device only
   receives it (CUDA, TF32 or not, does no arithmetic on it). What H and f then compute, in whatever
   arithmetic, is one fixed function of that integer vector (each row on its own: eval mode, no batch
   statistics), so it is part of the base classifier the proof allows to be arbitrary.
4. **Radius.** For integer Z the sample is ``F(Z + s G, t G')`` with ``F(u, w) = f(H(Q (round(u) + B
   round(w))))`` one fixed function on R^n x R^m, and for integer ``k``, ``F(u + B k, w) = F(u, w + k)``
   (almost everywhere). So at another grid point ``Z' = Z + D`` the law is that of F under the Gaussian
   ``N((Z + D - B k, k), diag(s^2 I, t^2 I))``: the law at Z shifted by ``(D - B k, k)``, and by Cohen's
   lemma Phi^-1 of the probability of a class moves by at most ``||(D - B k, k)||`` in that Gaussian's
   metric. Over real k its minimum is ``||D||`` in the metric of ``s^2 I + t^2 B B^T = Sigma / Q^2`` (the
   law of ``U + B W``), i.e. ``||Q D||_{Sigma^-1}``; the nearest integer k adds at most
   ``||(B e, e)|| <= (sqrt(m) / 2) sqrt(P / s^2 + 1 / t^2)`` (``|e_j| <= 1/2``, ``B^T B = P I``). Each of the
   two roundings of z and z' moves a coordinate by at most Q/2 and ``||v||_{Sigma^-1} <= ||v|| / s2``, so a
   proven ``d >= ||z' - z||_{Sigma^-1}`` certifies the distance ``d + g`` with the grid's cost, in code units,
   ``g = sqrt(n) Q / s2 + (sqrt(m) Q / (2 s2)) sqrt(P + s2^2 / tau^2)`` (:func:`grid_cost`).
5. **The table's error.** The sampled law of (K, T) is within ``eps = n tv(s) + m tv(t)`` of the ideal one in
   total variation (``lattice_noise.tv_per_coordinate``), paid on both sides as in
   ``lattice_noise.required_margin``: certified iff ``Phi^-1(p_A lower) > Phi^-1(Phi(d + g + Phi^-1(1/2 +
   eps)) + eps)`` (:func:`required_margin`).

6. **Two-step certificate** (uniform or Laplace theta, m = 1; baselines/gsmooth/theta_noise.py). T is
   ``round(V / Q)``, V = theta / unit of that law, from its integer table in ``lattice_noise``. For the
   real shift ``z' - z = A1 xi + w`` take the integer ``k = round(xi / (unit Q))``: the law at Z' is the law at
   Z with the isotropic part shifted by ``r = D - B k`` and T by k, and ``||Q r|| / s2 <= ||w|| / s2 + sqrt(n)
   Q / s2 + sqrt(P) Q / (2 s2)`` (:func:`residual_grid_cost`). The Gaussian step in r is Cohen's lemma as
   above; the theta step is D-smoothing of a fixed function of ``T + k`` over the shift ``k Q unit``, at most
   ``|xi| + unit Q / 2``, which must also keep the ideal probability above ``1/2 + eps``: ``R_D`` from 1/2
   to ``1/2 + eps`` is added to the budget too (:func:`shift_allowance`). Certified iff ``Phi^-1(p_A lower) >
   Phi^-1(Phi(m_D + S + g') + eps)`` with m_D the margin whose D-radius exceeds the enlarged budget
   (:func:`two_step_margin`).

One pure rule, :func:`required_margin` of a proven distance and the certificate's ``code_noise`` record, is
used by the defense to issue and by the audit (benchmark/audit/statistics.py) to check the thresholds.
Certificates recorded before this noise (no ``code_noise``) replay under their own exact-arithmetic rule.
"""
from __future__ import annotations

import math
from statistics import NormalDist

import torch

from benchmark.certify import lattice_noise
from benchmark.certify.general_radius import general_radius

KIND, VERSION = "lattice", 2
#: the threshold of a budget whose distance is not proven: no margin reaches it (margins are below ~8)
NEVER = 1e9
_N = NormalDist()


def grid_bits(sigma2: float) -> int:
    """``grid_bits`` of the code grid ``Q = 2**-grid_bits``: the one with ``sigma2 / Q`` in [2**12, 2**13)."""
    if not sigma2 > 0:
        raise ValueError(f"code noise needs a positive sigma2, got {sigma2}")
    return lattice_noise.GRID_BITS - math.floor(math.log2(sigma2))


def record(sigma2: float, shape: tuple[int, int, int], pose_channels: int, shift_scale: float,
           shift_kind: str = "gaussian") -> dict:
    """The ``code_noise`` record of a certificate: everything the sampler and the rule need. ``shape`` is the
    semantic layer's (C + m, H, W); the pose shift ``theta / unit`` has law ``shift_kind`` with scale
    ``shift_scale`` in code units (gaussian: its standard deviation tau = s1 / unit; uniform / laplace: the
    half-width / the Laplace scale of the two-step certificate's theta noise, divided by unit)."""
    channels, height, width = shape
    if shift_kind not in SHIFT_KINDS:
        raise ValueError(f"pose shift law must be one of {SHIFT_KINDS}, got {shift_kind!r}")
    return {"kind": KIND, "version": VERSION, "grid_bits": grid_bits(sigma2), "d": channels * height * width,
            "pose_channels": int(pose_channels), "pose_size": height * width, "sigma2": float(sigma2),
            "shift": {"kind": shift_kind, "scale": float(shift_scale)}}


def _check(rec: dict, shift: str | None = None) -> None:
    if not isinstance(rec, dict) or rec.get("kind") != KIND or rec.get("version") != VERSION:
        raise ValueError(f"unknown code_noise record {rec!r}; this version knows kind {KIND!r} version {VERSION}")
    if shift is not None and rec["shift"]["kind"] != shift:
        raise ValueError(f"this rule needs a {shift} pose shift, the record has {rec['shift']['kind']!r}")


def scales(rec: dict) -> tuple[float, float]:
    """(s, c): the per-coordinate noise's standard deviation and the pose shift's scale, in grid steps."""
    q = 2.0 ** rec["grid_bits"]
    return float(rec["sigma2"]) * q, float(rec["shift"]["scale"]) * q


SHIFT_KINDS = ("gaussian", "uniform", "laplace")
#: each pose-shift law's integer table in lattice_noise: round(c V), V standard Gaussian, uniform on [-1, 1], Laplace
_TABLE_KIND = {"gaussian": "gaussian", "uniform": "symmetric_uniform", "laplace": "laplace"}


def _shift_kind(rec: dict) -> tuple[str, float]:
    """(lattice_noise's table kind, scale in grid steps) of the record's pose shift."""
    return _TABLE_KIND[rec["shift"]["kind"]], scales(rec)[1]


def _shift_max(rec: dict) -> int:
    kind, c = _shift_kind(rec)
    return lattice_noise.max_draw(c, kind)


def _shift_tv(rec: dict) -> float:
    """Total variation between one pose shift's sampled law and the ideal rounded one."""
    kind, c = _shift_kind(rec)
    return lattice_noise.tv_per_coordinate(c, kind)


def _draw_shift(shape: tuple[int, ...], rec: dict, generator: torch.Generator) -> torch.Tensor:
    kind, c = _shift_kind(rec)
    return lattice_noise.draw(shape, c, generator, kind)


def quantise(z: torch.Tensor, rec: dict) -> torch.Tensor:
    """``round(z / Q)`` as int64 on the CPU: the grid point of the code ``z`` [B, C + m, H, W]."""
    return torch.round(z.detach().to("cpu", torch.float64) * 2.0 ** rec["grid_bits"]).to(torch.int64)


def check_range(z_int: torch.Tensor, rec: dict) -> None:
    """Raise unless every ``Z + K + B T`` stays below 2**24 in magnitude (float32 exactness)."""
    s, _ = scales(rec)
    top = int(z_int.abs().max()) + lattice_noise.max_draw(s) + (_shift_max(rec) if rec["pose_channels"] else 0)
    if top >= lattice_noise.EXACT:
        raise ValueError(f"code noise sigma2={rec['sigma2']:g} on codes up to "
                         f"{int(z_int.abs().max()) * 2.0 ** -rec['grid_bits']:g} leaves the range where the grid "
                         "sum is exact in float32 (|Z + K + B T| < 2**24).")


def perturb(z_int: torch.Tensor, rec: dict, generator: torch.Generator) -> torch.Tensor:
    """One noisy code per row of the grid points ``z_int`` [k, C + m, H, W]: ``Q (Z + K + B T)`` (float32,
    exact, on the CPU). T (one per pose channel and row) is drawn first, then K, from ``generator``."""
    s, _ = scales(rec)
    k, m = z_int.shape[0], int(rec["pose_channels"])
    shift = _draw_shift((k, m), rec, generator) if m else None
    w = z_int + lattice_noise.draw(tuple(z_int.shape), s, generator)
    if m:
        w[:, -m:] += shift.view(k, m, 1, 1)
    return w.to(torch.float32).mul_(2.0 ** -rec["grid_bits"])  # |w| < 2**24: exact, then a power of two


def grid_cost(rec: dict) -> float:
    """``g`` of the module docstring (Sigma^-1 units): the two codes' roundings plus the integer pose shift."""
    q, s2 = 2.0 ** -rec["grid_bits"], float(rec["sigma2"])
    n, m, p = int(rec["d"]), int(rec["pose_channels"]), int(rec["pose_size"])
    tau = float(rec["shift"]["scale"])
    pose = math.sqrt(m) * q / (2 * s2) * math.sqrt(p + (s2 / tau) ** 2) if m else 0.0
    return math.sqrt(n) * q / s2 + pose


def table_error(rec: dict) -> float:
    """``eps``: total variation between the sampled (K, T) and the ideal rounded laws."""
    s, _ = scales(rec)
    m = int(rec["pose_channels"])
    return int(rec["d"]) * lattice_noise.tv_per_coordinate(s) + (m * _shift_tv(rec) if m else 0.0)


def required_margin(distance: float | None, rec: dict) -> float:
    """The margin ``Phi^-1(p_A lower)`` must exceed to certify a proven code distance ``distance`` (an upper
    bound on ``||F2(tau(xi, x)) - F2(x)||_{Sigma^-1}`` over a budget's region; None: not proven, ``NEVER``)
    under the lattice code noise ``rec``: ``Phi^-1(Phi(distance + g + Phi^-1(1/2 + eps)) + eps)``."""
    _check(rec, "gaussian")
    if distance is None:
        return NEVER
    eps = table_error(rec)
    r = (float(distance) + grid_cost(rec)) * (1 + 1e-12) + 1e-12  # float64 slack on the sums
    p = _N.cdf(r + _N.inv_cdf(0.5 + eps)) + eps if math.isfinite(r) else 1.0
    return lattice_noise.NO_MARGIN if p >= 1.0 - 1e-15 else _N.inv_cdf(p) + 1e-12


def distance_budget(margin: float, rec: dict) -> float:
    """The largest distance that ``margin`` certifies under ``rec`` (about: it steers how far the supremum
    bounds refine; the decision is :func:`required_margin`'s)."""
    eps = table_error(rec)
    p = _N.cdf(margin) - eps if math.isfinite(margin) else 1.0
    if not 0.5 + eps < p < 1.0:
        return -math.inf if p <= 0.5 + eps else math.inf
    return _N.inv_cdf(p) - _N.inv_cdf(0.5 + eps) - grid_cost(rec)


def residual_grid_cost(rec: dict) -> float:
    """``g'`` of the two-step certificate (Sigma = s2^2 I units): both codes' roundings and the pose shift
    rounded to the grid, ``sqrt(n) Q / s2 + sqrt(m P) Q / (2 s2)``."""
    q, s2 = 2.0 ** -rec["grid_bits"], float(rec["sigma2"])
    return (math.sqrt(int(rec["d"])) + math.sqrt(int(rec["pose_channels"]) * int(rec["pose_size"])) / 2) * q / s2


def shift_allowance(rec: dict) -> float:
    """What the two-step certificate adds to a budget, in units of ``theta / unit``: the rounding of the shift
    to the grid (Q / 2) and the D-radius from 1/2 to 1/2 + eps (``general_radius`` is linear in the scale)."""
    eps = table_error(rec)
    kind, scale = rec["shift"]["kind"], float(rec["shift"]["scale"])
    return 2.0 ** -rec["grid_bits"] / 2 + general_radius(0.5 + eps, 0.5 - eps, kind, scale) * (1 + 1e-9)


def two_step_margin(residual: float | None, shift_margin: float, rec: dict) -> float:
    """The margin the two-step certificate needs: ``residual`` bounds ``sup ||w|| / s2`` over the region (None:
    not proven, ``NEVER``), ``shift_margin`` is the margin whose D-radius exceeds the budget plus
    :func:`shift_allowance`; ``Phi^-1(Phi(shift_margin + residual + g') + eps)``."""
    _check(rec)
    if residual is None:
        return NEVER
    eps = table_error(rec)
    r = (float(residual) + float(shift_margin) + residual_grid_cost(rec)) * (1 + 1e-12) + 1e-12
    p = _N.cdf(r) + eps if math.isfinite(r) else 1.0
    return lattice_noise.NO_MARGIN if p >= 1.0 - 1e-15 else _N.inv_cdf(p) + 1e-12
