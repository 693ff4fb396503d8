"""Smoothing mechanisms the harness verifies end to end: helpers for defense authors.

A radius rule is only a proof when the noise it assumes is the noise that was drawn and when the budget
it is compared with means the same thing as the transformation's budget. Two mechanisms give both,
because the harness itself draws the noise and converts the budgets:

* ``parameter``: smoothing over the transformation's own parameter. The harness draws integer noise from the
  ``generator`` and applies the registry's transformation to exactly representable parameters; the radius
  over theta is a proof only for transformations that compose additively (``kind == "additive"``:
  brightness, translation, Gaussian blur), with a two-sided Gaussian for two-sided ones and a one-sided
  family otherwise. Sound in floating point since mechanism version 2 (``PARAMETER_VERSION``): the noise
  and its radius are ``benchmark.certify.parameter_lattice``'s (see ``parameter_smoothing``).
* ``pixel``: Gaussian pixel noise (Cohen et al.): the l2 pixel radius sigma * Phi^-1(p_A) certifies
  budget b when it exceeds the l2 distance between x and every image of the budget's region, bounded
  from the registry's sound ``pixel_bounds`` (any transformation that has them). Sound in floating
  point since mechanism version 2 (``PIXEL_VERSION``): the harness quantises the input to a grid and adds
  integer noise drawn from fair bits, so the float32 sample is exact (``benchmark.certify.lattice_noise``).

A defense passes its base classifier (images -> labels or logits) and the input it was given. The
certificate records ``stats["mechanism"]`` (kind, transformation, parameters, the input's sha256); the
runner keeps that record only on certificates a helper produced during that very ``certify`` call
(``produced`` / ``confirm``), and the checker re-derives it from the test image
(``benchmark.audit.mechanism``). Certificates of outside code without a confirmed mechanism are
listed as unverified and not ranked.
"""
from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import torch

from benchmark.certify import lattice_noise, parameter_lattice, radius_rule
from benchmark.certify.certificate import Certificate
from benchmark.certify.radii import gaussian_radius, radius_threshold
from benchmark.certify.smoothing import SampleLabels, SmoothingParams, certify
from benchmark.errors import BenchError
from benchmark.transformations.base import Transformation

Classify = Callable[[torch.Tensor], torch.Tensor]  # images [k,C,H,W] -> labels [k] or logits [k,K]
TWO_SIDED = ("gaussian",)
ONE_SIDED = ("uniform", "exponential", "folded_gaussian")
#: 2: grid input + integer rounded-Gaussian noise, exact in float32 (1: float32 ``x + sigma * randn``, whose
#: rounding a base classifier can read: not a proof in floating point)
PIXEL_VERSION = 2
#: 2: integer noise from fair bits on parameter_lattice's grid, exact parameters (or the canonical lattice image)
#: (1: float64 draws cast to float32 and applied to the image given: its rounding can be read; not a proof)
PARAMETER_VERSION = 2
_PRODUCED: ContextVar[set | None] = ContextVar("mechanism_certificates", default=None)


def image_sha256(x: torch.Tensor) -> str:
    """sha256 of one input as float32 bytes on the CPU (how the certificate names the image it certifies)."""
    return hashlib.sha256(x.detach().to("cpu", torch.float32).contiguous().numpy().tobytes()).hexdigest()


def fingerprint(cert: dict) -> str:
    """A certificate's decision and statistics (``Certificate.to_json()`` without its variant), hashed."""
    keep = {k: cert.get(k) for k in ("prediction", "radius", "certified", "stats")}
    return hashlib.sha256(json.dumps(keep, sort_keys=True, default=str).encode()).hexdigest()


@contextmanager
def produced() -> Iterator[set]:
    """Collect the fingerprints of the certificates the helpers return inside the block (the runner wraps
    each ``certify`` call)."""
    seen: set = set()
    token = _PRODUCED.set(seen)
    try:
        yield seen
    finally:
        _PRODUCED.reset(token)


def confirm(cert: dict, seen: set) -> dict:
    """``cert`` (JSON form) with its ``mechanism`` kept only if a helper produced exactly this certificate;
    otherwise the record is moved to ``claimed_mechanism`` (outside code wrote or edited it)."""
    stats = cert.get("stats") or {}
    if "mechanism" not in stats or fingerprint(cert) in seen:
        return cert
    stats = {k: v for k, v in stats.items() if k != "mechanism"}
    return {**cert, "stats": {**stats, "claimed_mechanism": cert["stats"]["mechanism"]}}


def _record(cert: Certificate) -> Certificate:
    seen = _PRODUCED.get()
    if seen is not None:
        seen.add(fingerprint(cert.to_json()))
    return cert


def _labels(classify: Classify, images: torch.Tensor) -> torch.Tensor:
    out = classify(images)
    return out.argmax(1) if out.ndim == 2 else out


