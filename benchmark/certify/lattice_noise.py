"""Gaussian pixel noise that stays a proof in floating point (after Voráček & Hein, ICLR 2023).

Why: with ``y = x + sigma * randn`` computed in float32, the rounding of the sum depends on x, so the noisy
samples around x and around a nearby x' are not translated copies of each other, and a base classifier that
reads the low-order bits of y can tell them apart (tests/certify/test_float_exploit.py builds one: a
certified budget with a confident wrong label inside it). Cohen et al.'s proof assumes exact arithmetic.

The route here is Voráček & Hein's (inputs on a grid, integer noise drawn from fair bits, a radius that pays
for the grid), with the *rounded* Gaussian in place of their discrete Gaussian, because its radius is
exactly Cohen's:

1. **Grid.** The harness quantises the input to ``X = round(x / Q)`` (integers, ``Q = 2**-GRID_BITS``).
2. **Noise.** ``K = round(s * G)`` per coordinate, ``s = sigma / Q``, ``G ~ N(0, 1)``, drawn by inverse CDF
   from 53 fair bits per coordinate (``torch.randint`` of the harness's generator) against an integer
   table; no floating-point operation touches the sample.
3. **Exact sum.** The classifier gets ``Q * (X + K)``: an integer below ``2**24`` times a power of two, so
   its float32 value is exact, on CPU and CUDA alike (the sum is formed in int64 on the CPU and only then
   converted; the device does no arithmetic on it, so TF32 and fused kernels never see it). The sample is a
   function of the integer vector ``X + K`` alone: there are no low-order bits left to read.
4. **Radius.** For integer X, ``X + round(s G) = round(X + s G)``, so the smoothed probability of class A is
   ``E F(X + s G)`` with ``F = f(Q * round(.))`` one fixed function: Cohen's theorem holds for F with
   N(0, s^2 I) and, in pixel units, any grid point within ``sigma * (Phi^-1(p_A) - Phi^-1(1/2))`` keeps A.
   An off-grid x' is quantised first, so ``||Q(x') - Q(x)|| <= ||x' - x|| + sqrt(d) * Q`` (each of the two
   roundings moves a coordinate by at most Q / 2): the grid costs ``sqrt(d) * Q`` of l2 distance.
5. **The table's own error.** The sampled law differs from the ideal rounded Gaussian by at most
   ``tv_per_coordinate(s)`` in total variation per coordinate (``erfc`` in float64 is within a few ulp,
   bounded here by ``CDF_ERROR``; the 53-bit quantile adds ``2**-53`` per entry; tails beyond ``TAIL``
   standard deviations are cut), ``eps = d * tv_per_coordinate(s)`` over the image. Both the p_A that
   CERTIFY bounds and the p_A at x' move by at most eps, and ``required_margin`` pays for both.

The same table machinery draws the integer parameter noise of TSS's parameter-space certificates (``KINDS``:
the rounded Gaussian, the geometric law ``floor(E)`` of the exponential, ``floor(s U)``, ``round(|s G|)``;
``benchmark/certify/parameter_lattice.py`` holds their grid and radius rule).
"""
from __future__ import annotations

import math
from functools import lru_cache
from statistics import NormalDist

import torch

GRID_BITS = 12
Q = 2.0 ** -GRID_BITS  #: the input grid (pixel units): 1/4096, finer than any 8-bit image's 1/255
TAIL = 9.0  #: the table covers |K| <= TAIL * s + 1; the cut mass is 2 * Phi(-TAIL) < 2.3e-19
CDF_ERROR = 2.0 ** -50  #: bound on |float64 table CDF - true CDF| per entry (erfc is within a few ulp of 2**-53)
UNIFORM_BITS = 53
EXACT = 2 ** 24  #: |X + K| must stay below this for Q * (X + K) to be exact in float32
NO_MARGIN = 1e3  #: the required margin when no p_A can meet it (Phi^-1 of any float64 below 1 is < 9)
_N = NormalDist()


def quantise(x: torch.Tensor) -> torch.Tensor:
    """``round(x / Q)`` as int64 on the CPU: the grid point the harness smooths instead of ``x``."""
    return torch.round(x.detach().to("cpu", torch.float64) * 2.0 ** GRID_BITS).to(torch.int64)


#: the integer noises the tables draw, each ``K = g(V / Q)`` for a continuous smoothing variable V (``s`` = the
#: noise scale in grid steps): gaussian ``round(s G)``; exponential ``floor(E)``, E of mean s (a geometric law);
#: uniform ``floor(s U)``; folded_gaussian ``round(|s G|)``. A shift by whole grid steps commutes with g, so the
#: law of ``n + K`` is g applied to the continuous law shifted by n: its radius is the continuous one
#: (benchmark/certify/parameter_lattice.py).
KINDS = ("gaussian", "exponential", "uniform", "folded_gaussian", "symmetric_uniform", "laplace")
EXP_TAIL = 45.0  #: the exponential table covers K < EXP_TAIL * s + 1; the cut mass is e^-45 < 2.9e-20
LAPLACE_TAIL = 44.0  #: the Laplace table covers |K| <= LAPLACE_TAIL * s + 1: the cut mass is below e^-44 < 1e-19


