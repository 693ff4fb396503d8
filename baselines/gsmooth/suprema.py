"""How GSmooth bounds the supremum of the real-path shift and the paper's M* over a budget region.

A mixin of the ``gsmooth`` defense (it reads the defense's transformation, surrogate, noise and
config), kept apart so that the defense module holds the smoothing and the certificate rules and this
one the bounds they rely on (certificates.py has the bound arithmetic, pose_bounds.py the interval
arithmetic through the pose encoder). Which bound serves which encoder:
* exact covers (translation, pixelate): every distinct image evaluated;
* closed form (photometric and Gaussian-blur pose encoders): the code path is exactly linear;
* interval (lowpass encoder, rotation/scaling pose encoder): the transformation's pixel bounds per
  cell through the encoder;
* otherwise an *estimated* bound (cover maximum + estimated Lipschitz slack), never a proof.
Every proven bound holds for the pipeline as executed in float32: the closed forms add the float32
rounding of the transformed image (rounding.py, blur_bound.py), the interval bounds carry it in the
transformation's pixel bounds, and all of them add the rounding of the encoder's output (rounding.py).
"""
from __future__ import annotations

import math
from dataclasses import replace

import torch

from baselines.gsmooth.blur_bound import blur_deviation
from baselines.gsmooth.certificates import (FLOAT_SLACK, SupBound, code_cell_bound, interval_sup, paper_mstars,
                                            sup_distances, vertex_sup)
from baselines.gsmooth.pose import LINEAR_KINDS
from baselines.gsmooth.pose_bounds import pose_cell_distance
from baselines.gsmooth.regions import cover, region_vertices
from baselines.gsmooth.rounding import REGION_SCALE, output_rounding, photometric_input_deviation
from baselines.gsmooth.surrogate import LowpassEncoder, PoseDecoder, PoseEncoder, gaussian_smooth


