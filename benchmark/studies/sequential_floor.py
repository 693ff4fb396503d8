"""How few samples can any valid sequential CERTIFY draw? Fixed n vs the ``cp-union`` rule vs Wald's floor.

    python -m benchmark.studies.sequential_floor runs/default-...              # a run folder (rows.jsonl)
    python -m benchmark.studies.sequential_floor leaderboards/semantic/digits  # a leaderboard dataset folder
                                         [--trials 2000] [--seed 0] [--out FILE.md] [--json FILE]

From the recorded single-bound Monte-Carlo certificates (TSS parameter smoothing, GSmooth, SPT, any
certificate with a ``radius_rule`` or ``threshold_rule``; slice certificates get their own table, below), per
example:
the selected class c = argmax(counts_selection), p_hat = counts_estimation[c] / n, and the decision
thresholds tau_b on p_A of its budgets (budget 0 and every threshold below it: 1/2, the abstain decision).
Treating p_hat as the true p_A, three rules are compared:

* fixed n (Cohen et al.): n0 + n samples; P(certified at b) = P(CP_lower(S, n, alpha) > tau_b) for
  S ~ Bin(n, p_hat), exactly (``fixed_certify_probability``);
* the repo's anytime-valid ``cp-union`` rule (benchmark/certify/sequential.py) with the source's sequential
  settings, cap n and the same alpha: ``--trials`` simulated Bernoulli(p_hat) streams (seeded);
* Wald's floor (``wald_floor``): the fewest samples *any* valid sequential test needs in expectation to
  match the fixed rule's certification probability at every budget (``example_floor``).

Every column counts the n0 selection samples in full (only the estimation step is bounded). The floor is
a bound at p_A = p_hat, not at the unknown true p_A; the sequential rule can fall below it only where it
certifies less often than fixed n (e.g. a threshold above the best bound its final look can reach), which
the per-budget difference column shows.

Per (transformation, certificate label): samples per example and the ratios fixed / floor and
fixed / sequential; per budget: expected certified accuracy under the fixed and the sequential rule, their
difference, and the standard deviation of the difference between two independent fixed runs (the
Monte-Carlo noise any comparison of two real runs carries). Surrogate-only certificates
(``certifies == "surrogate transformation"``, GSmooth's paper variant: the same samples as the sound
certificate) are reported but left out of the summary means.

TSS slice certificates of a fixed-rule source (rotation, scaling) get a table of their own
(``sliced_floor``): the fixed walk's samples against the floor of any valid walk over the same endpoints.
"""
from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
from scipy.special import xlogy
from scipy.stats import binom, norm

from benchmark.certify import sequential as sq
from benchmark.certify.radii import RADIUS_FUNCTIONS, radius_threshold
from benchmark.errors import BenchError
from benchmark.reports import rows_file

#: stats every usable certificate has (single Clopper-Pearson bound on the selected class's p_A)
REQUIRED = ("count_a", "n", "n0", "alpha", "counts_selection", "counts_estimation")
#: a threshold at or above this (GSmooth's unproven budgets, code_noise.NEVER = 1e9) can never be exceeded: tau = 1
NEVER = 1e8
SURROGATE = "surrogate transformation"


# ------------------------------------------------------------------ statistics
def kl_bernoulli(p: float, q: float) -> float:
    """KL(Bernoulli(p) || Bernoulli(q)) in nats (inf when q is 0 or 1 and p differs)."""
    if not 0 < q < 1:
        return 0.0 if p == q else math.inf
    return float(xlogy(p, p / q) + xlogy(1 - p, (1 - p) / (1 - q)))