def _cdf(kind: str, s: float) -> tuple[int, torch.Tensor]:
    """(L, P(K <= j - L) for j = 0, 1, ...) in float64 over the table's range (K >= -L)."""
    if kind == "gaussian":
        L = int(math.ceil(TAIL * s)) + 1
        k = torch.arange(-L, L + 1, dtype=torch.float64)
        return L, 0.5 * torch.special.erfc(-(k + 0.5) / (s * math.sqrt(2.0)))  # P(s G < k + 1/2)
    if kind == "exponential":
        k = torch.arange(int(math.ceil(EXP_TAIL * s)) + 1, dtype=torch.float64)
        return 0, -torch.special.expm1(-(k + 1.0) / s)  # P(E < k + 1)
    if kind == "uniform":
        k = torch.arange(int(math.ceil(s)), dtype=torch.float64)
        return 0, ((k + 1.0) / s).clamp_max(1.0)  # P(s U < k + 1)
    if kind == "folded_gaussian":
        k = torch.arange(int(math.ceil(TAIL * s)) + 1, dtype=torch.float64)
        return 0, torch.special.erf((k + 0.5) / (s * math.sqrt(2.0)))  # P(|s G| < k + 1/2)
    if kind in ("symmetric_uniform", "laplace"):  # round(s V), V uniform on [-1, 1] / standard Laplace
        L = int(math.ceil((1.0 if kind == "symmetric_uniform" else LAPLACE_TAIL) * s)) + 1
        y = (torch.arange(-L, L + 1, dtype=torch.float64) + 0.5) / s
        if kind == "symmetric_uniform":
            return L, ((y + 1) / 2).clamp(0.0, 1.0)
        return L, torch.where(y < 0, 0.5 * torch.exp(y.clamp_max(0)), 1 - 0.5 * torch.exp(-y.clamp_min(0)))
    raise ValueError(f"no lattice table for {kind!r}; valid: {KINDS}")


@lru_cache(maxsize=32)
def _table(s: float, kind: str = "gaussian") -> tuple[int, torch.Tensor]:
    """(L, T): K = j - L for the first j with ``U < T[j]``, U uniform on [0, 2**53): ``T[j]`` is
    ``ceil(2**53 * P(K <= j - L))`` (int64, the last entry 2**53 so every U lands)."""
    L, cdf = _cdf(kind, float(s))
    t = torch.ceil(cdf * 2.0 ** UNIFORM_BITS).to(torch.int64)
    t[-1] = 2 ** UNIFORM_BITS
    return L, t


def max_draw(s: float, kind: str = "gaussian") -> int:
    """The largest ``|K|`` that :func:`draw` returns at scale ``s`` (a symmetric table's half-width)."""
    return _table(float(s), kind)[0]


def check_range(x_int: torch.Tensor, s: float) -> None:
    """Raise unless every ``X + K`` stays below 2**24 in magnitude (float32 exactness)."""
    L, _ = _table(float(s))
    if int(x_int.abs().max()) + L >= EXACT:
        raise ValueError(f"pixel noise sigma={s * Q:g} on inputs up to {int(x_int.abs().max()) * Q:g} leaves the "
                         f"range where the grid sum is exact in float32 (|X + K| < 2**24).")


GUIDE_BITS = 17  #: the guide table splits [0, 2**53) into 2**17 buckets of the uniform's top bits
_SHIFT = UNIFORM_BITS - GUIDE_BITS
_NONE, _WIDE = 2 ** _SHIFT, 2 ** (_SHIFT + 1) - 1  #: a bucket's offset field: no table entry / more than one
#: (one gather of the packed guide per draw; 2**17 buckets, 1 MB: at s = 4096-8192 about 2 % of draws land in a
#: wide bucket, and 256 x 1568 draws took 6.0-6.4 ms with the fair bits against 6.7-7.9 with 2**18 buckets,
#: 7.3-8.1 with 2**16 and 12-19 for the earlier two-array guide with 2**16)


@lru_cache(maxsize=32)
def _guide(s: float, kind: str = "gaussian") -> torch.Tensor:
    """Per bucket of U's top bits, one int64: ``lo << (_SHIFT + 1) | offset`` with ``lo`` the number of table
    entries <= the bucket's first U and ``offset`` the bucket's one entry inside it, less that first U
    (``_NONE``: none inside, ``_WIDE``: more than one)."""
    _, t = _table(s, kind)
    edges = torch.arange(2 ** GUIDE_BITS, dtype=torch.int64) << _SHIFT
    lo = torch.searchsorted(t, edges, right=True)
    inside = torch.searchsorted(t, edges + (_NONE - 1), right=True) - lo
    first = t[lo.clamp_max(len(t) - 1)] - edges  # the first entry above the bucket's start
    offset = torch.where(inside == 0, _NONE, torch.where(inside == 1, first, _WIDE))
    return (lo << (_SHIFT + 1)) | offset