def parameter_problem(t: Transformation, distribution: str) -> str | None:
    """Why parameter smoothing with ``distribution`` is not a proof on ``t`` (None: it is)."""
    if t.kind != "additive":
        return (f"parameter smoothing certifies only transformations that compose additively (kind 'additive'); "
                f"'{t.name}' is {t.kind}: use pixel_smoothing (sound wherever pixel_bounds exist).")
    allowed = ONE_SIDED if t.one_sided else TWO_SIDED
    if distribution not in allowed or (t.one_sided and t.dim != 1) or (t.norm == "linf" and t.dim > 1):
        return (f"'{t.name}' ({'one' if t.one_sided else 'two'}-sided, m={t.dim}, {t.norm}) takes parameter "
                f"smoothing with one of {list(allowed)}, got {distribution!r}.")
    return None


def parameter_noise(t: Transformation, distribution: str, scale: float, x: torch.Tensor | None = None) -> dict:
    """The ``parameter_noise`` record (``parameter_lattice.record``) of parameter smoothing on ``t``, from its
    capabilities: ``integer`` shifts (grid 1, exact rolls), a ``pixel_offset`` parameter (``reference_pixel``:
    the grid point read back from the image, with the reach of the image ``x [1,C,H,W]`` when given), else
    ``nearest`` (grid 2**-12 of the scale). The helpers issue with it and ``benchmark.audit.mechanism`` re-derives
    it from the test image."""
    rec = parameter_lattice.additive_record(t, distribution, scale)
    if rec["shift"] == "reference_pixel" and x is not None:
        rec["reach"] = parameter_lattice.reference_reach(x, rec["grid_bits"])
    return rec


def parameter_inputs(x: torch.Tensor, t: Transformation, rec: dict, scale: float, k: int,
                     generator: torch.Generator) -> torch.Tensor:
    """``k`` inputs of the base classifier at ``x [1,C,H,W]``: integer noise ``K`` from fair bits of
    ``generator`` (``parameter_lattice.draw``) and, per route, ``Q * (canonical(x) + K)`` (reference_pixel) or
    ``t(x, Q * K)`` with ``Q * K`` exact in float32 and formed on the CPU (integer, nearest). The transformation
    runs unclipped (``_apply``): the parameter domain is the threat model's, the composition is exact beyond it."""
    n = parameter_lattice.draw(scale, rec, k, generator)
    xs = x.expand(k, -1, -1, -1)
    if rec["shift"] == "reference_pixel":
        return parameter_lattice.reference_samples(xs, n[:, 0], rec["grid_bits"])
    return t._apply(xs, parameter_lattice.parameters(n, rec).to(x.device))


def parameter_sampler(classify: Classify, x: torch.Tensor, t: Transformation, distribution: str,
                      scale: float) -> SampleLabels:
    """``sample_labels(k, generator)``: labels of ``classify`` under the harness's parameter noise at ``x``.

    Floating-point argument (``benchmark.certify.parameter_lattice``): ``classify`` sees only inputs that are
    one fixed function of the grid point and the integer noise, exact on CPU and CUDA alike. On translation
    (integer shifts) PREDICT at an attacked image ``roll(x, d)`` samples exactly ``roll(x, d + K)``; on brightness
    the grid point is read back from the image itself, so at ``fl32(x + b')`` the samples are the clean ones
    moved by one integer number of grid steps (within the certificate's ``reach``); on the Gaussian blur
    (``nearest``) the certificate is a statement about the parameter-space smoothed classifier
    ``b' -> P[f(T(x, Q (round(b'/Q) + K)))]``: PREDICT at an attacked image composes two rounded blurs and equals
    it only up to that image's float32 rounding, which is not covered."""
    problem = parameter_problem(t, distribution)
    if problem:
        raise BenchError(problem)
    rec = parameter_noise(t, distribution, scale)

    @torch.no_grad()
    def sample(k: int, generator: torch.Generator) -> torch.Tensor:
        return _labels(classify, parameter_inputs(x, t, rec, scale, k, generator))

    return sample


def parameter_smoothing(classify: Classify, x: torch.Tensor, t: Transformation, budgets: list[float],
                        generator: torch.Generator, params: SmoothingParams, num_classes: int, *,
                        distribution: str = "gaussian", scale: float) -> Certificate:
    """CERTIFY of ``classify`` smoothed over ``t``'s parameter (version ``PARAMETER_VERSION``): the samples of
    ``parameter_sampler``, the radius ``parameter_lattice.radius`` of the recorded ``parameter_noise`` (the
    distribution's Neyman-Pearson bound with the table error paid on both sides, less the grid's cost, capped at
    the image's reach on the reference-pixel route): the one rule TSS issues with and the audit recomputes."""
    rec = parameter_noise(t, distribution, scale, x)
    need = [radius_threshold(lambda p: parameter_lattice.radius(distribution, scale, p, rec), float(b))
            for b in budgets]
    res = certify(parameter_sampler(classify, x, t, distribution, scale), num_classes, params, generator,
                  thresholds=need)
    rule = radius_rule.record(distribution, scale)
    radius = radius_rule.radius(rule, res.p_a_lower, res.prediction < 0, rec)
    mechanism = {"kind": "parameter", "version": PARAMETER_VERSION, "transformation": t.name,
                 "distribution": distribution, "scale": scale, "input_sha256": image_sha256(x)}
    stats = {**res.stats(), "radius_rule": rule, "parameter_noise": rec, "mechanism": mechanism}
    return _record(Certificate.from_radius(res.prediction, radius, budgets, stats))


