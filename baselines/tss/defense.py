"""The ``tss`` defense: transformation-specific smoothing (Li et al., CCS 2021).

Which certificate a transformation gets follows from its capabilities (``route``), never its name:
additive transformations get parameter smoothing; a ``scale_shift`` composition (exp(k)(x + b)) the
exact two-scale Gaussian bound; a 1-D parameter with a proven Lipschitz bound in theta (bilinear
resampling) pixel noise with slice certification. Noise settings come from the suite, else from the
transformation's suggested ``tss`` settings (``Transformation.defaults_for``). In the registry:

* gaussian_blur: parameter = kernel variance (px^2), Fourier-domain blur with a periodic
  boundary so blur(a) o blur(b) = blur(a + b); smoothing over the variance with an
  exponential (default), uniform or folded-Gaussian distribution (config ``smoothing``);
  radius in kernel-variance units (px^2): exponential -lam ln(2 - 2pA), uniform
  lam (pA - 1/2), folded Gaussian sigma (Phi^-1(1/2 + pA/2) - Phi^-1(3/4)).
* translation: integer cyclic shifts (wrap-around padding, which TSS's code calls
  "reflection"); Gaussian noise on (dx, dy) rounded to whole pixels; l2 radius in px.
  Because the attack shift d is an integer, round(d + e) = d + round(e), so this is
  exact Gaussian smoothing of theta -> f(shift(x, round(theta))).
* brightness: x + b without clipping; Gaussian noise on b; radius in intensity units.
* contrast_brightness: exp(k)(x + b), Gaussian noise on k (sd ``scale``) and b (sd
  ``scale_b``, default ``scale``); per-budget l-infinity certificate from the exact
  Neyman-Pearson bound for Gaussians of different covariance (baselines.common.contrast).
* rotation, scaling: isotropic pixel noise (sd ``scale``, after a circular mask for
  rotation) and slice certification with Bonferroni-corrected endpoints and a sound
  interpolation-error bound (baselines.tss.slicing); radius in degrees / factor - 1.
  Floating point: the certified pixel noise is the harness's lattice noise (the masked image
  quantised to the grid Q = 2^-12, integer noise from fair bits, exact float32 samples), so
  the smoothed classifier is one fixed function of the grid point and the slice rule pays
  ``sqrt(d) Q`` and the table error (benchmark/certify/slice_rule.py); the training
  augmentation and the attacks' gradients use float32 Gaussian noise (no certificate rests
  on them).
  Slices, sub-slices and samples per endpoint come from the profile
  (``defense_settings: {tss: {slices, subslices, n_slice}}``) and are recorded per
  certificate. Under ``certify: sequential`` each endpoint is tested at alpha with the
  sequential rule (n_slice as its cap) in the order 0, +1, -1, ... up to the first failure.

Floating point of the parameter routes (``benchmark/certify/parameter_lattice.py``, records
``parameter_noise: {kind: lattice, version: 2, ...}``; records without it replay with the exact-arithmetic
rule): CERTIFY and PREDICT draw integer noise K from fair bits on a grid Q and form the parameter Q K exactly
on the CPU, so the base classifier's input is one fixed function of the grid point on CPU float32 and CUDA
alike (the device receives exact numbers; TF32 off or on, its rounding depends on the grid point only), and
the radius pays the grid and the noise table's error:

* translation: no rounding exists. Shifts are integers, an integer roll is exact, and roll(roll(x, d), K) =
  roll(x, d + K) bit for bit, so PREDICT at an attacked image samples exactly the translate of the
  certified law (rounded Gaussian from the table; only the table's error is paid).
* brightness (``pixel_offset``): the classifier gets Q (canonical(y) + K), the grid point (Q = 2^-8) read
  back from the image y itself through its pixel differences to pixel 0. At y' = fl32(x + b') that is the
  clean grid point shifted by one integer n with |n Q - b'| < Q + 2^-20, for every |b'| up to the image's
  recorded ``reach`` (no pixel difference near a rounding boundary): PREDICT at the attacked image samples
  exactly a lattice translate, so the certificate holds for the arithmetic that runs, against a classifier
  that reads every bit (tests/certify/test_parameter_float_exploit.py).
* gaussian_blur (grid 2^-12 of lambda, geometric noise floor(E / Q)) and contrast_brightness (grid 2^-12 of
  the smaller sd, rounded Gaussians; the closed form holds through the rounding of the composed parameter):
  sound for the parameter-space smoothed classifier theta' -> P[f(T(x, theta' (+) Q K))], whose samples at the
  certified image are a function of K alone. PREDICT at an attacked image computes T(fl32(T(x, theta')), Q K):
  two rounded transformations, which differ from one at the composed parameter in the last bits of the image
  (measured in the exploit test). That gap is not covered: no grid point can be read back from a blurred or
  rescaled image without x.

The attacks' gradients and training use float32 noise (``_float_noise``); no certificate rests on them.

Base model (suite-settable, ``baselines/common/base_model.py``, the keys GSmooth shares; defaults = the dataset's
standard classifier, so existing checkpoints stay): ``arch``
(e.g. ``conv4fc3``, TSS's MNIST network), ``normalize`` ([mean, std] of the input layer, TSS's MNIST (0.5, 0.5)),
``training`` (a named recipe, e.g. ``tss``: TSS's SGD schedule),
``consistency_lambda`` / ``noise_draws`` (TSS's consistency regularisation on the smoothing distribution) and, for
sliced transformations, ``train_range`` (training angles / factors uniform in +-train_range; default the largest
budget). Each is recorded in the model config only when set.
Under ``certify: sequential`` every certificate passes its p_A thresholds (inverted radius rules,
contrast+brightness's p*(B), Phi(M_i / sigma) per slice endpoint) so sampling stops once they are decided.
Every other transformation, and one without a noise scale, is reported as unsupported ("--").
"""
from __future__ import annotations

