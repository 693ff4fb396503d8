"""Certifying contrast+brightness ``x -> exp(k)(x + b)`` under Gaussian smoothing of (k, b).

Smoothed classifier (ours, no clipping, exactly the registry's transformation):
``g(x) = argmax_c P(f(exp(k)(x + b)) = c)``, ``k ~ N(0, sk^2)``, ``b ~ N(0, sb^2)``.

Derivation. Write ``h(k, b) = f(exp(k)(x + b))``. For an attacked image
``x' = exp(k1)(x + b1)`` the composition rule gives
``exp(k)(x' + b) = exp(k + k1)(x + b1 + b exp(-k1))``, so
``g(x')`` smooths ``h`` with the *shifted and rescaled* Gaussian
``N((k1, b1), diag(sk^2, sb^2 exp(-2 k1)))`` instead of ``N(0, diag(sk^2, sb^2))``.
In standardised coordinates ``u = k/sk``, ``v = b/sb`` the clean distribution is
``q0 = N(0, I)`` and the attacked one ``q1 = N((a, c), diag(1, s^2))`` with
``a = k1/sk``, ``c = b1/sb``, ``s = exp(-k1)``. By Neyman-Pearson, among all
``h`` with ``P_q0(h = cA) >= p`` the smallest ``P_q1(h = cA)`` is attained by a
sublevel set of the likelihood ratio: ``A_tau = {a u + l(v) <= tau}`` with
``l(v) = v^2/2 - (v - c)^2/(2 s^2) - log s`` (quadratic in v). So

    V(p; theta) = P_q1(A_tau)  where  P_q0(A_tau) = p,

and ``g(x') = cA`` whenever ``V(pA_lower; theta) > 1/2``. Both probabilities are
one-dimensional integrals over u of Gaussian probabilities of a quadratic's
sublevel set in v (closed form); the integrand has a square-root kink where the
quadratic's discriminant vanishes, removed by the substitution u = u0 +- w^2,
after which Gauss-Legendre quadrature is accurate to well below the 1e-6 margin
added to p* (tested against the equal-variance closed form, scipy quad and Monte Carlo).

The l-infinity budget region ``|k1| <= B, |b1| <= B`` is a continuum, so it is
covered by cells. For theta in a cell with centre theta0 and any set A,
``|P_theta(A) - P_theta0(A)| <= TV(q_theta, q_theta0) <= sqrt(KL(q_theta||q_theta0)/2)``
(Pinsker), hence ``V(p; theta) >= V(p; theta0) - TV``. KL between the two
Gaussians, ``(exp(-2d) + 2d - 1 + (a - a0)^2 + (c - c0)^2/s0^2)/2`` with
``d = k1 - k10``, is convex in (k1, b1), so its maximum over a cell is at a corner.
The region is certified when ``pA_lower > p*(B) = max over cells of the p that
makes V(p; theta0) = 1/2 + TV_cell``; V is strictly increasing in p, so then
``V(pA_lower; theta) > 1/2`` on the whole region. The map v -> -v leaves q0 invariant and
maps c to -c, so only ``b1 >= 0`` is searched. p*(B) depends only on (sk, sb, B)
and is computed once per budget. The certificate is per budget (no single
radius): the region is not a ball of a shifted-mean Gaussian.

This is our derivation; the public TSS code's factor for this case (known to be
wrong) is not used.

Floating point (``parameter_noise: {kind: lattice, version: 2, shift: composed}``, see
benchmark/certify/parameter_lattice.py). CERTIFY and PREDICT draw ``(k, b) = Q (K_k, K_b)`` with K the
rounded Gaussians ``round(sk G / Q)``, ``round(sb G' / Q)`` from fair bits (``Q`` = 2^-12 of the smaller sd,
a power of two: the parameters are exact float32), so the classifier's input at the certified image is one
fixed function of the integer pair, whatever rounding ``exp`` and the product do on CPU or CUDA. The smoothed
classifier at an attacked ``theta'`` is taken as ``P[f(T(x, Q round((theta' o xi)/Q)))]`` with the continuous
Gaussian xi: rounding is one measurable map of the composed parameter, so for the set ``A`` of grid points the
classifier sends to cA, ``P_q1(round^-1(A)) >= V(P_q0(round^-1(A)))`` and the bound above holds unchanged;
at ``theta' = 0`` that law is the table's, within its total variation, which the threshold adds
(``composed_threshold``). What this does not cover: PREDICT at an attacked *image* computes
``T(fl32(T(x, theta')), Q K)``, two rounded transformations, not one at the composed parameter; the two differ
in the last bits of the image (tests/certify/test_parameter_float_exploit.py measures it) and a classifier that
reads those bits is not bounded by this certificate. Records without ``parameter_noise`` (version 1, float32
``randn`` draws) keep their recorded thresholds.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np
from scipy.special import ndtr

#: Gauss-Legendre nodes per piece (two pieces per integral)
_NODES = 64
#: u is integrated over mean +- _U_SPAN standard deviations (mass outside < 1e-30)
_U_SPAN = 12.0
#: standardised half-width of a cell (controls the Pinsker slack, about _DELTA/sqrt(2) per axis)
_DELTA = 0.015
#: added to p* to absorb quadrature and root-finding error
_NUMERIC_MARGIN = 1e-6


def _gl(n: int) -> tuple[np.ndarray, np.ndarray]:
    x, w = np.polynomial.legendre.leggauss(n)
    return (x + 1) / 2, w / 2  # on [0, 1]


def _quadratic_set_prob(alpha: np.ndarray, beta: np.ndarray, gam: np.ndarray, m: float | np.ndarray,
                        sv: float | np.ndarray) -> np.ndarray:
    """P(alpha v^2 + beta v + gam <= 0) for v ~ N(m, sv^2), elementwise (alpha != 0)."""
    disc = beta * beta - 4 * alpha * gam
    sq = np.sqrt(np.maximum(disc, 0.0))
    q = -0.5 * (beta + np.where(beta >= 0, 1.0, -1.0) * sq)  # stable roots: q/alpha and gam/q
    with np.errstate(divide="ignore", invalid="ignore"):
        r1 = q / alpha
        r2 = np.where(q != 0, gam / q, r1)
    lo, hi = np.minimum(r1, r2), np.maximum(r1, r2)
    f_lo, f_hi = ndtr((lo - m) / sv), ndtr((hi - m) / sv)
    inside = np.clip(f_hi - f_lo, 0.0, 1.0)
    prob = np.where(alpha > 0, inside, 1.0 - inside)
    no_root = np.where(alpha > 0, 0.0, 1.0)
    return np.where(disc >= 0, prob, no_root)


def set_probabilities(tau: np.ndarray, a: np.ndarray, c: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(P_q0(A_tau), P_q1(A_tau)) for ``A_tau = {a u + l(v) <= tau}``, elementwise over arrays.

    q0 = N(0, I); q1 = N((a, c), diag(1, s^2)); l as in the module docstring.
    """
    return set_probability(tau, a, c, s, under_q1=False), set_probability(tau, a, c, s, under_q1=True)


