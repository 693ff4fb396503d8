"""Small file helpers: atomic writes, a folder lock, hashing and canonical JSON (shared by store, zoo and reports)."""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

try:  # POSIX; where it is missing, the lock is a no-op (one writer at a time is then the user's job)
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None


def default_cache_dir() -> Path:
    """Where trained models and built datasets are cached (``$BENCH_CACHE``, else ~/.cache/semantic-bench)."""
    return Path(os.environ.get("BENCH_CACHE", Path.home() / ".cache" / "semantic-bench"))


def canonical_json(obj: Any) -> str:
    """Deterministic JSON (sorted keys, no whitespace) used for config hashes."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def config_hash(obj: Any, length: int = 16) -> str:
    """Short sha256 of the canonical JSON of ``obj``."""
    return hashlib.sha256(canonical_json(obj).encode()).hexdigest()[:length]


def sha256_file(path: Path) -> str:
    """sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def atomic_write_bytes(path: Path, data: bytes, durable: bool = True) -> None:
    """Write to a temporary file in the same folder and rename: readers never see half a file.

    ``durable``: fsync before the rename, so the file survives a crash of the machine, not only of the
    process. Caches whose readers recompute a missing or unreadable file pass False (an fsync is ~5 ms)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; results and zoo files are meant to be shared
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


@contextmanager
def locked(folder: Path) -> Iterator[None]:
    """Hold an exclusive advisory lock on ``folder`` for a read-modify-write of a file in it.

    ``flock`` on the directory itself, so no lock file is left behind (the zoo folder ships in the package).
    Released when the descriptor is closed, also if the process dies."""
    folder.mkdir(parents=True, exist_ok=True)
    if fcntl is None:  # pragma: no cover - Windows
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