import math

import torch

from baselines.common.base_model import BASE_MODEL_DEFAULTS, base_model_options
from baselines.common.parameter_noise import ParameterNoise
from baselines.common.parameter_smoothing import ParameterSmoothing, parameter_noise_for, parameter_route
from baselines.tss.slicing import chain_coverage_grouped, slice_grid
from benchmark.api import (ABSTAIN, BenchError, Certificate, Context, Defense, Transformation, classifier_spec,
                           lattice_noise, lower_confidence_bound, sample_counts, sample_counts_many, sequential,
                           slice_rule)

#: slice settings used when the profile gives none (the suite's profiles normally set them)
SLICE_DEFAULTS = {"slices": 40, "subslices": 100, "n_slice": None}


def route(t: Transformation) -> str | None:
    """Which TSS certificate ``t``'s capabilities allow: "parameter" (additive: smoothing over theta),
    "scale_shift" (exp(k)(x + b): the two-scale Gaussian bound), "sliced" (a 1-D parameter with a proven
    Lipschitz bound: pixel noise and slices), or None (unsupported)."""
    resolved = parameter_route(t)
    if resolved is not None:
        return resolved
    if t.dim == 1 and t.has_parameter_lipschitz:
        return "sliced"
    return None


class TSS(ParameterSmoothing, Defense):
    """Transformation-specific smoothing (TSS)."""

    name = "tss"
    certified = True
    defaults = {"smoothing": None, "scale": None, "scale_b": None,
                # the base model: TSS's own MNIST setup when set (docs/tss-mnist-protocol.md); unset = the recipe's
                **BASE_MODEL_DEFAULTS, "train_range": None}
    description = "transformation-specific smoothing over the parameter (TSS, Li et al. 2021)"
    paper = "https://arxiv.org/abs/2002.12398"

    def supports(self, transformation: Transformation) -> bool:
        t = transformation
        return route(t) is not None and (self.config["scale"] is not None or "scale" in t.defaults_for("tss"))

    @property
    def _route(self) -> str | None:
        """The certificate the prepared transformation's capabilities allow (see :func:`route`), derived once per
        transformation: it is read on every noise draw."""
        cached = getattr(self, "_route_of", None)
        if cached is None or cached[0] is not self._t:
            cached = self._route_of = (self._t, route(self._t))
        return cached[1]

    # ------------------------------------------------------------ set-up
    def _scale(self, t: Transformation) -> float:
        scale = self.config["scale"] or t.defaults_for("tss").get("scale")
        if scale is None:
            raise BenchError(f"tss/{t.name}: no noise scale; set 'scale' in the suite's tss config for {t.name}.")
        return float(scale)

    def noise_for(self, t: Transformation, image_shape: tuple[int, ...]) -> ParameterNoise:
        """Parameter noise for an additive transformation (``parameter_noise_for``): the config's ``smoothing``,
        else the transformation's suggestion, else Gaussian / exponential by the parameter's domain."""
        kind = self.config["smoothing"] or t.defaults_for("tss").get("smoothing")
        return parameter_noise_for(t, image_shape, kind, self._scale(t), "tss")

    def prepare(self, ctx: Context) -> None:
        t = ctx.transformation
        self._t = t
        self.smoothing = ctx.smoothing
        self.num_classes = ctx.dataset.spec.num_classes
        self.device = ctx.device
        if self.config["smoothing"] not in (None, "gaussian") and self._route == "sliced":
            raise BenchError(f"tss/{t.name} uses Gaussian smoothing only; remove 'smoothing: "
                             f"{self.config['smoothing']}' from its config.")
        if self._route == "scale_shift":
            desc = self.prepare_parameter_noise(t, ctx.dataset.spec.shape, self.config["smoothing"], self._scale(t),
                                                self.config["scale_b"], "tss")
            augment = self._float_noise
        elif self._route == "sliced":
            self.sigma = self._scale(t)
            h, w = ctx.dataset.spec.shape[-2:]
            self.mask = t.support_mask(h, w).float().to(ctx.device)
            settings = {**SLICE_DEFAULTS, **(ctx.profile.get("defense_settings") or {}).get("tss", {})}
            unknown = set(settings) - set(SLICE_DEFAULTS)
            if unknown:
                raise BenchError(f"profile defense_settings.tss: unknown key(s) {sorted(unknown)}; "
                                 f"valid: {sorted(SLICE_DEFAULTS)}.")
            self.slices, self.subslices = int(settings["slices"]), int(settings["subslices"])
            self.n_slice = int(settings["n_slice"] or ctx.smoothing.n)
            self.train_range = float(self.config["train_range"] or max(ctx.budgets, default=0.0))
            train_range = self.train_range

            def augment(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
                theta = (2 * torch.rand(len(x), 1, generator=gen) - 1) * train_range
                return self._float_pixel_noise(t.apply(x, theta), gen)

            desc = {"name": "tss-pixel-noise", "transformation": t.name, "sigma": self.sigma,
                    "mask": t.pixel_mask, "train_range": train_range}
        else:
            kind = self.config["smoothing"] or t.defaults_for("tss").get("smoothing")
            desc = self.prepare_parameter_noise(t, ctx.dataset.spec.shape, kind, self._scale(t), None, "tss")
            noise = self.noise

            def augment(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
                return t.apply(x, noise.sample(len(x), gen))

        if self.config["train_range"] is not None and self._route != "sliced":
            raise BenchError(f"tss/{t.name}: 'train_range' applies to sliced transformations (pixel noise on a "
                             "1-parameter transformation) only; remove it from the config.")
        if t.revision:  # the transformation's numbers changed: a new checkpoint
            desc["transformation_revision"] = t.revision
        self.model = ctx.model(classifier_spec(ctx, f"tss/{t.name}", desc, augment, **base_model_options(self.config)))

    # ------------------------------------------------------------ smoothing
    def _noisy(self, x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        """One smoothing-noise draw per row of ``x [B,C,H,W]``: the base classifier's inputs in CERTIFY and
        PREDICT, the lattice noise of each route (``_lattice_parameter_noise``, ``_lattice_pixel_noise``)."""
        if self._route == "sliced":
            return self._lattice_pixel_noise(x, gen)
        return self._lattice_parameter_noise(x, gen)

    def _float_noise(self, x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        """The float32 noise of TSS's training and of the attacks' gradients (``noisy_logits``): never a
        certificate's samples. Parameter routes draw float64 noise cast to float32 (``ParameterNoise.sample``)."""
        if self._route == "sliced":
            return self._float_pixel_noise(x, gen)
        return self.float_parameter_noise(x, gen)

    def _lattice_pixel_noise(self, x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        """The certified pixel noise (slice certificates, PREDICT): ``Q * (X + K)`` with ``X`` the masked image
        quantised to the grid Q and ``K`` integer noise from fair bits (``lattice_noise``). Sound in floating
        point: the sample is exact in float32 (formed on the CPU in integers, only copied to the device, so
        TF32 and fused kernels never touch it) and depends on the input only through the grid point, so a
        base model reading low-order bits learns nothing; the slice rule pays the grid (``grid_dim``)."""
        return lattice_noise.perturb(self.mask.to(x.device) * x, self.sigma, gen)  # a 0/1 mask: exact product

    def _float_pixel_noise(self, x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        """``mask * x + sigma * eps`` in float32: the training augmentation and the attacks' differentiable
        surrogate (``noisy_logits``); never a certificate's samples."""
        eps = torch.randn(x.shape, generator=gen).to(x.device) * self.sigma
        return self.mask.to(x.device) * x + eps

    def noisy_logits(self, x: torch.Tensor, transformation: Transformation,
                     generator: torch.Generator) -> torch.Tensor:
        """One smoothing-noise draw per image, differentiable in x (the lattices' rounding is not: the attacks
        follow the float32 noise, and judge candidates by PREDICT on the lattice noise)."""
        return self.model(self._float_noise(x.to(self.device), generator))

    # ------------------------------------------------------------ certificates
    def certify(self, x: torch.Tensor, transformation: Transformation, budgets: list[float],
                generator: torch.Generator) -> list[Certificate]:
        if self._route == "sliced":
            return [self._certify_sliced(x, transformation, budgets, generator)]
        return [self.certify_parameter(x, budgets, generator)]

    def _certify_sliced(self, x: torch.Tensor, t: Transformation, budgets: list[float],
                        generator: torch.Generator) -> Certificate:
        """Slice certification (baselines.tss.slicing). Fixed rule: every endpoint at alpha/(N+1)
        (Bonferroni), walked outward + then -; sequential rule: endpoints in the fixed order 0, +1, -1, +2, ...
        each at alpha with the anytime-valid per-endpoint rule, stopping at the first failure
        (fixed-sequence testing, see ``chain_coverage``), several endpoints side by side in one batch of
        samples per look (``chain_coverage_grouped``)."""
        p = self.smoothing
        seq = p.rule == "sequential"
        budget = max(budgets, default=0.0)
        n_ends = self.slices + 1
        alpha_slice = p.alpha if seq else p.alpha / n_ends
        x = x.to(self.device)
        if budget > 0:
            grid = slice_grid(x, t, budget, self.slices, self.subslices, self.mask)
            ends, bound = grid.endpoints, grid.bound
        else:
            ends, bound = torch.zeros(1, dtype=torch.float64), torch.zeros(1, dtype=torch.float64)
        centre = (len(ends) - 1) // 2
        width = float(ends[1] - ends[0]) if len(ends) > 1 else 0.0

        def image(i: int) -> torch.Tensor:
            return t.apply(x, torch.tensor([[float(ends[i])]], dtype=x.dtype, device=x.device))

        sel = sample_counts(self._sampler(image(centre), t), p.n0, self.num_classes, p.batch_size, generator)
        c = int(sel.argmax())
        evaluated: dict[int, dict] = {}

        ok_at: dict[int, bool] = {}

        d = int(x[0].numel())  # the lattice noise's coordinates: the grid and the table error are paid on them

        def judge(i: int, count: int, pl: float, extra: dict) -> bool:
            evaluated[i] = {"theta": float(ends[i]), "count": count, "p_a_lower": pl,
                            "radius": slice_rule.endpoint_radius(pl, self.sigma), "bound": float(bound[i]), **extra}
            ok_at[i] = slice_rule.endpoint_certified(pl, self.sigma, float(bound[i]), d)
            return ok_at[i]

        def need(i: int) -> float:  # p_A_lower above it iff the endpoint is certified (slice_rule, lattice noise)
            return slice_rule.endpoint_threshold(float(bound[i]), self.sigma, d)

        def group_ok(idx: list[int]) -> list[bool]:
            """Sequential rule on the endpoints ``idx`` side by side, one batch of samples per look; judged in
            walk order up to the first failure (later ones are not part of the claim, so not recorded)."""
            th = torch.tensor([[float(ends[i])] for i in idx], dtype=x.dtype, device=x.device)
            draw_labels = self._multi_sampler(t.apply(x.expand(len(idx), -1, -1, -1), th))
            ests = sequential.estimate_many(
                lambda ks: sample_counts_many(draw_labels, ks, self.num_classes, p.batch_size, generator),
                c, p.sequential, self.n_slice, alpha_slice, [[need(i)] for i in idx])
            oks = []
            for i, est in zip(idx, ests):
                oks.append(judge(i, est.counts_a[-1], est.p_lower, {"index": i, "n": est.n, "sequential": est.record}))
                if not oks[-1]:
                    break
            return oks

        def endpoint_ok(i: int) -> bool:
            if seq:
                return group_ok([i])[0]
            counts = sample_counts(self._sampler(image(i), t), self.n_slice, self.num_classes, p.batch_size,
                                   generator)
            return judge(i, int(counts[c]), lower_confidence_bound(int(counts[c]), self.n_slice, alpha_slice), {})

        centre_ok = endpoint_ok(centre)
        prediction = c if evaluated[centre]["p_a_lower"] > 0.5 else ABSTAIN
        if centre_ok and len(ends) > 1 and seq:
            # as many endpoints side by side as fill one batch at the first look
            chain_coverage_grouped(len(ends), width, budget, group_ok, max(1, p.batch_size // p.sequential.first))
        elif centre_ok and len(ends) > 1:
            # outward in each direction until the first failure; the - side stops once it covers the + side
            limit = math.inf
            for direction in (1, -1):
                i = centre
                while abs(i - centre) * width + width / 2 < limit and 0 <= i + direction < len(ends) \
                        and endpoint_ok(i + direction):
                    i += direction
                limit = min(abs(i - centre) * width + width / 2, budget)
        coverage = slice_rule.coverage(ok_at, centre, width, budget)
        ok = {float(b): prediction != ABSTAIN and (b == 0 or coverage >= b) for b in budgets}
        stats = {"n0": p.n0, "n_slice": self.n_slice, "alpha": p.alpha, "alpha_slice": alpha_slice,
                 "alpha_split": "fixed-sequence" if seq else "bonferroni",
                 "slices": len(ends) - 1, "subslices": self.subslices, "sigma": self.sigma,
                 "mask": t.pixel_mask, "range": budget, "pixel_noise": {
                     "kind": "lattice", "version": 2, "grid_bits": lattice_noise.GRID_BITS, "d": d},
                 "lipschitz": grid.lipschitz if budget > 0 else 0.0, "bound_max": float(bound.max()),
                 "counts_selection": sel.tolist(), "p_a_lower": evaluated[centre]["p_a_lower"],
                 "endpoints": list(evaluated.values()) if seq else [evaluated[i] for i in sorted(evaluated)],
                 "coverage": coverage}
        return Certificate(prediction=prediction, radius=coverage if prediction != ABSTAIN else 0.0,
                           certified=ok, stats=stats)
