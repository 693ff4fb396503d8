"""The ``determinism`` rule: a defense's randomness comes only from the generator the harness passes in.

What is compared is what depends on the noise, not only the argmax labels: PREDICT's labels, the logits
of ``noisy_logits`` and every certificate with its raw Monte-Carlo counts. Three experiments:

The probe inputs are chosen among the check images and harness-made blends of consecutive pairs of
them, those whose certificate counts split most first (``split_probes``): a defense
whose counts are all in one class on the plain images would show no difference whatever its noise.

1. the same generator seed twice, with torch's, numpy's and Python's global generators reseeded
   *differently* in between: everything must match exactly. If it does not, the same call is repeated
   with the globals reseeded identically (a difference now means a clock- or OS-seeded generator), then
   with one global generator changed at a time (naming the one the defense draws from);
2. for a smoothed defense (Monte-Carlo certificates), another generator seed: the noisy logits or the
   counts must change, else the noise comes from somewhere else (a generator with a fixed seed);
3. (warning) predictions that change with the seed although the defense gives no certificate.

Then the ``independence`` rule (``benchmark.audit.independence``) on the most split probe.

The global generators' states are restored afterwards.
"""
from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch

from benchmark.audit.independence import check_independence
from benchmark.audit.statistics import kind

GLOBALS = ("torch", "numpy", "random")
CERTIFY_IMAGES = 2  # images certified per observation (the most split probes)
BLENDS = (0.5,)  # weights of the blended probe inputs w * x_i + (1 - w) * x_(i+1)
USE_GENERATOR = ("draw every random number from the `generator` argument: torch.randn(..., generator=generator), "
                 "torch.rand(..., generator=generator), torch.randint(..., generator=generator)")
SOURCES = {
    "torch": "torch's global generator (torch.rand/randn/randint/randperm/bernoulli/dropout without generator=)",
    "numpy": "numpy's global generator (np.random.*)",
    "random": "Python's `random` module",
}


@contextmanager
def seeded_globals(seeds: dict[str, int]) -> Iterator[None]:
    """Reseed torch's, numpy's and Python's global generators; restore their states on exit."""
    saved = torch.get_rng_state(), np.random.get_state(), random.getstate()
    torch.manual_seed(seeds["torch"])
    np.random.seed(seeds["numpy"])
    random.seed(seeds["random"])
    try:
        yield
    finally:
        torch.set_rng_state(saved[0])
        np.random.set_state(saved[1])
        random.setstate(saved[2])


def _strip_seconds(v):
    """A certificate without wall-clock timings (stats keys named ``seconds``)."""
    if isinstance(v, dict):
        return {k: _strip_seconds(w) for k, w in v.items() if k != "seconds"}
    return [_strip_seconds(w) for w in v] if isinstance(v, list) else v


def observe(defense, x: torch.Tensor, t, budgets: list[float], seed: int) -> dict:
    """Everything the defense's noise can show up in, for one generator seed."""
    def gen() -> torch.Generator:
        return torch.Generator().manual_seed(seed)

    out = {"predict": defense.predict(x, t, gen()).tolist()}
    logits = defense.noisy_logits(x, t, gen())
    out["logits"] = None if logits is None else logits.detach().cpu().double().tolist()
    if type(defense).certified:
        out["certify"] = [[_strip_seconds(c.to_json()) for c in defense.certify(x[i:i + 1], t, budgets, gen())]
                          for i in range(min(CERTIFY_IMAGES, len(x)))]
    return out


def _noise_parts(obs: dict) -> tuple:
    """The noisy logits and the Monte-Carlo counts of every certificate."""
    counts = []
    for certs in obs.get("certify", []):
        for c in certs:
            s = c["stats"]
            counts.append((s.get("counts_selection"), s.get("counts_estimation"),
                           [e.get("count") for e in s.get("endpoints", [])]))
    return obs["logits"], counts


def probe_inputs(x: torch.Tensor) -> torch.Tensor:
    """``x`` and blends of consecutive pairs of its images: inputs between two classes, where a smoothed
    classifier's counts split."""
    blends = [w * x[i] + (1 - w) * x[i + 1] for i in range(len(x) - 1) for w in BLENDS]
    return torch.cat([x, torch.stack(blends)]) if blends else x


