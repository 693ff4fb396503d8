"""The submission checker: rules a defense must pass before it gets a leaderboard entry.

Each rule adds findings (``error`` rejects the submission, ``warning`` is flagged in the entry and
becomes an error under ``--strict``). The pre-run rules exercise the defense on a few images of
one task with a small Monte-Carlo protocol; the post-run rules read the finished run.

Rules (ids appear in the JSON report):
  api            the reference imports, subclasses Defense, has a name, implements its methods
  prepare        prepare() finishes on the first supported task
  outputs        predict/certify/noisy_logits have the documented types and shapes, no NaN/inf
  determinism    randomness only from the generator passed in: the same seed gives identical labels,
                 noisy logits and certificate counts even with the global generators reseeded
                 differently; another seed changes a smoothed defense's counts or logits; the message
                 names the generator drawn from (torch/numpy global, Python random, clock-seeded); the
                 probes are the check images and blends of them, those whose counts split most first
  independence   a smoothed defense's counts on its most split probe input, across generator seeds, are not
                 over-dispersed against the binomial (samples are independent draws, not repeated noise)
  statistics     every certificate (pre-run and of every row of the run) is recomputed from its raw
                 statistics (``benchmark.audit.statistics``): Clopper-Pearson bound or the sequential
                 record replayed (``certify: sequential``), abstain iff p_A <= 1/2, n0 / n / alpha (and the
                 certify rule) of the suite's protocol, radius from ``radius_rule`` or flags from
                 ``threshold_rule``, sliced endpoints (Bonferroni or fixed-sequence walk); no infinite radius;
                 under ``predict: sequential`` every row's PREDICT records replayed against its clean
                 prediction and attack decisions (``benchmark.audit.predict_replay``)
  randomized     predictions that change with the seed but come without a certificate (warning)
  test_split     defense code never loads the test split (datasets refuse it, the sandbox refuses their files),
                 and its accuracy does not collapse on canaries (the evaluated images under small secret noise)
                 and it does not answer lookup traps (training images whose nearest test image has another
                 label) with that test image's label
  sandbox        defense code (its module, prepare, predict, certify, noisy_logits) opens no socket or process
                 and writes only in its run's artifacts folder and the model cache (``benchmark.infra.sandbox``);
                 the leaderboard folders hash the same before and after the submission
  run            the suite run finished (a defense that raises or returns NaN mid-run fails here)
  consistency    no certified example was broken by the attack with a confident wrong label; where certified >
                 empirical accuracy only through PREDICT abstentions, PREDICT is re-run there with 10,000 samples
                 before acceptance (``benchmark.audit.abstentions``): another class is an error, still undecided a
                 warning
  abstain        clean abstain rate above 30% (warning); 90% or more (nearly every example) is an error
  unverified     deterministic certificates from outside code: on integer translation every shift in each
                 certified budget is evaluated (a counterexample is an error); elsewhere they are listed as
                 unverified (warning) and not ranked (``benchmark.audit.proofs``); so are smoothing
                 certificates of outside code that no harness mechanism (parameter_smoothing,
                 pixel_smoothing) made and the test image re-derives (``benchmark.audit.mechanism``); a
                 parameter_smoothing record whose noise the test image contradicts (route, grid, inflated
                 reach) is an error
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import torch

from benchmark.audit.predict_replay import predict_problems
from benchmark.audit.statistics import Protocol, certificate_problems
from benchmark.certify.certificate import ABSTAIN, Certificate
from benchmark.certify.smoothing import SmoothingParams
from benchmark.datasets.base import TestSplitAccess
from benchmark.errors import BenchError

CHECK_IMAGES = 4  # images used by the pre-run checks
MAX_LISTED = 5  # findings listed per rule for the run's rows (the rest are counted)
#: a defense is flagged when it abstains on more than this fraction of clean examples
HIGH_ABSTAIN = 0.3
MAX_ABSTAIN = 0.9  # clean abstain rate from which a submission is rejected (above HIGH_ABSTAIN: a warning)


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
    canary: dict | None = None  # real vs canary accuracy (the `test_split` rule)

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
                "canary": self.canary,
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
                  seed: int, report: CheckReport, protocol: Protocol | None = None) -> None:
    """predict / certify / noisy_logits: types, shapes, ranges, finiteness, statistics; then determinism."""
    from benchmark.audit.noise import check_noise

    report.ran("outputs")

    def gen():
        return torch.Generator().manual_seed(seed)

    def call(what, fn):
        try:
            return fn(), True
        except TestSplitAccess as exc:
            report.add("test_split", "error", f"{what}: {exc}")
            return None, False
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
            _check_certificate_list(defense, certs, budgets, num_classes, report, protocol)
    if not report.errors():
        try:
            check_noise(defense, x, transformation, budgets, seed, report)
        except Exception as exc:  # noqa: BLE001 - a defense that raises only on a later call
            report.add("outputs", "error", f"a repeated call raised {type(exc).__name__}: {exc}")


def _check_certificate_list(defense, certs, budgets: list[float], num_classes: int, report: CheckReport,
                            protocol: Protocol | None = None) -> bool:
    n_var = len(defense.variants)
    if not isinstance(certs, list) or len(certs) != n_var or not all(isinstance(c, Certificate) for c in certs):
        report.add("outputs", "error", f"certify() must return a list of {n_var} Certificate objects (one per "
                                       f"variant {list(defense.variants)}), got {certs!r:.200}.")
        return False
    ok = True
    for c in certs:
        if not isinstance(c.prediction, int) or not ABSTAIN <= c.prediction < num_classes:
            report.add("outputs", "error", f"certificate '{c.variant or 'headline'}': prediction must be an int in "
                                           f"[-1, {num_classes}), got {c.prediction!r}.")
            ok = False
            continue
        ok &= check_statistics(c.to_json(), budgets, num_classes, protocol, report)
    return ok


def check_statistics(cert: dict, budgets: list[float], num_classes: int, protocol: Protocol | None,
                     report: CheckReport, where: str = "") -> bool:
    """The certificate's raw statistics reproduce it (``benchmark.audit.statistics``)."""
    report.ran("statistics")
    problems = certificate_problems(cert, budgets, num_classes, protocol)
    for m in problems:
        report.add("statistics", "error", f"{where}certificate '{cert.get('variant') or 'headline'}': {m}")
    return not problems


