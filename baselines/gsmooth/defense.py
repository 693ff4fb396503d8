"""The ``gsmooth`` defense: GSmooth with its sound certificate (``gsmooth``) and the paper's (``gsmooth:paper``).

Per (dataset, transformation): a surrogate (F2, H; A1 fixed by sigma1) is fitted to the real
transformation, then a base classifier f is trained on H(F2(x') + eta), eta ~ N(0, Sigma), with x'
the image transformed by a random parameter of the largest budget half of the time. The smoothed
classifier is G(x) = E f(H(F2(x) + eta)); CERTIFY draws eta, and for each budget:
* ``gsmooth`` (sound, headline): certified iff a *proven* upper bound d on
  sup_xi ||F2(tau(xi, x)) - F2(x)||_{Sigma^-1} over the budget region, computed on the *real*
  transformation for the float32 codes the encoder returns (certificates.py: exact, closed-form or
  interval; rounding.py), is below Phi^-1(p_A lower) once the lattice is paid
  (``code_noise.required_margin``); with ``slices`` > 0, on the rows whose bound is an interval bound (rotation,
  scaling, the blurs), the sliced rule instead (sliced.py: CERTIFY at slice endpoints, each paying only the
  proven shift within its half-slices); with ``layout: outputs`` on a parameter whose output is piecewise
  constant (pixelate), one endpoint per interval of constant output;
* ``gsmooth:estimated`` (only with ``report_estimated: true``): the same rule where the supremum may
  be only *estimated* (cover maximum plus an estimated Lipschitz slack, used where no proof is
  available: an encoder without interval bounds, a transformation without pixel bounds); never a
  headline number;
* ``gsmooth:paper`` (Corollary 1): certified iff Phi^-1(p_A lower) / M*_b exceeds the largest
  l2 norm in the region, with M*_b on the surrogate path. It certifies the surrogate
  transformation only, and tables flag it as such; its rule is the paper's, in exact arithmetic.

Theorem 1 rows (``theorem1: true``, issue #44): on a transformation whose parameter composes (additive, or the
scale-shift of contrast+brightness: ``baselines/common/parameter_smoothing.py`` decides by capability) the paper
certifies by smoothing over the parameter itself, "only ... applying translation or Gaussian blur to the sample".
There this defense holds a ``ParameterSmoothed`` classifier: noise of scale sigma1 over the real transformation's
parameter (``smoothing`` its law on a one-sided parameter, exponential by default; ``scale_b`` brightness's scale),
TSS's rule and floating-point argument (``benchmark.certify.parameter_lattice``) and, at TSS's settings, TSS's
checkpoint. Theorem 1 is exact there, so ``gsmooth:paper`` reports the same certificate. Off by default (the
semantic-layer certificate), so committed entries stay what they are.

Base classifier: the dataset's recipe, or the keys of ``baselines/common/base_model.py`` that TSS shares (``arch``,
``normalize``, ``training``, ``consistency_lambda``, ``noise_draws``: the paper keeps TSS's MNIST networks and trains
"after TSS"), with the consistency regularisation taken over the semantic-noise augmentation above; recorded in
the model config only when set.

Floating point: CERTIFY and PREDICT draw the semantic noise on a lattice (benchmark/certify/code_noise.py,
after Voráček & Hein, ICLR 2023): the code F2(x) is quantised to a grid Q (2**-12 to 2**-13 of sigma2), the
noise is integers drawn from fair bits (rounded Gaussians of scales sigma2 / Q per coordinate and
(sigma1 / unit) / Q per pose channel, the latter put on every entry of its channel: A1 theta exactly), and
H gets Q (Z + K + B T), formed in int64 on the CPU and exact in float32. So the decoder and the classifier,
whatever arithmetic they run (CPU float32, CUDA with or without TF32), are one fixed function of the
integers, and Cohen's argument holds for them between grid points; the rule pays the two codes' roundings,
the pose shift's rounding to an integer and the noise table's total-variation error. The proven d already
holds for the float32 codes (the encoder's output rounding, rounding.py, is still added: the lattice
quantises the float32 code). Training and the attacks' gradients keep float32 noise (``_eta``); the attacks
judge their candidates with PREDICT, on the lattice.
"""
from __future__ import annotations

import math

import torch
from scipy.stats import norm

