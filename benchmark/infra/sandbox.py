"""Confinement of defense code with a Python audit hook (PEP 578).

While defense code runs (``confined``, entered by ``benchmark.datasets.base.defense_code``), the hook
refuses, with a :class:`SandboxViolation` (a ``PermissionError``), and records:

* opening, listing or changing anything under a *protected* path: the datasets' files, the leaderboard
  folders, the run folder's rows (``protect``);
* writing (open for writing, remove, rename, mkdir, chmod, ...) anywhere outside the *writable* paths:
  the run's ``artifacts/`` folder, the model cache's checkpoints, torch's compiler and matplotlib's caches
  (``allow_writes``);
* sockets, subprocesses, ``os.system`` / ``exec*`` / ``spawn*`` / ``fork``, and loading libraries with
  ``ctypes`` other than those installed with Python and its packages (given by absolute path).

The record (``take_attempts``) is what rejects a submission, so a defense that catches the exception is
rejected all the same. The harness's own file access during a defense call (``ctx.train_data()``) runs
under ``harness()``. Audit hooks cannot be removed, so the hook checks a flag the harness toggles; the
flag is process-wide, so threads a defense starts are confined too.

Not enforced (an in-process hook cannot): C extension code that calls the operating system directly
(the audit events are raised by Python and the standard library), foreign functions of libraries loaded
before the defense ran or installed with Python (e.g. ``ctypes.pythonapi``), and the harness's objects in memory.
"""
from __future__ import annotations

import getpass
import os
import sys
import tempfile
import threading
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
#: audit events that change the file system, with how many leading arguments are paths
_CHANGES = {"os.remove": 1, "os.rmdir": 1, "os.mkdir": 1, "os.rename": 2, "os.truncate": 1, "os.chmod": 1,
            "os.chown": 1, "os.link": 2, "os.symlink": 2, "os.utime": 1, "shutil.rmtree": 1, "os.chflags": 1,
            "os.lchmod": 1, "os.lchown": 1}
_LISTINGS = ("os.listdir", "os.scandir", "glob.glob")
_REFUSED = ("socket.", "subprocess.", "os.system", "os.exec", "os.spawn", "os.posix_spawn", "os.fork",
            "os.forkpty", "pty.spawn", "os.startfile")
#: libraries ``ctypes`` may load: those installed with Python and its packages (torchvision loads its ops so)
_LIBRARIES = tuple(dict.fromkeys(os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)))

_protected: list[tuple[str, str]] = []  # (path, rule whose finding an attempt on it becomes)
_writable: list[str] = []
_running: list[str] = []  # defenses whose code runs now (innermost last)
_attempts: list[tuple[str, str]] = []  # (rule, what was tried)
_local = threading.local()  # .off: the hook is not checking in this thread (harness code, or the hook itself)
_installed = False


class SandboxViolation(PermissionError):
    """Defense code tried something it may not (read evaluation data, write outside its run folder, ...)."""


def _real(path) -> str | None:
    """The absolute, symlink-free form of a path argument (None for file descriptors and the like)."""
    if isinstance(path, int) or path is None:
        return None
    try:
        return os.path.realpath(os.fsdecode(path))
    except (TypeError, ValueError):
        return None