def wald_floor(p: float, tau: float, alpha: float, power: float) -> float:
    """Wald's lower bound on E_p[N] of any sequential level-``alpha`` test of H0: p_A <= ``tau`` that rejects
    (certifies) with probability ``power`` when p_A = ``p`` > tau.

    Derivation (Wald 1945, "Sequential tests of statistical hypotheses", Ann. Math. Statist. 16: the lower
    bound on the average sample number; in this general form Kaufmann, Cappe & Garivier 2016, JMLR 17,
    Lemma 1). Let N be the (a.s. finite, here capped) stopping time, A in F_N the event "certified",
    P_tau(A) <= alpha and P_p(A) = 1 - beta >= alpha, and Lambda_N the log-likelihood ratio of Bernoulli(p)
    against Bernoulli(tau) over the N samples. Wald's identity gives E_p[Lambda_N] = E_p[N] KL(p || tau);
    the data-processing inequality on the partition {A, not A} gives E_p[Lambda_N] >= d(P_p(A), P_tau(A))
    >= d(1 - beta, alpha) (the binary KL d(x, y) falls in y on [0, x]), i.e.

        E_p[N] >= W / KL(p || tau),  W = (1-beta) ln((1-beta)/alpha) + beta ln(beta/(1-alpha)).

    0 when ``power`` <= ``alpha`` (a test may then ignore the data); inf when p <= tau (no valid test has
    power above alpha there).
    """
    if not 0 < alpha < 1 or not 0 <= power <= 1:
        raise ValueError(f"need alpha in (0,1) and power in [0,1], got alpha={alpha}, power={power}")
    if power <= alpha:
        return 0.0
    if p <= tau:
        return math.inf
    beta = 1.0 - power
    w = float(xlogy(power, power / alpha) + xlogy(beta, beta / (1 - alpha)))
    return max(w, 0.0) / kl_bernoulli(p, tau)


#: smallest count from which fixed-n Clopper-Pearson certifies tau (the rule's own function)
critical_count = sq.critical_count


def fixed_certify_probability(p: float, n: int, alpha: float, tau: float | np.ndarray) -> float | np.ndarray:
    """P(CP_lower(S, n, alpha) > tau) for S ~ Bin(n, p): the fixed rule's chance to certify, exactly.

    A float for a scalar ``tau``, an array of the same shape for an array.
    """
    k = critical_count(n, alpha, tau)
    out = np.where(k > n, 0.0, binom.sf(k - 1, n, p))
    return float(out) if np.ndim(tau) == 0 else out


def example_floor(p: float, taus: Sequence[float], alpha: float, power: Sequence[float], cap: int) -> float:
    """Wald's floor on the expected *estimation* samples of one example: min(cap, max_j wald_floor(...)) over
    the thresholds with p > tau_j and power_j > 0 (0 when none qualifies).

    It bounds our multi-threshold rule: the rule stops once, at N, and its decision "certified at tau_j"
    is for every j a level-alpha test of H0: p_A <= tau_j (the rule's validity) with the power it has at p.
    So N must make the hardest of these decisions: E[N] >= max_j of the per-threshold floors, here at the
    power ``power_j`` (the fixed rule's: a sequential rule that certifies no less often than fixed n).
    A rule that certifies less often may draw fewer; the floor assumes ``p`` is the true p_A.
    """
    vals = [wald_floor(p, t, alpha, float(w)) for t, w in zip(taus, power) if p > t and w > 0]
    return float(min(cap, max(vals))) if vals else 0.0


