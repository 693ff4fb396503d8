"""Suite profiles (protocol sizes), task identity and key checking, shared by every kind of suite."""
from __future__ import annotations

import difflib
from dataclasses import asdict, dataclass, field

from benchmark.errors import BenchError

PROFILE_KEYS = {"n_examples", "skip", "n0", "n", "alpha", "batch_size", "n_predict", "attack_k", "defense_settings",
                "attacks", "survival_points", "certify", "sequential", "predict"}
#: profile settings left out of task hashes: they add a check (the survival grid) without changing any
#: other column, so every earlier task hash, row and random stream stays as it was
UNHASHED_PROFILE_KEYS = ("survival_points",)

@dataclass(frozen=True)
class Profile:
    """Protocol sizes: test examples, Monte-Carlo samples, confidence, attack strength.

    ``attack_k`` is worst-of-k's k (also PGD's fallback); ``attacks`` maps an attack name of the
    suite's list to settings that override the suite entry under this profile (e.g. PGD steps).
    ``survival_points``: grid points per example with which the claims of surrogate-only certificates
    are checked on the real transformation (benchmark/run/survival.py; 0 = the attacks only).
    ``certify``: ``fixed`` (n and n_predict samples, Cohen et al.) or ``sequential`` (anytime-valid
    stopping with n and n_predict as caps, benchmark/certify/sequential.py; parameters in ``sequential``:
    first, growth, final_share, beta, match_fixed).
    ``predict``: PREDICT's rule when it differs from ``certify`` (``fixed`` | ``sequential``; null = the
    ``certify`` rule). The sequential PREDICT is anytime-valid at the same alpha with n_predict as the cap
    (benchmark/certify/sequential.py), so a profile can keep fixed-n certificates and still stop PREDICT
    early: every attack candidate is judged by PREDICT, which is most of a run's samples.
    """

    name: str
    n_examples: int | None = 25
    skip: int = 0
    n0: int = 32
    n: int = 500
    alpha: float = 0.001
    batch_size: int = 256
    n_predict: int = 200
    attack_k: int = 8
    #: per-defense protocol knobs that scale with the profile (e.g. tss: {slices: 40}); passed in ctx.profile
    defense_settings: dict = field(default_factory=dict)
    attacks: dict = field(default_factory=dict)
    survival_points: int = 21
    certify: str = "fixed"
    sequential: dict = field(default_factory=dict)
    predict: str | None = None

    def __post_init__(self) -> None:
        from benchmark.certify.sequential import SequentialSettings

        if self.certify not in ("fixed", "sequential"):
            raise BenchError(f"profile '{self.name}': certify must be 'fixed' or 'sequential', got {self.certify!r}.")
        if self.predict not in (None, "fixed", "sequential"):
            raise BenchError(f"profile '{self.name}': predict must be 'fixed', 'sequential' or null (= the certify "
                             f"rule), got {self.predict!r}.")
        SequentialSettings.from_dict(self.sequential)  # unknown keys or bad values fail here
        p = self.survival_points
        if isinstance(p, bool) or not isinstance(p, int) or p == 1 or p < 0:
            raise BenchError(f"profile '{self.name}': survival_points must be 0 (attacks only) or an integer >= 2, "
                             f"got {p!r}.")

    def to_dict(self) -> dict:
        return asdict(self)


def task_identity(task) -> dict:
    """What a task's hash is computed from: all its fields, the profile without ``UNHASHED_PROFILE_KEYS``."""
    d = asdict(task)
    prof = d["profile"]
    drop = list(UNHASHED_PROFILE_KEYS)
    if prof["certify"] == "fixed":
        drop.append("certify")
        if prof.get("predict") != "sequential":  # the sequential settings matter to no rule of this task
            drop.append("sequential")
    if prof.get("predict") is None:  # unset: the hashes of earlier tasks stay as they were
        drop.append("predict")
    for key in drop:
        prof.pop(key, None)
    return d


def check_keys(where: str, got: dict, valid: set[str]) -> None:
    if not isinstance(got, dict):
        raise BenchError(f"{where} must be a mapping, got {type(got).__name__}.")
    for k in got:
        if k not in valid:
            close = difflib.get_close_matches(str(k), sorted(valid), n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            raise BenchError(f"{where}: unknown key '{k}'.{hint} Valid keys: {', '.join(sorted(valid))}.")