def set_probability(tau: np.ndarray, a: np.ndarray, c: np.ndarray, s: np.ndarray, under_q1: bool) -> np.ndarray:
    """P_q1(A_tau) if ``under_q1`` else P_q0(A_tau) (one of ``set_probabilities``; the bisections need one)."""
    tau, a, c, s = np.broadcast_arrays(*(np.asarray(z, dtype=np.float64) for z in (tau, a, c, s)))
    alpha = 0.5 * (1.0 - 1.0 / s**2)
    alpha = np.where(alpha == 0, 1e-300, alpha)  # s == 1: linear case, one root at -inf/+inf
    beta = c / s**2
    gam0 = -np.log(s) - c**2 / (2 * s**2) - tau
    t01, w01 = _gl(_NODES)
    mu_u, m, sv = (a, c, s) if under_q1 else (np.zeros_like(a), 0.0, 1.0)
    lo_u, hi_u = mu_u - _U_SPAN, mu_u + _U_SPAN
    # discriminant beta^2 - 4 alpha (gam0 + a u) vanishes at u0
    with np.errstate(divide="ignore", invalid="ignore"):
        u0 = (beta**2 - 4 * alpha * gam0) / (4 * alpha * a)
    u0 = np.where(np.isfinite(u0), u0, hi_u)
    u0 = np.clip(u0, lo_u, hi_u)
    total = np.zeros_like(a)
    for sign, length in ((-1.0, u0 - lo_u), (1.0, hi_u - u0)):
        wmax = np.sqrt(np.maximum(length, 0.0))
        w = wmax[..., None] * t01  # u = u0 + sign * w^2, du = 2 w dw
        u = u0[..., None] + sign * w**2
        pv = _quadratic_set_prob(alpha[..., None], beta[..., None], gam0[..., None] + a[..., None] * u,
                                 m if np.isscalar(m) else m[..., None], sv if np.isscalar(sv) else sv[..., None])
        dens = np.exp(-0.5 * (u - mu_u[..., None]) ** 2) / math.sqrt(2 * math.pi)
        total = total + (pv * dens * 2 * w * w01).sum(-1) * wmax
    return np.clip(total, 0.0, 1.0)


