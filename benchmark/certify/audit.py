"""Recompute a Monte-Carlo certificate's bound from its recorded counts (``bench submit``'s checker and
``bench verify-entry``). Each function returns a list of problems (empty = reproduced).

* fixed CERTIFY: p_A_lower = Clopper-Pearson(count of the selected class, n, alpha);
* sequential CERTIFY: the ``sequential`` record replayed by ``sequential.recompute`` (schedule from the
  recorded settings, levels summing to <= alpha, bound = max over the looks, stop where the rule stops);
* slice certification: every endpoint's bound, the level split (Bonferroni: alpha_slice (N+1) <= alpha;
  fixed-sequence: the endpoints are a prefix of the fixed order 0, +1, -1, ..., every one but the last
  passed, and the coverage is the one the passed endpoints give).
"""
from __future__ import annotations

import math

import numpy as np
from scipy.stats import norm

from benchmark.certify import sequential
from benchmark.certify.certificate import ABSTAIN
from benchmark.certify.stats import lower_confidence_bound

_RTOL, _ATOL = 1e-9, 1e-12


def _close(a: float, b: float) -> bool:
    return math.isclose(float(a), float(b), rel_tol=_RTOL, abs_tol=_ATOL)


def selected_count(s: dict) -> int:
    """The estimation count of the class the selection samples chose (``count_a`` when they are not recorded;
    CERTIFY records ``count_a`` = 0 when it abstains, so the selection decides which count was bounded)."""
    sel, est = s.get("counts_selection"), s.get("counts_estimation")
    if sel and est:
        return int(est[int(np.argmax(sel))])
    return int(s["count_a"])


def certify_problems(s: dict, prediction: int) -> list[str]:
    """The bound of a CERTIFY record (fixed or sequential) and its abstention rule."""
    count = selected_count(s)
    if s.get("counts_selection") and prediction != ABSTAIN and prediction != int(np.argmax(s["counts_selection"])):
        return [f"prediction {prediction} is not the class the selection counts chose."]
    if "sequential" in s:
        rec = s["sequential"]
        p, problems = sequential.recompute(rec, alpha=float(s["alpha"]))
        if problems:
            return problems
        done = len(rec["counts_a"])
        if int(rec["counts_a"][-1]) != count or int(s["n"]) != int(rec["looks"][done - 1]):
            return [f"count {count} / n {s['n']} differ from the last look of the sequential record "
                    f"({rec['counts_a'][-1]} of {rec['looks'][done - 1]})."]
        what = "the sequential bound"
    else:
        p = lower_confidence_bound(count, int(s["n"]), float(s["alpha"]))
        what = f"the one-sided Clopper-Pearson bound of count {count}, n={s['n']}, alpha={s['alpha']}"
    if not _close(p, s["p_a_lower"]):
        return [f"p_a_lower {s['p_a_lower']} is not {what} ({p})."]
    if (p > 0.5) != (prediction != ABSTAIN):
        return [f"p_a_lower = {p:.4f} but prediction = {prediction}; CERTIFY abstains exactly when p_a_lower <= 1/2."]
    return []


def sliced_problems(s: dict, prediction: int) -> list[str]:
    """Per-endpoint bounds and the level split of a slice certificate (baselines.tss.slicing)."""
    problems = []
    alpha, a_slice, n_ends = float(s["alpha"]), float(s["alpha_slice"]), int(s.get("slices", 0)) + 1
    chain = s.get("alpha_split") == "fixed-sequence"
    if (a_slice if chain else a_slice * n_ends) > alpha * (1 + 1e-12):
        problems.append(f"alpha_slice {a_slice} over {n_ends} endpoints exceeds alpha {alpha} "
                        f"({'fixed-sequence' if chain else 'Bonferroni'} split).")
    passed = []
    for e in s["endpoints"]:
        if "sequential" in e:
            p, more = sequential.recompute(e["sequential"], alpha=a_slice)
            problems += [f"endpoint {e.get('theta')}: {m}" for m in more]
        else:
            p = lower_confidence_bound(int(e["count"]), int(s["n_slice"]), a_slice)
        if not _close(p, e["p_a_lower"]):
            problems.append(f"endpoint {e.get('theta')}: p_a_lower {e['p_a_lower']} is not the bound {p} of its count.")
        passed.append(p > 0.5 and float(s["sigma"]) * float(norm.ppf(min(p, 1 - 1e-15))) > float(e["bound"]))
    if chain and not problems:
        problems += _chain_problems(s, passed, prediction)
    return problems


def _chain_problems(s: dict, passed: list[bool], prediction: int) -> list[str]:
    order = sequential.centre_out_order(int(s["slices"]) + 1)
    idx = [int(e["index"]) for e in s["endpoints"]]
    if idx != order[:len(idx)]:
        return [f"endpoints {idx} are not a prefix of the fixed-sequence order {order[:len(idx)]}."]
    if not all(passed[:-1]) or (passed[-1] and len(idx) < len(order)):
        return ["the fixed-sequence walk must stop exactly at its first failing endpoint."]
    width = 2 * float(s["range"]) / int(s["slices"]) if int(s["slices"]) else 0.0
    pairs = (len(idx) - 1 - (not passed[-1])) // 2
    coverage = min((pairs + 0.5) * width, float(s["range"])) if passed[0] and len(order) > 1 else 0.0
    if prediction != ABSTAIN and not _close(coverage, s["coverage"]):
        return [f"coverage {s['coverage']} differs from {coverage} given by the passed endpoints."]
    return []
