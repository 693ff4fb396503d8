"""Parse and validate a suite YAML and expand it to tasks.

A suite names datasets, defenses, a list of attacks, profiles (protocol sizes and
per-profile attack settings) and, per
transformation, budgets (per dataset, with a ``default``) and per-defense
configs. Unknown keys at any level are an error naming the key and the valid
ones, so a typo never silently changes a protocol. Datasets, defenses, attacks and transformations may be
plugins (``path/to/file.py:Name``, ``benchmark.infra.registry``); a plugin transformation is named by its
``name`` in tasks and tables. ``parse_header`` and ``parse_profiles``
are the parsing every kind of suite shares (``benchmark.suites.corruption_suite`` uses them too).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from benchmark.errors import BenchError, unknown_name
from benchmark.infra.io import config_hash
from benchmark.suites.profile import PROFILE_KEYS, Profile, check_keys, task_identity

__all__ = ["Profile", "Suite", "Task", "parse_suite", "parse_header", "parse_profiles", "load_transformation_suite",
           "read_suite_file", "suite_names", "task_identity", "PROFILE_KEYS"]

SUITE_DIR = Path(__file__).resolve().parent
TOP_KEYS = {"name", "description", "datasets", "defenses", "attack", "profiles", "transformations"}
TRANSFORM_KEYS = {"budgets", "defenses", "run", "reference_budget"}  # run: only these suite defenses on this
# transformation; reference_budget: the budget of the leaderboard page's summary (default: the largest)
DEFAULT_ATTACKS = [{"name": "worst_of_k"}]


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
    #: plugin transformations: table name (its ``name``) -> reference (``file.py:Name``) as the suite gives it
    transformation_plugins: dict[str, str] = field(default_factory=dict)

    def profile(self, name: str) -> Profile:
        if name not in self.profiles:
            raise unknown_name("profile", name, self.profiles)
        return self.profiles[name]

    def load_plugins(self) -> None:
        """Register the plugin transformations' names in this process (a spawned worker starts without them)."""
        from benchmark.transformations import register_plugin

        for ref in self.transformation_plugins.values():
            register_plugin(ref)

    def transformation_name(self, ref: str) -> str:
        """The suite's name of transformation ``ref`` (a name, or a plugin's reference as the suite gives it)."""
        if ref in self.transformations:
            return ref
        by_ref = {r: n for n, r in self.transformation_plugins.items()}
        if ref in by_ref:
            return by_ref[ref]
        if ":" in ref:
            raise BenchError(f"transformation '{ref}' is not in suite '{self.name}'; a plugin transformation needs its "
                             "budgets: add it under `transformations:` of a suite file (see docs/python-api.md).")
        raise unknown_name("transformation", ref, self.transformations, f"in suite '{self.name}'")

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

    def reference_budget(self, transformation: str, dataset: str) -> float:
        """The budget the leaderboard page's summary shows for ``transformation``: the largest budget the suite
        lists for it on ``dataset``, unless its entry sets ``reference_budget`` (a number, or one per dataset
        with a ``default``, like ``budgets``), which must be one of those budgets."""
        budgets = self.budgets(transformation, dataset)
        ref = self.transformations[transformation].get("reference_budget")
        if isinstance(ref, dict):
            ref = ref.get(dataset, ref.get("default"))
        if ref is None:
            return budgets[-1]
        if float(ref) not in budgets:
            raise BenchError(f"suite '{self.name}': transformation '{transformation}' has reference_budget {ref}, "
                             f"which is not one of its budgets {list(budgets)} on '{dataset}'.")
        return float(ref)

    def tasks(self, profile: Profile, seed: int, datasets: list[str] | None = None,
              defenses: list[str] | None = None, transformations: list[str] | None = None) -> list[Task]:
        """Expand to tasks, in a fixed order (dataset, transformation, defense)."""
        out = []
        for ds in datasets or self.datasets:
            for t in transformations or list(self.transformations):
                t = self.transformation_name(t)
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
    """Names of the packaged suites (YAML files next to this module)."""
    return sorted(p.stem for p in SUITE_DIR.glob("*.yaml"))


