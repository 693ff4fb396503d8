"""One example of a transformation task: clean prediction, certificates, attacks and survival check.

Its random generators are seeded from (run seed, task hash, example id) only, so a row does not
depend on the order of work, the executor, the shard, interruption or resumption.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import torch

from attacks.base import ParameterAttack
from benchmark.certify import predict_log
from benchmark.certify.certificate import is_surrogate_only
from benchmark.certify.mechanisms import confirm, produced
from benchmark.certify.smoothing import ledger_snapshot, sample_ledger
from benchmark.errors import BenchError
from benchmark.run.guard import check_labels, guard
from benchmark.run.options import example_seed
from benchmark.run.survival import Evidence, check_survival
from benchmark.suites.loader import Task


@dataclass
class BudgetState:
    """The attack search at one budget: what is known so far and whether the search goes on.

    ``robust``: no attack run so far broke the example; ``confident``: some run found a confident wrong
    label (``wrong_theta``: the first such run's parameters); ``runs``: each run's row entry, in order;
    ``ran``: attacks run (a fallback counts as run); ``first``: the first run that broke it; ``open``: the
    remaining attacks still run here (see ``_evaluate``).
    """

    certified: bool  # some correct certificate certifies the example at this budget
    robust: bool = True
    confident: bool = False
    runs: list[dict] = field(default_factory=list)
    ran: set[str] = field(default_factory=set)
    first: dict | None = None
    open: bool = True
    wrong_theta: list[float] | None = None


def evaluate_example(task: Task, defense, transformation, attacks: list[ParameterAttack] | ParameterAttack,
                     x: torch.Tensor, y: int, example: int) -> dict:
    """Clean prediction, certificates and attacks for one example; returns its row (see ``_evaluate``).

    ``row["samples"]``: the Monte-Carlo samples the defense's CERTIFY and PREDICT drew (survival checks
    excluded), the number of PREDICT calls, the rule (fixed | sequential) and CERTIFY's seconds. Under the
    sequential PREDICT, ``row["clean"]["predict"]`` and each attack run's ``predict`` keep the records of
    those calls (``benchmark.audit.predict_replay`` replays them).
    """
    with sample_ledger():
        return _evaluate(task, defense, transformation, attacks, x, y, example)


def _evaluate(task: Task, defense, transformation, attacks: list[ParameterAttack] | ParameterAttack,
              x: torch.Tensor, y: int, example: int) -> dict:
    """Clean prediction, certificates and attacks for one example; returns its row.

    At each budget the attacks run in order; the example is empirically robust only if it is robust
    under all of them, and the first that breaks it ends the search, except when that break is only
    an abstention on an example some certificate certifies at the budget: then the remaining attacks
    still look for a confident wrong label (the certified-vs-empirical consistency check). An attack
    that fell back to another one (PGD -> worst_of_k on pixelate) counts as having run both.
    """
    attacks = [attacks] if isinstance(attacks, ParameterAttack) else list(attacks)
    # separate streams: certificates depend only on task.certify_key, not on the attack or subset size
    gen_cert = torch.Generator().manual_seed(example_seed(task.seed, task.certify_key, example))
    gen = torch.Generator().manual_seed(example_seed(task.seed, task.hash + ":predict", example))
    gen_survival = torch.Generator().manual_seed(example_seed(task.seed, task.hash + ":survival", example))
    start = time.perf_counter()
    with predict_log.collect() as clean_records:
        clean = int(check_labels(task, guard(task, "predict", lambda: defense.predict(x, transformation, gen)), 1)[0])
    certificates, certify_seconds = [], 0.0
    if defense.certified:
        t0 = time.perf_counter()
        with produced() as seen:  # a mechanism record stays only on certificates the harness's helpers made
            certs = guard(task, "certify", lambda: defense.certify(x, transformation, list(task.budgets), gen_cert))
        certify_seconds = time.perf_counter() - t0
        for c in certs:
            if c.radius is not None and isinstance(c.radius, float) and math.isnan(c.radius):
                raise BenchError(f"defense '{task.defense}' returned a NaN radius on {task.label} example {example}.")
            d = confirm(c.to_json(), seen)
            d["correct"] = c.prediction == y
            certificates.append(d)
    # empirical[b]: robust under the attack (abstain = wrong); broken[b]: a confident wrong label was found
    empirical, broken, attacked = {}, {}, {}
    state: dict[float, BudgetState] = {}
    for b in task.budgets:
        key = repr(b)
        if b == 0 or clean != y:
            empirical[key] = clean == y
            broken[key] = clean not in (y, -1)
            if b == 0 or broken[key]:
                continue
        state[b] = BudgetState(certified=any(c["correct"] and c["certified"][key] for c in certificates))
    # attacks in order, each over every budget still open in one call (PGD batches the budgets)
    for attack in attacks:
        todo = [b for b, st in state.items() if st.open and attack.name not in st.ran]
        if not todo:
            continue
        results = guard(task, "attack", lambda a=attack: a.run_budgets(defense, x, y, transformation, todo, gen))
        for b, res in zip(todo, results):
            st = state[b]
            st.ran.update({attack.name, res.fallback} - {None})
            run = {"attack": attack.name, "robust": res.robust, "theta": res.theta, "queries": res.queries}
            if res.fallback:
                run["fallback"] = res.fallback
            if res.info:
                run["info"] = res.info
            if res.predict:
                run["predict"] = res.predict
            st.runs.append(run)
            st.robust &= res.robust
            st.confident |= res.confident_wrong
            if res.confident_wrong and st.wrong_theta is None:
                st.wrong_theta = res.theta
            if not res.robust and st.first is None:
                st.first = run
            if st.confident or (not st.robust and not st.certified):
                st.open = False
    for b, st in state.items():
        key, first = repr(b), st.first
        empirical[key] = st.robust and clean == y
        broken[key] = st.confident
        attacked[key] = {"attack": None if first is None else first["attack"],
                         "theta": None if first is None else first["theta"],
                         "queries": sum(r["queries"] for r in st.runs), "runs": st.runs}
    row = {
        "task": task.hash, "example": example, "label": y, "dataset": task.dataset,
        "transformation": task.transformation, "defense": task.defense,
        "clean": {"prediction": clean, "correct": clean == y, "abstained": clean == -1,
                  **({"predict": clean_records[0]} if len(clean_records) == 1 else {})},
        "certificates": certificates, "empirical": empirical, "broken": broken, "attacks": attacked,
        "seconds": time.perf_counter() - start,  # the defense's cost, without the survival check below
        "samples": {**ledger_snapshot(), "rule": task.profile.certify,
                    "predict_rule": task.profile.predict or task.profile.certify, "certify_seconds": certify_seconds},
    }
    if any(is_surrogate_only(c) for c in certificates):
        evidence: Evidence = {repr(b): ("attack", st.wrong_theta) for b, st in state.items()
                              if st.wrong_theta is not None}
        if clean not in (y, -1):
            evidence = {repr(b): ("clean", transformation.identity()[0].tolist()) for b in task.budgets if b > 0}
        row["survival"] = guard(task, "predict", lambda: check_survival(
            defense, transformation, x, y, certificates, evidence, task.profile.survival_points, gen_survival))
    return row
