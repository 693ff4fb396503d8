"""Parse and validate a suite YAML and expand it to tasks.

A suite names datasets, defenses, a list of attacks, profiles (protocol sizes and
per-profile attack settings) and, per
transformation, budgets (per dataset, with a ``default``) and per-defense
configs. Unknown keys at any level are an error naming the key and the valid
ones, so a typo never silently changes a protocol.
"""
from __future__ import annotations

import difflib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from benchmark.errors import BenchError, unknown_name
from benchmark.io import config_hash

SUITE_DIR = Path(__file__).resolve().parent
TOP_KEYS = {"name", "description", "datasets", "defenses", "attack", "profiles", "transformations"}
TRANSFORM_KEYS = {"budgets", "defenses", "run"}  # run: only these suite defenses on this transformation
PROFILE_KEYS = {"n_examples", "skip", "n0", "n", "alpha", "batch_size", "n_predict", "attack_k", "defense_settings",
                "attacks", "survival_points", "certify", "sequential"}
#: profile settings left out of task hashes: they add a check (the survival grid) without changing any
#: other column, so every earlier task hash, row and random stream stays as it was
UNHASHED_PROFILE_KEYS = ("survival_points",)
#: left out of task hashes while ``certify`` is "fixed" (the default), so fixed-n tasks keep their hashes
CERTIFY_KEYS = ("certify", "sequential")
DEFAULT_ATTACKS = [{"name": "worst_of_k"}]