from baselines.common.base_model import BASE_MODEL_DEFAULTS, base_model_options
from baselines.common.parameter_smoothing import ParameterSmoothed, parameter_model_key, parameter_route
from baselines.gsmooth.certificates import margin, sup_distances
from baselines.gsmooth.pose import DECODER_REVISION, POSE_KINDS
from baselines.gsmooth.regions import cover
from baselines.gsmooth.semantic_noise import SemanticNoise
from baselines.gsmooth.sliced import SlicedCertificates
from baselines.gsmooth.suprema import SupremumBounds
from baselines.gsmooth.surrogate import LowpassEncoder, Surrogate
from baselines.gsmooth.theta_noise import THETA_NOISES, ThetaNoise, margin_to_p
from baselines.gsmooth.training import SurrogateConfig, surrogate_quality, train_surrogate
from benchmark.api import (ABSTAIN, BenchError, Certificate, Context, Defense, ModelSpec, SURROGATE_ONLY,
                           Transformation, certify, classifier_spec, code_noise, predict_many, threshold_rule)

SURROGATE_RECIPE = 4  # 2: reproducible initialisation; 3: half of each batch noise-free; 4: analytic encoders in float64


def _rule(required: dict) -> dict:
    """The recorded decision rule: budget b certified iff margin = Phi^-1(p_A lower) > required[repr(b)]."""
    return threshold_rule.record("margin", required)