class SupremumBounds:
    """Supremum bounds of the sound certificate and M* of the paper's, for the ``GSmooth`` defense."""

    def _norm_fn(self):
        return (lambda p: p.abs().amax(dim=-1)) if self.t.norm == "linf" else (lambda p: p.norm(dim=-1))

    def _per_unit(self) -> list[float]:
        """||A1 e_j||_{Sigma^-1}: the Mahalanobis length of a unit pose shift along parameter j."""
        return [float(self.noise.mahalanobis(self.noise.A[:, j])) for j in range(self.noise.A.shape[1])]

    def _sup_distances(self, x: torch.Tensor, z0: torch.Tensor, budgets: list[float], threshold: float) -> dict:
        """Per budget, an upper bound on sup d(xi) over its region: proven where the encoder allows it,
        for the deployed float32 pipeline (the encoder output's rounding added to every proven bound)."""
        return self._with_output_rounding(self._exact_path_sups(x, z0, budgets, threshold), x, self.noise)

    def _with_output_rounding(self, sups: dict, x: torch.Tensor, noise) -> dict:
        """Proven bounds plus the float32 rounding of F2(x) and F2(tau(xi, x)) (rounding.output_rounding)."""
        z0_norm = float(self.surrogate.F2(x.to(torch.float64)).norm())
        out = {}
        for b, s in sups.items():
            if s.proven and not s.early_exit:
                extra = output_rounding(z0_norm, s.value, noise, self.sigma2)
                s = replace(s, value=s.value + extra, slack=s.slack + extra)
            out[b] = s
        return out

    def _exact_path_sups(self, x: torch.Tensor, z0: torch.Tensor, budgets: list[float], threshold: float) -> dict:
        """The bounds before the encoder output's rounding (see :meth:`_sup_distances`)."""
        t, sur = self.t, self.surrogate

        def real_path(theta: torch.Tensor) -> torch.Tensor:
            xs = x.expand(len(theta), -1, -1, -1)
            # clip: finite-difference probes at the region's edge may step just outside the domain
            return sur.F2(t.apply(xs, t.clip(theta.to(self.device, x.dtype)))).flatten(1).double().cpu()

        res, safety, z = int(self.config["resolution"]), float(self.config["safety"]), z0.flatten().double().cpu()
        if t.enumerable:  # exact covers: one per budget (finitely many images)
            return {b: sup_distances(real_path, z, self.noise, cover(t, b, res, image_size=x.shape[-1]), [b],
                                     self._norm_fn(), safety, t.differentiable)[b] for b in budgets}
        enc = sur.F2
        if isinstance(enc, PoseEncoder) and enc.kind in LINEAR_KINDS:
            return self._closed_form_sups(x, budgets)
        if isinstance(enc, LowpassEncoder) and t.has_pixel_bounds and t.dim == 1:
            return self._interval_sups(x, budgets, threshold)
        if isinstance(enc, PoseEncoder) and enc.kind in ("orientation", "log_radius") and t.has_pixel_bounds:
            return self._pose_interval_sups(x, budgets, threshold)
        cov = cover(t, max(budgets), res, image_size=x.shape[-1])
        return sup_distances(real_path, z, self.noise, cov, budgets, self._norm_fn(), safety, t.differentiable,
                             threshold=threshold)

    def _closed_form_sups(self, x: torch.Tensor, budgets: list[float]) -> dict:
        """Exactly linear code path (photometric and Gaussian-blur pose encoders): the exact path's
        maximum over each region (at a vertex: a norm of a linear map is convex), plus the float32
        rounding of the transformed image (rounding.py, blur_bound.py)."""
        t, enc = self.t, self.surrogate.F2
        x64 = x.to(torch.float64)
        per_unit = self._per_unit()

        def real_path(theta: torch.Tensor) -> torch.Tensor:
            return enc(t.apply(x64.expand(len(theta), -1, -1, -1), theta.to(x64.device))).flatten(1).cpu()

        z0 = enc(x64).flatten().cpu()
        verts = {b: region_vertices(t, b) for b in budgets}
        sups = vertex_sup(real_path, z0, self.noise, {b: v * REGION_SCALE for b, v in verts.items()})
        out = {}
        for b in budgets:
            if enc.kind == "spectral_slope":
                out[b] = self._blur_sup(x64, b, per_unit[0], sups[b])
                continue
            dev = photometric_input_deviation(enc.kind, x64, verts[b], per_unit, self.sigma2)
            out[b] = (replace(sups[b], value=sups[b].value + dev, slack=sups[b].slack + dev) if math.isfinite(dev)
                      else replace(sups[b], method="estimated"))
        return out

    def _blur_sup(self, x64: torch.Tensor, b: float, per_unit: float, vertex: SupBound) -> SupBound:
        """Gaussian blur: b ||A1 e1|| on the exact path plus the proven float32 deviation (blur_bound.py);
        where that is not proven (too little room below the canonical blur level, or a band coefficient
        of x that is 0 to float64 precision), the vertex evaluation, marked estimated."""
        dev = blur_deviation(x64, b * REGION_SCALE)
        if dev is None:
            return replace(vertex, method="estimated")
        exact = b * REGION_SCALE * per_unit
        extra = dev.mahalanobis(per_unit, self.sigma2) + FLOAT_SLACK
        return SupBound(exact + extra, exact, extra, 0.0, 2, True, method="closed-form")

    def _lowpass_code_bound(self, x64: torch.Tensor):
        """Cell bound on the lowpass code's Euclidean shift / sigma2 from the transformation's pixel bounds."""
        z0 = self.surrogate.F2(x64)[:, :self.surrogate.channels].flatten().cpu()
        return code_cell_bound(self._lowpass_code_bounds(x64), z0, self.sigma2)

    def _lowpass_code_bounds(self, x64: torch.Tensor):
        """Sound bounds ``[K, n]`` on the lowpass code over parameter cells, from the transformation's pixel bounds."""
        t, enc = self.t, self.surrogate.F2
        xc = x64.cpu()  # the cell bounds run on the CPU whatever the device (as blur_bound's)

        def code_bounds(lo: torch.Tensor, hi: torch.Tensor):
            plo, phi = t.pixel_bounds(xc, t.clip(lo).to(xc), t.clip(hi).to(xc))
            blur = enc.content_blur
            return (gaussian_smooth(plo.to(torch.float64), blur).flatten(1),
                    gaussian_smooth(phi.to(torch.float64), blur).flatten(1))

        return code_bounds

    def _interval_sups(self, x: torch.Tensor, budgets: list[float], threshold: float) -> dict:
        """Linear monotone encoder (lowpass): the transformation's pixel bounds per cell, filtered."""
        x64 = x.to(torch.float64)
        return self._cells(self._lowpass_code_bound(x64), budgets, threshold,
                           self._point_distance(x64, self.surrogate.F2(x64).flatten().cpu()))

    def _pose_interval_sups(self, x: torch.Tensor, budgets: list[float], threshold: float) -> dict:
        """Geometric pose encoder: pixel bounds per cell through the encoder by interval arithmetic (pose_bounds.py)."""
        t, sur = self.t, self.surrogate
        enc = sur.F2
        x64 = x.to(torch.float64)
        z64 = enc(x64)
        c0 = z64[:, :sur.channels].cpu()
        p0 = z64[:, sur.channels:].mean(dim=(2, 3)).flatten().cpu() * float(sur.unit)
        per_unit = self._per_unit()[0]  # ||A1 e_1||, a pose shift of 1

        def pixel_bounds(img, lo, hi):
            return t.pixel_bounds(img, t.clip(lo).to(img), t.clip(hi).to(img))

        # the cell bounds run on the CPU whatever the device (as blur_bound's): the same proof on every device
        bound = pose_cell_distance(enc.kind, x64.cpu(), pixel_bounds, enc.content_blur, c0, p0,
                                   lambda shift: shift * per_unit, self.sigma2)
        return self._cells(bound, budgets, threshold, self._point_distance(x64, z64.flatten().cpu()))

    def _point_distance(self, x64: torch.Tensor, z0: torch.Tensor):
        """d(xi) at given parameters [K, 1] on the real path in float64 (to skip cells that cannot pass)."""
        t, enc = self.t, self.surrogate.F2

        def d(theta: torch.Tensor) -> torch.Tensor:
            z = enc(t.apply(x64.expand(len(theta), -1, -1, -1), t.clip(theta).to(x64))).flatten(1).cpu()
            return self.noise.mahalanobis(z - z0.reshape(1, -1))
        return d

    def _cells(self, bound, budgets: list[float], threshold: float, point) -> dict:
        """interval_sup over [0, b], or over [-b, b] for two-sided regions (both sides in the same calls)."""
        cells, depth = int(self.config["cells"]), int(self.config["refinements"])
        return interval_sup(bound, 0.0, budgets, cells, threshold, depth, point, mirrored=not self.t.one_sided)

    def mstars(self, z0: torch.Tensor, budgets: list[float]) -> dict:
        """Per budget, M* of Corollary 1 (certificates.paper_mstars) along the surrogate path from the code
        ``z0 = F2(x)``: what ``gsmooth:paper`` divides the margin by."""
        cov = cover(self.t, max(budgets), int(self.config["resolution"]), continuous=True)
        return paper_mstars(self._surrogate_path(z0), self.noise.A, self.sigma1, self.sigma2, cov, budgets,
                            self._norm_fn(), safety=float(self.config["safety"]))

    def _surrogate_path(self, z0: torch.Tensor):
        """theta [k, m] -> F2(H(z0 + A1 theta)) [k, n] in float64: the surrogate path whose Jacobians give M*.

        A pose decoder that moves a U-Net content (``PoseDecoder``, not learned) feeds the U-Net only the code
        channels, which A1 theta leaves at z0's: the content is the same for every theta, so it is computed
        once per batch size and grad mode from those values, outside the graph the Jacobian differentiates, which
        then leaves the U-Net out of its passes (the same Jacobians bit for bit;
        tests/baselines/gsmooth/test_gsmooth_mstar_path.py)."""
        sur = self.surrogate
        dec = sur.H

        def plain(theta: torch.Tensor) -> torch.Tensor:
            th = theta.to(self.device, z0.dtype)
            return sur.F2(dec(z0.expand(len(th), -1, -1, -1) + sur.F1(th))).flatten(1).double().cpu()

        if not isinstance(dec, PoseDecoder) or dec.learned:
            return plain
        contents: dict[tuple[int, bool], torch.Tensor] = {}

        def moved(theta: torch.Tensor) -> torch.Tensor:
            th = theta.to(self.device, z0.dtype)
            z = z0.expand(len(th), -1, -1, -1) + sur.F1(th)
            key = (len(th), torch.is_grad_enabled())
            if key not in contents:
                still = z0.expand(len(th), -1, -1, -1) + sur.F1(z0.new_zeros(len(th), sur.m))
                contents[key] = dec.refine(still[:, :sur.channels])
            return sur.F2(dec.moved(contents[key], z)).flatten(1).double().cpu()

        return moved