def _bisect(prob: Callable[[np.ndarray], np.ndarray], target: np.ndarray, shape: tuple[int, ...],
            iters: int = 90) -> np.ndarray:
    """The least float ``hi`` found by bisection on [-1e3, 1e3] with ``prob(hi) >= target`` (``prob`` is
    non-decreasing in tau), elementwise. Stops once no element moves: when lo and hi are adjacent floats,
    mid equals one of them and the update leaves both unchanged, so later iterations are no-ops and the
    result is the same as running all ``iters``."""
    lo = np.full(shape, -1e3)
    hi = np.full(shape, 1e3)
    for _ in range(iters):
        mid = (lo + hi) / 2
        below = prob(mid) < target
        new_lo, new_hi = np.where(below, mid, lo), np.where(below, hi, mid)
        if np.array_equal(new_lo, lo) and np.array_equal(new_hi, hi):
            break
        lo, hi = new_lo, new_hi
    return hi


def _tau_for_q1(target: np.ndarray, a: np.ndarray, c: np.ndarray, s: np.ndarray, iters: int = 90) -> np.ndarray:
    """tau with P_q1(A_tau) = target (P_q1(A_tau) is non-decreasing in tau), by bisection."""
    return _bisect(lambda tau: set_probability(tau, a, c, s, under_q1=True), target, np.shape(a), iters)


def worst_case_probability(p, k1, b1, sk: float, sb: float, iters: int = 90):
    """V(p; (k1, b1)): the Neyman-Pearson lower bound on P(h = cA) after the attack (k1, b1).

    Elementwise over broadcastable arrays; returns a float for scalar inputs.
    """
    p, k1, b1 = np.broadcast_arrays(*(np.asarray(z, dtype=np.float64) for z in (p, k1, b1)))
    a, c, s = k1 / sk, b1 / sb, np.exp(-k1)
    hi = _bisect(lambda tau: set_probability(tau, a, c, s, under_q1=False), p, a.shape, iters)  # P_q0(A_tau) = p
    v = set_probability(hi, a, c, s, under_q1=True)
    return float(v) if v.ndim == 0 else v


def required_probability_at(target: float, k1: np.ndarray, b1: np.ndarray, sk: float, sb: float) -> np.ndarray:
    """The p with V(p; (k1, b1)) = target, elementwise (p = P_q0 of the set with P_q1 = target)."""
    a, c, s = k1 / sk, b1 / sb, np.exp(-k1)
    tau = _tau_for_q1(np.asarray(target, dtype=np.float64), a, c, s)
    return set_probability(tau, a, c, s, under_q1=False)


def cell_tv_bound(k_lo, k_hi, b_lo, b_hi, sk: float, sb: float) -> np.ndarray:
    """Pinsker bound on sup over the cell of TV(q_theta, q_centre); KL is convex so corners suffice."""
    k0, b0 = (k_lo + k_hi) / 2, (b_lo + b_hi) / 2
    s0sq = np.exp(-2 * k0)
    kl = np.zeros_like(k0)
    for kc in (k_lo, k_hi):
        for bc in (b_lo, b_hi):
            d = kc - k0
            v = 0.5 * (np.exp(-2 * d) + 2 * d - 1 + ((kc - k0) / sk) ** 2 + ((bc - b0) / sb) ** 2 / s0sq)
            kl = np.maximum(kl, v)
    return np.minimum(np.sqrt(kl / 2), 0.5)


@functools.lru_cache(maxsize=64)
def required_probability(budget: float, sk: float, sb: float, delta: float = _DELTA) -> float:
    """p*(B): pA_lower > p*(B) certifies every (k1, b1) with max(|k1|, |b1|) <= B.

    Returns a value in [1/2, 1]; 1 means the budget cannot be certified at any pA.
    """
    if budget <= 0:
        return 0.5
    nk = 2 * max(1, math.ceil(budget / (2 * sk * delta)))
    nb = max(1, math.ceil(budget / (2 * sb * math.exp(-budget) * delta)))
    ke = np.linspace(-budget, budget, nk + 1)
    be = np.linspace(0.0, budget, nb + 1)
    k_lo, b_lo = np.meshgrid(ke[:-1], be[:-1], indexing="ij")
    k_hi, b_hi = np.meshgrid(ke[1:], be[1:], indexing="ij")
    k_lo, k_hi, b_lo, b_hi = (z.ravel() for z in (k_lo, k_hi, b_lo, b_hi))
    tv = cell_tv_bound(k_lo, k_hi, b_lo, b_hi, sk, sb)
    target = 0.5 + tv
    ok = target < 1.0
    p = np.ones_like(target)
    if ok.any():
        p[ok] = required_probability_at(target[ok], ((k_lo + k_hi) / 2)[ok], ((b_lo + b_hi) / 2)[ok], sk, sb)
    return float(min(1.0, p.max() + _NUMERIC_MARGIN))
