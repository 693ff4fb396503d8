"""Registry of semantic transformations (lazy: modules are imported on first use).

``get_transformation(name)`` returns the module-level :class:`Transformation`
instance; ``transformation_names()`` lists the registered names. Importing this
package imports only :mod:`base` (torch), not kornia.
"""
from __future__ import annotations

import importlib

from benchmark.errors import unknown_name
from benchmark.transformations.base import Transformation, check_images

__all__ = ["Transformation", "check_images", "get_transformation", "transformation_names", "REGISTRY"]

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

_CACHE: dict[str, Transformation] = {}


def transformation_names() -> list[str]:
    """Registered transformation names, in registry order."""
    return list(REGISTRY)


def get_transformation(name: str) -> Transformation:
    """The registered transformation ``name``; unknown names raise a BenchError with a hint."""
    if name not in REGISTRY:
        raise unknown_name("transformation", name, REGISTRY)
    if name not in _CACHE:
        module, attr = REGISTRY[name].split(":")
        _CACHE[name] = getattr(importlib.import_module(module), attr)
    return _CACHE[name]