def budget_box(t: Transformation, b: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The parameter box ``[1, m]`` holding the attack region of budget ``b`` (clipped to the domain)."""
    lo = torch.full((1, t.dim), 0.0 if t.one_sided else -float(b), dtype=torch.float64)
    hi = torch.full((1, t.dim), float(b), dtype=torch.float64)
    return t.clip(lo), t.clip(hi)


def pixel_distances(x: torch.Tensor, t: Transformation, budgets: list[float]) -> dict[str, float]:
    """Upper bounds on ``||t(x, theta) - x||_2`` over each budget's region, from ``t.pixel_bounds``."""
    if not t.has_pixel_bounds:
        raise BenchError(f"pixel smoothing needs sound pixel_bounds, which '{t.name}' does not implement.")
    x64 = x.detach().to("cpu", torch.float64)
    out = {}
    for b in budgets:
        if float(b) == 0:
            out[repr(float(b))] = 0.0
            continue
        lo, hi = t.pixel_bounds(x64, *budget_box(t, float(b)))
        out[repr(float(b))] = float(torch.maximum(hi - x64, x64 - lo).clamp_min(0).flatten().norm())
    return out


def pixel_sampler(classify: Classify, x: torch.Tensor, sigma: float) -> SampleLabels:
    """``sample_labels(k, generator)``: labels of ``classify`` on ``x`` under the harness's pixel noise.

    Floating-point argument (``benchmark.certify.lattice_noise``): the harness quantises ``x`` to the grid
    ``Q = 2**-12`` and adds integer noise ``round(sigma / Q * G)`` drawn from 53 fair bits per coordinate of
    the generator; ``classify`` sees ``Q * (X + K)``, exact in float32 (formed on the CPU, only copied to the
    device), so nothing in the sample depends on the input beyond the integer vector ``X + K``."""
    s = float(sigma) / lattice_noise.Q
    x_int = lattice_noise.quantise(x)
    lattice_noise.check_range(x_int, s)

    @torch.no_grad()
    def sample(k: int, generator: torch.Generator) -> torch.Tensor:
        return _labels(classify, lattice_noise.samples(x_int, s, k, generator).to(x.device, torch.float32))

    return sample


def pixel_required(dist: dict[str, float], sigma: float, d: int) -> dict[str, float]:
    """Per budget, the margin ``Phi^-1(p_A lower)`` that certifies it: ``lattice_noise.required_margin`` of
    its pixel_bounds distance (the grid and the noise table's error paid); issued and audited alike."""
    return {b: lattice_noise.required_margin(v, sigma, d) for b, v in dist.items()}


def pixel_smoothing(classify: Classify, x: torch.Tensor, t: Transformation, budgets: list[float],
                    generator: torch.Generator, params: SmoothingParams, num_classes: int, *,
                    sigma: float) -> Certificate:
    """CERTIFY of ``classify`` under the harness's Gaussian pixel noise; budget b certified iff the margin
    Phi^-1(p_A lower) exceeds ``pixel_required`` of b's pixel_bounds distance (a per-budget certificate,
    statistic ``margin``).

    Sound in floating point (version ``PIXEL_VERSION``): Voráček & Hein's route, inputs on a grid and
    integer noise from fair bits, exact float32 samples on CPU and CUDA alike (see ``pixel_sampler``); the
    radius pays ``sqrt(d) * Q`` for quantising x and every x' of the region, and the table's bounded error."""
    dist = pixel_distances(x, t, budgets)
    required = pixel_required(dist, sigma, int(x[0].numel()))
    need = [min(1.0, float(_phi(v))) for v in required.values()]
    res = certify(pixel_sampler(classify, x, sigma), num_classes, params, generator, thresholds=need)
    value = gaussian_radius(res.p_a_lower, 1.0)  # the margin Phi^-1(p_A lower), clipped like every radius
    flags = {float(b): res.prediction >= 0 and (float(b) == 0 or value > required[repr(float(b))]) for b in budgets}
    mechanism = {"kind": "pixel", "version": PIXEL_VERSION, "grid_bits": lattice_noise.GRID_BITS,
                 "transformation": t.name, "sigma": sigma, "l2": dist, "input_sha256": image_sha256(x)}
    stats = {**res.stats(), "threshold_rule": {"statistic": "margin", "required": required}, "mechanism": mechanism}
    return _record(Certificate(res.prediction, None, flags, stats))


def _phi(v: float) -> float:
    """Phi(v): the p_A whose margin is v (the sequential CERTIFY's threshold)."""
    return 0.5 * (1.0 + math.erf(v / math.sqrt(2.0)))