def split_score(certs: list[dict]) -> float:
    """1 - the top class's share of the first Monte-Carlo certificate's counts (0: all in one class)."""
    for c in certs:
        s = c["stats"]
        counts = [a + b for a, b in zip(s.get("counts_selection") or [], s.get("counts_estimation") or
                                        [0] * len(s.get("counts_selection") or []))]
        if counts and sum(counts):
            return 1.0 - max(counts) / sum(counts)
    return 0.0


def split_probes(defense, x: torch.Tensor, t, budgets: list[float], seed: int) -> torch.Tensor:
    """``len(x)`` probe inputs: for a certified defense those whose counts split most, most split first;
    otherwise the check images and the blends alternately."""
    probes = probe_inputs(x)
    if not type(defense).certified:
        order = [i for pair in zip(range(len(x)), range(len(x), len(probes))) for i in pair] + [len(x) - 1]
        return probes[order[:len(x)]]
    with seeded_globals(_globals(1)):
        scores = [split_score([c.to_json() for c in defense.certify(probes[i:i + 1], t, budgets,
                                                                    torch.Generator().manual_seed(seed))])
                  for i in range(len(probes))]
    order = sorted(range(len(probes)), key=lambda i: -scores[i])
    return probes[order[:len(x)]]


def _informative(obs: dict) -> bool:
    """Whether another seed must visibly change the noise parts (not every count vector degenerate)."""
    logits, counts = _noise_parts(obs)
    vectors = [v for triple in counts for v in triple[:2] if v]
    return logits is not None or any(sum(1 for c in v if c) > 1 for v in vectors) \
        or any(len(set(triple[2])) > 1 for triple in counts)


def smoothed(obs: dict) -> bool:
    """Whether the defense gives Monte-Carlo (or sliced) certificates."""
    return any(kind(c["stats"]) in ("monte_carlo", "sliced") for certs in obs.get("certify", []) for c in certs)


def _globals(value: int, **changed: int) -> dict[str, int]:
    return {g: changed.get(g, value) for g in GLOBALS}


def check_noise(defense, x: torch.Tensor, t, budgets: list[float], seed: int, report) -> None:
    """Run the three experiments of the module docstring; findings go to ``report`` (rules
    ``determinism`` and ``randomized``)."""
    report.ran("determinism")
    report.ran("randomized")
    x = split_probes(defense, x, t, budgets, seed)

    def run(seeds: dict[str, int], s: int = seed) -> dict:
        with seeded_globals(seeds):
            return observe(defense, x, t, budgets, s)

    first = run(_globals(1))
    if run(_globals(2)) != first:
        report.add("determinism", "error", _diagnose(run, first))
        return
    if smoothed(first) and _informative(first):
        if _noise_parts(run(_globals(1), seed + 1)) == _noise_parts(first):
            report.add("determinism", "error", "the noisy logits and the certificates' Monte-Carlo counts are "
                                               f"identical for generator seeds {seed} and {seed + 1}: the noise "
                                               "does not come from the generator the harness passes in (e.g. a "
                                               f"generator with a fixed seed of its own); {USE_GENERATOR}.")
            return
    if smoothed(first):
        check_independence(defense, x[:1], t, budgets, seed, report)
    if not type(defense).certified:
        others = []
        for s in range(seed + 1, seed + 4):
            with seeded_globals(_globals(1)):
                others.append(defense.predict(x, t, torch.Generator().manual_seed(s)).tolist())
        if any(o != first["predict"] for o in others):
            report.add("randomized", "warning", "predictions change with the seed but the defense gives no "
                                                "certificate: randomized outputs need an adaptive (EoT) attack to "
                                                "be evaluated fairly.")
            report.randomized = True


def _diagnose(run, first: dict) -> str:
    """Name the generator a defense draws from when the same seed gave different outputs."""
    what = "the same generator seed gave different outputs (labels, noisy logits or certificate counts)"
    if run(_globals(1)) != first:
        return (f"{what}, even with every global generator reseeded identically: the defense draws from a generator "
                "seeded by the clock or the operating system (a time-based seed, np.random.default_rng() or "
                f"torch.Generator().seed() without a fixed seed, os.urandom); {USE_GENERATOR}.")
    used = [g for g in GLOBALS if run(_globals(1, **{g: 2})) != first]
    names = " and ".join(SOURCES[g] for g in used) or "a global generator"
    return f"{what}: the defense draws from {names}; {USE_GENERATOR}."
