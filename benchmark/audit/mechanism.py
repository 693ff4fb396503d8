"""Which smoothing certificates of outside code are proofs: the mechanism half of the ``unverified`` rule.

A Monte-Carlo or sliced certificate is recomputed from its counts by the ``statistics`` rule, but its
radius rule is only a proof if the noise behind the counts is the one the rule assumes and the budgets
are those of the task's transformation. The harness knows that only for its own mechanisms
(``benchmark.certify.mechanisms``): the record a helper wrote (and the runner confirmed) is re-derived
here from the task's transformation and the test image itself: the transformation's name, the input's
sha256; for parameter noise the mechanism version (2: integer noise from fair bits on parameter_lattice's grid;
a version-1 record, float64 draws cast to float32 and applied to the image, is named as such and not
verified), a distribution that fits the transformation and matches the radius rule, and the
``parameter_noise`` record (route, grid, dimension, and on the reference-pixel route a reach no larger than the
test image's) against ``mechanisms.parameter_noise`` of the transformation and the image (the radius itself is
recomputed from that record by the ``statistics`` rule); for
pixel noise, the mechanism version (2: grid input and integer noise, sound in floating point; a version-1
record, float32 ``x + sigma * randn``, is named as such and not verified) and the ``pixel_bounds`` distance
of every budget against the recorded thresholds, recomputed with the same rule that issued them
(``mechanisms.pixel_required``). Any other smoothing certificate of outside code is a claim: listed as
unverified and never ranked. A parameter record that the test image contradicts (``tampered``: another route,
grid or dimension, an inflated reach) is a false statement about the noise, and the checker rejects it.
"""
from __future__ import annotations

import math

import torch

from benchmark.audit.statistics import kind
from benchmark.certify import mechanisms
from benchmark.transformations.base import Transformation

RTOL = 1e-9


def problem(cert: dict, t: Transformation, x: torch.Tensor) -> str | None:
    """Why the smoothing certificate ``cert`` (JSON form) is not a verified mechanism on ``t`` and the test
    image ``x [1,C,H,W]``; None when it is."""
    s = cert.get("stats") or {}
    m = s.get("mechanism")
    if not isinstance(m, dict):
        return "no mechanism record from the harness's smoothing helpers (parameter_smoothing, pixel_smoothing)"
    if kind(s) != "monte_carlo":
        return f"mechanism record on a {kind(s)} certificate"
    if m.get("transformation") != t.name:
        return f"mechanism smoothed '{m.get('transformation')}', the task's transformation is '{t.name}'"
    if m.get("input_sha256") != mechanisms.image_sha256(x):
        return "the mechanism smoothed another input than the test image"
    if m.get("kind") == "parameter":
        return _parameter_problem(s, m, t, x)
    if m.get("kind") == "pixel":
        return _pixel_problem(s, m, t, x)
    return f"unknown mechanism kind {m.get('kind')!r}"


def _parameter_problem(s: dict, m: dict, t: Transformation, x: torch.Tensor) -> str | None:
    if m.get("version", 1) != mechanisms.PARAMETER_VERSION:
        return (f"parameter mechanism version {m.get('version', 1)} (float64 draws cast to float32 and applied to the "
                f"image: their rounding can be read by the base classifier, not a proof in floating point); rerun "
                f"with the current parameter_smoothing (version {mechanisms.PARAMETER_VERSION})")
    reason = mechanisms.parameter_problem(t, m.get("distribution"))
    if reason:
        return reason
    rule = {"distribution": m.get("distribution"), "scale": m.get("scale")}
    if s.get("radius_rule") != rule:
        return f"radius_rule {s.get('radius_rule')} is not the mechanism's {rule}"
    if not isinstance(rule["scale"], (int, float)) or not 0 < rule["scale"] < math.inf:
        return f"parameter mechanism needs a positive scale, got {rule['scale']!r}"
    return noise_problem(s.get("parameter_noise"), t, rule["distribution"], float(rule["scale"]), x)


