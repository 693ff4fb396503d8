"""Recompute a certificate from its recorded statistics: the checker's ``statistics`` rule.

Works on the JSON form of a certificate (``Certificate.to_json()``, as stored in a run's rows), so the
same code checks the pre-run certificates, every certificate of every row a submission's run wrote,
and the rows of a committed entry (``bench verify-entry``). Three kinds of certificate are known:

* Monte-Carlo (CERTIFY): ``n0``, ``n``, ``alpha``, ``counts_selection``, ``counts_estimation``,
  ``count_a``, ``p_a_lower``. The selected class is the argmax of the selection counts; ``p_a_lower`` is
  the bound of that class's estimation count: the one-sided Clopper-Pearson bound at (n, alpha) under the
  fixed rule, or, when the stats carry a ``sequential`` record (``certify: sequential``), the anytime-valid
  bound that ``benchmark.certify.sequential.recompute`` replays from it (schedule from the recorded
  settings, levels summing to <= alpha, max over the looks, stop exactly where the rule stops; ``n`` is
  then the samples used, the record's ``cap`` the protocol's n). Abstain iff the bound is <= 1/2. Then
  either a ``radius_rule`` (the radius is recomputed from ``p_a_lower``, flags follow the radius; with a
  ``parameter_noise`` record, version 2, by ``parameter_lattice``'s rule, which pays the grid and the noise
  table's error) or a ``threshold_rule`` (per budget: certified iff the statistic exceeds the recorded threshold).
  A certificate on
  GSmooth's lattice code noise (``code_noise`` with ``code_distances``) must have the thresholds that
  ``code_noise.required_margin`` gives its recorded distances (the grid and the noise table paid).
* Sliced (TSS rotation/scaling): per-endpoint counts (fixed n_slice, or a sequential record per endpoint
  replayed like the above), the per-endpoint radius sigma * Phi^-1(p), and the coverage of the contiguous
  run of certified endpoints. The level split is Bonferroni (alpha_slice = alpha / (slices + 1), endpoints
  in any order) or, with ``alpha_split = 'fixed-sequence'``, alpha per endpoint with the endpoints a prefix
  of the order 0, +1, -1, +2, ... that stops exactly at its first failing endpoint (baselines/tss/slicing.py).
  GSmooth's sliced certificate (``code_noise`` in its stats, baselines/gsmooth/sliced.py) is the same chain with
  each endpoint judged by ``slice_rule.code_endpoint_certified`` of its recorded code-shift bound (the recorded
  required margin must be ``code_noise.required_margin`` of it), always fixed-sequence, and ``one_sided``
  regions [0, B] whose chain walks 0, 1, 2, ...; with ``layout: outputs`` its endpoints are one per recorded
  span (``slice_rule.spans_problems`` must accept the spans: a float32 partition of the range) and the coverage is
  ``slice_rule.span_coverage``; its rotation records may list ``wraps``, cells of the grid's range that the
  coverage holds only when the endpoints each names are all certified (``slice_rule.coverage``).
* Deterministic (``stats['deterministic'] = True``): no statistics to recompute; the radius must be
  finite and within the largest budget, and the flags must follow it.

Against the protocol (when given): ``n0``, ``n`` and ``alpha`` must be the suite's; a sequential record
needs the suite's ``certify: sequential`` with its settings and n as the cap (a fixed-n certificate is
accepted under either rule: CERTIFY without thresholds draws the fixed n).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from benchmark.certify import (code_noise, parameter_lattice, radius_rule, sequential, slice_rule, spt_rule,
                               threshold_rule)
from benchmark.certify.certificate import ABSTAIN
from benchmark.certify.radii import RADIUS_FUNCTIONS
from benchmark.certify.stats import lower_confidence_bound

RTOL = 1e-9
EDGE = 1e-12  # a statistic this close to its threshold may go either way (float round-off)
MC_KEYS = ("n0", "n", "alpha", "count_a", "p_a_lower", "counts_selection", "counts_estimation")
SLICED_KEYS = ("endpoints", "n_slice", "alpha_slice", "slices", "range", "n0", "alpha",
               "counts_selection", "p_a_lower", "coverage")
STATISTICS = threshold_rule.STATISTICS


@dataclass(frozen=True)
class Protocol:
    """The Monte-Carlo protocol every certificate of a task must use."""

    n0: int
    n: int
    alpha: float
    rule: str = "fixed"  # the suite's ``certify`` rule: fixed | sequential
    sequential: dict | None = None  # its SequentialSettings.to_dict() under the sequential rule

    @classmethod
    def of(cls, params) -> "Protocol":
        """The protocol of a ``SmoothingParams`` (``ctx.smoothing``, or ``SmoothingParams.from_profile``)."""
        seq = params.sequential.to_dict() if params.rule == "sequential" else None
        return cls(params.n0, params.n, params.alpha, params.rule, seq)


def kind(stats: dict) -> str | None:
    """``monte_carlo``, ``sliced``, ``deterministic`` or None (no raw statistics)."""
    if "endpoints" in stats:
        return "sliced"
    if "counts_estimation" in stats or "count_a" in stats:
        return "monte_carlo"
    if stats.get("deterministic") is True:
        return "deterministic"
    return None


margin = threshold_rule.margin


def _radius(cert: dict) -> float | None:
    r = cert.get("radius")
    return math.inf if r == "inf" else r


def _flags(cert: dict) -> dict[float, bool]:
    return {float(b): bool(v) for b, v in (cert.get("certified") or {}).items()}


def _close(a: float, b: float) -> bool:
    return math.isclose(float(a), float(b), rel_tol=RTOL, abs_tol=EDGE)


def certificate_problems(cert: dict, budgets: list[float], num_classes: int | None = None,
                         protocol: Protocol | None = None) -> list[str]:
    """Everything in ``cert`` its own statistics (and the protocol) do not reproduce; empty = consistent."""
    s, pred, radius, flags = cert.get("stats") or {}, cert.get("prediction"), _radius(cert), _flags(cert)
    out: list[str] = []
    if set(flags) != {float(b) for b in budgets}:
        out.append(f"`certified` must have one entry per budget {sorted(float(b) for b in budgets)}, "
                   f"got {sorted(flags)}.")
    if pred == ABSTAIN and any(flags.values()):
        out.append("abstained but certifies some budget.")
    if radius is not None and (not isinstance(radius, (int, float)) or math.isnan(radius) or radius < 0):
        out.append(f"radius must be None or a number >= 0, got {radius!r}.")
        return out
    if radius is not None and math.isinf(radius):
        out.append("infinite radius: no finite sample or verifier proves robustness to every parameter; "
                   "report the largest region actually checked.")
        return out
    k = kind(s)
    if k is None:
        out.append("no raw statistics. Monte-Carlo certificates record n0, n, alpha, counts_selection, "
                   "counts_estimation, count_a and p_a_lower (CertifyResult.stats() does), sliced ones per-endpoint "
                   "counts (endpoints, n_slice, alpha_slice); deterministic ones set stats['deterministic'] = True.")
        return out
    if k == "monte_carlo":
        out += _monte_carlo(s, pred, radius, flags, num_classes, protocol)
    elif k == "sliced":
        out += _sliced(s, pred, radius, flags, protocol)
    else:
        top = max((float(b) for b in budgets), default=0.0)
        if radius is not None and radius > top * (1 + RTOL) + EDGE:
            out.append(f"deterministic radius {radius} exceeds the largest budget {top:g}, the largest region a "
                       "verifier run on this task can have checked.")
    if radius is not None and not out:
        out += _flags_follow_radius(radius, pred, flags)
    return out


def _flags_follow_radius(radius: float, pred: int, flags: dict[float, bool]) -> list[str]:
    """Open (radius > b) and closed (b <= radius) regions are both accepted."""
    wrong = [b for b, v in flags.items()
             if (v and not b <= radius) or (not v and b < radius and pred != ABSTAIN)]
    if wrong:
        return [f"certified flags at budgets {wrong} disagree with the radius {radius} (certified at b needs "
                "b <= radius, and every b < radius must be certified)."]
    return []


def _ints(v) -> list[int] | None:
    if not isinstance(v, list) or not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in v):
        return None
    return v


def _protocol(s: dict, protocol: Protocol | None, keys: tuple[str, ...]) -> list[str]:
    if protocol is None:
        return []
    return [f"{key} = {s[key]} but the suite's protocol has {key} = {getattr(protocol, key)}; certify with "
            "ctx.smoothing (the task's protocol)."
            for key in keys if not _close(s[key], getattr(protocol, key))]


def _selection(s: dict, num_classes: int | None) -> tuple[list[str], list[int], list[int]]:
    """Problems with the selection counts, and the tied argmax classes."""
    sel = _ints(s["counts_selection"])
    if sel is None or not sel:
        return ["counts_selection must be a list of non-negative integer counts."], [], []
    out = []
    if num_classes is not None and len(sel) != num_classes:
        out.append(f"counts_selection has {len(sel)} classes, the dataset has {num_classes}.")
    if sum(sel) != s["n0"]:
        out.append(f"counts_selection sums to {sum(sel)}, not n0 = {s['n0']} (selection uses n0 samples).")
    top = max(sel)
    return out, sel, [i for i, c in enumerate(sel) if c == top]


def _monte_carlo(s: dict, pred: int, radius: float | None, flags: dict[float, bool], num_classes: int | None,
                 protocol: Protocol | None) -> list[str]:
    missing = [key for key in MC_KEYS if key not in s]
    if missing:
        return [f"Monte-Carlo statistics lack {missing} (record CertifyResult.stats())."]
    rec = s.get("sequential")
    out = _protocol(s, protocol, ("n0", "alpha") if rec is not None else ("n0", "n", "alpha"))
    sel_problems, sel, tied = _selection(s, num_classes)
    est = _ints(s["counts_estimation"])
    out += sel_problems
    if est is None or len(est) != len(sel):
        return out + ["counts_estimation must be integer counts, one per class like counts_selection."]
    if sum(est) != s["n"]:
        out.append(f"counts_estimation sums to {sum(est)}, not n = {s['n']} (estimation uses n fresh samples).")
    if out:
        return out
    n, alpha = int(s["n"]), float(s.get("alpha_p_a", s["alpha"]))  # alpha_p_a: p_A's share of alpha (spt)
    if "alpha_p_a" in s or "spt_rule" in s:
        problems = _spt_rule(s, flags)
        if problems:
            return problems
    if "code_distances" in s:
        problems = _code_rule(s, flags)
        if problems:
            return problems
    if pred != ABSTAIN and pred not in tied:
        return [f"prediction {pred} is not the class selected by counts_selection {sel}."]
    if pred != ABSTAIN and s["count_a"] != est[pred]:
        return [f"count_a = {s['count_a']} but counts_estimation[{pred}] = {est[pred]}."]
    classes = [pred] if pred != ABSTAIN else tied
    if rec is None:
        bounds = [lower_confidence_bound(est[c], n, alpha) for c in classes]
        what = f"the one-sided Clopper-Pearson bound {bounds[0]} of the selected class's count (n={n}, alpha={alpha})"
    else:
        bound, problems = _replay(rec, alpha, protocol.n if protocol else None, n, protocol)
        if problems:
            return problems
        if not any(est[c] == rec["counts_a"][-1] for c in classes):
            return [f"the sequential record's last count {rec['counts_a'][-1]} is not the estimation count of the "
                    f"selected class (counts_estimation {est})."]
        bounds, what = [bound], f"the sequential bound {bound} replayed from its record"
    p = next((v for v in bounds if _close(v, s["p_a_lower"])), None)
    if p is None:
        return [f"p_a_lower {s['p_a_lower']} is not {what}."]
    if (p > 0.5) != (pred != ABSTAIN):
        return [f"p_a_lower = {p:.6f} but prediction = {pred}; CERTIFY abstains exactly when p_a_lower <= 1/2."]
    if radius is not None:
        return _radius_rule(s, p, pred, radius)
    return _threshold_rule(s, p, pred, flags)


def _replay(rec, alpha: float, cap: int | None, n_used: int | None, protocol: Protocol | None
            ) -> tuple[float, list[str]]:
    """(L*, problems) of a ``sequential`` record: ``sequential.recompute`` replays it at the certificate's
    alpha; here its cap (the protocol's n, or n_slice), the samples the certificate says it used, and the
    suite's rule and settings."""
    if not isinstance(rec, dict):
        return 0.0, [f"the sequential record must be a dict, got {type(rec).__name__}."]
    bound, out = sequential.recompute(rec, alpha=alpha)
    if out:
        return bound, out
    done = len(rec["counts_a"])
    if cap is not None and int(rec["cap"]) != cap:
        out.append(f"sequential cap {rec['cap']} differs from n = {cap} (the cap of the sequential rule).")
    if n_used is not None and int(n_used) != int(rec["looks"][done - 1]):
        out.append(f"n = {n_used} differs from the last look done by the sequential record "
                   f"({rec['looks'][done - 1]}).")
    if protocol is not None and protocol.rule != "sequential":
        out.append(f"a sequential record, but the suite's protocol certifies with rule '{protocol.rule}'.")
    elif protocol is not None and protocol.sequential is not None:
        got = {k: rec.get(k) for k in protocol.sequential}
        if got != protocol.sequential:
            out.append(f"sequential settings {got} differ from the protocol's {protocol.sequential}.")
    return bound, out


def _radius_rule(s: dict, p: float, pred: int, radius: float) -> list[str]:
    rule = s.get("radius_rule")
    if not isinstance(rule, dict):
        return ["has a radius but no radius_rule, so the harness cannot recompute it: add stats['radius_rule'] = "
                f"{{'distribution': one of {sorted(RADIUS_FUNCTIONS)}, 'scale': s}}, or certify per budget "
                "(radius=None) with a threshold_rule."]
    fn, scale = RADIUS_FUNCTIONS.get(rule.get("distribution")), rule.get("scale")
    if fn is None:
        return [f"radius_rule distribution {rule.get('distribution')!r} is not one of {sorted(RADIUS_FUNCTIONS)}."]
    if not isinstance(scale, (int, float)) or not 0 < scale < math.inf:
        return [f"radius_rule scale must be a positive number, got {scale!r}."]
    noise = s.get("parameter_noise")
    if noise is not None:
        why = parameter_lattice.problem(noise, rule.get("distribution"))
        if why:
            return [f"{why}."]
    r = radius_rule.radius(rule, p, pred == ABSTAIN, noise)
    if not _close(r, radius):
        return [f"radius {radius} differs from {r} recomputed by radius_rule {rule} from p_a_lower"
                f"{'' if noise is None else ' and parameter_noise ' + str(noise)}."]
    return []


def _spt_rule(s: dict, flags: dict[float, bool]) -> list[str]:
    """An SPT certificate (benchmark/certify/spt_rule.py): its thresholds follow from the recorded rule
    (sigmas, E, the rho record), and p_A's share plus rho's share of alpha stay within alpha."""
    rule = s.get("spt_rule")
    if not isinstance(rule, dict) or "alpha_p_a" not in s:
        return ["an alpha split (alpha_p_a) needs an spt_rule, and an spt_rule its alpha_p_a."]
    try:
        need = spt_rule.thresholds(sorted(flags), rule)
        share = float(s["alpha_p_a"]) + spt_rule.rho_alpha(rule["rho"])
    except (KeyError, TypeError, ValueError) as exc:
        return [f"spt_rule {rule} cannot be evaluated: {exc}"]
    if share > float(s["alpha"]) * (1 + RTOL):
        return [f"alpha_p_a + rho's alpha = {share} exceeds alpha = {s['alpha']}."]
    recorded = {float(b): v for b, v in ((s.get("threshold_rule") or {}).get("required") or {}).items()}
    wrong = [b for b, v in need.items() if b not in recorded or not _close(recorded[b], v)]
    return [f"threshold_rule thresholds at budgets {wrong} differ from the spt_rule's {need}."] if wrong else []


def _code_rule(s: dict, flags: dict[float, bool]) -> list[str]:
    """A certificate on GSmooth's lattice code noise (benchmark/certify/code_noise.py): its margin thresholds
    follow from the recorded code distances through ``code_noise.required_margin`` (the grid and the noise
    table paid); a record without ``code_noise`` (older entries) has no such distances and is not checked here.
    Only budgets the certificate claims carry a threshold to check: an abstained or uncertified budget claims
    nothing (GSmooth records no distance where it never bounded one)."""
    dist = s["code_distances"]
    try:
        need = {b: code_noise.required_margin(dist[repr(b)], s["code_noise"]) for b in flags if b > 0 and flags[b]}
    except (KeyError, TypeError, ValueError) as exc:
        return [f"code_distances {dist} with code_noise {s.get('code_noise')} cannot be evaluated: {exc!r}"]
    recorded = {float(b): v for b, v in ((s.get("threshold_rule") or {}).get("required") or {}).items()}
    wrong = [b for b, v in need.items() if b not in recorded or not _close(recorded[b], v)]
    return [f"threshold_rule thresholds at budgets {wrong} differ from code_noise.required_margin of the "
            f"code distances: {need}."] if wrong else []


def _threshold_rule(s: dict, p: float, pred: int, flags: dict[float, bool]) -> list[str]:
    rule = s.get("threshold_rule")
    if rule is None and isinstance(s.get("required_p_a"), dict):  # entries written before threshold_rule
        rule = {"statistic": "p_a_lower", "required": s["required_p_a"]}
    if not isinstance(rule, dict) or rule.get("statistic") not in STATISTICS \
            or not isinstance(rule.get("required"), dict):
        return ["a per-budget certificate (radius=None) needs stats['threshold_rule'] = {'statistic': "
                f"one of {list(STATISTICS)}, 'required': {{repr(budget): threshold}}}}: certified at b iff the "
                "statistic exceeds the threshold."]
    value = threshold_rule.value(rule, p)
    required = {float(b): v for b, v in rule["required"].items()}
    canonical = threshold_rule.record(rule["statistic"], {repr(b): v for b, v in required.items()})
    out = []
    for b, flag in sorted(flags.items()):
        if b == 0 or pred == ABSTAIN:
            expect, edge = pred != ABSTAIN and b == 0, False
        elif b not in required or not isinstance(required[b], (int, float)) or math.isnan(required[b]):
            out.append(f"threshold_rule has no threshold for budget {b:g}.")
            continue
        else:
            expect, edge = threshold_rule.certified(canonical, p, pred == ABSTAIN, b), abs(value - required[b]) <= EDGE
        if flag != expect and not edge:
            out.append(f"budget {b:g}: certified = {flag} but {rule['statistic']} = {value:.6g} vs threshold "
                       f"{required.get(b, 0.5)} says {expect}.")
    return out


def _sliced(s: dict, pred: int, radius: float | None, flags: dict[float, bool],
            protocol: Protocol | None) -> list[str]:
    missing = [key for key in SLICED_KEYS if key not in s]
    if missing:
        return [f"sliced statistics lack {missing}."]
    out = _protocol(s, protocol, ("n0", "alpha"))
    slices, rng, n_slice = int(s["slices"]), float(s["range"]), int(s["n_slice"])
    a_slice, chain = float(s["alpha_slice"]), s.get("alpha_split") == "fixed-sequence"
    if chain and a_slice > float(s["alpha"]) * (1 + RTOL):
        out.append(f"alpha_slice {a_slice} is above alpha {s['alpha']} (fixed-sequence split).")
    elif not chain and a_slice * (slices + 1) > float(s["alpha"]) * (1 + RTOL):
        out.append(f"alpha_slice {a_slice} is above the Bonferroni level alpha / (slices + 1) = "
                   f"{float(s['alpha']) / (slices + 1)}.")
    code = s.get("code_noise") if "code_noise" in s else None
    if code is None and "sigma" not in s:
        out.append("sliced statistics lack ['sigma'] (or a code_noise record).")
    if code is not None and not chain:
        out.append("a sliced code-noise certificate must use the fixed-sequence split.")
    sel_problems, sel, tied = _selection(s, None)
    out += sel_problems
    if out:
        return out
    one_sided = bool(s.get("one_sided", False))
    spans = s.get("spans") if s.get("layout") == "outputs" else None
    if spans is not None:  # one endpoint per interval of constant output (slice_rule: output intervals)
        bad = slice_rule.spans_problems(spans, rng)
        if bad or not one_sided or slices != len(spans) - 1:
            return bad or [f"output-interval spans need a one-sided range and slices = {len(spans) - 1}."]
    first, width, centre = slice_rule.layout(rng, slices, one_sided) if spans is None else (0.0, None, 0)
    wraps = s.get("wraps", [])
    bad = _wraps_problems(wraps, first, width, slices)
    if bad:
        return bad
    grid = _lattice_dim(s)
    ok: dict[int, bool] = {}
    p_lower: dict[int, float] = {}
    sequential.prime_tables([e["sequential"] for e in s["endpoints"]
                             if isinstance(e, dict) and isinstance(e.get("sequential"), dict)])
    for e in s["endpoints"]:
        if spans is not None:
            i = e.get("index")
            if not isinstance(i, int) or not 0 <= i < len(spans) or i in ok \
                    or not spans[i][0] <= float(e["theta"]) <= spans[i][1] or (i == 0 and float(e["theta"]) != 0.0):
                return [f"endpoint theta {e['theta']} (index {i}) is not a distinct endpoint inside its span "
                        "(the centre at theta = 0)."]
        else:
            i = round((float(e["theta"]) - first) / width) if width else 0
            if not _close(first + i * width, e["theta"]) or not 0 <= i <= (slices if width else 0) \
                    or e.get("index", i) != i or i in ok:
                return [f"endpoint theta {e['theta']} (index {e.get('index', i)}) is not a distinct point of the "
                        f"slice grid of [{first:g}, {rng:g}] in {slices} slices."]
        if "sequential" in e:
            pl, problems = _replay(e["sequential"], a_slice, n_slice, e.get("n"), protocol)
            if not problems and int(e["count"]) != int(e["sequential"]["counts_a"][-1]):
                problems = [f"count {e['count']} is not the last count of its sequential record."]
            if problems:
                return [f"endpoint {e['theta']}: {m}" for m in problems]
            what = "sequential bound"
        else:
            pl, what = lower_confidence_bound(int(e["count"]), n_slice, a_slice), "Clopper-Pearson bound"
        problem = _endpoint(e, pl, what, s, code, grid)
        if isinstance(problem, str):
            return [problem]
        ok[i], p_lower[i] = problem, pl
    if centre not in ok:
        return ["the centre endpoint (theta = 0) was not evaluated."]
    if chain:
        order = slice_rule.walk_order(slices + 1 if width or spans is not None else 1, one_sided)
        walked = ([e["index"] for e in s["endpoints"]] if spans is not None else
                  [round((float(e["theta"]) - first) / width) if width else 0 for e in s["endpoints"]])
        if walked != order[:len(walked)]:
            return [f"endpoints {walked} are not a prefix of the fixed-sequence order {order[:len(walked)]}."]
        passed = [ok[i] for i in walked]
        if not all(passed[:-1]) or (passed[-1] and len(walked) < len(order) and not _budget_stop(s)):
            return ["the fixed-sequence walk must stop exactly at its first failing endpoint (and only there), "
                    "or where its recorded draws reach its max_draws."]
    if (pred != ABSTAIN) != (p_lower[centre] > 0.5) or (pred != ABSTAIN and pred not in tied) \
            or not _close(p_lower[centre], s["p_a_lower"]):
        return [f"prediction {pred} / p_a_lower {s['p_a_lower']} do not follow the centre endpoint "
                f"(p_a_lower {p_lower[centre]}) and the selection counts {sel}."]
    coverage = (slice_rule.span_coverage(ok, spans, rng) if spans is not None
                else slice_rule.coverage(ok, centre, width, rng, one_sided, wraps))
    if not _close(coverage, s["coverage"]) or (radius is not None
                                               and not _close(coverage if pred != ABSTAIN else 0.0, radius)):
        return [f"coverage {s['coverage']} / radius {radius} differ from the coverage {coverage} of the "
                "contiguous run of certified endpoints around 0."]
    wrong = [b for b, v in flags.items() if v != (pred != ABSTAIN and (b == 0 or coverage >= b))
             and abs(coverage - b) > EDGE]
    return [f"certified flags at budgets {wrong} disagree with the coverage {coverage}."] if wrong else []


def _wraps_problems(wraps, first: float, width: float | None, slices: int) -> list[str]:
    """What keeps ``wraps`` from being cells ``[lo, hi, [i, ...]]`` inside the uniform slice grid's range, each
    naming distinct endpoints of the grid (slice_rule.coverage). Their bounds are the issuer's proof (tested, not
    replayed); the audit checks that the coverage it recomputes honours them."""
    if not wraps:
        return []
    if not isinstance(wraps, list) or not width:
        return ["wrap cells need a list on a uniform slice grid."]
    for w in wraps:
        try:
            lo, hi, needs = float(w[0]), float(w[1]), list(w[2])
        except (TypeError, ValueError, IndexError):
            return [f"wrap cell {w!r} is not [lo, hi, [endpoint, ...]]."]
        if not needs or len(set(needs)) != len(needs) \
                or not all(isinstance(e, int) and 0 <= e <= slices for e in needs) \
                or not first - EDGE <= lo <= hi <= first + slices * width + EDGE:
            return [f"wrap cell {w!r} is not a cell of the slice grid's range naming distinct endpoints of it."]
    return []


def _budget_stop(s: dict) -> bool:
    """Whether a walk that stops after a passed endpoint stopped on its draw budget: ``max_draws`` recorded and
    reached by the recorded endpoints' draws (baselines/gsmooth/sliced.py). Dropping later hypotheses of a
    fixed-sequence chain keeps its error bound; the check only makes sure the stop is the stated one."""
    if s.get("walk_stop") != "max_draws":
        return False
    try:
        return slice_rule.draws_reached(s["endpoints"], s.get("max_draws"))
    except (KeyError, TypeError, ValueError):
        return False


def _endpoint(e: dict, pl: float, what: str, s: dict, code: dict | None, grid: int | None) -> bool | str:
    """Whether endpoint ``e`` (p_A lower ``pl`` recomputed) is certified, or what in its record is wrong: the
    pixel rule (radius sigma Phi^-1(p) against the interpolation bound, TSS) or the code rule (margin against
    ``code_noise.required_margin`` of the code-shift bound, GSmooth)."""
    if code is None:
        r = slice_rule.endpoint_radius(pl, float(s["sigma"]))
        if not (_close(pl, e["p_a_lower"]) and _close(r, e["radius"])):
            return (f"endpoint {e['theta']}: p_a_lower {e['p_a_lower']} / radius {e['radius']} are not the "
                    f"{what} {pl} of its count and sigma * Phi^-1 of it ({r}).")
        return slice_rule.endpoint_certified(pl, float(s["sigma"]), float(e["bound"]), grid)
    try:
        bound = float(e["bound"])
        need = code_noise.required_margin(bound, code)
    except (KeyError, TypeError, ValueError) as exc:
        return f"endpoint {e.get('theta')}: bound {e.get('bound')} with code_noise {code} cannot be evaluated: {exc!r}"
    if not (bound >= 0 and _close(pl, e["p_a_lower"]) and _close(need, e.get("required", math.nan))):
        return (f"endpoint {e['theta']}: p_a_lower {e['p_a_lower']} / required {e.get('required')} are not the "
                f"{what} {pl} of its count and code_noise.required_margin of its bound {bound} ({need}).")
    return slice_rule.code_endpoint_certified(pl, bound, code)


def _lattice_dim(stats: dict) -> int | None:
    """The coordinates of a slice certificate's lattice pixel noise (``slice_rule``'s ``grid_dim``), or None for
    a record made before it (version 1: float32 noise, replayed with its exact-arithmetic rule)."""
    noise = stats.get("pixel_noise")
    if not isinstance(noise, dict):
        return None
    return int(noise["d"])
