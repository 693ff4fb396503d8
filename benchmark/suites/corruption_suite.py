"""A corruption suite (``kind: corruptions``): accuracy of each defense's own prediction on
CIFAR-10-C-layout data, per corruption and severity (GSmooth paper Table 4 shape).

Each corruption names the registry transformation whose task the defense is prepared for
(its models, smoothing noise and config): the corruption's own transformation where it is
one of ours (e.g. ``contrast: contrast_brightness``), a stated proxy otherwise (e.g.
``gaussian_noise: gaussian_blur``). Defense configs and budgets (which select the models, e.g.
GSmooth's surrogate range) come from the suite named by ``models_from``, so the corruption run
uses exactly the models of that suite's zoo. A defense that does not support the mapped
transformation shows "--".
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from benchmark.errors import BenchError, unknown_name
from benchmark.infra.io import config_hash
from benchmark.suites.loader import Suite, load_transformation_suite, parse_header, parse_profiles
from benchmark.suites.profile import Profile, task_identity

TOP_KEYS = {"name", "kind", "description", "datasets", "defenses", "models_from", "profiles", "corruptions"}
SEVERITIES = (1, 2, 3, 4, 5)


@dataclass(frozen=True)
class CorruptionTask:
    """One defense (prepared for ``transformation``) evaluated on one corruption, all severities."""

    suite: str
    dataset: str
    corruption: str
    transformation: str
    defense: str
    defense_config: dict
    budgets: tuple[float, ...]  # of the model task in ``models_from`` (they select the models)
    profile: Profile
    seed: int

    @property
    def hash(self) -> str:
        return config_hash({"kind": "corruptions", **task_identity(self)})

    @property
    def label(self) -> str:
        return f"{self.dataset}/{self.corruption}/{self.defense}"


@dataclass
class CorruptionSuite:
    name: str
    description: str
    datasets: list[str]
    defenses: list[str]
    models_from: Suite
    profiles: dict[str, Profile]
    corruptions: dict[str, str]  # corruption -> transformation whose models are used
    source: str = ""
    raw: dict = field(default_factory=dict)
    kind: str = "corruptions"
    attack: dict = field(default_factory=dict)  # none: kept for the run config's shape

    def load_plugins(self) -> None:
        """Register the plugin transformations of ``models_from`` in this process (see ``Suite.load_plugins``)."""
        self.models_from.load_plugins()

    def profile(self, name: str) -> Profile:
        if name not in self.profiles:
            raise unknown_name("profile", name, self.profiles)
        return self.profiles[name]

    def tasks(self, profile: Profile, seed: int, datasets: list[str] | None = None,
              defenses: list[str] | None = None, corruptions: list[str] | None = None) -> list[CorruptionTask]:
        """Expand to tasks in a fixed order (dataset, corruption, defense)."""
        from benchmark.datasets import get_dataset

        out = []
        for ds in datasets or self.datasets:
            clean = getattr(get_dataset(ds), "clean_dataset", None)
            if clean is None:
                raise BenchError(f"suite '{self.name}': dataset '{ds}' is not a corruption dataset "
                                 "(use cifar10c or digits-c).")
            for c in corruptions or list(self.corruptions):
                if c not in self.corruptions:
                    raise unknown_name("corruption", c, self.corruptions, f"in suite '{self.name}'")
                t = self.corruptions[c]
                cfgs = self.models_from.transformations[t].get("defenses", {}) or {}
                for d in defenses or self.defenses:
                    out.append(CorruptionTask(self.name, ds, c, t, d, dict(cfgs.get(d, {}) or {}),
                                              self.models_from.budgets(t, clean), profile, seed))
        return out


def parse_corruption_suite(raw: Any, source: str = "<dict>") -> CorruptionSuite:
    """Validate a ``kind: corruptions`` suite mapping and build a :class:`CorruptionSuite`."""
    from benchmark.datasets.cifar10c import ALL_CORRUPTIONS
    from benchmark.transformations import transformation_names

    where = parse_header(raw, source, TOP_KEYS,
                         ("name", "datasets", "defenses", "models_from", "profiles", "corruptions"))
    try:
        models_from = load_transformation_suite(raw["models_from"])
    except BenchError as exc:
        raise BenchError(f"{where}: models_from must name a transformation suite (e.g. semantic): {exc}") from exc
    profiles = parse_profiles(where, raw["profiles"], set())  # no attacks in a corruption suite
    corruptions = raw["corruptions"]
    if not isinstance(corruptions, dict) or not corruptions:
        raise BenchError(f"{where}: corruptions must map each corruption to a transformation.")
    mapped: dict[str, str] = {}
    for c, t in corruptions.items():
        if c not in ALL_CORRUPTIONS:
            raise unknown_name("corruption", str(c), ALL_CORRUPTIONS)
        if t not in transformation_names() and t not in models_from.transformations and ":" not in str(t):
            raise unknown_name("transformation", str(t), transformation_names(), f"(for corruption '{c}')")
        if ":" in str(t):
            t = models_from.transformation_name(str(t))  # a plugin's reference -> its name
        mapped[c] = t
        if t not in models_from.transformations:
            raise BenchError(f"{where}: corruption '{c}' uses transformation '{t}', which suite "
                             f"'{models_from.name}' (models_from) does not have.")
    return CorruptionSuite(name=raw["name"], description=raw.get("description", ""), datasets=list(raw["datasets"]),
                           defenses=list(raw["defenses"]), models_from=models_from, profiles=profiles,
                           corruptions=mapped, source=source, raw=raw)
