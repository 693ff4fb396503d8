"""Registry of semantic transformations (lazy: modules are imported on first use).

``get_transformation(name)`` returns the module-level :class:`Transformation`
instance; ``transformation_names()`` lists the registered names. Importing this
package imports only :mod:`base` (torch), not kornia.

A plugin is ``path/to/file.py:Name`` (or ``package.module:Name``): a :class:`Transformation` instance, or a
subclass (instantiated without arguments). Tables name it by its ``name`` attribute:
``register_plugin(ref)`` resolves it and lets that name stand for it in this process.
"""
from __future__ import annotations

from benchmark.errors import BenchError
from benchmark.infra.registry import Accepts, Registry
from benchmark.transformations.base import Transformation, check_images

__all__ = ["Transformation", "check_images", "get_transformation", "transformation_names", "register_plugin",
           "plugin_provenance", "plugin_refs", "REGISTRY"]

#: name -> "module:attribute" of the registered instance.
REGISTRY: dict[str, str] = {
    "gaussian_blur": "benchmark.transformations.gaussian_blur:GAUSSIAN_BLUR",
    "translation": "benchmark.transformations.translation:TRANSLATION",
    "brightness": "benchmark.transformations.photometric:BRIGHTNESS",
    "contrast_brightness": "benchmark.transformations.photometric:CONTRAST_BRIGHTNESS",
    "rotation": "benchmark.transformations.geometric:ROTATION",
    "scaling": "benchmark.transformations.geometric:SCALING",
    "rotational_blur": "benchmark.transformations.multi_view_blur:ROTATIONAL_BLUR",
    "defocus_blur": "benchmark.transformations.kernel_blur:DEFOCUS_BLUR",
    "zoom_blur": "benchmark.transformations.multi_view_blur:ZOOM_BLUR",
    "pixelate": "benchmark.transformations.pixelate:PIXELATE",
    "motion_blur": "benchmark.transformations.kernel_blur:MOTION_BLUR",
}



def _is_transformation(obj) -> bool:
    return isinstance(obj, Transformation) or (isinstance(obj, type) and issubclass(obj, Transformation))


def _instance(obj) -> Transformation:
    """A plugin's Transformation instance (a subclass is instantiated); it needs a ``name`` for the tables."""
    t = obj() if isinstance(obj, type) else obj
    if not t.name:
        raise BenchError(f"transformation {type(t).__name__} has an empty `name`; set `name = \"my_transformation\"` "
                         "in its class (tables and rows name it so).")
    return t


_REGISTRY: Registry[Transformation] = Registry(
    "transformation", REGISTRY,
    Accepts(_is_transformation, what="Transformation instance or subclass", found="Transformations",
            fix="write `class MyTransformation(Transformation)` with a `name` and `_apply` (benchmark.transformations"
                ".base); an instance of it or the class itself is accepted", convert=_instance))


def transformation_names() -> list[str]:
    """Registered transformation names, in registry order."""
    return list(REGISTRY)


def get_transformation(name: str) -> Transformation:
    """The transformation ``name`` (registered, a loaded plugin's own name, or a plugin reference
    ``file.py:Name``); unknown names raise a BenchError with a hint."""
    return _REGISTRY.get(name)


def register_plugin(ref: str) -> str:
    """The table name of ``ref``: a registered name itself; for a plugin, its ``name``, which from now on
    stands for it in this process (refused if it is a registered name or another plugin's)."""
    if ref in REGISTRY or not _REGISTRY.is_plugin(ref):
        get_transformation(ref)  # unknown names fail with a close match
        return ref
    name = get_transformation(ref).name
    _REGISTRY.alias(name, ref)
    return name


def plugin_refs() -> dict[str, str]:
    """name -> reference of the plugin transformations registered in this process."""
    return _REGISTRY.aliases()


def plugin_provenance(ref: str) -> dict | None:
    """Path and sha256 of the file of a plugin transformation (by reference or name) and its table name; None
    for a registered name."""
    found = _REGISTRY.provenance(ref)
    return None if found is None else {**found, "name": get_transformation(ref).name}