def sliced_floor(stats: dict) -> tuple[float, float] | None:
    """(fixed samples, Wald floor) of one fixed-rule slice certificate (TSS rotation/scaling), both with n0.

    The fixed rule tests each walked endpoint with n_slice samples at alpha_slice; endpoint i passes iff
    CP_lower > tau_i = Phi(M_i / sigma) (its recorded bound M_i). Any valid fixed-sequence walk over the same
    endpoints (the sequential rule's, each endpoint at the full alpha) must certify every endpoint the fixed
    walk passed to claim the same coverage; each is a level-alpha test of H0: p_i <= tau_i, so by Wald's bound
    it costs at least ``wald_floor(p_hat_i, tau_i, alpha, power_i)`` samples in expectation, power_i being
    the fixed rule's own chance to pass it at p_hat_i = count_i / n_slice. Failing endpoints are counted 0
    (a lower bound). None for a certificate that is not a fixed-rule slice walk."""
    if not all(k in stats for k in ("endpoints", "n_slice", "alpha_slice", "alpha", "sigma", "n0")) \
            or not stats["endpoints"] or stats.get("alpha_split") == "fixed-sequence":
        return None
    n, a_slice, alpha = int(stats["n_slice"]), float(stats["alpha_slice"]), float(stats["alpha"])
    sigma, ends = float(stats["sigma"]), stats["endpoints"]
    floor = 0.0
    for e in ends:
        tau, p = max(0.5, float(norm.cdf(float(e["bound"]) / sigma))), int(e["count"]) / n
        if e["p_a_lower"] > tau:  # passed (radius > bound iff p_A_lower > Phi(bound / sigma))
            power = float(fixed_certify_probability(p, n, a_slice, tau))
            floor += min(n, wald_floor(p, tau, alpha, power))
    n0 = int(stats["n0"])
    return float(n0 + len(ends) * n), float(n0 + floor)


def analyse_sliced(rows: Iterable[dict]) -> list[dict]:
    """Per (dataset, transformation, label) of fixed-rule slice certificates: mean fixed samples and Wald floor
    per example, over all examples and over those certified at the largest budget."""
    groups: dict[tuple, list] = defaultdict(list)
    for row in rows:
        for cert in row.get("certificates") or []:
            got = sliced_floor(cert.get("stats") or {})
            if got is None:
                continue
            top = repr(max(float(b) for b in cert["certified"]))
            groups[(row.get("dataset", ""), row["transformation"], certificate_label(row, cert))].append(
                (*got, bool(cert.get("correct")) and bool(cert["certified"][top])))
    out = []
    for (ds, tname, label), ex in sorted(groups.items()):
        a = np.asarray(ex, dtype=float)
        top = a[a[:, 2] > 0]
        out.append({"dataset": ds, "transformation": tname, "label": label, "examples": len(ex),
                    "samples_fixed": float(a[:, 0].mean()), "samples_floor": float(a[:, 1].mean()),
                    "certified_top": len(top),
                    "samples_fixed_top": float(top[:, 0].mean()) if len(top) else float("nan"),
                    "samples_floor_top": float(top[:, 1].mean()) if len(top) else float("nan")})
    return out


def render_sliced(records: list[dict]) -> str:
    """Markdown: fixed samples and the Wald floor of slice certification per example."""
    head = ["transformation", "certificate", "examples", "fixed samples/ex", "Wald floor", "fixed/floor",
            "certified at the largest budget", "fixed samples/ex", "Wald floor", "fixed/floor"]
    lines = [_md(head), _md(["---"] * len(head))]
    for r in records:
        lines.append(_md([r["transformation"], r["label"], r["examples"], f"{r['samples_fixed']:.0f}",
                          f"{r['samples_floor']:.0f}", _ratio(r["samples_fixed"], r["samples_floor"]),
                          r["certified_top"], f"{r['samples_fixed_top']:.0f}", f"{r['samples_floor_top']:.0f}",
                          _ratio(r["samples_fixed_top"], r["samples_floor_top"])]))
    return "\n".join(lines)


# ------------------------------------------------------------------ certificates
def usable(stats: dict) -> bool:
    """A single-bound Monte-Carlo certificate with a decision rule we can turn into thresholds on p_A."""
    return isinstance(stats, dict) and all(k in stats for k in REQUIRED) and "endpoints" not in stats \
        and (isinstance(stats.get("radius_rule"), dict) or isinstance(stats.get("threshold_rule"), dict))


