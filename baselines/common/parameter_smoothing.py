"""Smoothing over a transformation's own parameter: Theorem 1 of TSS (Li et al., CCS 2021) and of GSmooth (Hao et
al., ICML 2022) on the rows it resolves, one implementation for both defenses.

Which rows: those whose capabilities make the smoothed classifier over the parameter a proof (``parameter_route``):
an additive composition T(T(x, a), b) = T(x, a + b) (``parameter``: translation, brightness, Gaussian blur) and the
scale-shift composition exp(k)(x + b) with its closed-form Neyman-Pearson bound (``scale_shift``:
``baselines/common/contrast.py``). The GSmooth paper: "the certification of these simple transformations only
requires applying translation or Gaussian blur to the sample", so GSmooth and TSS share the theorem, the noise, the
rule (``benchmark.certify.parameter_lattice``, issued here and re-applied by the audit) and, with equal settings, the
base classifier.

Floating point (``benchmark/certify/parameter_lattice.py``, records ``parameter_noise`` v2): CERTIFY and PREDICT draw
integer noise K from fair bits on a grid Q and form the parameter Q K exactly on the CPU, so the base classifier's
input is one fixed function of the grid point on CPU float32 and CUDA alike, and the radius pays the grid and the
noise table's error. Translation (integer rolls) and brightness (the grid point read back from the image, within the
recorded ``reach``) hold at attacked images bit for bit; the blur's variance and contrast+brightness are statements
about the parameter-space smoothed classifier theta' -> P[f(T(x, theta' (+) Q K))] (the attacked image's own float32
rounding is not covered; parameter_lattice's docstring). Training and the attacks' gradients use float32 noise
(``float_parameter_noise``); no certificate rests on them.

A class mixing this in provides ``model``, ``device``, ``num_classes``, ``smoothing`` (NoisyClassifier's contract),
``_t`` (the prepared transformation) and either ``noise`` (a ``ParameterNoise``, route ``parameter``) or ``sk`` /
``sb`` (route ``scale_shift``), set by ``prepare_parameter_noise``.
"""
from __future__ import annotations

import torch

from baselines.common import contrast
from baselines.common.noisy_classifier import NoisyClassifier
from baselines.common.parameter_noise import ParameterNoise
from benchmark.api import (ABSTAIN, BenchError, Certificate, Transformation, certify, parameter_lattice, radius_rule,
                           radius_threshold, threshold_rule)

ONE_SIDED_KINDS = ("exponential", "uniform", "folded_gaussian")


def parameter_model_key(t: Transformation) -> str:
    """The base classifier's model key on a Theorem 1 row: TSS's, for GSmooth too, so equal settings (the same
    augmentation record and base-model options, hence the same config hash) load one checkpoint, not two."""
    return f"tss/{t.name}"


def parameter_route(t: Transformation) -> str | None:
    """"parameter" (additive: smoothing over theta), "scale_shift" (exp(k)(x + b): the two-scale Gaussian bound) or
    None (Theorem 1 does not resolve ``t``)."""
    if t.kind == "additive":
        return "parameter"
    if t.composition == "scale_shift" and t.dim == 2:
        return "scale_shift"
    return None


def parameter_noise_for(t: Transformation, image_shape: tuple[int, ...], kind: str | None, scale: float,
                        who: str) -> ParameterNoise:
    """Parameter noise for an additive transformation: Gaussian on a two-sided parameter (rounded to whole numbers,
    modulo the period, where the threat model is integer), a non-negative distribution (default exponential, as
    TSS's blur) on a one-sided one. ``who`` names the defense in errors."""
    kind = kind or ("exponential" if t.one_sided else "gaussian")
    if t.integer:
        if kind != "gaussian":
            raise BenchError(f"{who}/{t.name} supports only gaussian smoothing, got '{kind}'.")
        return ParameterNoise("gaussian", scale, dim=t.dim, integer=True, period=t.period(image_shape))
    if not t.one_sided and kind != "gaussian":
        raise BenchError(f"{who}/{t.name} supports only gaussian smoothing (two-sided parameter), got '{kind}'.")
    if t.one_sided and kind not in ONE_SIDED_KINDS:
        raise BenchError(f"{who}/{t.name} needs a non-negative smoothing distribution (the parameter "
                         f"is >= 0): choose smoothing from {ONE_SIDED_KINDS}, got '{kind}'.")
    return ParameterNoise(kind, scale, dim=t.dim)