class GSmooth(SlicedCertificates, SupremumBounds, Defense):
    """Generalized randomized smoothing (Hao et al., ICML 2022) with a sound certificate for the real transformation."""

    name = "gsmooth"
    certified = True
    variants = ("", "paper")
    #: the Theorem 1 classifier on a resolvable row (set by ``prepare``); None = the semantic-layer certificate
    theorem1: ParameterSmoothed | None = None
    defaults = {"sigma1": None, "sigma2": 0.5, "budget_max": None, "resolution": 17, "safety": 2.0,
                "lam": 0.003, "steps_recon": 400, "steps_resolve": 300, "width": 8,
                "theta_noise": "gaussian", "surrogate_sigma1": None, "surrogate_sigma2": None, "encoder": "local",
                "content_blur": 0.0, "cells": 48, "refinements": 6,
                "report_estimated": False, "slices": 0, "subslices": 4,
                # uniform slices, or ``outputs``: one endpoint per interval of constant output (sliced.py)
                "layout": "uniform",
                # the sliced walk's draw budget per certificate (sliced.py: cost control); None = no budget
                "max_draws": None,
                # the sliced bounds' second refinement (sliced.py ``_refine``): at most refine_to_levels more
                # bisections of the cells whose bound is still >= refine_to (a distance); None = none
                "refine_to": None, "refine_to_levels": 2,
                # the base classifier (baselines/common/base_model.py): TSS's MNIST network, recipe and consistency
                # regularisation on GSmooth's own semantic noise when set; unset = the dataset's recipe
                **BASE_MODEL_DEFAULTS,
                # Theorem 1 on the rows it resolves (baselines/common/parameter_smoothing.py): smoothing over the
                # transformation's own parameter, sigma1 its scale, ``smoothing`` its law on a one-sided parameter
                # (default exponential), ``scale_b`` brightness's scale beside contrast's (default sigma1)
                "theorem1": False, "smoothing": None, "scale_b": None}
    description = "GSmooth: smoothing in a surrogate's semantic layer; sound certificate + paper's (gsmooth:paper)"
    paper = "https://arxiv.org/abs/2206.04310"

    def __init__(self, **config):
        super().__init__(**config)
        if self.config["theta_noise"] not in THETA_NOISES:
            raise BenchError(f"gsmooth: theta_noise must be one of {list(THETA_NOISES)}, "
                             f"got {self.config['theta_noise']!r}.")
        if self.config["layout"] not in ("uniform", "outputs"):
            raise BenchError(f"gsmooth: layout must be 'uniform' (slices of equal width) or 'outputs' (one slice "
                             f"per interval of constant output), got {self.config['layout']!r}.")
        # Corollary 1 (the paper variant) is stated for Gaussian noises only
        self.variants = ("", "paper") if self.config["theta_noise"] == "gaussian" else ("",)
        if self.config["report_estimated"]:  # certificates that rest on an estimated supremum, beside
            self.variants = (*self.variants, "estimated")

    def supports(self, transformation: Transformation) -> bool:
        if self.config["theta_noise"] != "gaussian":
            return transformation.dim == 1
        return True

    # ------------------------------------------------------------------ prepare
    def prepare_surrogate(self, ctx: Context) -> tuple[ModelSpec, SurrogateConfig]:
        """Set the task's sigmas and budget, load or train the surrogate (F2, H; A1 fixed by sigma1) and the
        semantic noise around it: everything ``certify``'s bounds and M* need, without the base classifier
        (benchmark/studies/paper_design.py measures surrogates through this). Returns its spec and config."""
        t, spec = ctx.transformation, ctx.dataset.spec
        self.t, self.device, self.smoothing = t, ctx.device, ctx.smoothing
        self.num_classes = spec.num_classes
        # sigma1 in the transformation's units: the suite's, else the transformation's suggestion, else 1
        self.sigma1 = float(self.config["sigma1"] or t.defaults_for("gsmooth").get("sigma1", 1.0))
        self.sigma2 = float(self.config["sigma2"])
        budget_max = self.config["budget_max"] or max(ctx.budgets, default=0.0)
        if not budget_max > 0:
            raise BenchError(f"gsmooth/{t.name}: no positive budget; set budgets in the suite or budget_max in its config.")
        self.budget_max = float(budget_max)
        cfg = SurrogateConfig(steps_recon=int(self.config["steps_recon"]), steps_resolve=int(self.config["steps_resolve"]),
                              lam=float(self.config["lam"]), width=int(self.config["width"]),
                              encoder=str(self.config["encoder"]), content_blur=float(self.config["content_blur"]))
        c, size = spec.shape[0], spec.shape[1]
        # the surrogate may be shared by several smoothing noises (ablations): its own sigmas fix A1's
        # scale and its denoising noise; the smoothing sigmas only change the noise drawn around it
        sur_s1 = float(self.config["surrogate_sigma1"] or self.sigma1)
        sur_s2 = float(self.config["surrogate_sigma2"] or self.sigma2)
        sur_config = {"recipe": SURROGATE_RECIPE, "kind": "gsmooth-surrogate", "dataset": {"name": spec.name, "version": spec.version},
                      "transformation": t.name, "sigma1": sur_s1, "sigma2": sur_s2,
                      "budget_max": self.budget_max, "train": cfg.to_dict()}
        # the pose design (pose.POSE_KINDS) a transformation suggests for itself: what its parameter moves
        pose = t.defaults_for("gsmooth").get("pose", "")
        if cfg.encoder == "pose" and pose not in POSE_KINDS:
            raise BenchError(f"gsmooth/{t.name}: the pose encoder needs a pose design {list(POSE_KINDS)} that moves by "
                             f"+theta under {t.name}; its suggested gsmooth settings name none (use encoder: lowpass).")
        if cfg.encoder == "pose" and pose in DECODER_REVISION:
            sur_config["decoder_revision"] = DECODER_REVISION[pose]
        if t.revision:
            sur_config["transformation_revision"] = t.revision

        def build() -> Surrogate:
            return Surrogate(c, size, t.dim, unit=sur_s1, width=cfg.width, encoder=cfg.encoder, kind=pose,
                             content_blur=cfg.content_blur)

        def train(model: Surrogate) -> Surrogate:
            x, _ = ctx.train_data()
            return train_surrogate(model, x, t, cfg, sur_s1, sur_s2, self.budget_max, ctx.device)

        sur_spec = ModelSpec(key=f"{spec.name}/gsmooth/{t.name}/surrogate", config=sur_config, build=build, train=train)
        loaded = ctx.store.get(sur_spec)
        self.surrogate = loaded.model.to(ctx.device).eval()
        for p in self.surrogate.parameters():
            p.requires_grad_(False)
        self.noise = SemanticNoise(self.surrogate.A1().cpu(), self.sigma1, self.sigma2)
        self.surrogate_provenance, self.surrogate_sigmas = loaded.provenance(), (sur_s1, sur_s2)
        self.theta_noise = ThetaNoise(self.config["theta_noise"], self.sigma1)
        return sur_spec, cfg

    def resolves(self, t: Transformation) -> bool:
        """Whether ``t`` is certified by Theorem 1 (parameter-space smoothing) rather than the semantic layer."""
        return bool(self.config["theorem1"]) and parameter_route(t) is not None

    def prepare_theorem1(self, ctx: Context) -> None:
        """Theorem 1's classifier for a resolvable row: noise over the transformation's parameter (sigma1 its
        scale), the base classifier trained on it, under TSS's model key (same settings, same checkpoint)."""
        t, spec = ctx.transformation, ctx.dataset.spec
        self.t, self.device, self.smoothing, self.num_classes = t, ctx.device, ctx.smoothing, spec.num_classes
        self.sigma1 = float(self.config["sigma1"] or t.defaults_for("gsmooth").get("sigma1", 1.0))
        self.sigma2, self.quality, self.picture = None, None, None
        smoothed = ParameterSmoothed(None, ctx.device, spec.num_classes, ctx.smoothing)
        desc = smoothed.prepare_parameter_noise(t, spec.shape, self.config["smoothing"], self.sigma1,
                                                self.config["scale_b"], "gsmooth")
        smoothed.model = ctx.model(classifier_spec(ctx, parameter_model_key(t), desc, smoothed.float_parameter_noise,
                                                   **base_model_options(self.config)))
        self.model, self.theorem1 = smoothed.model, smoothed

    def prepare(self, ctx: Context) -> None:
        t = ctx.transformation
        self.theorem1 = None
        if self.resolves(t):
            return self.prepare_theorem1(ctx)
        sur_spec, cfg = self.prepare_surrogate(ctx)
        sur_s1, sur_s2 = self.surrogate_sigmas
        sur, noise_budget = self.surrogate, self.budget_max

        @torch.no_grad()
        def augment(xb: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
            xb = xb.to(ctx.device)
            moved = t.apply(xb, t.sample(len(xb), noise_budget, gen).to(ctx.device))
            keep = (torch.rand(len(xb), generator=gen) < 0.5).to(ctx.device).view(-1, 1, 1, 1)
            z = sur.F2(torch.where(keep, xb, moved))
            return sur.H(z + self._eta(len(xb), gen)).cpu()

        desc = {"name": "gsmooth-semantic-noise", "surrogate": sur_spec.config_hash, "sigma1": self.sigma1,
                "sigma2": self.sigma2, "transformed_fraction": 0.5, "budget_max": self.budget_max}
        if self.theta_noise.kind != "gaussian":
            desc["theta_noise"] = self.theta_noise.kind
        tag = "" if self.sigma1 == sur_s1 and self.sigma2 == sur_s2 and self.theta_noise.kind == "gaussian" else (
            f"@{self.theta_noise.kind}-s1={self.sigma1:g}-s2={self.sigma2:g}")
        self.model = ctx.model(classifier_spec(ctx, f"gsmooth/{t.name}{tag}", desc, augment,
                                               **base_model_options(self.config)))
        self.quality = self.surrogate_fit(ctx, cfg) if ctx.profile.get("surrogate_quality", True) else None
        self.picture = None
        if ctx.artifacts_dir is not None:
            from baselines.gsmooth.pictures import save_surrogate_grid

            x, _ = ctx.train_data()  # held-out training images: a defense never sees the test split
            self.picture = str(save_surrogate_grid(ctx.artifacts_dir / "surrogate.png", self.surrogate, t, x[-6:],
                                                   self.budget_max, self.sigma2))

    def surrogate_fit(self, ctx: Context, cfg: SurrogateConfig) -> dict:
        """``surrogate_quality`` on the training split's held-out tail (the images surrogate training left out)."""
        x, y = ctx.train_data()
        held = cfg.held_out
        return surrogate_quality(self.surrogate, x[-held:], y[-held:], self.t, self.sigma1, self.sigma2,
                                 self.budget_max)

    def prepare_report(self) -> dict:
        return {"surrogate_quality": self.quality, "sigma1": self.sigma1, "sigma2": self.sigma2,
                "picture": self.picture}

    # ---------------------------------------------------------------- sampling
    @property
    def code_record(self) -> dict:
        """The record of the lattice code noise CERTIFY and PREDICT draw (``benchmark.certify.code_noise``):
        A1 = B / unit, so the pose shift is theta / unit, of theta's law with its scale divided by unit."""
        sur = self.surrogate
        return code_noise.record(self.sigma2, (sur.channels + sur.m, sur.size, sur.size), sur.m,
                                 self.theta_noise.scale / float(sur.unit), self.theta_noise.kind)

    def _eta(self, k: int, gen: torch.Generator) -> torch.Tensor:
        """k draws of A1 theta + theta' as semantic-layer tensors (theta ~ N(0, s1^2), theta' ~ N(0, s2^2)) in
        float32: the noise of training and of the attacks' gradients (differentiable, never certified)."""
        sur = self.surrogate
        theta = self.theta_noise.sample(k, sur.m, gen)
        # drawn from the CPU generator (same numbers on every device), then moved: F1 reads the surrogate's
        # device-resident unit, so theta goes to the device first (a no-op on CPU: results unchanged)
        eta = (torch.randn(k, sur.channels + sur.m, sur.size, sur.size, generator=gen).mul_(self.sigma2)
               .to(self.device))
        # + F1(theta), added in place where it is nonzero: the same sums (addition commutes exactly) without
        # a zeros tensor and two passes over the layer (work per sample that faster networks do not shrink)
        eta[:, sur.channels:] += sur.parameter_maps(theta.to(self.device)).to(eta.dtype)
        return eta

    def _grid(self, z: torch.Tensor) -> torch.Tensor:
        """The grid points ``round(z / Q)`` (int64, CPU) of codes ``z [K, ...]`` (``benchmark.certify.code_noise``)."""
        z_int = code_noise.quantise(z, self.code_record)
        code_noise.check_range(z_int, self.code_record)
        return z_int

    def _classify_grid(self, z_int: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        """Labels of one lattice code-noise draw per row of the grid points ``z_int``: f(H(Q (Z + K + B T))),
        the noisy code formed exactly on the CPU, so the networks see a function of the integers alone."""
        noisy = code_noise.perturb(z_int, self.code_record, gen).to(self.device)
        return self.model(self.surrogate.H(noisy)).argmax(1)

    def _sampler(self, z0: torch.Tensor):
        z_int = self._grid(z0)

        @torch.no_grad()
        def sample_labels(k: int, gen: torch.Generator) -> torch.Tensor:
            return self._classify_grid(z_int.expand(k, -1, -1, -1), gen)
        return sample_labels

    def _multi_sampler(self, z: torch.Tensor):
        """Labels on semantic-noise draws of several codes ``z [K, ...]`` in one batch: ``pieces`` = [(code
        index, copies), ...] (``benchmark.certify.smoothing.sample_counts_many``)."""
        z_int = self._grid(z)

        @torch.no_grad()
        def sample_labels(pieces: list[tuple[int, int]], gen: torch.Generator) -> torch.Tensor:
            return self._classify_grid(torch.cat([z_int[i:i + 1].expand(k, -1, -1, -1) for i, k in pieces]), gen)
        return sample_labels

    # ----------------------------------------------------------------- certify
    def certify(self, x: torch.Tensor, transformation: Transformation, budgets: list[float],
                generator: torch.Generator) -> list[Certificate]:
        if self.theorem1 is not None:  # Theorem 1 is exact here: the paper's certificate is the sound one
            cert = self.theorem1.certify_parameter(x.to(self.device), budgets, generator)
            return [Certificate(cert.prediction, cert.radius, dict(cert.certified), dict(cert.stats), v)
                    for v in self.variants]
        if (self.config["slices"] or self.outputs_layout) and self.sliceable():  # the sliced rule (sliced.py)
            return self.certify_sliced(x, budgets, generator)
        if self.outputs_layout:
            raise BenchError(f"gsmooth/{transformation.name}: layout 'outputs' needs a one-sided 1-D parameter with "
                             "output intervals and pixel bounds, Gaussian pose noise and a lowpass or pose encoder "
                             "(pixelate); use layout 'uniform' here.")
        x = x.to(self.device)
        with torch.no_grad():
            z0 = self.surrogate.F2(x)
        sound, paper, estimated, diag, need_sound, need_paper, need_est = {}, {}, {}, {}, {}, {}, {}
        dist_sound, dist_est = {}, {}
        positive = [float(b) for b in budgets if b > 0]
        rec = self.code_record
        if self.theta_noise.kind != "gaussian":  # (the two-step rule keeps the fixed n)
            res = certify(self._sampler(z0), self.num_classes, self.smoothing, generator)
            mrg = margin(res.p_a_lower)
            return self._two_step_certificate(x, z0, res, mrg, budgets, res.prediction != ABSTAIN and mrg > 0)
        early = self.smoothing.rule == "sequential" and bool(positive)
        if early:
            # sequential CERTIFY needs its thresholds on p_A before sampling: the suprema are bounded
            # first (refined against the largest margin the protocol can reach, not the actual one)
            best = margin(self.smoothing.best_p_lower())
            sups = self._sup_distances(x, z0, positive, code_noise.distance_budget(best, rec))
            mstars = self.mstars(z0, positive)
            needs = [code_noise.required_margin(s.value, rec) for s in sups.values() if s.proven] + \
                [self.reach(b) * mstars[b].value for b in positive]
            taus = sorted({float(norm.cdf(v)) for v in needs if v < best})
            res = certify(self._sampler(z0), self.num_classes, self.smoothing, generator, thresholds=taus)
        else:
            res = certify(self._sampler(z0), self.num_classes, self.smoothing, generator)
        mrg = margin(res.p_a_lower)
        live = res.prediction != ABSTAIN and mrg > 0
        if not early:
            sups = self._sup_distances(x, z0, positive, code_noise.distance_budget(mrg, rec)) if live and positive \
                else {}
            mstars = self.mstars(z0, positive) if live and positive else {}
        for b in budgets:
            if not live:
                sound[b] = paper[b] = estimated[b] = False
            elif b == 0:
                sound[b] = paper[b] = estimated[b] = True
            else:
                sup, mstar = sups[float(b)], mstars[float(b)]
                reach = self.reach(b)
                key = repr(float(b))
                dist_est[key], dist_sound[key] = sup.value, (sup.value if sup.proven else None)
                need_est[key], need_paper[key] = code_noise.required_margin(sup.value, rec), reach * mstar.value
                need_sound[key] = code_noise.required_margin(dist_sound[key], rec)
                # R = margin / M* > reach for the paper's rule
                estimated[b], sound[b], paper[b] = (
                    threshold_rule.certified(_rule(need), res.p_a_lower, False, b)
                    for need in (need_est, need_sound, need_paper))
                diag[key] = {"sup_distance": sup.to_json(), "mstar": mstar.to_json(), "paper_radius": mrg / mstar.value}
        stats = {**res.stats(), "margin": mrg, "sigma1": self.sigma1, "sigma2": self.sigma2, "diagnostics": diag,
                 "code_noise": rec}
        # certified at b iff margin = Phi^-1(p_A lower) exceeds the threshold: the checker recomputes the flags,
        # and the thresholds from the recorded distances (code_noise.required_margin)
        certs = [Certificate(res.prediction, None, sound,
                             {**stats, "threshold_rule": _rule(need_sound), "code_distances": dist_sound}, ""),
                 Certificate(res.prediction, None, paper,
                             {**stats, "threshold_rule": _rule(need_paper), "certifies": SURROGATE_ONLY}, "paper")]
        return certs + self._estimated(res, estimated, {**stats, "threshold_rule": _rule(need_est),
                                                        "code_distances": dist_est})

    def reach(self, b: float) -> float:
        """The largest l2 norm in budget b's region (an l-inf box reaches b sqrt(m))."""
        return b * (math.sqrt(self.t.dim) if self.t.norm == "linf" else 1.0)

    def _two_step_certificate(self, x: torch.Tensor, z0: torch.Tensor, res, mrg: float, budgets: list[float],
                              live: bool) -> Certificate:
        """Sound certificate for non-Gaussian theta noise (see ThetaNoise): certified at b iff
        R_D(Phi(margin - S_b)) > b, S_b bounding sup ||F2(tau(xi,x)) - F2(x) - A1 xi|| / sigma2, in exact
        arithmetic; on the lattice code noise S_b pays the grid and b the shift's rounding and the tables' error
        (``code_noise.two_step_margin``, derivation in benchmark/certify/code_noise.py)."""
        t, sur = self.t, self.surrogate
        positive = [float(b) for b in budgets if b > 0]
        ok, diag, need = {}, {}, {}
        sups = {}
        if live and positive:
            iso = SemanticNoise(torch.zeros_like(self.noise.A), self.sigma1, self.sigma2)  # Sigma = sigma2^2 I
            shift0 = sur.F1(torch.zeros(1, t.dim, device=self.device, dtype=x.dtype)).flatten(1).double().cpu()

            def residual_path(theta: torch.Tensor) -> torch.Tensor:
                th = t.clip(theta.to(self.device, x.dtype))
                z = sur.F2(t.apply(x.expand(len(th), -1, -1, -1), th)).flatten(1).double().cpu()
                return z - (sur.F1(th).flatten(1).double().cpu() - shift0)

            if isinstance(sur.F2, LowpassEncoder) and t.has_pixel_bounds and t.dim == 1:
                # proven: the code part from pixel bounds; the residual's parameter part is exactly -A1 xi
                x64 = x.to(torch.float64)
                content, a = self._lowpass_code_bound(x64), float(self.noise.A[:, 0].norm()) / self.sigma2
                z64 = sur.F2(x64).flatten().cpu()

                def cell(lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
                    far = torch.maximum(lo.abs(), hi.abs()).flatten().to(torch.float64)
                    return (content(lo, hi) ** 2 + (far * a) ** 2).sqrt()

                def point(theta: torch.Tensor) -> torch.Tensor:
                    th = t.clip(theta).to(x64)
                    z = sur.F2(t.apply(x64.expand(len(th), -1, -1, -1), th)).flatten(1).cpu()
                    return iso.mahalanobis(z - (sur.F1(th).flatten(1).cpu() - shift0) - z64)

                sups = self._with_output_rounding(self._cells(cell, positive, mrg, point), x, iso)
            else:
                cov = cover(t, max(positive), int(self.config["resolution"]), image_size=x.shape[-1])
                sups = sup_distances(residual_path, z0.flatten().double().cpu(), iso, cov, positive,
                                     self._norm_fn(), float(self.config["safety"]), t.differentiable)
        est, need_est = {}, {}
        rec, unit = self.code_record, float(sur.unit)
        for b in budgets:
            if not live:
                ok[b] = est[b] = False
            elif b == 0:
                ok[b] = est[b] = True
            else:
                sup = sups[float(b)]
                radius = self.theta_noise.radius(margin_to_p(mrg - sup.value))
                # R_D(Phi(margin - S_b)) > b  <=>  margin > S_b + (the margin R_D needs for b), plus the lattice's
                # costs: the budget grows by the shift's rounding and the tables' error, S_b by the grid
                shift_margin = self.theta_noise.required_margin(float(b) + unit * code_noise.shift_allowance(rec))
                key = repr(float(b))
                need_est[key] = code_noise.two_step_margin(sup.value, shift_margin, rec)
                need[key] = code_noise.two_step_margin(sup.value if sup.proven else None, shift_margin, rec)
                ok[b], est[b] = mrg > need[key], mrg > need_est[key]
                diag[key] = {"residual_sup": sup.to_json(), "theta_radius": radius}
        stats = {**res.stats(), "margin": mrg, "sigma1": self.sigma1, "sigma2": self.sigma2,
                 "theta_noise": self.theta_noise.describe(), "two_step": diag, "code_noise": rec}
        return ([Certificate(res.prediction, None, ok, {**stats, "threshold_rule": _rule(need)}, "")]
                + self._estimated(res, est, {**stats, "threshold_rule": _rule(need_est)}))

    def _estimated(self, res, certified: dict, stats: dict) -> list[Certificate]:
        """The ``estimated`` variant (estimated suprema allowed), only when the config asks for it."""
        if not self.config["report_estimated"]:
            return []
        return [Certificate(res.prediction, None, certified, {**stats, "bound": "estimated allowed"}, "estimated")]

    # ----------------------------------------------------------------- attack surface
    def noisy_logits(self, x: torch.Tensor, transformation: Transformation,
                     generator: torch.Generator) -> torch.Tensor:
        """One semantic-layer noise draw per image: f(H(F2(x) + A1 theta + theta')), differentiable in x."""
        if self.theorem1 is not None:
            return self.theorem1.noisy_logits(x, transformation, generator)
        z = self.surrogate.F2(x.to(self.device))
        return self.model(self.surrogate.H(z + self._eta(len(x), generator)))

    # ----------------------------------------------------------------- predict
    def predict(self, x: torch.Tensor, transformation: Transformation, generator: torch.Generator) -> torch.Tensor:
        if self.theorem1 is not None:
            return self.theorem1.predict(x, transformation, generator)
        with torch.no_grad():
            z = self.surrogate.F2(x.to(self.device))
        out = [label for label, _ in predict_many(self._multi_sampler(z), len(z), self.num_classes,
                                                  self.smoothing, generator)]
        return torch.tensor(out, dtype=torch.int64)