def budget_threshold(stats: dict, budget: float) -> float:
    """tau_b: certified at ``budget`` iff p_A_lower > tau_b (always >= 1/2: an abstaining CERTIFY certifies
    nothing; 1 = never certifiable)."""
    if budget <= 0:
        return 0.5
    rule = stats.get("radius_rule")
    if isinstance(rule, dict):
        fn, scale = RADIUS_FUNCTIONS[rule["distribution"]], float(rule["scale"])
        tau = radius_threshold(lambda q: fn(q, scale), budget)
    else:
        rule = stats["threshold_rule"]
        required = {float(b): v for b, v in (rule.get("required") or {}).items()}
        v = required.get(float(budget))
        if not isinstance(v, (int, float)) or math.isnan(v) or v >= NEVER:
            tau = 1.0
        elif rule.get("statistic") == "margin":  # margin = Phi^-1(p_A_lower)
            tau = float(norm.cdf(v))
        elif rule.get("statistic") == "p_a_lower":
            tau = float(v)
        else:
            raise BenchError(f"threshold_rule statistic {rule.get('statistic')!r} is not p_a_lower or margin.")
    return min(1.0, max(0.5, tau))


def certificate_label(row: dict, cert: dict) -> str:
    """defense, or defense:variant."""
    return row["defense"] + (f":{cert['variant']}" if cert.get("variant") else "")


def analyse_example(p: float, n: int, alpha: float, taus: Sequence[float], settings: sq.SequentialSettings,
                    trials: int, rng: np.random.Generator) -> dict:
    """One example's certification probabilities and estimation samples under the three rules."""
    taus = np.asarray(taus, dtype=np.float64)
    fixed = np.asarray(fixed_certify_probability(p, n, alpha, taus), dtype=np.float64).reshape(taus.shape)
    tables = sq.plan(settings, n, alpha, taus)  # the schedule CERTIFY uses for these thresholds
    sched = tables.schedule
    cols = np.searchsorted(tables.thresholds, taus)
    looks = np.asarray(sched.looks)
    counts = rng.binomial(np.diff((0, *looks)), p, size=(trials, len(looks))).cumsum(1)
    stop, certified = sq.run_rule(counts, tables)
    return {"fixed": fixed, "sequential": certified[:, cols].mean(0), "sequential_samples": float(looks[stop].mean()),
            "floor_samples": example_floor(p, taus, alpha, fixed, n)}


def analyse_sources(sources: Iterable[tuple[Iterable[dict], sq.SequentialSettings]], trials: int = 2000,
                    seed: int = 0) -> list[dict]:
    """One record per (dataset, transformation, certificate label) with usable certificates in the rows of
    (rows, sequential settings) groups (leaderboard files may differ in settings), one seeded generator for all."""
    if trials < 1:
        raise BenchError(f"--trials must be at least 1, got {trials}.")
    rng = np.random.default_rng(seed)
    groups: dict[tuple, list] = defaultdict(list)
    surrogate: dict[tuple, bool] = {}
    for rows, settings in sources:
        _collect(rows, settings, trials, rng, groups, surrogate)
    return _records(groups, surrogate)


def _collect(rows: Iterable[dict], settings: sq.SequentialSettings, trials: int, rng: np.random.Generator,
             groups: dict[tuple, list], surrogate: dict[tuple, bool]) -> None:
    for row in rows:
        for cert in row.get("certificates") or []:
            s = cert.get("stats")
            if not usable(s):
                continue
            key = (row.get("dataset", ""), row["transformation"], certificate_label(row, cert))
            surrogate[key] = surrogate.get(key, False) or s.get("certifies") == SURROGATE
            c = int(np.argmax(s["counts_selection"]))
            n_used = int(s["n"])
            cap = int((s.get("sequential") or {}).get("cap", n_used))  # a sequential source: n is what it drew
            alpha = float(s.get("alpha_p_a", s["alpha"]))
            budgets = sorted(float(b) for b in cert["certified"])
            taus = [budget_threshold(s, b) for b in budgets]
            res = analyse_example(s["counts_estimation"][c] / n_used, cap, alpha, taus, settings, trials, rng)
            groups[key].append({"defense": row["defense"], "correct": c == row.get("label"), "n0": int(s["n0"]),
                                "n": cap, "alpha": alpha, "budgets": budgets, **res})


