"""Attacks in transformation-parameter space used by the harness, and a pixel-space reference.

Registry of parameter-space attacks (``ParameterAttack`` subclasses, imported on first use):

* ``pgd_eot``: PGD over the parameter with gradients averaged over the defense's noise (EoT);
  falls back to worst-of-k where there is no gradient (pixelate) or no attack surface;
* ``worst_of_k``: the region's extreme points plus k random parameters;
* ``grid``: a regular grid over the region.

A suite lists attacks under ``attack:``; an example is empirically robust at a budget only if
it is robust under every listed attack. A suite may also name a plugin, ``path/to/file.py:Class`` (or
``package.module:Class``), a ``ParameterAttack`` subclass (``benchmark.infra.registry``). The pixel-space
l-inf/l2 attacks through torchattacks (:mod:`benchmark.studies.pixel_attack`) are a sanity reference for
undefended models, not part of the registry.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from benchmark.api import Accepts, BenchError, Registry

__all__ = ["REGISTRY", "attack_names", "get_attack_class", "build_attack", "resolve_settings", "plugin_provenance"]

#: name -> "module:Class"
REGISTRY: dict[str, str] = {
    "pgd_eot": "attacks.pgd_eot:PGDEoT",
    "worst_of_k": "attacks.worst_of_k:WorstOfK",
    "grid": "attacks.grid:GridSearch",
}




def _is_attack_class(obj) -> bool:
    from attacks.base import ParameterAttack

    return isinstance(obj, type) and issubclass(obj, ParameterAttack)


_REGISTRY: Registry[type] = Registry(
    "attack", REGISTRY,
    Accepts(_is_attack_class, what="subclass of attacks.base.ParameterAttack", found="ParameterAttack subclasses",
            fix="write `class MyAttack(ParameterAttack)` with `name`, `defaults` and `run` (attacks/base.py)"))


def attack_names() -> list[str]:
    """Registered attack names."""
    return list(REGISTRY)


def get_attack_class(name: str):
    """The attack class registered as ``name`` or the plugin ``file.py:Class``; unknown names raise a
    BenchError with a close match."""
    return _REGISTRY.get(name)


def plugin_provenance(ref: str) -> dict | None:
    """Path and sha256 of the file of a plugin attack (None for a registered name)."""
    return _REGISTRY.provenance(ref)


def resolve_settings(entry: Mapping[str, Any], profile: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Full settings of one suite attack entry under a profile.

    Precedence (later wins): the class defaults, profile fields named by the class's
    ``from_profile`` (e.g. ``attack_k``), the suite entry, the profile's ``attacks[name]`` overrides.
    Returns ``{"name": ..., **settings}``; unknown names or settings raise a BenchError.
    """
    if not isinstance(entry, Mapping) or "name" not in entry:
        raise BenchError(f"an attack entry must be a mapping with a 'name' (one of {attack_names()}), got {entry!r}.")
    name = entry["name"]
    cls = get_attack_class(name)
    profile = dict(profile or {})
    settings = dict(cls.defaults)
    settings.update({k: profile[f] for k, f in cls.from_profile.items() if profile.get(f) is not None})
    settings.update({k: v for k, v in entry.items() if k != "name"})
    settings.update((profile.get("attacks") or {}).get(name) or {})
    cls(**settings)  # validates names and values
    return {"name": name, **settings}


def build_attack(spec: Mapping[str, Any]):
    """Instantiate ``{"name": ..., **settings}`` (as returned by :func:`resolve_settings`)."""
    spec = dict(spec)
    return get_attack_class(spec.pop("name"))(**spec)