def _under(path: str, roots: Iterable[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


def _problem(event: str, args: tuple) -> tuple[str, str] | None:
    """(rule, what) ``event`` would do that defense code may not, or None."""
    if event.startswith(_REFUSED):
        return "sandbox", f"{'opened a network socket' if event.startswith('socket.') else 'called'} ({event})"
    if event == "ctypes.dlopen":
        lib = _real(args[0]) if args and args[0] else None
        if lib is None or not os.path.isabs(os.fsdecode(args[0])) or not _under(lib, _LIBRARIES):
            return "sandbox", f"tried to load the library {args[0] if args else None!r} with ctypes (ctypes.dlopen)"
        return None
    if event == "open":
        path, write = _real(args[0]), bool(args[2] & _WRITE_FLAGS) if isinstance(args[2], int) else False
        return _path_problem(path, write, "open for writing" if write else "open")
    if event in _LISTINGS:
        return _path_problem(_real(args[0]) if args else None, False, "list")
    if event in _CHANGES:
        for a in args[:_CHANGES[event]]:
            p = _path_problem(_real(a), True, event)
            if p:
                return p
    return None


def _refused(path: str) -> str | None:
    """The rule of the protected path ``path`` is under, unless it is under a writable path inside that one
    (a run's artifacts in its folder)."""
    for p, rule in _protected:
        if _under(path, [p]) and not any(_under(w, [p]) and _under(path, [w]) for w in _writable):
            return rule
    return None


def _path_problem(path: str | None, write: bool, what: str) -> tuple[str, str] | None:
    if path is None:
        return None
    rule = _refused(path)
    if rule:
        return rule, f"tried to {what} {path} (protected: evaluation data, leaderboard entries or the run's rows)"
    parent_of_writable = what == "os.mkdir" and any(_under(w, [path]) for w in _writable)  # makedirs(...)
    if write and not _under(path, _writable) and not parent_of_writable:
        return "sandbox", f"tried to {what} {path} (defense code may write only in its run's artifacts folder " \
                          "and the model cache)"
    return None


def _hook(event: str, args: tuple) -> None:
    if not _running or getattr(_local, "off", False):
        return
    problem = None
    _local.off = True
    try:
        problem = _problem(event, args)
        if problem:
            _attempts.append((problem[0], f"defense '{_running[-1]}' {problem[1]}"))
    finally:
        _local.off = False
    if problem:
        raise SandboxViolation(f"sandbox: {problem[1]}; see docs/submitting.md, 'What defense code may do'.")


def install() -> None:
    """Add the audit hook once per process (it stays; it checks nothing outside ``confined``)."""
    global _installed
    if not _installed:
        sys.addaudithook(_hook)
        _installed = True


def default_writable() -> list[Path]:
    """Writable in every confined call: the caches torch's compiler and matplotlib write on first use (the
    harness adds the run's artifacts folder and the model cache)."""
    inductor = os.environ.get("TORCHINDUCTOR_CACHE_DIR") or \
        Path(tempfile.gettempdir()) / f"torchinductor_{getpass.getuser()}"
    mpl = [Path(os.environ["MPLCONFIGDIR"])] if os.environ.get("MPLCONFIGDIR") else \
        [Path.home() / ".cache" / "matplotlib", Path.home() / ".config" / "matplotlib"]
    return [Path(inductor), *mpl]


@contextmanager
def _pushed(target: list, items: list) -> Iterator[None]:
    target.extend(items)
    try:
        yield
    finally:
        for item in items:
            target.remove(item)


def _reals(paths: Iterable) -> list[str]:
    return [os.path.realpath(os.fspath(p)) for p in paths if p is not None]


def protect(paths: Iterable, rule: str = "sandbox") -> AbstractContextManager:
    """Defense code may neither read nor write under ``paths`` while this is open; an attempt becomes a
    finding of ``rule`` (``test_split`` for evaluation data)."""
    return _pushed(_protected, [(p, rule) for p in _reals(paths)])


def allow_writes(paths: Iterable) -> AbstractContextManager:
    """Defense code may write under ``paths`` (unless protected) while this is open."""
    return _pushed(_writable, _reals(paths))


@contextmanager
def confined(name: str) -> Iterator[None]:
    """Run defense ``name``'s code under the hook's rules (nested calls stay confined)."""
    install()
    bytecode = sys.dont_write_bytecode
    sys.dont_write_bytecode = True  # lazy imports inside defense code must not write __pycache__ files
    writable = default_writable()  # before confining: tempfile.gettempdir() probes by writing a file
    _running.append(name)
    try:
        with allow_writes(writable):
            yield
    finally:
        _running.pop()
        if not _running:
            sys.dont_write_bytecode = bytecode


@contextmanager
def harness() -> Iterator[None]:
    """Harness code called from defense code (loading the training split): not checked in this thread."""
    before = getattr(_local, "off", False)
    _local.off = True
    try:
        yield
    finally:
        _local.off = before


def take_attempts() -> list[tuple[str, str]]:
    """(rule, what) confined code tried and was refused since the last call (each once, in order)."""
    out = list(dict.fromkeys(_attempts))
    _attempts.clear()
    return out