def _records(groups: dict[tuple, list], surrogate: dict[tuple, bool]) -> list[dict]:
    out = []
    for key in sorted(groups):
        ex = groups[key]
        n0, n = np.array([e["n0"] for e in ex], float), np.array([e["n"] for e in ex], float)
        floor = np.array([e["floor_samples"] for e in ex])
        seq = np.array([e["sequential_samples"] for e in ex])
        rec = {"dataset": key[0], "transformation": key[1], "defense": ex[0]["defense"], "label": key[2],
               "surrogate": surrogate[key], "examples": len(ex), "n0": float(n0.mean()), "n": float(n.mean()),
               "alpha": sorted({e["alpha"] for e in ex}),
               "samples_fixed": float((n0 + n).mean()), "samples_floor": float((n0 + floor).mean()),
               "samples_sequential": float((n0 + seq).mean()), "estimation_floor": float(floor.mean()),
               "estimation_sequential": float(seq.mean()), "budgets": []}
        for b in sorted({b for e in ex for b in e["budgets"]}):
            fx, sx = [], []
            for e in ex:
                if b in e["budgets"]:
                    j = e["budgets"].index(b)
                    fx.append(e["correct"] * float(e["fixed"][j]))
                    sx.append(e["correct"] * float(e["sequential"][j]))
            fx_a, m = np.array(fx), len(fx)
            rec["budgets"].append({"budget": b, "examples": m, "certified_fixed": float(fx_a.mean()),
                                   "certified_sequential": float(np.mean(sx)),
                                   "difference": 100 * float(np.mean(sx) - fx_a.mean()),
                                   "noise_sd": 100 * math.sqrt(float(np.sum(2 * fx_a * (1 - fx_a)))) / m})
        out.append(rec)
    if not out:
        raise BenchError("no usable Monte-Carlo certificates: need single-bound certificates whose stats have "
                         f"{', '.join(REQUIRED)} and a radius_rule or threshold_rule (sliced ones are skipped).")
    return out


# ------------------------------------------------------------------ report
def summary(records: list[dict]) -> dict | None:
    """Means over the records that are not surrogate-only (None when there are none)."""
    rs = [r for r in records if not r["surrogate"]]
    if not rs:
        return None
    m = {k: float(np.mean([r[k] for r in rs])) for k in
         ("samples_fixed", "samples_floor", "samples_sequential", "estimation_floor", "n0", "n")}
    return {"certificates": len(rs), **m}


def _ratio(x: float, y: float) -> str:
    return f"{x / y:.1f}x" if y > 0 and np.isfinite(x / y) else "--"


def _md(cells: list) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _where(r: dict, many: bool) -> str:
    return f"{r['dataset']}/{r['transformation']}" if many else r["transformation"]


