"""GSmooth's sliced semantic-layer certificate: TSS's progressive sampling in the code space (issue #44).

The whole-path rule (defense.py) pays sup_xi ||F2(tau(xi, x)) - F2(x)||_{Sigma^-1} over the budget region at
once. Here the region ([-B, B], or [0, B] for a one-sided parameter) is cut into ``slices`` slices of width w
with endpoints xi_i (``slice_rule.layout``; xi = 0 is one). At each endpoint the smoothed classifier is
certified around its own code z_i = F2(tau(xi_i, x)), the real transformation as it runs (float32; the centre
is the clean code F2(x)), with the lattice code noise of today's CERTIFY (``_sampler(z_i)``). Endpoint i
covers its half-slices N_i = [xi_i - w/2, xi_i + w/2] (clipped to the region) when

    Phi^-1(p_A lower at z_i) > code_noise.required_margin(M_i, code_noise record),
    M_i >= sup over xi in N_i of ||F2(tau(xi, x)) - z_i||_{Sigma^-1}   (proven)

(``slice_rule.code_endpoint_certified``): then G(F2(tau(xi, x))) keeps the class for every xi in N_i (the
argument of code_noise.py with z_i for F2(x)). A budget b is certified iff the contiguous run of certified
endpoints around the centre covers [-b, b] ([0, b]): ``slice_rule.coverage``.

The bound M_i: the same cell bounds as the whole-path rule (``code_cell_bound`` of the lowpass encoder,
``pose_cell_distance`` of the rotation/scaling pose encoder) with the reference code z_i instead of F2(x),
over ``subslices`` cells per slice, bisected where they reach the distance the best margin of the protocol
certifies (``refine_cells``). Floating point: the cells' pixel bounds hold for the float32 transformed image
at every float32 parameter of the cell (the transformations' bounds); the reference is the float64 code of
the float32 endpoint image, whose float32 rounding is the deployed z_i (the analytic encoders compute in
float64 and round once), so ``output_rounding`` of both codes is added, with ``FLOAT_SLACK`` for the float64
evaluation; the lattice's grid and table error are paid by ``code_noise.required_margin``.

Rotation's wrap (``_wrapped_bounds``): the pose encoder's orientation wraps from +90 to -90 degrees where the digit's
principal axis passes the horizontal, and its canonical code turns by 180 degrees there, so no single reference
covers a cell that holds the wrap, nor a cell beside an endpoint whose own image has already wrapped. For rotation
every bound is therefore proven up front, and a cell may be charged, instead of to the endpoint whose interval holds
it, to that endpoint's neighbour, or split into its two branches of the orientation, each charged to a nearby
endpoint on that branch (within two of the owner). Such a cell is recorded in ``wraps`` as ``[lo, hi, [i, ...]]``
(the endpoints charged) and is held only when they are all certified (``slice_rule.coverage`` stops at its edge
nearer 0 otherwise): every parameter of it then has its code within the charged endpoint's M of that endpoint's
code, which is what the chain's claim needs.

Statistics (fixed-sequence testing, baselines/tss/slicing.py): the class c is chosen by n0 samples at the
centre; every endpoint is tested for c at the full alpha (the sequential rule per endpoint where the profile
says ``certify: sequential``, n as its cap; else n samples and Clopper-Pearson), in the fixed order
``slice_rule.walk_order`` (centre, +1, -1, +2, ... or 0, 1, 2, ...), stopping at the first failure
(``slice_rule.walk``). A false claim needs the false endpoint first in that order to pass its own test:
probability <= alpha for the whole chain. The centre's CERTIFY is also the one ``gsmooth:paper`` uses (its
thresholds join the centre's), so the paper variant is unchanged.

Cost control (``max_draws``, unset by default): an endpoint whose p_A sits just above its threshold runs the
sequential rule to its cap, and a walk of many such endpoints can cost hours per image. With ``max_draws`` set
the walk tests no further group once the endpoints' draws (the centre's included, n0 not) reach it, and within
a group the endpoints' sequential rules draw no further look once the group's draws reach what is left of it
(``sequential.estimate_many``'s ``budget``): an endpoint cut there ends undecided, so it fails and the walk stops
at it. (Checked between groups only, one group of up to 62 endpoints could spend 62 caps: measured, 1,082,692
draws on one image against a budget of 200,000.) This only drops later hypotheses of the fixed order: the claims
made are those the unlimited walk would make on the same draws up to that point, so the chain's error bound is
unchanged; the record says ``walk_stop: max_draws`` and the audit accepts an early stop after a passed endpoint
only when the recorded endpoints' draws reach the recorded ``max_draws`` (a cut endpoint is a failure, which
needs no excuse; its sequential record says ``stopped: budget``, which the replay accepts only for a stream the
rule had not stopped before its cap).

Each endpoint's record (theta, counts or sequential record, p_A lower, bound, required margin) and the grid
(range, slices, one_sided) let the audit (benchmark/audit/statistics.py) recompute every decision with the
same pure functions of ``slice_rule``.
"""
from __future__ import annotations