# ---------------------------------------------------------------------------------- post-run rules
def check_run(run, defense_ref: str, report: CheckReport) -> None:
    """Consistency of certified vs empirical accuracy and abstain rates in a finished run."""
    from benchmark.run.results import compute_results

    report.ran("consistency")
    report.ran("abstain")
    _, results, violations = compute_results(run, defense_ref)
    check_rows(run, defense_ref, report)
    for (ds, tname, label, b), n in sorted(violations.items()):
        report.add("consistency", "error", f"{ds}/{tname} {label} budget {b:g}: {n} example(s) certified but broken "
                                           "by the attack with a confident wrong label (unsound certificate).")
    # certified > empirical only through abstentions: decided by ``check_abstentions`` (re-run PREDICT), not here
    for r in results:
        if r["budget"] == 0 and r["abstain_rate"] > HIGH_ABSTAIN:
            reject = r["abstain_rate"] >= MAX_ABSTAIN
            report.add("abstain", "error" if reject else "warning",
                       f"{r['transformation']} {r['label']}: abstains on {100 * r['abstain_rate']:.0f}% of clean "
                       "examples" + (f" (at least {100 * MAX_ABSTAIN:.0f}%: a defense that (nearly) always abstains "
                                     "has no accuracy to rank and makes every certificate vacuous)." if reject else "."))


def row_problems(run, defense_ref: str) -> list[str]:
    """Every certificate of every row of ``defense_ref`` in ``run`` recomputed from its statistics against
    its task's protocol and budgets (``benchmark.audit.statistics``); one line per problem."""
    from benchmark.datasets import get_dataset

    tasks = {t.hash: t for t in run.tasks if t.defense == defense_ref}
    classes: dict[str, int] = {}
    out = []
    for r in sorted((r for r in run.rows if r["task"] in tasks), key=lambda r: (r["task"], r["example"])):
        t = tasks[r["task"]]
        if t.dataset not in classes:
            classes[t.dataset] = get_dataset(t.dataset).spec.num_classes
        protocol = Protocol.of(SmoothingParams.from_profile(t.profile))
        for c in r.get("certificates", []):
            for m in certificate_problems(c, list(t.budgets), classes[t.dataset], protocol):
                out.append(f"{t.transformation} example {r['example']} certificate "
                           f"'{c.get('variant') or 'headline'}': {m}")
        out += [f"{t.transformation} example {r['example']}: {m}"
                for m in predict_problems(r, SmoothingParams.from_profile(t.profile))]
    return out


def check_rows(run, defense_ref: str, report: CheckReport) -> None:
    """The ``statistics`` rule on the whole run: any certificate its statistics do not reproduce rejects."""
    report.ran("statistics")
    problems = row_problems(run, defense_ref)
    for m in problems[:MAX_LISTED]:
        report.add("statistics", "error", f"run rows: {m}")
    if len(problems) > MAX_LISTED:
        report.add("statistics", "error", f"run rows: {len(problems) - MAX_LISTED} more certificate(s) that their "
                                          "statistics do not reproduce.")
