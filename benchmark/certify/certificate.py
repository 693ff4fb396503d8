"""The certificate record every certified defense returns, with its raw statistics."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

ABSTAIN = -1

#: ``stats["certifies"]`` of a certificate that holds for a surrogate of the transformation only (GSmooth's
#: Corollary 1), not for the real one. Such certificates are checked on the real transformation (the survival
#: table) and are never counted as consistency failures of the run.
SURROGATE_ONLY = "surrogate transformation"


@dataclass
class Certificate:
    """Outcome of certifying one example.

    Attributes:
        prediction: predicted class, or ABSTAIN (-1).
        radius: certified radius in the transformation's units and norm, or None
            for certificates that are decided per budget (``certified`` holds them).
        certified: budget -> whether the prediction is certified for every
            parameter in the attack region of that budget (independent of the label).
        stats: raw statistics (n0, n, counts, alpha, p_A lower bound, ...) so the
            certificate can be recomputed and audited.
        variant: certificate variant; the table label is ``defense:variant``.
    """

    prediction: int
    radius: float | None
    certified: dict[float, bool] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)
    variant: str = ""

    @property
    def abstained(self) -> bool:
        return self.prediction == ABSTAIN

    @classmethod
    def from_radius(cls, prediction: int, radius: float, budgets: list[float], stats: dict, variant: str = "") -> "Certificate":
        """Radius-style certificate: certified at budget b iff not abstained and radius > b."""
        if prediction == ABSTAIN or not radius > 0:
            radius = 0.0
        ok = {float(b): prediction != ABSTAIN and radius > b for b in budgets}
        return cls(prediction=int(prediction), radius=float(radius), certified=ok, stats=stats, variant=variant)

    def to_json(self) -> dict:
        d = asdict(self)
        d["certified"] = {repr(float(b)): bool(v) for b, v in self.certified.items()}
        if d["radius"] is not None and math.isinf(d["radius"]):
            d["radius"] = "inf"
        d["abstained"] = self.abstained
        return d


def is_surrogate_only(cert: dict) -> bool:
    """Whether a certificate as stored in a row (``Certificate.to_json``) declares ``certifies: SURROGATE_ONLY``.

    The one rule the harness uses for surrogate-only certificates: a declared field, not a label name.
    """
    return (cert.get("stats") or {}).get("certifies") == SURROGATE_ONLY
