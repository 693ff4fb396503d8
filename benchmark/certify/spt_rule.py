"""The certification rule of transformation smoothing with an interpolation-error bound (IndivSPT / DistSPT,
Fischer, Baader & Vechev, NeurIPS 2020), as closed forms shared by the defense (baselines/spt) and the
record checker (benchmark/audit/statistics.py).

Smoothed classifier: ``g(z) = argmax_c P_{beta, delta}(f(P(T(z, beta)) + delta) = c)`` with
``beta ~ N(0, sigma_gamma^2 I_m)`` (the transformation's parameter) and ``delta ~ N(0, sigma_delta^2 I)``
(pixels, after a fixed pixel pipeline P). For the attacked input ``T(x, gamma)`` write
``P(T(T(x, gamma), beta)) = P(T(x, beta + gamma)) + eps(beta, gamma)`` (the interpolation error) and let
``rho >= sup_{|gamma| <= b} P_beta(||eps(beta, gamma)||_2 > E)``. Then, with ``p_A <= P(f(P(T(x, beta)) +
delta) = c)``,

    P(f(P(T(T(x, gamma), beta)) + delta) = c) >= Phi(Phi^-1(p_A) - sqrt((|gamma| / sigma_gamma)^2
                                                   + (E / sigma_delta)^2)) - rho,

so ``g(T(x, gamma)) = c`` for every ``|gamma| <= b`` once the right side is > 1/2 at ``|gamma| = b``, i.e.

    p_A > required(b) = Phi(Phi^-1(1/2 + rho) + sqrt((b / sigma_gamma)^2 + (E / sigma_delta)^2)).

Proof. For fixed beta, Cohen's lemma in delta (any shift of l2 norm <= E) gives
``P_delta(f(z + e + delta) = c) >= Phi(Phi^-1(u(beta)) - E / sigma_delta)`` with ``u(beta) = P_delta(f(z +
delta) = c)``, ``z = P(T(x, beta + gamma))``. The right side is the mass of the half-line
``{s <= sigma_delta Phi^-1(u(beta)) - E}`` under ``s ~ N(0, sigma_delta^2)``, i.e. the set
``S = {(beta, s): s <= sigma_delta Phi^-1(u(beta))}`` (mass >= p_A under N(0, diag(sigma_gamma^2 I,
sigma_delta^2))) shifted by ``(gamma, E)``. Cohen's lemma for that Gaussian gives the Phi(...) term; the
betas with ``||eps|| > E`` (probability <= rho) are subtracted. Uses only that the base classifier's
inputs at the attacked image equal those at the clean image moved by eps; nothing about T itself.

Floating point (``grid_dim``, records with ``pixel_noise``): delta is the harness's lattice noise
(``benchmark.certify.lattice_noise``): the base classifier gets ``Q * (round(P(.) / Q) + K)``, exact in
float32, which for fixed beta is the rounded-Gaussian smoothing of one fixed function at the grid point.
Cohen's lemma in delta then holds between the two *grid points*, at most ``E + sqrt(d) Q`` apart (each image
is rounded by at most Q/2 per pixel), and the sampled law is within ``eps = d * tv`` of the ideal one for
every beta, paid on both sides:

    p_A > Phi(Phi^-1(1/2 + rho + eps) + sqrt((b / sigma_gamma)^2 + ((E + sqrt(d) Q) / sigma_delta)^2)) + eps.

Not covered here: the float32 rounding of beta itself (the parameter noise), which the parameter
smoothing step of the floating-point work addresses.
"""
from __future__ import annotations

import math

from scipy.stats import norm

from benchmark.certify import lattice_noise
from benchmark.certify.stats import upper_confidence_bound


def required_probability(budget: float, sigma_gamma: float, sigma_delta: float, error: float, rho: float,
                         grid_dim: int | None = None) -> float:
    """The p_A threshold of a budget (see the module docstring; ``grid_dim``: the lattice pixel noise's
    coordinates, None for the exact-arithmetic rule of older records); 1.0 (never) when rho >= 1/2."""
    if not (sigma_gamma > 0 and sigma_delta > 0 and error >= 0 and 0 <= rho <= 1 and budget >= 0):
        raise ValueError(f"bad SPT rule parameters: b={budget}, sigma_gamma={sigma_gamma}, "
                         f"sigma_delta={sigma_delta}, E={error}, rho={rho}")
    eps = 0.0
    if grid_dim is not None:
        eps = grid_dim * lattice_noise.tv_per_coordinate(sigma_delta / lattice_noise.Q)
        error = error + math.sqrt(grid_dim) * lattice_noise.Q
    if rho + eps >= 0.5:
        return 1.0
    shift = math.hypot(budget / sigma_gamma, error / sigma_delta)
    return min(1.0, float(norm.cdf(norm.ppf(0.5 + rho + eps) + shift)) + eps)


def rho_bound(record: dict) -> float:
    """rho from its record: ``{"kind": "exact", "value": v}`` (a proven bound, e.g. 0 for an exactly
    composing transformation) or ``{"kind": "clopper_pearson", "failures": k, "trials": K, "alpha": a}``
    (one-sided upper Clopper-Pearson bound of a failure probability from K iid trials), optionally divided
    by ``markov_fraction`` kappa (DistSPT: a bound on the *mean* of rho_x over the data distribution, so
    rho_x <= mean / kappa except on a kappa fraction of inputs, by Markov's inequality)."""
    kind = record.get("kind")
    if kind == "exact":
        value = float(record["value"])
    elif kind == "clopper_pearson":
        value = upper_confidence_bound(int(record["failures"]), int(record["trials"]), float(record["alpha"]))
    else:
        raise ValueError(f"unknown rho record kind {kind!r}; valid: exact, clopper_pearson.")
    kappa = record.get("markov_fraction")
    if kappa is not None:
        if not 0 < float(kappa) <= 1:
            raise ValueError(f"markov_fraction must be in (0, 1], got {kappa}.")
        value = value / float(kappa)
    return min(value, 1.0)


def rho_alpha(record: dict) -> float:
    """The share of alpha the rho bound spends (0 for a proven bound)."""
    return float(record["alpha"]) if record.get("kind") == "clopper_pearson" else 0.0


def thresholds(budgets: list[float], rule: dict) -> dict[float, float]:
    """required(b) for every budget b > 0 of an ``spt_rule`` record
    ``{"sigma_gamma", "sigma_delta", "error", "rho": <rho record>}`` and, for the lattice pixel noise,
    ``"pixel_noise": {"d": d, ...}``."""
    rho = rho_bound(rule["rho"])
    grid = int(rule["pixel_noise"]["d"]) if isinstance(rule.get("pixel_noise"), dict) else None
    return {float(b): required_probability(float(b), float(rule["sigma_gamma"]), float(rule["sigma_delta"]),
                                           float(rule["error"]), rho, grid) for b in budgets if float(b) > 0}
