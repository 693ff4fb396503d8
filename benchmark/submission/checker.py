"""The submission checker: rules a defense must pass before it gets a leaderboard entry.

Each rule adds findings (``error`` rejects the submission, ``warning`` is flagged in the entry and
becomes an error under ``--strict``). The pre-run rules exercise the defense on a few images of
one task with a small Monte-Carlo protocol; the post-run rules read the finished run.

Rules (ids appear in the JSON report):
  api            the reference imports, subclasses Defense, has a name, implements its methods
  prepare        prepare() finishes on the first supported task
  outputs        predict/certify/noisy_logits have the documented types and shapes, no NaN/inf
  determinism    the same generator seed gives the same predictions and certificates
  statistics     certificates carry raw statistics that reproduce them (Clopper-Pearson bound, or the
                 sequential record replayed; abstention rule, radius from ``radius_rule``, certified
                 flags from the radius; benchmark/certify/audit.py)
  randomized     predictions that change with the seed but come without a certificate (warning)
  run            the suite run finished (a defense that raises or returns NaN mid-run fails here)
  consistency    no certified example was broken by the attack with a confident wrong label;
                 certified > empirical accuracy caused only by PREDICT abstentions is a warning
  abstain        clean abstain rate above 30% (warning)
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import torch

from benchmark.certify.certificate import ABSTAIN, Certificate
from benchmark.certify.radii import RADIUS_FUNCTIONS
from benchmark.certify.audit import certify_problems, sliced_problems
from benchmark.errors import BenchError

CHECK_IMAGES = 4  # images used by the pre-run checks
RADIUS_RTOL = 1e-6


@dataclass
class Finding:
    rule: str
    level: str  # "error" | "warning"
    message: str

    def to_json(self) -> dict:
        return {"rule": self.rule, "level": self.level, "message": self.message}


@dataclass
class CheckReport:
    """All findings for one submission; ``passed`` honours ``strict``."""

    defense: str
    strict: bool = False
    findings: list[Finding] = field(default_factory=list)
    rules_run: list[str] = field(default_factory=list)
    run_folder: str | None = None
    entries: list[str] = field(default_factory=list)
    randomized: bool = False  # predictions change with the seed (set by the `randomized` rule)

    def add(self, rule: str, level: str, message: str) -> None:
        self.findings.append(Finding(rule, level, message))

    def ran(self, rule: str) -> None:
        if rule not in self.rules_run:
            self.rules_run.append(rule)

    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.level == "error" or (self.strict and f.level == "warning")]

    @property
    def passed(self) -> bool:
        return not self.errors()

    def warnings(self) -> list[str]:
        return [f"{f.rule}: {f.message}" for f in self.findings if f.level == "warning"]

    def to_json(self) -> dict:
        return {"defense": self.defense, "passed": self.passed, "strict": self.strict, "rules_run": self.rules_run,
                "findings": [f.to_json() for f in self.findings], "randomized": self.randomized,
                "run_folder": self.run_folder,
                "entries": self.entries}

    def render(self) -> str:
        lines = [f"submission check of '{self.defense}': {'PASSED' if self.passed else 'FAILED'}"
                 f"{' (strict)' if self.strict else ''}"]
        for f in self.findings:
            lines.append(f"  [{f.level}] {f.rule}: {f.message}")
        if not self.findings:
            lines.append(f"  all rules passed: {', '.join(self.rules_run)}")
        return "\n".join(lines)


# ----------------------------------------------------------------------------------- pre-run rules
def check_api(ref: str, report: CheckReport):
    """Resolve ``ref`` and instantiate it with its defaults; returns the class or None."""
    from benchmark.defense import Defense
    from benchmark.defenses import get_defense_class

    report.ran("api")
    try:
        cls = get_defense_class(ref)
    except BenchError as exc:
        report.add("api", "error", str(exc))
        return None
    if not cls.name or not re.fullmatch(r"[A-Za-z0-9_.\-]+", cls.name):
        report.add("api", "error", f"class attribute `name` must be a non-empty identifier (letters, digits, _ . -), "
                                   f"got {cls.name!r}.")
    if cls.certified and cls.certify is Defense.certify:
        report.add("api", "error", "certified = True but certify() is not implemented.")
    if not cls.variants or any(not isinstance(v, str) for v in cls.variants):
        report.add("api", "error", "`variants` must be a non-empty tuple of strings ('' = the headline certificate).")
    try:
        cls(**{})
    except Exception as exc:  # noqa: BLE001 - any failure here is the submission's
        report.add("api", "error", f"cannot instantiate with default config: {type(exc).__name__}: {exc}")
        return None
    return None if report.errors() else cls


def _finite(t: torch.Tensor) -> bool:
    return bool(torch.isfinite(t).all())


def check_outputs(defense, x: torch.Tensor, transformation, budgets: list[float], num_classes: int,
                  seed: int, report: CheckReport) -> None:
    """predict / certify / noisy_logits: types, shapes, ranges, finiteness, determinism, statistics."""
    report.ran("outputs")
    report.ran("determinism")
    report.ran("randomized")

    def gen(s=seed):
        return torch.Generator().manual_seed(s)

    def call(what, fn):
        try:
            return fn(), True
        except Exception as exc:  # noqa: BLE001
            report.add("outputs", "error", f"{what} raised {type(exc).__name__}: {exc}")
            return None, False

    pred, ok = call("predict()", lambda: defense.predict(x, transformation, gen()))
    if ok:
        if not torch.is_tensor(pred) or pred.shape != (len(x),) or pred.dtype != torch.int64:
            got = (tuple(pred.shape), str(pred.dtype)) if torch.is_tensor(pred) else type(pred).__name__
            report.add("outputs", "error", f"predict() must return an int64 tensor of shape ({len(x)},), got {got}.")
        elif bool(((pred < ABSTAIN) | (pred >= num_classes)).any()):
            report.add("outputs", "error", f"predict() returned labels outside [-1, {num_classes}): {pred.tolist()}.")
        else:
            again, _ = call("predict()", lambda: defense.predict(x, transformation, gen()))
            if again is not None and not torch.equal(again, pred):
                report.add("determinism", "error", "predict() with the same generator seed gave different labels "
                                                   f"({pred.tolist()} vs {again.tolist()}); draw randomness only from "
                                                   "the generator argument.")
            others = [call("predict()", lambda s=s: defense.predict(x, transformation, gen(s)))[0]
                      for s in range(seed + 1, seed + 4)]
            if any(o is not None and not torch.equal(o, pred) for o in others) and not type(defense).certified:
                report.add("randomized", "warning", "predictions change with the seed but the defense gives no "
                                                    "certificate: randomized outputs need an adaptive (EoT) attack to "
                                                    "be evaluated fairly.")
                report.randomized = True

    logits, ok = call("noisy_logits()", lambda: defense.noisy_logits(x, transformation, gen()))
    if ok and logits is not None:
        if not torch.is_tensor(logits) or logits.shape != (len(x), num_classes):
            got = tuple(logits.shape) if torch.is_tensor(logits) else type(logits).__name__
            report.add("outputs", "error", f"noisy_logits() must return [{len(x)}, {num_classes}] logits, got {got}.")
        elif not _finite(logits.detach()):
            report.add("outputs", "error", "noisy_logits() returned NaN or inf.")

    if type(defense).certified:
        certs, ok = call("certify()", lambda: defense.certify(x[:1], transformation, budgets, gen()))
        if ok:
            if _check_certificate_list(defense, certs, budgets, num_classes, report):
                again, _ = call("certify()", lambda: defense.certify(x[:1], transformation, budgets, gen()))
                if again is not None and [_comparable(c) for c in again] != [_comparable(c) for c in certs]:
                    report.add("determinism", "error", "certify() with the same generator seed gave different "
                                                       "certificates; draw randomness only from the generator.")


def _comparable(c: Certificate) -> dict:
    """A certificate without its wall-clock timings (stats keys named ``seconds``), for the determinism rule."""
    def strip(v):
        if isinstance(v, dict):
            return {k: strip(w) for k, w in v.items() if k != "seconds"}
        return [strip(w) for w in v] if isinstance(v, list) else v
    return strip(c.to_json())


def _check_certificate_list(defense, certs, budgets: list[float], num_classes: int, report: CheckReport) -> bool:
    n_var = len(defense.variants)
    if not isinstance(certs, list) or len(certs) != n_var or not all(isinstance(c, Certificate) for c in certs):
        report.add("outputs", "error", f"certify() must return a list of {n_var} Certificate objects (one per "
                                       f"variant {list(defense.variants)}), got {certs!r:.200}.")
        return False
    ok = True
    for c in certs:
        where = f"certificate '{c.variant or 'headline'}'"
        if not isinstance(c.prediction, int) or not ABSTAIN <= c.prediction < num_classes:
            report.add("outputs", "error", f"{where}: prediction must be an int in [-1, {num_classes}), "
                                           f"got {c.prediction!r}.")
            ok = False
        if c.radius is not None and (not isinstance(c.radius, (int, float)) or math.isnan(c.radius) or c.radius < 0):
            report.add("outputs", "error", f"{where}: radius must be None or a number >= 0, got {c.radius!r}.")
            ok = False
        if {float(b) for b in c.certified} != {float(b) for b in budgets}:
            report.add("outputs", "error", f"{where}: `certified` must have one entry per budget {budgets}, got "
                                           f"{sorted(c.certified)}.")
            ok = False
        ok &= check_statistics(c, report)
    return ok


def check_statistics(c: Certificate, report: CheckReport) -> bool:
    """The certificate's raw statistics reproduce it (see the module docstring)."""
    report.ran("statistics")
    where = f"certificate '{c.variant or 'headline'}'"
    s = c.stats or {}
    before = len(report.findings)
    if c.prediction == ABSTAIN and any(c.certified.values()):
        report.add("statistics", "error", f"{where}: abstained but certifies some budget.")
    mc = all(k in s for k in ("n", "count_a", "alpha", "p_a_lower"))
    sliced = all(k in s for k in ("endpoints", "n_slice", "alpha_slice"))
    if not (mc or sliced) and s.get("deterministic") is not True:
        report.add("statistics", "error", f"{where}: no raw statistics. Monte-Carlo certificates must record n, "
                                          "count_a, alpha and p_a_lower (CertifyResult.stats() does), or per-endpoint "
                                          "counts (endpoints, n_slice, alpha_slice); deterministic ones must set "
                                          "stats['deterministic'] = True.")
        return False
    problems = (sliced_problems(s, c.prediction) if sliced else []) + (certify_problems(s, c.prediction) if mc else [])
    for problem in problems:
        report.add("statistics", "error", f"{where}: {problem}")
    rule = s.get("radius_rule")
    if rule is not None and c.radius is not None and mc:
        fn = RADIUS_FUNCTIONS.get(rule.get("distribution"))
        if fn is None:
            report.add("statistics", "error", f"{where}: radius_rule distribution {rule.get('distribution')!r} "
                                              f"is not one of {sorted(RADIUS_FUNCTIONS)}.")
        elif c.prediction != ABSTAIN:
            r = max(fn(float(s["p_a_lower"]), float(rule["scale"])), 0.0)
            if not math.isclose(r, float(c.radius), rel_tol=RADIUS_RTOL, abs_tol=1e-12):
                report.add("statistics", "error", f"{where}: radius {c.radius} differs from {r} recomputed by "
                                                  f"radius_rule {rule} from p_a_lower.")
    if c.radius is not None:
        # open (smoothing: radius > b) or closed (verified intervals: b <= radius) regions are both accepted:
        # certified => b <= radius, and b < radius => certified
        wrong = [b for b, v in c.certified.items()
                 if (v and not float(b) <= c.radius) or (not v and float(b) < c.radius and c.prediction != ABSTAIN)]
        if wrong:
            report.add("statistics", "error", f"{where}: certified flags at budgets {wrong} disagree with the "
                                              f"radius {c.radius} (certified at b needs b <= radius, and every b < "
                                              "radius must be certified).")
    return len(report.findings) == before