def read_suite_file(name_or_path: str) -> tuple[dict, Path]:
    """The raw mapping of a packaged suite (by name) or of a YAML file (by path), and its path."""
    path = Path(name_or_path)
    if not (path.suffix in {".yaml", ".yml"} and path.exists()):
        if name_or_path not in suite_names():
            raise unknown_name("suite", name_or_path, suite_names())
        path = SUITE_DIR / f"{name_or_path}.yaml"
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise BenchError(f"suite file {path} is not valid YAML: {exc}") from exc
    return raw, path


def load_transformation_suite(name_or_path: str) -> Suite:
    """Load a transformation suite (``benchmark.suites.load_suite`` loads every kind)."""
    raw, path = read_suite_file(name_or_path)
    if isinstance(raw, dict) and raw.get("kind") is not None:
        raise BenchError(f"suite {path} is a '{raw['kind']}' suite, where a transformation suite (e.g. semantic) "
                         "is needed.")
    return parse_suite(raw, str(path))


def parse_suite(raw: Any, source: str = "<dict>") -> Suite:
    """Validate a suite mapping (registry names are checked too) and build a :class:`Suite`."""
    from benchmark.transformations import register_plugin

    where = parse_header(raw, source, TOP_KEYS, ("name", "datasets", "defenses", "profiles", "transformations"))
    attack = _parse_attack(where, raw.get("attack"))
    profiles = parse_profiles(where, raw["profiles"], {a["name"] for a in attack})
    transformations: dict[str, dict] = {}
    plugins: dict[str, str] = {}
    for t, tcfg in raw["transformations"].items():
        name = register_plugin(t)  # unknown names fail with a close match; a plugin is named by its `name`
        if name in transformations:
            raise BenchError(f"{where}: transformation '{t}' is named '{name}', like another of the suite's "
                             "transformations; list each transformation once.")
        if name != t:
            plugins[name] = t
        tcfg = tcfg or {}
        check_keys(f"{where}: transformation '{t}'", tcfg, TRANSFORM_KEYS)
        for d in tcfg.get("run") or []:
            if d not in raw["defenses"]:
                raise BenchError(f"{where}: transformation '{t}' runs defense '{d}', which is not in the suite's "
                                 f"defenses {raw['defenses']}.")
        for d in (tcfg.get("defenses") or {}):
            if d not in raw["defenses"]:
                raise BenchError(f"{where}: transformation '{t}' configures defense '{d}', which is not in "
                                 f"the suite's defenses {raw['defenses']}.")
        raw["transformations"][t] = transformations[name] = tcfg
    suite = Suite(name=raw["name"], description=raw.get("description", ""), datasets=list(raw["datasets"]),
                  defenses=list(raw["defenses"]), attack=attack,
                  profiles=profiles, transformations=transformations, source=source, raw=raw,
                  transformation_plugins=plugins)
    for p in profiles.values():
        suite.attacks(p)  # unknown attack names / settings fail here, not mid-run
    return suite


def parse_header(raw: Any, source: str, top_keys: set[str], required: tuple[str, ...]) -> str:
    """Checks every kind of suite shares: no unknown top-level key, the ``required`` keys present, registered
    datasets and defenses. Returns the ``where`` prefix of the parser's error messages."""
    from benchmark.datasets import get_dataset
    from benchmark.defenses import get_defense_class

    where = f"suite {source}"
    check_keys(where, raw, top_keys)
    for key in required:
        if key not in raw:
            raise BenchError(f"{where}: missing required key '{key}'.")
    for ds in raw["datasets"]:
        get_dataset(ds)  # unknown names fail with a close match; a plugin file is loaded and checked
    for d in raw["defenses"]:
        get_defense_class(d)  # raises with a close match if unknown
    return where


def parse_profiles(where: str, raw_profiles: dict, attack_names: set[str]) -> dict[str, Profile]:
    """The ``profiles:`` mapping of any kind of suite; a profile's ``attacks`` may only name ``attack_names``
    (the suite's attacks; none in a suite without attacks)."""
    profiles = {}
    for pname, p in raw_profiles.items():
        check_keys(f"{where}: profile '{pname}'", p, PROFILE_KEYS)
        check_keys(f"{where}: profile '{pname}' attacks", p.get("attacks") or {}, attack_names)
        profiles[pname] = Profile(name=pname, **{**p, "attacks": dict(p.get("attacks") or {})})
    return profiles


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