import bisect

import torch
from scipy.stats import norm

from baselines.gsmooth.certificates import FLOAT_SLACK, code_cell_bound, margin, refine_cells
from baselines.gsmooth.pose_bounds import orientation_cell_distance, pose_cell_distance
from baselines.gsmooth.rounding import output_rounding
from baselines.gsmooth.surrogate import LowpassEncoder, PoseEncoder
from benchmark.api import (ABSTAIN, BenchError, Certificate, SURROGATE_ONLY, certify, code_noise,
                           lower_confidence_bound, sample_counts_many, sequential, slice_rule, threshold_rule)

#: pose designs whose encoder has interval bounds (pose_bounds.py)
INTERVAL_POSES = ("orientation", "log_radius")


class SlicedCertificates:
    """The sliced certificate of the ``GSmooth`` defense (a mixin: it reads the defense's transformation,
    surrogate, noise, smoothing protocol, config and samplers)."""

    @property
    def outputs_layout(self) -> bool:
        """``layout: outputs``: one endpoint per interval of constant output instead of uniform slices."""
        return self.config.get("layout", "uniform") == "outputs"

    def sliceable(self) -> bool:
        """Whether the sliced rule applies: Gaussian pose noise, one parameter with pixel bounds, an encoder
        with interval cell bounds (lowpass, or the rotation/scaling pose encoder), and either uniform slices of a
        parameter that is not enumerable or (``layout: outputs``) a one-sided parameter with output intervals."""
        t, enc = self.t, self.surrogate.F2
        if self.theta_noise.kind != "gaussian" or t.dim != 1 or not t.has_pixel_bounds:
            return False
        if self.outputs_layout:
            if not (t.one_sided and t.has_output_intervals):
                return False
        elif t.enumerable:
            return False
        return isinstance(enc, LowpassEncoder) or (isinstance(enc, PoseEncoder) and enc.kind in INTERVAL_POSES)

    def _layout(self, limit: float, image_shape: tuple[int, ...]
                ) -> tuple[list[float], list[tuple[float, float]], int, float | None, dict]:
        """(endpoint parameters, the interval each covers, the centre's index, the uniform slice width (None for
        output intervals), the record of the layout).

        ``layout: uniform`` (default): ``slices`` slices of ``slice_rule.layout`` over [-B, B] or [0, B], each
        endpoint covering its half-slices. ``layout: outputs``: one endpoint per interval of
        ``Transformation.output_intervals`` (the output is constant on it), at the interval's float32 midpoint."""
        if self.outputs_layout:
            spans = self.t.output_intervals(limit, image_shape) if limit > 0 else [(0.0, 0.0)]
            # the centre is the clean image (theta = 0, its code F2(x)); the others the float32 midpoints
            thetas = [0.0] + [float(torch.tensor((lo + hi) / 2, dtype=torch.float32).clamp(lo, hi))
                              for lo, hi in spans[1:]]
            return thetas, spans, 0, None, {"layout": "outputs", "spans": [list(sp) for sp in spans]}
        slices, one_sided = int(self.config["slices"]), bool(self.t.one_sided)
        first, width, centre = slice_rule.layout(limit, slices, one_sided)
        n_ends = slices + 1 if width else 1
        thetas = [first + i * width for i in range(n_ends)]
        spans = [(max(first + (i - 0.5) * width, first), min(first + (i + 0.5) * width, limit)) for i in range(n_ends)]
        return thetas, spans, centre, width, {}

    # ------------------------------------------------------------------ bounds
    def _reference_cell_bound(self, x64: torch.Tensor):
        """``make(refs)``: the cell bound (theta_lo, theta_hi) [K, 1] -> [K] against one float64 reference code
        per cell, ``refs [K, C + m, H, W]`` (the whole-path rule's cell bounds with another reference)."""
        t, sur = self.t, self.surrogate
        enc, ch = sur.F2, sur.channels
        if isinstance(enc, LowpassEncoder):
            bounds = self._lowpass_code_bounds(x64)
            return lambda refs: code_cell_bound(bounds, refs[:, :ch].flatten(1), self.sigma2)
        per_unit = self._per_unit()[0]
        xc = x64.cpu()

        def pixel_bounds(img, lo, hi):
            return t.pixel_bounds(img, t.clip(lo).to(img), t.clip(hi).to(img))

        def make(refs: torch.Tensor):
            p0 = refs[:, ch:].mean(dim=(2, 3)).flatten() * float(sur.unit)
            return pose_cell_distance(enc.kind, xc, pixel_bounds, enc.content_blur, refs[:, :ch], p0,
                                      lambda shift: shift * per_unit, self.sigma2)
        return make

    def _endpoint_bounds(self, x: torch.Tensor, idx: list[int], refs: dict[int, torch.Tensor],
                         spans: list[tuple[float, float]], threshold: float) -> dict[int, float]:
        """Proven M_i (module docstring) for the endpoints ``idx`` against their float64 references ``refs``
        over the intervals ``spans[i]`` they cover, in one batch of cells: ``subslices`` cells per interval,
        refined against ``threshold``."""
        t = self.t
        x64 = x.to(torch.float64)
        make = self._reference_cell_bound(x64)
        enc = self.surrogate.F2
        lows = [lo for lo, _ in spans]

        def owner(lo: torch.Tensor, hi: torch.Tensor) -> list[int]:
            mid = (lo.flatten() + hi.flatten()) / 2  # a cell lies inside one interval
            return [bisect.bisect_right(lows, float(m)) - 1 for m in mid]

        def cell_bound(lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
            return make(torch.stack([refs[i] for i in owner(lo, hi)]))(lo, hi)

        def point(theta: torch.Tensor) -> torch.Tensor:
            z = enc(t.apply(x64.expand(len(theta), -1, -1, -1), t.clip(theta).to(x64))).flatten(1).cpu()
            ref = torch.stack([refs[i] for i in owner(theta, theta)]).flatten(1)
            return self.noise.mahalanobis(z - ref)

        per = max(1, int(self.config["subslices"]))
        parts = [torch.linspace(spans[i][0], spans[i][1], per + 1, dtype=torch.float64) for i in idx]
        c_lo, c_hi = torch.cat([e[:-1] for e in parts]), torch.cat([e[1:] for e in parts])
        c_lo, c_hi, vals = self._refine(cell_bound, c_lo, c_hi, threshold, point)
        whose = owner(c_lo, c_hi)
        out = {}
        for i in idx:
            top = float(max(v for v, j in zip(vals.tolist(), whose) if j == i)) + FLOAT_SLACK
            out[i] = top + output_rounding(float(refs[i].norm()), top, self.noise, self.sigma2)
        return out

    def _refine(self, cell_bound, c_lo: torch.Tensor, c_hi: torch.Tensor, threshold: float, point
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``refine_cells`` up to ``refinements`` bisections of the cells whose bound reaches ``threshold`` (the
        distance the protocol's best margin certifies), then, where the config sets ``refine_to`` (a distance below
        it), at most ``refine_to_levels`` more of those still at or above ``refine_to``: a bound the endpoint's
        margin clears by more needs fewer draws and fails less often, at a bounded cost (each level at most doubles
        the cells it splits). Any partition gives a sound bound, so neither pass changes what a bound proves."""
        c_lo, c_hi, vals = refine_cells(cell_bound, c_lo, c_hi, threshold, int(self.config["refinements"]), point)
        target = self.config.get("refine_to")
        if target is not None and float(target) < threshold:
            c_lo, c_hi, vals = refine_cells(cell_bound, c_lo, c_hi, float(target),
                                            int(self.config.get("refine_to_levels", 2)), point, vals)
        return c_lo, c_hi, vals

    def _wraps_orientation(self) -> bool:
        """Whether the bounds handle the orientation's wrap (rotation's pose encoder, uniform slices): then every
        endpoint's bound is proven up front (``_wrapped_bounds``), before any sample is drawn."""
        enc = self.surrogate.F2
        return isinstance(enc, PoseEncoder) and enc.kind == "orientation" and not self.outputs_layout

    def _wrapped_bounds(self, x: torch.Tensor, thetas: list[float], refs: dict[int, torch.Tensor],
                        spans: list[tuple[float, float]], threshold: float) -> tuple[dict[int, float], list[list]]:
        """(M_i of every endpoint, the cells charged to other endpoints) for rotation's pose encoder (module
        docstring).

        Each cell of endpoint i's interval is bounded against z_i (``orientation_cell_distance``); where that bound
        reaches ``threshold``, also against i's neighbour on the cell's side, and, where the cell's orientation box
        is split by the wrap, its upper-branch part against the nearest endpoint (within two of i) whose pose is on
        the upper branch and its lower-branch part against the nearest one on the lower branch. The smallest of
        the three is used (ties: z_i alone); a cell not charged to i goes to ``wraps`` as ``[lo, hi, [charged
        endpoints]]``. Cells are refined as in ``_endpoint_bounds``; a midpoint is hopeless when its code is at
        least ``threshold`` from every endpoint a cell there may be charged to (a lower bound on any charge)."""
        t, sur = self.t, self.surrogate
        enc, ch = sur.F2, sur.channels
        per_unit = self._per_unit()[0]
        x64 = x.to(torch.float64)
        xc = x64.cpu()
        n = len(thetas)
        stack = torch.stack([refs[i] for i in range(n)])
        codes, poses = stack[:, :ch], stack[:, ch:].mean(dim=(2, 3)).flatten() * float(sur.unit)
        lows = [lo for lo, _ in spans]

        def pixel_bounds(img, lo, hi):
            return t.pixel_bounds(img, t.clip(lo).to(img), t.clip(hi).to(img))

        def locate(lo: torch.Tensor, hi: torch.Tensor):
            """Per cell: its owner (the endpoint whose interval holds it), the owner's neighbour on the cell's side,
            and the nearest endpoints (within two of the owner) on the upper and the lower branch of the orientation
            (pose >= 0, < 0; the nearer one in pose where none is)."""
            own, other, up, low = [], [], [], []
            for u, v in zip(lo.flatten().tolist(), hi.flatten().tolist()):
                mid = (u + v) / 2
                i = bisect.bisect_right(lows, mid) - 1
                near = sorted(range(max(i - 2, 0), min(i + 3, n)), key=lambda e: abs(thetas[e] - mid))
                upper = [e for e in near if poses[e] >= 0] or [max(near, key=lambda e: poses[e])]
                lower = [e for e in near if poses[e] < 0] or [min(near, key=lambda e: poses[e])]
                own.append(i)
                other.append(min(max(i + (1 if mid > thetas[i] else -1), 0), n - 1))
                up.append(upper[0])
                low.append(lower[0])
            return tuple(torch.tensor(v) for v in (own, other, up, low))

        seen: dict[tuple[float, float], tuple] = {}

        def evaluate(lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
            own, other, up, low = locate(lo, hi)
            d, d_other, split, d_up, d_low = orientation_cell_distance(
                xc, pixel_bounds, enc.content_blur, (codes[own], poses[own]), (codes[other], poses[other]),
                (codes[up], poses[up]), (codes[low], poses[low]), lambda shift: shift * per_unit, self.sigma2,
                threshold)(lo, hi)
            d_split = torch.where(split, torch.maximum(d_up, d_low), torch.full_like(d, float("inf")))
            # 0: the owner alone; 1: its neighbour alone; 2: each branch against its endpoint (ties: the owner)
            options = torch.stack([d, d_other, d_split])
            how = options.argmin(0)
            for k, (u, v) in enumerate(zip(lo.flatten().tolist(), hi.flatten().tolist())):
                seen[(u, v)] = (int(how[k]), int(own[k]), int(other[k]), int(up[k]), int(low[k]),
                                float(d[k]), float(d_other[k]), float(d_up[k]), float(d_low[k]))
            return options.amin(0)

        def point(theta: torch.Tensor) -> torch.Tensor:
            z = enc(t.apply(x64.expand(len(theta), -1, -1, -1), t.clip(theta).to(x64))).flatten(1).cpu()
            near = torch.stack(locate(theta, theta))  # every endpoint a cell there may be charged to
            return torch.stack([self.noise.mahalanobis(z - stack[e].flatten(1)) for e in near]).amin(0)

        per = max(1, int(self.config["subslices"]))
        parts = [torch.linspace(lo, hi, per + 1, dtype=torch.float64) for lo, hi in spans]
        c_lo, c_hi = torch.cat([e[:-1] for e in parts]), torch.cat([e[1:] for e in parts])
        c_lo, c_hi, _ = self._refine(evaluate, c_lo, c_hi, threshold, point)
        top = [0.0] * n  # distances are >= 0; an endpoint whose every cell is charged to others keeps 0
        wraps = []
        for u, v in zip(c_lo.tolist(), c_hi.tolist()):
            how, own, other, up, low, d, d_other, d_up, d_low = seen[(u, v)]
            if how == 0:
                top[own] = max(top[own], d)
                continue
            if how == 1:
                top[other] = max(top[other], d_other)
                wraps.append([u, v, [other]])
            else:
                top[up], top[low] = max(top[up], d_up), max(top[low], d_low)
                wraps.append([u, v, sorted({up, low})])
        out = {}
        for i in range(n):
            m = top[i] + FLOAT_SLACK
            out[i] = m + output_rounding(float(refs[i].norm()), m, self.noise, self.sigma2)
        return out, sorted(wraps)

    def _codes(self, x: torch.Tensor, thetas: list[float]) -> tuple[torch.Tensor, torch.Tensor]:
        """(deployed float32 codes [k, ...] on the device, their float64 references on the CPU) of the real
        transformation at ``thetas``: F2 of the float32 image as it runs, and F2 of that image in float64."""
        th = torch.tensor([[v] for v in thetas], dtype=x.dtype, device=x.device)
        with torch.no_grad():
            imgs = self.t.apply(x.expand(len(th), -1, -1, -1), th)
            return self.surrogate.F2(imgs), self.surrogate.F2(imgs.to(torch.float64)).cpu()

    # ----------------------------------------------------------------- certify
    def certify_sliced(self, x: torch.Tensor, budgets: list[float], generator: torch.Generator) -> list[Certificate]:
        """The sliced ``gsmooth`` certificate and ``gsmooth:paper`` from the centre's CERTIFY (module docstring)."""
        if self.config["report_estimated"]:
            raise BenchError("gsmooth: the sliced rule (slices > 0) has no estimated variant; "
                             "set report_estimated: false.")
        p, rec, t = self.smoothing, self.code_record, self.t
        seq = p.rule == "sequential"
        positive = [float(b) for b in budgets if b > 0]
        limit, slices, one_sided = max(positive, default=0.0), int(self.config["slices"]), bool(t.one_sided)
        if slices % 2 and not one_sided and not self.outputs_layout:
            raise BenchError(f"gsmooth/{t.name}: slices over [-B, B] must be even (so 0 is an endpoint), "
                             f"got {slices}.")
        thetas, spans, centre, width, layout_record = self._layout(limit, tuple(x.shape))
        n_ends = len(thetas)
        x = x.to(self.device)
        with torch.no_grad():
            z0 = self.surrogate.F2(x)
        refs = {centre: self.surrogate.F2(x.to(torch.float64)).cpu()[0]}
        codes_at: dict[int, torch.Tensor] = {}
        wraps: list[list] = []
        distance = code_noise.distance_budget(margin(p.best_p_lower()), rec)  # refine cells up to it
        if limit > 0 and self._wraps_orientation():  # every bound up front: a wrap cell charges two endpoints
            others = [i for i in range(n_ends) if i != centre]
            z, ref64 = self._codes(x, [thetas[i] for i in others])
            codes_at.update(zip(others, z))
            refs.update(zip(others, ref64))
            bound, wraps = self._wrapped_bounds(x, thetas, refs, spans, distance)
        else:  # no positive budget: a single endpoint whose neighbourhood is theta = 0 alone
            bound = self._endpoint_bounds(x, [centre], refs, spans, distance) if limit > 0 else {centre: 0.0}
        mstars = self.mstars(z0, positive) if positive else {}
        paper_need = {repr(b): self.reach(b) * mstars[b].value for b in positive}
        best, centre_need = margin(p.best_p_lower()), slice_rule.code_endpoint_threshold(bound[centre], rec)
        taus = sorted({float(norm.cdf(v)) for v in paper_need.values() if v < best}
                      | ({centre_need} if centre_need < p.best_p_lower() else set()))
        res = certify(self._sampler(z0), self.num_classes, p, generator, thresholds=taus if seq else None)
        c = int(torch.tensor(res.counts_selection).argmax())
        evaluated: list[dict] = []
        ok_at: dict[int, bool] = {}
        max_draws = self.config.get("max_draws")

        def judge(i: int, count: int, pl: float, n: int, record: dict | None) -> bool:
            evaluated.append({"index": i, "theta": thetas[i], "count": count, "n": n, "p_a_lower": pl,
                              "margin": margin(pl), "bound": bound[i],
                              "required": code_noise.required_margin(bound[i], rec),
                              **({"sequential": record} if record is not None else {})})
            ok_at[i] = slice_rule.code_endpoint_certified(pl, bound[i], rec)
            return ok_at[i]

        def group_ok(idx: list[int]) -> list[bool]:
            """The endpoints ``idx`` side by side: bounds, then one batch of samples per look; judged in walk
            order up to the first failure (later ones are not part of the claim, so not recorded). None of them
            once the draws reach ``max_draws`` (the walk then stops: module docstring)."""
            if slice_rule.draws_reached(evaluated, max_draws):  # the centre's draws count, n0's do not
                return []
            if not all(i in codes_at for i in idx):
                z, ref64 = self._codes(x, [thetas[i] for i in idx])
                codes_at.update(zip(idx, z))
                refs.update(zip(idx, ref64))
                bound.update(self._endpoint_bounds(x, idx, refs, spans, distance))
            draw = self._multi_sampler(torch.stack([codes_at[i] for i in idx]))
            if seq:
                left = None if max_draws is None else int(max_draws) - sum(int(e["n"]) for e in evaluated)
                ests = sequential.estimate_many(
                    lambda ks: sample_counts_many(draw, ks, self.num_classes, p.batch_size, generator), c,
                    p.sequential, p.n, p.alpha, [[slice_rule.code_endpoint_threshold(bound[i], rec)] for i in idx],
                    budget=left)
                found = [(int(e.counts_a[-1]), e.p_lower, e.n, e.record) for e in ests]
            else:
                counts = sample_counts_many(draw, [p.n] * len(idx), self.num_classes, p.batch_size, generator)
                found = [(int(k[c]), lower_confidence_bound(int(k[c]), p.n, p.alpha), p.n, None) for k in counts]
            oks = []
            for i, (count, pl, n, record) in zip(idx, found):
                oks.append(judge(i, count, pl, n, record))
                if not oks[-1]:
                    break
            return oks

        if judge(centre, int(res.counts_estimation[c]), res.p_a_lower, res.n, res.sequential) and n_ends > 1:
            group = max(1, p.batch_size // p.sequential.first) if seq else 1
            slice_rule.walk(slice_rule.walk_order(n_ends, one_sided), group_ok, group)
        live = res.prediction != ABSTAIN
        cov = (slice_rule.span_coverage(ok_at, spans, limit) if width is None
               else slice_rule.coverage(ok_at, centre, width, limit, one_sided, wraps))
        # the walk ended early on its draw budget: between groups (every judged endpoint passed, group_ok met the
        # budget) or within one (its first failing endpoint was cut undecided by the budget, estimate_many)
        budget_stop = len(evaluated) < n_ends and (
            (all(ok_at.values()) and slice_rule.draws_reached(evaluated, max_draws))
            or evaluated[-1].get("sequential", {}).get("stopped") == sequential.BUDGET_STOP)
        ok = {b: live and (b == 0 or cov >= b) for b in budgets}
        mrg = margin(res.p_a_lower)
        common = {"margin": mrg, "sigma1": self.sigma1, "sigma2": self.sigma2, "code_noise": rec}
        stats = {**common, "n0": p.n0, "alpha": p.alpha, "counts_selection": res.counts_selection,
                 "p_a_lower": res.p_a_lower, "n_slice": p.n, "alpha_slice": p.alpha, "alpha_split": "fixed-sequence",
                 "slices": n_ends - 1, "subslices": int(self.config["subslices"]), "range": limit,
                 "one_sided": one_sided, "endpoints": evaluated, "coverage": cov, **layout_record,
                 **({"max_draws": int(max_draws)} if max_draws is not None else {}),
                 **({"wraps": wraps} if wraps else {}),
                 **({"walk_stop": "max_draws"} if budget_stop else {})}
        sound = Certificate(res.prediction, cov if live else 0.0, ok, stats, "")
        rule = threshold_rule.record("margin", paper_need)
        paper_ok = {b: live and (b == 0 or threshold_rule.certified(rule, res.p_a_lower, False, b)) for b in budgets}
        diag = {repr(b): {"mstar": mstars[b].to_json(), "paper_radius": mrg / mstars[b].value} for b in positive}
        paper = Certificate(res.prediction, None, paper_ok,
                            {**res.stats(), **common, "diagnostics": diag, "threshold_rule": rule,
                             "certifies": SURROGATE_ONLY}, "paper")
        return [sound, paper]