class ParameterSmoothing(NoisyClassifier):
    """Noise, certificate and training augmentation of smoothing over the transformation's parameter."""

    def prepare_parameter_noise(self, t: Transformation, image_shape: tuple[int, ...], kind: str | None,
                                scale: float, scale_b: float | None, who: str) -> dict:
        """Set the route's noise for ``t`` and return the augmentation record of the base classifier's config
        (the same record for every defense: equal noise, equal checkpoint)."""
        self._t = t
        if parameter_route(t) == "scale_shift":
            if kind not in (None, "gaussian"):
                raise BenchError(f"{who}/{t.name} uses Gaussian smoothing only; remove 'smoothing: {kind}' "
                                 "from its config.")
            self.sk, self.sb = float(scale), float(scale_b or scale)
            desc = {"name": "tss-contrast-brightness-noise", "sigma_k": self.sk, "sigma_b": self.sb}
        else:
            self.noise = parameter_noise_for(t, image_shape, kind, scale, who)
            desc = {"name": "tss-parameter-noise", "transformation": t.name, "noise": self.noise.describe()}
        if t.revision:  # the transformation's numbers changed: a new checkpoint
            desc["transformation_revision"] = t.revision
        return desc

    @property
    def _lattice(self) -> dict:
        """The parameter noise's lattice record (``parameter_lattice.record``, without a reach) for the prepared
        transformation and noise, derived once per (transformation, noise): the parameter route's grid follows
        the threat model (integer shifts: no grid; a parameter every pixel shows: the reference-pixel grid; else
        2^-12 of the scale), the scale_shift route's is 2^-12 of the smaller scale."""
        key = (self._t, getattr(self, "noise", None), getattr(self, "sk", None), getattr(self, "sb", None))
        cached = getattr(self, "_lattice_of", None)
        if cached is None or cached[0] != key:
            t, pl = self._t, parameter_lattice
            if parameter_route(t) == "scale_shift":
                rec = pl.record("gaussian", 2, pl.grid_bits(min(self.sk, self.sb)), "composed")
            else:
                rec = pl.additive_record(t, self.noise.kind, self.noise.scale)
            cached = self._lattice_of = (key, rec)
        return cached[1]

    def _lattice_parameter_noise(self, x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        """The certified parameter noise (``benchmark.certify.parameter_lattice``): integer noise ``K`` from fair
        bits on the route's grid Q, the parameter ``Q * K`` exact in float32, formed on the CPU.

        * translation (integer shifts): ``roll(x, K mod period)``, exact: the sample at an attacked image
          ``roll(x, d)`` is ``roll(x, d + K)``, bit for bit;
        * brightness (``pixel_offset``): ``Q * (canonical(x) + K)``, the grid point read back from the image, so
          the sample at ``fl32(x + theta')`` is the clean one shifted by one grid step count (within the reach
          that ``certify_parameter`` records);
        * Gaussian blur: ``T(x, Q K)``; contrast+brightness: ``exp(Q K_k) (x + Q K_b)``: at the certified image a
          function of K alone (the parameter-space smoothed classifier; an attacked image adds the float32
          rounding of its own transformation, which this does not cover)."""
        b, rec = len(x), self._lattice
        if parameter_route(self._t) == "scale_shift":
            q = parameter_lattice.parameters(parameter_lattice.draw((self.sk, self.sb), rec, b, gen), rec)
            k, off = (q[:, j].view(-1, 1, 1, 1).to(x.device) for j in (0, 1))
            return torch.exp(k) * (x + off)  # = contrast_brightness(x, (k, b)), without the domain check
        k = parameter_lattice.draw(self.noise.scale, rec, b, gen)
        if rec["shift"] == "reference_pixel":
            return parameter_lattice.reference_samples(x, k[:, 0], rec["grid_bits"])
        if self.noise.period is not None:  # an exact identity for cyclic shifts, keeps the shift in the domain
            p = torch.tensor(self.noise.period, dtype=torch.int64)
            k = torch.remainder(k + p // 2, p) - p // 2
        return self._t.apply(x, parameter_lattice.parameters(k, rec).to(x.device))

    def float_parameter_noise(self, x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        """The float32 parameter noise of training and of the attacks' gradients: never a certificate's samples
        (float64 draws cast to float32, ``ParameterNoise.sample``)."""
        if parameter_route(self._t) == "scale_shift":
            e = torch.randn(len(x), 2, generator=gen)
            k = (e[:, 0] * self.sk).view(-1, 1, 1, 1).to(x.device)
            off = (e[:, 1] * self.sb).view(-1, 1, 1, 1).to(x.device)
            return torch.exp(k) * (x + off)
        return self._t.apply(x, self.noise.sample(len(x), gen).to(x.device))

    def certify_parameter(self, x: torch.Tensor, budgets: list[float], generator: torch.Generator) -> Certificate:
        """CERTIFY of the parameter-smoothed classifier (``_sampler`` over ``_noisy``, which must draw
        ``_lattice_parameter_noise``) with the one rule of its record: the closed-form p* of contrast+brightness
        through ``parameter_lattice.composed_threshold``, else the distribution's radius
        ``parameter_lattice.radius`` (capped at the image's reach on the reference-pixel route)."""
        sampler = self._sampler(x, self._t)
        rec = self._lattice
        if parameter_route(self._t) == "scale_shift":
            need = {float(b): parameter_lattice.composed_threshold(
                contrast.required_probability(float(b), self.sk, self.sb), (self.sk, self.sb), rec) for b in budgets}
            res = certify(sampler, self.num_classes, self.smoothing, generator, thresholds=list(need.values()))
            rule = threshold_rule.record("p_a_lower", {repr(b): p for b, p in need.items()})
            ok = {b: threshold_rule.certified(rule, res.p_a_lower, res.prediction == ABSTAIN, b) for b in need}
            stats = {**res.stats(), "sigma_k": self.sk, "sigma_b": self.sb, "threshold_rule": rule,
                     "parameter_noise": rec}
            return Certificate(prediction=res.prediction, radius=None, certified=ok, stats=stats)
        if rec["shift"] == "reference_pixel":  # how far the grid point read back from the image stays exact
            rec = {**rec, "reach": parameter_lattice.reference_reach(x, rec["grid_bits"])}
        kind, scale = self.noise.kind, self.noise.scale
        # certified at b iff radius(p_A_lower) > b: the thresholds only tell the sequential rule when to stop
        need = [radius_threshold(lambda p: parameter_lattice.radius(kind, scale, p, rec), float(b)) for b in budgets]
        res = certify(sampler, self.num_classes, self.smoothing, generator, thresholds=need)
        rule = radius_rule.record(kind, scale)
        radius = radius_rule.radius(rule, res.p_a_lower, res.prediction == ABSTAIN, rec)
        stats = {**res.stats(), "noise": self.noise.describe(), "radius_rule": rule, "parameter_noise": rec}
        return Certificate.from_radius(res.prediction, radius, budgets, stats)


class ParameterSmoothed(ParameterSmoothing):
    """A parameter-smoothed classifier on its own: what GSmooth holds on the rows Theorem 1 resolves."""

    def __init__(self, model: torch.nn.Module, device, num_classes: int, smoothing) -> None:
        self.model, self.device, self.num_classes, self.smoothing = model, device, num_classes, smoothing

    def _noisy(self, x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        """CERTIFY's and PREDICT's samples: the lattice parameter noise."""
        return self._lattice_parameter_noise(x, gen)

    def noisy_logits(self, x: torch.Tensor, transformation: Transformation,
                     generator: torch.Generator) -> torch.Tensor:
        """One float32 noise draw per image, differentiable in x (the attacks' gradients; they judge candidates
        with PREDICT on the lattice)."""
        return self.model(self.float_parameter_noise(x.to(self.device), generator))
