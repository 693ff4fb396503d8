"""Defense registry: built-ins, installed plugins (entry points) and ``path.py:Class`` / ``pkg.mod:Class``.

Lookups are lazy: importing this module imports no defense (``benchmark.infra.registry``).
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from benchmark.datasets.base import defense_code
from benchmark.errors import BenchError
from benchmark.infra.registry import Accepts, Registry

#: built-in defenses: name -> "module:Class"
BUILTIN: dict[str, str] = {
    "vanilla": "baselines.vanilla:Vanilla",
    "tss": "baselines.tss:TSS",
    "gsmooth": "baselines.gsmooth.defense:GSmooth",
    "semanify": "baselines.semanify.defense:Semanify",
    "interval": "baselines.semanify.defense:Interval",
    "enumeration": "baselines.semanify.enumeration:Enumeration",
    "deepg": "baselines.deepg.defense:DeepG",
    "augmix": "baselines.augmix:AugMix",
    "spt": "baselines.spt.defense:SPT",
}

ENTRY_POINT_GROUP = "semantic_bench.defenses"


def _is_defense_class(obj) -> bool:
    from benchmark.defense import Defense

    return isinstance(obj, type) and issubclass(obj, Defense)


#: the registry: names, installed plugins and file/module plugins, whose code runs in the sandbox (executed
#: again on each lookup: the submission checker records what a file's module code tries)
REGISTRY: Registry[type] = Registry(
    "defense", BUILTIN,
    Accepts(_is_defense_class, what="subclass of benchmark.defense.Defense", found="Defense subclasses",
            fix="see docs/submitting.md or `bench template my_defense.py`"),
    entry_point_group=ENTRY_POINT_GROUP, confine=defense_code, module_prefix="bench_submission_",
    cache_plugins=False)


def defense_names() -> list[str]:
    """Built-in and installed defense names."""
    return REGISTRY.names()


def split_tag(ref: str) -> tuple[str, str]:
    """``"gsmooth@s1=5"`` -> ``("gsmooth", "s1=5")``: a suite may run one defense under several configs,
    each tagged; the tag becomes part of the table label (``gsmooth@s1=5``, ``gsmooth@s1=5:paper``)."""
    base, sep, tag = ref.rpartition("@")
    if sep and base and tag and not any(ch in tag for ch in "/:\\"):
        return base, tag
    return ref, ""


def get_defense_class(ref: str) -> type:
    """Resolve a defense name, ``file.py:Class`` or ``package.module:Class`` (optionally ``@tag``ged)."""
    return REGISTRY.get(split_tag(ref)[0])


def defense_classes_in(module) -> list[str]:
    """Names of the Defense subclasses defined in ``module`` (not imported into it)."""
    return REGISTRY.members(module)


def plugin_provenance(ref: str) -> dict | None:
    """Path and sha256 of the file of a plugin defense (None for a built-in): recorded in the run folder."""
    return REGISTRY.provenance(split_tag(ref)[0])


@contextmanager
def using_instance(defense) -> Iterator[str]:
    """While open, the reference this yields (the defense's ``name``, else its class name) resolves in this
    process to a class whose construction returns ``defense`` itself, so a run evaluates that very object
    (``benchmark.evaluate``; the suite's config of that name is not applied: the object is configured)."""
    from benchmark.defense import Defense

    if not isinstance(defense, Defense):
        raise BenchError(f"expected a benchmark.defense.Defense instance, got {type(defense).__name__}.")
    cls = type(defense)
    ref = cls.name or cls.__name__
    if any(ch in ref for ch in ":@/"):
        raise BenchError(f"defense name {ref!r} contains ':', '@' or '/'; give its class another `name`.")

    def _same(_cls, **_config):  # no __init__ follows: ``defense`` is not an instance of the subclass
        return defense

    bound = type(cls.__name__, (cls,), {"__new__": _same, "__module__": cls.__module__,
                                        "__qualname__": cls.__qualname__})
    with REGISTRY.override(ref, bound):
        yield ref