def _index(t: torch.Tensor, u: torch.Tensor, s: float, kind: str = "gaussian") -> torch.Tensor:
    """``searchsorted(t, u, right=True)`` exactly (same integers), through the guide table: ``lo`` of u's bucket
    plus whether u reaches the bucket's one entry; the rare wide buckets (far tails) fall back to bisection."""
    packed = torch.take(_guide(s, kind), u >> _SHIFT)
    offset = packed & (2 ** (_SHIFT + 1) - 1)
    out = (packed >> (_SHIFT + 1)).add_((u & (_NONE - 1)) >= offset)
    wide = (offset == _WIDE).view(-1).nonzero().squeeze(1)
    if len(wide):
        out.view(-1)[wide] = torch.searchsorted(t, u.reshape(-1)[wide], right=True)
    return out


def draw(shape: tuple[int, ...], s: float, generator: torch.Generator, kind: str = "gaussian") -> torch.Tensor:
    """Integer noise ``K`` [shape] (int64, CPU), i.i.d. ``round(s G)`` (or another ``kind`` of ``KINDS``) from
    53 fair bits each (inverse CDF on the integer table: ``K = searchsorted(T, U, right=True) - L``, computed
    through a guide table)."""
    L, t = _table(float(s), kind)
    u = torch.randint(0, 2 ** UNIFORM_BITS, shape, generator=generator, dtype=torch.int64)
    return _index(t, u, float(s), kind) - L


def samples(x_int: torch.Tensor, s: float, k: int, generator: torch.Generator) -> torch.Tensor:
    """``k`` noisy copies ``Q * (X + K)`` [k, C, H, W] (float32, exact) of the grid point ``x_int`` [1,C,H,W]."""
    z = x_int + draw((k, *x_int.shape[1:]), s, generator)
    return z.to(torch.float32) * Q  # |z| < 2**24 (check_range): exact integer, exact power-of-two scaling


def perturb(x: torch.Tensor, sigma: float, generator: torch.Generator) -> torch.Tensor:
    """One noisy copy per row of ``x [B, ...]``: ``Q * (round(x / Q) + K)`` (float32, exact, on ``x``'s device),
    the pixel noise of a smoothed classifier whose rows are different images (TSS's slice endpoints, SPT)."""
    s = float(sigma) / Q
    x_int = quantise(x)
    check_range(x_int, s)
    z = x_int + draw(tuple(x_int.shape), s, generator)
    return (z.to(torch.float32) * Q).to(x.device)  # formed on the CPU: the device only receives exact values


@lru_cache(maxsize=256)
def tv_per_coordinate(s: float, kind: str = "gaussian") -> float:
    """Bound on the total variation between one coordinate's sampled law and the ideal ``round(s G)`` (or the
    ideal K of ``kind``): every entry's CDF error and its 53-bit quantile, plus the mass beyond the table."""
    L, t = _table(float(s), kind)
    top = len(t) - L  # the first K the table cannot give
    tail = {"gaussian": 2.0 * _N.cdf(-(L - 0.5) / s), "exponential": math.exp(-top / s), "uniform": 0.0,
            "folded_gaussian": 2.0 * _N.cdf(-(top - 0.5) / s), "symmetric_uniform": 0.0,
            "laplace": math.exp(-(L - 0.5) / s)}[kind]
    return len(t) * (CDF_ERROR + 2.0 ** -UNIFORM_BITS) + tail


def required_margin(l2: float, sigma: float, d: int) -> float:
    """The margin ``Phi^-1(p_A lower)`` that certifies an l2 pixel distance ``l2`` (of the real
    transformation's region, from sound pixel bounds) under this mechanism with noise ``sigma`` on ``d``
    coordinates: the grid's ``sqrt(d) * Q`` is added to the distance, and ``eps = d * tv`` is paid on both
    sides, ``Phi^-1(p_lower - eps) - Phi^-1(1/2 + eps) > D / sigma``, solved for ``Phi^-1(p_lower)``. One pure
    rule, used by ``pixel_smoothing`` to issue and by ``benchmark.audit.mechanism`` to check."""
    eps = d * tv_per_coordinate(float(sigma) / Q)
    r = (float(l2) + math.sqrt(d) * Q) / float(sigma) * (1 + 1e-12) + 1e-12  # float64 slack on the division
    p = _N.cdf(r + _N.inv_cdf(0.5 + eps)) + eps
    return NO_MARGIN if p >= 1.0 - 1e-15 else _N.inv_cdf(p) + 1e-12