def noise_problem(rec, t: Transformation, distribution: str, scale: float, x: torch.Tensor) -> str | None:
    """Why the ``parameter_noise`` record ``rec`` is not the one ``parameter_smoothing`` draws on ``t`` with
    ``distribution`` and ``scale`` at the test image ``x`` (None: it is); a smaller reach is conservative."""
    want = mechanisms.parameter_noise(t, distribution, scale, x)
    if not isinstance(rec, dict):
        return f"no parameter_noise record: the harness's parameter noise on '{t.name}' is {want}"
    wrong = [k for k in ("kind", "version", "distribution", "shift", "grid_bits", "dim") if rec.get(k) != want[k]]
    if wrong:
        return (f"parameter_noise {', '.join(f'{k} {rec.get(k)!r}' for k in wrong)} differ(s) from the harness's "
                f"noise on '{t.name}' ({', '.join(f'{k} {want[k]!r}' for k in wrong)}): {want}")
    if "reach" in want:
        reach = rec.get("reach")
        if not isinstance(reach, (int, float)) or not reach <= want["reach"]:
            return (f"parameter_noise reach {reach!r} exceeds {want['reach']}, the largest offset the test image's "
                    f"grid point stays exact for (parameter_lattice.reference_reach)")
    elif "reach" in rec:
        return f"parameter_noise has a reach on the {want['shift']!r} route, which has none: {want}"
    return None


def tampered(cert: dict, t: Transformation, x: torch.Tensor) -> str | None:
    """Why the ``parameter_noise`` of a certificate that a (possibly edited) ``parameter_smoothing`` record of
    version 2 names (``mechanism`` or the runner's ``claimed_mechanism``) contradicts the test image; None if
    it does not or no such record is there. Such a certificate states noise the harness did not draw."""
    s = cert.get("stats") or {}
    m = s.get("mechanism", s.get("claimed_mechanism"))
    if not (isinstance(m, dict) and m.get("kind") == "parameter" and m.get("version") == mechanisms.PARAMETER_VERSION
            and "parameter_noise" in s and mechanisms.parameter_problem(t, m.get("distribution")) is None):
        return None
    scale = m.get("scale")
    if not isinstance(scale, (int, float)) or not 0 < scale < math.inf:
        return f"parameter mechanism scale {scale!r} is not a positive number"
    return noise_problem(s["parameter_noise"], t, m["distribution"], float(scale), x)


def _pixel_problem(s: dict, m: dict, t: Transformation, x: torch.Tensor) -> str | None:
    if m.get("version", 1) != mechanisms.PIXEL_VERSION:
        return (f"pixel mechanism version {m.get('version', 1)} (float32 x + sigma * randn: its rounding can be read by "
                f"the base classifier, not a proof in floating point); rerun with the current pixel_smoothing "
                f"(version {mechanisms.PIXEL_VERSION})")
    sigma, rule = m.get("sigma"), s.get("threshold_rule") or {}
    if not isinstance(sigma, (int, float)) or not 0 < sigma < math.inf or rule.get("statistic") != "margin":
        return "pixel mechanism needs a positive sigma and a margin threshold_rule"
    required = {float(b): v for b, v in (rule.get("required") or {}).items()}
    if not t.has_pixel_bounds:
        return f"'{t.name}' has no pixel_bounds to convert budgets to l2 distances"
    need = mechanisms.pixel_required(mechanisms.pixel_distances(x, t, list(required)), sigma, int(x[0].numel()))
    low = [b for b, v in required.items() if not float(v) >= need[repr(b)] * (1 - RTOL) - 1e-12]
    return f"thresholds at budgets {low} are below the mechanism's rule (pixel_bounds distance, grid)" if low else None


def unverified_cells(rows: list[dict], task_labels: dict[str, list[str]], images,
                     check=None) -> dict[tuple[str, str], str]:
    """(transformation, label) -> the first reason one of its smoothing certificates is not verified (``check``,
    default ``problem``; ``tampered`` for the records the checker rejects). ``images(dataset)`` gives the test
    split's images; deterministic certificates are left to ``proofs``."""
    from benchmark.transformations import get_transformation

    check = check or problem
    out: dict[tuple[str, str], str] = {}
    for r in rows:
        labels = task_labels.get(r["task"], [])
        for i, c in enumerate(r.get("certificates", [])):
            key = (r["transformation"], labels[i] if i < len(labels) else str(i))
            if key in out or kind(c.get("stats") or {}) not in ("monte_carlo", "sliced"):
                continue
            x = images(r["dataset"])[r["example"]:r["example"] + 1]
            why = check(c, get_transformation(r["transformation"]), x)
            if why:
                out[key] = f"example {r['example']}: {why}"
    return out
