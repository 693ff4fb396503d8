"""Defense registry: built-ins, installed plugins (entry points) and ``path.py:Class`` / ``pkg.mod:Class``.

Lookups are lazy: importing this module imports no defense.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
from importlib.metadata import entry_points
from pathlib import Path

from benchmark.datasets.base import defense_code
from benchmark.errors import BenchError, unknown_name

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


def _plugins() -> dict[str, str]:
    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}


def defense_names() -> list[str]:
    """Built-in and installed defense names."""
    return list(BUILTIN) + [n for n in _plugins() if n not in BUILTIN]


def split_tag(ref: str) -> tuple[str, str]:
    """``"gsmooth@s1=5"`` -> ``("gsmooth", "s1=5")``: a suite may run one defense under several configs,
    each tagged; the tag becomes part of the table label (``gsmooth@s1=5``, ``gsmooth@s1=5:paper``)."""
    base, sep, tag = ref.rpartition("@")
    if sep and base and tag and not any(ch in tag for ch in "/:\\"):
        return base, tag
    return ref, ""


def get_defense_class(ref: str) -> type:
    """Resolve a defense name, ``file.py:Class`` or ``package.module:Class`` (optionally ``@tag``ged)."""
    from benchmark.defense import Defense

    ref = split_tag(ref)[0]
    target = BUILTIN.get(ref) or _plugins().get(ref)
    if target is None and ":" not in ref:
        if ref.endswith(".py"):
            raise BenchError(_file_without_class(ref))
        raise unknown_name("defense", ref, defense_names())
    target = target or ref
    module_ref, _, cls_name = target.rpartition(":")
    module = _import(module_ref, ref)
    cls = getattr(module, cls_name, None)
    if cls is None:
        raise BenchError(f"'{module_ref}' has no attribute '{cls_name}' (defense '{ref}'). {_found(module)}")
    if not (isinstance(cls, type) and issubclass(cls, Defense)):
        raise BenchError(f"'{ref}' is not a subclass of benchmark.defense.Defense. {_found(module)}")
    return cls


def _found(module) -> str:
    """Which Defense subclasses ``module`` defines, as a sentence for error messages."""
    names = defense_classes_in(module)
    return (f"Defense subclasses found in it: {', '.join(names)}." if names
            else "It defines no subclass of benchmark.defense.Defense.")


def _import(module_ref: str, ref: str):
    """Import ``path/to/file.py`` or ``package.module``; one clear error otherwise."""
    try:
        if module_ref.endswith(".py"):
            path = Path(module_ref).expanduser().resolve()
            if not path.exists():
                raise BenchError(f"defense file {path} does not exist.")
            mod_name = f"bench_submission_{path.stem}"
            spec = importlib.util.spec_from_file_location(mod_name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[mod_name] = module
            with defense_code(ref):  # the submission's module code is defense code
                spec.loader.exec_module(module)
            return module
        if module_ref.split(".")[0] in ("benchmark", "baselines"):
            return importlib.import_module(module_ref)
        with defense_code(ref):
            return importlib.import_module(module_ref)
    except BenchError:
        raise
    except Exception as exc:
        raise BenchError(f"cannot import defense '{ref}': {type(exc).__name__}: {exc}") from exc


def defense_classes_in(module) -> list[str]:
    """Names of the Defense subclasses defined in ``module`` (not imported into it)."""
    from benchmark.defense import Defense

    return sorted(n for n, v in vars(module).items() if isinstance(v, type) and issubclass(v, Defense)
                  and v.__module__ == module.__name__)


def _file_without_class(ref: str) -> str:
    """The message for ``file.py`` given without ``:Class``: whether it exists and which classes it defines."""
    path = Path(ref).expanduser()
    if not path.exists():
        return f"defense file {path} does not exist (a file-based defense is given as path/to/file.py:ClassName)."
    names = defense_classes_in(_import(ref, ref))
    if not names:
        return (f"defense file {path} exists but defines no subclass of benchmark.defense.Defense "
                "(see docs/submitting.md or `bench template my_defense.py`).")
    return (f"defense file {path} exists; name the class as {path}:{names[0]}. "
            f"Defense subclasses found in it: {', '.join(names)}.")
