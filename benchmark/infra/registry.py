"""One lazy registry for each kind of extension point (defenses, transformations, attacks, datasets).

A reference is resolved, in order, as

* a registered name: a lazy ``"module:attr"`` entry, imported on first use (importing a registry imports none);
* an installed plugin name (a package's entry point in ``entry_point_group``), for the kinds that have one;
* a name a plugin gave itself (``alias``; a plugin transformation's ``name``, under which tables show it);
* ``path/to/file.py:Name``: ``Name`` from a user's file, executed as a module;
* ``package.module:Name``: ``Name`` from an importable module.

Every failure is one :class:`~benchmark.errors.BenchError` naming the problem and the fix: an unknown name
with a did-you-mean (``unknown_name``), a missing file, ``file.py`` without ``:Name`` (listing what the file
defines), an attribute that is missing or of the wrong type, an import that fails. ``confine`` wraps the
execution of plugin code that is not the harness's own (defenses run it in the sandbox,
``benchmark.datasets.base.defense_code``). ``provenance`` names a plugin's file and its sha256 for the run folder.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import Any, Generic, TypeVar

from benchmark.errors import BenchError, unknown_name

T = TypeVar("T")

#: top-level packages whose modules are the harness's own (never confined)
HARNESS_PACKAGES = ("benchmark", "baselines")


@dataclass(frozen=True)
class Accepts:
    """What a registry's plugins must be, in the words of its error messages.

    ``is_member(obj)``: whether ``obj`` (a module attribute) is acceptable; ``convert(obj)``: the registered
    object made from it (e.g. a transformation class is instantiated); ``what``: e.g. "subclass of
    benchmark.defense.Defense" ("'x.py:A' is not a ..."); ``found``: e.g. "Defense subclasses" ("... found
    in it: A, B."); ``fix``: how to write one (appended to the errors of files that define none).
    """

    is_member: Callable[[Any], bool]
    what: str
    found: str
    fix: str = ""
    convert: Callable[[Any], Any] | None = None


class Registry(Generic[T]):
    """Names (lazy ``"module:attr"`` entries) and plugin references of one kind, resolved on first use."""

    def __init__(self, kind: str, entries: Mapping[str, str], accepts: Accepts, *,
                 entry_point_group: str | None = None, confine: Callable[[str], AbstractContextManager] | None = None,
                 module_prefix: str = "bench_plugin_", cache_plugins: bool = True):
        """``entries``: name -> "module:attr" (the mapping is read on each lookup, so a module may keep it
        public); ``cache_plugins``: keep a plugin's object while its file is unchanged (False: execute the file
        again on each lookup, as the defense checker expects)."""
        self.kind, self.entries, self.accepts = kind, entries, accepts
        self.entry_point_group, self.confine, self.module_prefix = entry_point_group, confine, module_prefix
        self.cache_plugins = cache_plugins
        self._cache: dict[str, T] = {}
        self._plugin_cache: dict[tuple[str, str], T] = {}
        self._aliases: dict[str, str] = {}
        self._overrides: dict[str, T] = {}

    # --------------------------------------------------------------------------------------- names
    def installed(self) -> dict[str, str]:
        """Installed plugins (entry points of ``entry_point_group``): name -> "module:attr"."""
        if not self.entry_point_group:
            return {}
        return {ep.name: ep.value for ep in entry_points(group=self.entry_point_group)}

    def names(self) -> list[str]:
        """Registered and installed names, registered first, in registry order."""
        return list(self.entries) + [n for n in self.installed() if n not in self.entries]

    def known(self, ref: str) -> bool:
        """Whether ``ref`` is a registered, installed, aliased or overridden name (not a plugin reference)."""
        return ref in self._overrides or ref in self.entries or ref in self._aliases or ref in self.installed()

    @contextmanager
    def override(self, name: str, obj: T) -> Iterator[None]:
        """While open, ``name`` resolves to ``obj`` in this process, before any registered name (an object
        built in Python, e.g. a notebook's defense, run under a name)."""
        before = self._overrides.get(name)
        self._overrides[name] = obj
        try:
            yield
        finally:
            if before is None:
                self._overrides.pop(name, None)
            else:
                self._overrides[name] = before

    def is_plugin(self, ref: str) -> bool:
        """Whether ``ref`` is a plugin reference (``file.py:Name`` or ``package.module:Name``), not a name."""
        return not self.known(ref) and ":" in ref

    def alias(self, name: str, ref: str) -> None:
        """Let ``name`` stand for the plugin ``ref`` in this process (a plugin's own name, e.g. for tables); the
        latest plugin of a name wins (a notebook may load a suite again from another file). A registered name
        is refused."""
        if name in self.entries or name in self.installed():
            raise BenchError(f"{self.kind} plugin '{ref}' is named '{name}', which is a registered {self.kind}; give "
                             f"it another `name`.")
        self._aliases[name] = ref

    def aliases(self) -> dict[str, str]:
        """name -> plugin reference of the names plugins gave themselves in this process."""
        return dict(self._aliases)

    # ------------------------------------------------------------------------------------- lookups
    def get(self, ref: str) -> T:
        """The object ``ref`` names (see the module docstring); one BenchError with a fix otherwise."""
        if ref in self._overrides:
            return self._overrides[ref]
        target = self.entries.get(ref)
        if target is not None:
            if ref not in self._cache:
                module, attr = target.split(":")
                self._cache[ref] = self._convert(getattr(importlib.import_module(module), attr), ref, None)
            return self._cache[ref]
        ref = self._aliases.get(ref, ref)
        target = self.installed().get(ref)
        if target is None and ":" not in ref:
            if ref.endswith(".py"):
                raise BenchError(self._file_without_name(ref))
            raise unknown_name(self.kind, ref, self.names() + list(self._aliases))
        return self._load(target or ref, ref)

    def _load(self, target: str, ref: str) -> T:
        module_ref, _, attr = target.rpartition(":")
        key = (target, _digest(module_ref)) if self.cache_plugins else None
        if key is not None and key in self._plugin_cache:
            return self._plugin_cache[key]
        module = self._import(module_ref, ref)
        obj = getattr(module, attr, None)
        if obj is None:
            raise BenchError(f"'{module_ref}' has no attribute '{attr}' ({self.kind} '{ref}'). {self._found(module)}")
        out = self._convert(obj, ref, module)
        if key is not None:
            self._plugin_cache[key] = out
        return out

    def _convert(self, obj: Any, ref: str, module: ModuleType | None) -> T:
        if not self.accepts.is_member(obj):
            found = f" {self._found(module)}" if module is not None else ""
            raise BenchError(f"'{ref}' is not a {self.accepts.what}.{found}")
        if self.accepts.convert is None:
            return obj
        try:
            return self.accepts.convert(obj)
        except BenchError:
            raise
        except Exception as exc:
            raise BenchError(f"cannot instantiate {self.kind} '{ref}': {type(exc).__name__}: {exc}") from exc

    def members(self, module: ModuleType) -> list[str]:
        """Names of the acceptable objects in ``module`` (classes: only those defined in it, not imported)."""
        return sorted(n for n, v in vars(module).items() if not n.startswith("_") and self.accepts.is_member(v)
                      and (not isinstance(v, type) or v.__module__ == module.__name__))

    def _found(self, module: ModuleType) -> str:
        """Which acceptable objects ``module`` defines, as a sentence for error messages."""
        names = self.members(module)
        fix = f" ({self.accepts.fix})" if self.accepts.fix else ""
        return (f"{self.accepts.found} found in it: {', '.join(names)}." if names
                else f"It defines no {self.accepts.what}{fix}.")

    def _import(self, module_ref: str, ref: str) -> ModuleType:
        """Import ``path/to/file.py`` (executed again on each call) or ``package.module``; one clear error otherwise."""
        try:
            if module_ref.endswith(".py"):
                path = Path(module_ref).expanduser().resolve()
                if not path.exists():
                    raise BenchError(f"{self.kind} file {path} does not exist.")
                mod_name = f"{self.module_prefix}{path.stem}"
                spec = importlib.util.spec_from_file_location(mod_name, path)
                module = importlib.util.module_from_spec(spec)
                sys.modules[mod_name] = module
                with self._confined(ref):  # a plugin's module code is plugin code
                    spec.loader.exec_module(module)
                return module
            if module_ref.split(".")[0] in HARNESS_PACKAGES:
                return importlib.import_module(module_ref)
            with self._confined(ref):
                return importlib.import_module(module_ref)
        except BenchError:
            raise
        except Exception as exc:
            raise BenchError(f"cannot import {self.kind} '{ref}': {type(exc).__name__}: {exc}") from exc

    def _confined(self, ref: str) -> AbstractContextManager:
        return self.confine(ref) if self.confine is not None else nullcontext()

    def _file_without_name(self, ref: str) -> str:
        """The message for ``file.py`` given without ``:Name``: whether it exists and what it defines."""
        path = Path(ref).expanduser()
        if not path.exists():
            return (f"{self.kind} file {path} does not exist (a file-based {self.kind} is given as "
                    "path/to/file.py:Name).")
        names = self.members(self._import(ref, ref))
        if not names:
            fix = f" ({self.accepts.fix})" if self.accepts.fix else ""
            return f"{self.kind} file {path} exists but defines no {self.accepts.what}{fix}."
        return (f"{self.kind} file {path} exists; name the {self.kind} as {path}:{names[0]}. "
                f"{self.accepts.found} found in it: {', '.join(names)}.")

    # ---------------------------------------------------------------------------------- provenance
    def provenance(self, ref: str) -> dict | None:
        """``{"kind", "ref", "path", "sha256"}`` of a plugin (its file, or its module's file); None for a
        registered name. Aliases name their plugin's reference."""
        ref = self._aliases.get(ref, ref)
        if ref in self.entries or ref in self._overrides:
            return None
        target = self.installed().get(ref) or ref
        if ":" not in target:
            return None
        module_ref = target.rpartition(":")[0]
        path = _module_file(module_ref)
        return {"kind": self.kind, "ref": ref, "path": str(path) if path else None,
                "sha256": _digest(module_ref) or None}


def _module_file(module_ref: str) -> Path | None:
    """The file of ``path/to/file.py`` or of an importable module (None where it has none)."""
    if module_ref.endswith(".py"):
        return Path(module_ref).expanduser().resolve()
    try:
        spec = importlib.util.find_spec(module_ref)
    except (ImportError, ValueError):
        return None
    return Path(spec.origin) if spec is not None and spec.origin and spec.origin != "built-in" else None


def _digest(module_ref: str) -> str:
    """sha256 of a plugin's file ("" where there is none): the cache key and the provenance of its code."""
    from benchmark.infra.io import sha256_file

    path = _module_file(module_ref)
    return sha256_file(path) if path is not None and path.is_file() else ""