@dataclass(frozen=True)
class Profile:
    """Protocol sizes: test examples, Monte-Carlo samples, confidence, attack strength.

    ``attack_k`` is worst-of-k's k (also PGD's fallback); ``attacks`` maps an attack name of the
    suite's list to settings that override the suite entry under this profile (e.g. PGD steps).
    ``survival_points``: grid points per example with which the claims of surrogate-only certificates
    are checked on the real transformation (benchmark/survival.py; 0 = the attacks only).
    ``certify``: ``fixed`` (n and n_predict samples, Cohen et al.) or ``sequential`` (anytime-valid
    stopping with n and n_predict as caps, benchmark/certify/sequential.py; parameters in ``sequential``:
    first, growth, final_share, beta).
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

    def __post_init__(self) -> None:
        from benchmark.certify.sequential import SequentialSettings

        if self.certify not in ("fixed", "sequential"):
            raise BenchError(f"profile '{self.name}': certify must be 'fixed' or 'sequential', got {self.certify!r}.")
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
    for key in UNHASHED_PROFILE_KEYS + (CERTIFY_KEYS if d["profile"]["certify"] == "fixed" else ()):
        d["profile"].pop(key, None)
    return d


@dataclass(frozen=True)
class Task:
    """One unit of the table: a defense (with config) on a transformation of a dataset, at budgets."""

    suite: str
    dataset: str
    transformation: str
    defense: str
    defense_config: dict
    budgets: tuple[float, ...]
    profile: Profile
    seed: int

    @property
    def hash(self) -> str:
        return config_hash(task_identity(self))

    @property
    def certify_key(self) -> str:
        """Hash of what a certificate's random draws depend on (not the number of examples or the attack),
        so the same example gets the same certificate under --n-examples or attack changes."""
        p = self.profile
        return config_hash({"dataset": self.dataset, "transformation": self.transformation, "defense": self.defense,
                            "config": self.defense_config, "n0": p.n0, "n": p.n, "alpha": p.alpha,
                            "batch_size": p.batch_size, "seed": self.seed})

    @property
    def label(self) -> str:
        return f"{self.dataset}/{self.transformation}/{self.defense}"


@dataclass
class Suite:
    name: str
    description: str
    datasets: list[str]
    defenses: list[str]
    attack: list[dict]
    profiles: dict[str, Profile]
    transformations: dict[str, dict]
    source: str = ""
    raw: dict = field(default_factory=dict)

    def profile(self, name: str) -> Profile:
        if name not in self.profiles:
            raise unknown_name("profile", name, self.profiles)
        return self.profiles[name]

    def attacks(self, profile: Profile) -> list[dict]:
        """The attacks run under ``profile``, in order, with full settings (``{"name": ..., **settings}``)."""
        from attacks import resolve_settings

        return [resolve_settings(entry, profile.to_dict()) for entry in self.attack]

    def budgets(self, transformation: str, dataset: str) -> tuple[float, ...]:
        b = self.transformations[transformation].get("budgets", {})
        if isinstance(b, list):
            values = b
        elif dataset in b:
            values = b[dataset]
        elif "default" in b:
            values = b["default"]
        else:
            raise BenchError(f"suite '{self.name}': transformation '{transformation}' has no budgets for "
                             f"dataset '{dataset}' (and no 'default'); add them under budgets.")
        return tuple(sorted({0.0, *(float(v) for v in values)}))

    def tasks(self, profile: Profile, seed: int, datasets: list[str] | None = None,
              defenses: list[str] | None = None, transformations: list[str] | None = None) -> list[Task]:
        """Expand to tasks, in a fixed order (dataset, transformation, defense)."""
        out = []
        for ds in datasets or self.datasets:
            for t in transformations or list(self.transformations):
                if t not in self.transformations:
                    raise unknown_name("transformation", t, self.transformations, f"in suite '{self.name}'")
                cfgs = self.transformations[t].get("defenses", {}) or {}
                only = self.transformations[t].get("run")
                for d in _variant_bases(defenses or self.defenses, self.defenses):
                    if only is not None and d not in only:
                        continue
                    out.append(Task(self.name, ds, t, d, dict(cfgs.get(d, {}) or {}), self.budgets(t, ds), profile, seed))
        return out


def _variant_bases(refs: list[str], suite_defenses: list[str]) -> list[str]:
    """``spt:indiv`` -> ``spt`` when ``spt`` is one of the suite's defenses (a table label names one certificate
    variant of a defense; the defense runs once and reports all its variants), without duplicates."""
    out = []
    for ref in refs:
        base = ref.split(":")[0] if ":" in ref and ref.split(":")[0] in suite_defenses else ref
        if base not in out:
            out.append(base)
    return out


def suite_names() -> list[str]:
    return sorted(p.stem for p in SUITE_DIR.glob("*.yaml"))


def load_suite(name_or_path: str) -> Suite:
    """Load a packaged suite by name, or a YAML file by path."""
    path = Path(name_or_path)
    if not (path.suffix in {".yaml", ".yml"} and path.exists()):
        if name_or_path not in suite_names():
            raise unknown_name("suite", name_or_path, suite_names())
        path = SUITE_DIR / f"{name_or_path}.yaml"
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise BenchError(f"suite file {path} is not valid YAML: {exc}") from exc
    if isinstance(raw, dict) and raw.get("kind") == "corruptions":
        from benchmark.suites.corruption_suite import parse_corruption_suite

        return parse_corruption_suite(raw, str(path))
    return parse_suite(raw, str(path))


def _check_keys(where: str, got: dict, valid: set[str]) -> None:
    if not isinstance(got, dict):
        raise BenchError(f"{where} must be a mapping, got {type(got).__name__}.")
    for k in got:
        if k not in valid:
            close = difflib.get_close_matches(str(k), sorted(valid), n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            raise BenchError(f"{where}: unknown key '{k}'.{hint} Valid keys: {', '.join(sorted(valid))}.")


def parse_suite(raw: Any, source: str = "<dict>") -> Suite:
    """Validate a suite mapping (registry names are checked too) and build a :class:`Suite`."""
    from benchmark.datasets import dataset_names
    from benchmark.defenses import get_defense_class
    from benchmark.transformations import transformation_names

    where = f"suite {source}"
    _check_keys(where, raw, TOP_KEYS)
    for key in ("name", "datasets", "defenses", "profiles", "transformations"):
        if key not in raw:
            raise BenchError(f"{where}: missing required key '{key}'.")
    for ds in raw["datasets"]:
        if ds not in dataset_names():
            raise unknown_name("dataset", ds, dataset_names())
    for d in raw["defenses"]:
        get_defense_class(d)  # raises with a close match if unknown
    profiles = {}
    attack = _parse_attack(where, raw.get("attack"))
    for pname, p in raw["profiles"].items():
        _check_keys(f"{where}: profile '{pname}'", p, PROFILE_KEYS)
        _check_keys(f"{where}: profile '{pname}' attacks", p.get("attacks") or {}, {a["name"] for a in attack})
        profiles[pname] = Profile(name=pname, **{**p, "attacks": dict(p.get("attacks") or {})})
    for t, tcfg in raw["transformations"].items():
        if t not in transformation_names():
            raise unknown_name("transformation", t, transformation_names())
        tcfg = tcfg or {}
        _check_keys(f"{where}: transformation '{t}'", tcfg, TRANSFORM_KEYS)
        for d in tcfg.get("run") or []:
            if d not in raw["defenses"]:
                raise BenchError(f"{where}: transformation '{t}' runs defense '{d}', which is not in the suite's "
                                 f"defenses {raw['defenses']}.")
        for d in (tcfg.get("defenses") or {}):
            if d not in raw["defenses"]:
                raise BenchError(f"{where}: transformation '{t}' configures defense '{d}', which is not in "
                                 f"the suite's defenses {raw['defenses']}.")
        raw["transformations"][t] = tcfg
    suite = Suite(name=raw["name"], description=raw.get("description", ""), datasets=list(raw["datasets"]),
                  defenses=list(raw["defenses"]), attack=attack,
                  profiles=profiles, transformations=raw["transformations"], source=source, raw=raw)
    for p in profiles.values():
        suite.attacks(p)  # unknown attack names / settings fail here, not mid-run
    return suite


def _parse_attack(where: str, value: Any) -> list[dict]:
    """``attack:`` is a list of ``{name, **settings}`` (one mapping is accepted as a list of one)."""
    from attacks import get_attack_class

    if value is None:
        return [dict(a) for a in DEFAULT_ATTACKS]
    entries = [value] if isinstance(value, dict) else value
    if not isinstance(entries, list) or not entries:
        raise BenchError(f"{where}: 'attack' must be a non-empty list of mappings like {{name: pgd_eot, steps: 10}}, "
                         f"got {value!r}.")
    out, names = [], set()
    for e in entries:
        if not isinstance(e, dict) or "name" not in e:
            raise BenchError(f"{where}: every attack entry needs a 'name', got {e!r}.")
        get_attack_class(e["name"])  # unknown names fail with a close match
        if e["name"] in names:
            raise BenchError(f"{where}: attack '{e['name']}' is listed twice; list each attack once.")
        names.add(e["name"])
        out.append(dict(e))
    return out
