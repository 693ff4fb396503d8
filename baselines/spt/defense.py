"""The ``spt`` defense: IndivSPT and DistSPT (Fischer, Baader & Vechev, NeurIPS 2020), variants ``indiv`` / ``dist``.

Smoothed classifier (both variants): ``g(z) = argmax_c P(f(P(T(z, beta)) + delta) = c)``, ``beta ~ N(0,
sigma_gamma^2 I)`` on the transformation's parameter (wrapped into its domain without changing the image),
``delta ~ N(0, sigma_delta^2 I)`` on the pixels, P a fixed 0/1 mask (circular for rotation, as TSS and the
paper's vignette, none for translation). Certified at budget b iff ``p_A_lower > Phi(Phi^-1(1/2 + rho) +
sqrt((b / sigma_gamma)^2 + (E / sigma_delta)^2))`` (benchmark/certify/spt_rule.py: the l2 pixel noise covers
the interpolation error E, rho bounds the chance over beta that it does not), for the REAL transformation.

* ``indiv`` (IndivSPT): rho for the input at hand. K fresh betas; for each, the sup over the attack region of
  the error is bounded soundly (baselines/spt/interpolation.py: Lipschitz grid for rotation, enumeration
  for translation); rho = one-sided Clopper-Pearson upper bound of the failure rate at alpha/2, p_A at alpha/2
  (the statistical bound over beta has its own share, as in the paper's code).
* ``dist`` (DistSPT): rho from a calibration on the *training* split (baselines/spt/calibration.py),
  divided by kappa (Markov). The certificate is distributional: it holds for every input except a kappa
  fraction of the data distribution (and with probability >= 1 - alpha/2 over the calibration sample,
  1 - alpha/2 over the certificate's own samples); ``stats['guarantee']`` says so.
* translation (the registry's cyclic shift, integer attack shifts): integer shifts compose exactly with any
  fractional beta, so E is float32 round-off only and rho = 0 is proven, without statistics: both variants
  coincide, p_A uses the whole alpha, and the certificate is ordinary Gaussian smoothing over the shift.
Both variants share one CERTIFY run (the same smoothed classifier, so one set of samples).
Floating point: delta is the harness's lattice pixel noise (the masked image on the grid Q = 2^-12, integer
noise from fair bits, exact float32 samples), and the rule pays ``sqrt(d) Q`` and the noise table's error
(benchmark/certify/spt_rule.py); training and the attacks' gradients use float32 noise. The float32
rounding of beta itself is not yet covered (the parameter-noise step of the floating-point work).
The base classifier is the suite's CNN trained with this noise (theta = uniform attack parameter + beta).
"""
from __future__ import annotations

import dataclasses

import torch

from baselines.common.noisy_classifier import NoisyClassifier
from baselines.spt.calibration import calibration_spec
from baselines.spt.interpolation import failures, method, sup_errors, wrap
from benchmark.api import (ABSTAIN, BenchError, Certificate, Context, Defense, Transformation, certify,
                           classifier_spec, lattice_noise, spt_rule, threshold_rule)

#: the noise settings: sigma_gamma (parameter units), sigma_delta (pixels), E (l2), kappa (DistSPT Markov fraction);
#: from the suite, else the transformation's suggested ``spt`` settings (``Transformation.defaults_for``)
NOISE_KEYS = ("sigma_gamma", "sigma_delta", "error", "kappa")
#: cost settings (suite config keys, not profile settings, so other defenses' task hashes stay as they are):
#: betas per input (indiv), Lipschitz-grid cells over [-B, B] (rotation), calibration pairs (dist)
SETTINGS = {"betas": 100, "cells": 100, "pairs": 1000}
CALIBRATION_SEED = 20201206