# ---------------------------------------------------------------------------------- post-run rules
def check_run(run, defense_ref: str, report: CheckReport) -> None:
    """Consistency of certified vs empirical accuracy and abstain rates in a finished run."""
    from benchmark.leaderboard.entry import HIGH_ABSTAIN, compute_results
    from benchmark.report import consistency_violations

    report.ran("consistency")
    report.ran("abstain")
    tasks, results, violations = compute_results(run, defense_ref)
    for (ds, tname, label, b), n in sorted(violations.items()):
        report.add("consistency", "error", f"{ds}/{tname} {label} budget {b:g}: {n} example(s) certified but broken "
                                           "by the attack with a confident wrong label (unsound certificate).")
    # surrogate-only certificates broken by the attack: findings of the survival table, not errors
    broken = {**violations, **consistency_violations(tasks, run.task_info, run.rows, surrogate_only=True)}
    for r in results:
        cert, emp = r["certified_accuracy"], r["empirical_accuracy"]
        if cert is not None and emp is not None and cert > emp + 1e-12:
            explained = any(k[1:] == (r["transformation"], r["label"], r["budget"]) for k in broken)
            if not explained:
                report.add("consistency", "warning", f"{r['transformation']} {r['label']} budget {r['budget']:g}: "
                                                     f"certified {cert:.3f} > empirical {emp:.3f} only through "
                                                     "PREDICT abstentions on certified examples; raise n_predict.")
    for r in results:
        if r["budget"] == 0 and r["abstain_rate"] > HIGH_ABSTAIN:
            report.add("abstain", "warning", f"{r['transformation']} {r['label']}: abstains on "
                                             f"{100 * r['abstain_rate']:.0f}% of clean examples.")