def render(records: list[dict]) -> str:
    """Markdown: samples per example (fixed, floor, sequential), certified accuracy per budget, the summary."""
    many = len({r["dataset"] for r in records}) > 1

    def name(r: dict) -> str:
        return r["label"] + (" (surrogate)" if r["surrogate"] else "")

    head = ["transformation", "certificate", "examples", "fixed samples/ex", "Wald floor", "sequential",
            "fixed/floor", "fixed/sequential"]
    lines = [_md(head), _md(["---"] * len(head))]
    for r in records:
        lines.append(_md([_where(r, many), name(r), r["examples"], f"{r['samples_fixed']:.0f}",
                          f"{r['samples_floor']:.1f}", f"{r['samples_sequential']:.1f}",
                          _ratio(r["samples_fixed"], r["samples_floor"]),
                          _ratio(r["samples_fixed"], r["samples_sequential"])]))
    head = ["transformation", "certificate", "budget", "certified fixed", "sequential", "difference",
            "fixed-vs-fixed sd"]
    lines += ["", _md(head), _md(["---"] * len(head))]
    for r in records:
        for b in r["budgets"]:
            lines.append(_md([_where(r, many), name(r), f"{b['budget']:g}", f"{b['certified_fixed']:.3f}",
                              f"{b['certified_sequential']:.3f}", f"{b['difference']:+.1f} pt",
                              f"{b['noise_sd']:.1f} pt"]))
    s = summary(records)
    if s is None:
        lines.append("\nno certificate but surrogate-only ones: no summary.")
        return "\n".join(lines)
    lines.append(f"\nmean over {s['certificates']} certificates (surrogate-only left out), samples per example: "
                 f"fixed {s['samples_fixed']:.0f}, Wald floor {s['samples_floor']:.1f}, sequential "
                 f"{s['samples_sequential']:.1f}; fixed/floor {_ratio(s['samples_fixed'], s['samples_floor'])}, "
                 f"fixed/sequential {_ratio(s['samples_fixed'], s['samples_sequential'])}")
    lines.append(f"without the n0 = {s['n0']:g} selection samples: estimation floor {s['estimation_floor']:.1f} "
                 f"per example, n/floor = {_ratio(s['n'], s['estimation_floor'])} (n = {s['n']:g})")
    return "\n".join(lines)


# ------------------------------------------------------------------ sources
def _settings(d: dict | None) -> sq.SequentialSettings:
    return sq.SequentialSettings.from_dict(d or {})


def load_source(source: Path) -> list[tuple[list[dict], sq.SequentialSettings]]:
    """(rows, sequential settings) groups of a run folder (rows.jsonl, config.json's profile) or a leaderboard
    dataset folder (each entry's rows file with ``NAME.json``'s protocol); defaults when no settings are
    recorded."""
    from benchmark.run.store import RunStore

    source = Path(source)
    if not source.is_dir():
        raise BenchError(f"{source} is not a folder: give a run folder (rows.jsonl) or a leaderboard dataset folder "
                         "(NAME.json beside NAME.rows.jsonl.xz).")
    groups: dict[sq.SequentialSettings, list[dict]] = defaultdict(list)
    store = RunStore(source)
    if store.rows_path.is_file() or store.packed_path.is_file():  # a run folder, packed or not (bench pack)
        config = store.read_json("config.json") or {}
        latest = {(r.get("dataset"), r.get("transformation"), r.get("defense"), r.get("task"), r.get("example")): r
                  for r in store.rows()}  # the last row written wins, as on --resume
        groups[_settings((config.get("profile") or {}).get("sequential"))] += list(latest.values())
    else:
        for path in rows_file.in_folder(source):
            meta = path.with_name(rows_file.entry_name(path) + ".json")
            protocol = json.loads(meta.read_text()).get("protocol", {}) if meta.is_file() else {}
            rows = rows_file.read(path)
            groups[_settings((protocol.get("profile_settings") or {}).get("sequential"))] += rows
    if not any(groups.values()):
        raise BenchError(f"{source} has no rows: expected rows.jsonl (a run folder) or NAME.rows.jsonl.xz files (a "
                         "leaderboard dataset folder).")
    return [(rows, s) for s, rows in groups.items()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("source", type=Path, help="run folder or leaderboard dataset folder")
    ap.add_argument("--trials", type=int, default=2000, help="simulated sample streams per example (sequential)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the simulation")
    ap.add_argument("--out", type=Path, help="also write the markdown here")
    ap.add_argument("--json", type=Path, help="write the records here")
    args = ap.parse_args(argv)
    sources = load_source(args.source)
    records = analyse_sources(sources, args.trials, args.seed)
    sliced = analyse_sliced(r for rows, _ in sources for r in rows)
    text = render(records)
    if sliced:
        text += "\n\nslice certification (fixed rule; the floor of any valid walk over the same endpoints):\n\n" + \
            render_sliced(sliced)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    if args.json:
        args.json.write_text(json.dumps({"rows": records, "summary": summary(records), "sliced": sliced},
                                        indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