class SPT(NoisyClassifier, Defense):
    """IndivSPT / DistSPT transformation smoothing with a bounded interpolation error."""

    name = "spt"
    certified = True
    variants = ("indiv", "dist")
    defaults = {**dict.fromkeys(NOISE_KEYS), **SETTINGS}
    description = "transformation smoothing + l2 pixel noise covering the interpolation error (IndivSPT / DistSPT)"
    paper = "https://arxiv.org/abs/2002.12398"
    code = "https://github.com/eth-sri/transformation-smoothing"

    def _noise_settings(self, t: Transformation) -> dict[str, float] | None:
        """The four noise settings (suite config over the transformation's suggestions), None if any is missing."""
        suggested = t.defaults_for("spt")
        cfg = {k: self.config[k] if self.config[k] is not None else suggested.get(k) for k in NOISE_KEYS}
        return None if any(v is None for v in cfg.values()) else {k: float(v) for k, v in cfg.items()}

    def supports(self, transformation: Transformation) -> bool:
        return method(transformation) is not None and self._noise_settings(transformation) is not None

    def prepare(self, ctx: Context) -> None:
        t = ctx.transformation
        cfg = self._noise_settings(t)
        if method(t) is None or cfg is None:
            raise BenchError(f"spt/{t.name}: unsupported (needs an integer threat model or a 1-D parameter composing "
                             f"by sum with a Lipschitz bound, and the settings {list(NOISE_KEYS)} from the suite).")
        self.sigma_gamma, self.sigma_delta, self.error, self.kappa = (cfg[k] for k in NOISE_KEYS)
        settings = {k: self.config[k] for k in SETTINGS}
        self.betas, self.cells = int(settings["betas"]), int(settings["cells"])
        self.t, self.smoothing, self.device = t, ctx.smoothing, ctx.device
        self.num_classes = ctx.dataset.spec.num_classes
        self.shape = tuple(ctx.dataset.spec.shape)
        self.mask = t.support_mask(*self.shape[-2:]).float()
        self.range = max(ctx.budgets, default=0.0)
        self.exact = method(t) == "enumeration"  # integer attack parameters compose exactly: rho = 0 proven
        train_range, sg = self.range, self.sigma_gamma

        def augment(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
            u = (2 * torch.rand(len(x), t.dim, generator=gen) - 1) * train_range
            if t.integer:  # integer attack parameters inside the l2 ball's bounding box
                u = torch.round(u)
            theta = u + torch.randn(len(x), t.dim, generator=gen) * sg
            return self._float_pixels(t.apply(x, wrap(t, theta, x.shape)), gen)

        desc = {"name": "spt-noise", "transformation": t.name, "sigma_gamma": self.sigma_gamma,
                "sigma_delta": self.sigma_delta, "mask": t.pixel_mask,
                "train_range": train_range}
        self.model = ctx.model(classifier_spec(ctx, f"spt/{t.name}", desc, augment))
        self.calibration = None
        if not self.exact and self.range > 0:
            cal = {"sigma_gamma": self.sigma_gamma, "error": self.error, "budget": self.range,
                   "pairs": int(settings["pairs"]), "cells": self.cells, "seed": CALIBRATION_SEED}
            sups = ctx.model(calibration_spec(ctx, t, self.mask, cal)).sups.cpu()
            self.calibration = {"failures": failures(sups, self.error), "trials": len(sups)}

    # ------------------------------------------------------------ smoothing
    def _float_pixels(self, z: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        """``mask * z + sigma_delta * eps`` in float32: the training augmentation and the attacks' differentiable
        surrogate (``noisy_logits``); never a certificate's samples."""
        eps = torch.randn(z.shape, generator=gen).to(z.device) * self.sigma_delta
        return self.mask.to(z.device) * z + eps

    def _lattice_pixels(self, z: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        """The certified pixel noise delta: ``Q * (round(mask * z / Q) + K)``, integer noise from fair bits
        (``lattice_noise``), exact in float32 and formed on the CPU, so a sample depends on ``z`` only through
        its grid point; ``spt_rule`` pays the grid (``pixel_noise`` in the rule record)."""
        return lattice_noise.perturb(self.mask.to(z.device) * z, self.sigma_delta, gen)  # a 0/1 mask: exact product

    def _noisy(self, z: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        """One (beta, delta) draw per row of ``z [B,C,H,W]``: the base classifier's inputs (certificates,
        PREDICT)."""
        beta = torch.randn(len(z), self.t.dim, generator=gen).to(z.device) * self.sigma_gamma
        return self._lattice_pixels(self.t.apply(z, wrap(self.t, beta, z.shape)), gen)

    def noisy_logits(self, x: torch.Tensor, transformation: Transformation,
                     generator: torch.Generator) -> torch.Tensor:
        """One (beta, delta) draw per image, differentiable in x: float32 pixel noise (the lattice's rounding
        has no gradient; the attacks judge their candidates by PREDICT on the lattice noise)."""
        z = x.to(self.device)
        beta = torch.randn(len(z), self.t.dim, generator=generator).to(z.device) * self.sigma_gamma
        return self.model(self._float_pixels(self.t.apply(z, wrap(self.t, beta, z.shape)), generator))


    # ------------------------------------------------------------ certificates
    def _rho_records(self, x: torch.Tensor, generator: torch.Generator) -> tuple[dict, dict, dict]:
        """(indiv rho record, dist rho record, facts about the indiv error bound)."""
        alpha_e = self.smoothing.alpha / 2
        if self.exact or self.range <= 0:
            exact = {"kind": "exact", "value": 0.0}
            return exact, exact, {"method": "exact composition" if self.exact else "no attack region"}
        betas = torch.randn(self.betas, self.t.dim, generator=generator) * self.sigma_gamma
        sups, info = sup_errors(self.t, x.cpu(), self.mask, betas, self.range, self.cells, self.error)
        indiv = {"kind": "clopper_pearson", "failures": failures(sups, self.error), "trials": self.betas,
                 "alpha": alpha_e}
        dist = {"kind": "clopper_pearson", **self.calibration, "alpha": alpha_e, "markov_fraction": self.kappa}
        info = {**info, "sup_max": float(sups.max()), "sup_median": float(sups.median())}
        return indiv, dist, info

    def certify(self, x: torch.Tensor, transformation: Transformation, budgets: list[float],
                generator: torch.Generator) -> list[Certificate]:
        rho_indiv, rho_dist, info = self._rho_records(x, generator)
        alpha = self.smoothing.alpha
        alpha_p = alpha - max(spt_rule.rho_alpha(rho_indiv), spt_rule.rho_alpha(rho_dist))
        noise = {"kind": "lattice", "version": 2, "grid_bits": lattice_noise.GRID_BITS, "d": int(x[0].numel())}
        rules = {v: {"sigma_gamma": self.sigma_gamma, "sigma_delta": self.sigma_delta,
                     "error": 0.0 if self.range <= 0 else self.error, "rho": rho, "pixel_noise": noise}
                 for v, rho in (("indiv", rho_indiv), ("dist", rho_dist))}
        need = {v: spt_rule.thresholds(budgets, rule) for v, rule in rules.items()}
        params = dataclasses.replace(self.smoothing, alpha=alpha_p)
        res = certify(self._sampler(x), self.num_classes, params, generator,
                      thresholds=sorted({p for th in need.values() for p in th.values() if p < 1}))
        certs = []
        for v, rule in rules.items():
            decide = threshold_rule.record("p_a_lower", {repr(b): p for b, p in need[v].items()})
            ok = {float(b): threshold_rule.certified(decide, res.p_a_lower, res.prediction == ABSTAIN, float(b))
                  for b in budgets}
            stats = {**res.stats(), "alpha": alpha, "alpha_p_a": alpha_p, "spt_rule": rule, "threshold_rule": decide,
                     "interpolation": info}
            if v == "dist" and not self.exact:
                stats["guarantee"] = (f"distributional: holds for all inputs but a kappa = {self.kappa:g} fraction of "
                                      "the data distribution (rho calibrated on the training split)")
            certs.append(Certificate(prediction=res.prediction, radius=None, certified=ok, stats=stats, variant=v))
        return certs
