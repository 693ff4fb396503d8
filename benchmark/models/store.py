"""Checkpoints keyed by a hash of their training config: the packaged zoo first, then a local cache.

Lookup order for a :class:`ModelSpec`:
1. the zoo inside the package (``benchmark/zoo``), written by ``bench train``:
   used when its recorded config hash equals the spec's; its sha256 is verified.
   A zoo entry whose config hash no longer matches the code is reported and
   retrained into the cache (or refused when training is not allowed);
2. the user cache (``$BENCH_CACHE`` or ``~/.cache/semantic-bench``), also sha256-verified;
3. training, when allowed (written to the zoo under ``bench train``, else to the cache), with
   every global generator seeded from the config hash and deterministic kernels enforced
   (determinism.py), so the same config gives bitwise the same weights in the same training
   environment; the environment and a digest of the weights are recorded with the checkpoint.
   Training saves its state after every epoch in the cache (``checkpoints/<key>-<hash>.epochs.<i>.pt``,
   models/training.py ``epoch_checkpoints``): a killed ``bench train`` resumes from the last epoch with
   the same final weights; the files are removed once the checkpoint is saved.

A file whose sha256 does not match its record is never loaded: one clear error
says which file and how to fix it.
"""
from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import torch
from torch import nn

from benchmark.errors import BenchError
from benchmark.infra.progress import say
from benchmark.infra.io import (
    atomic_write_bytes,
    atomic_write_json,
    config_hash,
    default_cache_dir,
    locked,
    sha256_file,
)
from benchmark.models.determinism import (
    seed_from_hash,
    seeded_training,
    training_environment,
    weights_digest,
)
from benchmark.models.training import epoch_checkpoints

ZOO_DIR = Path(__file__).resolve().parent.parent / "zoo"


#: checkpoint storage formats a ModelSpec's ``config["storage"]`` may name (absent: float32)
STORAGE_DTYPES = {"float32": torch.float32, "float16": torch.float16}


@dataclass
class ModelSpec:
    """What determines a trained model: a key, its full config, how to build and how to train it."""

    key: str  # e.g. "digits/tss/gaussian_blur"; one zoo slot per key
    config: dict  # everything the weights depend on (architecture, data, noise, schedule, recipe version)
    build: Callable[[], nn.Module]
    train: Callable[[nn.Module], nn.Module]

    @property
    def config_hash(self) -> str:
        return config_hash(self.config)

    def stored_state(self, model: nn.Module) -> dict:
        """The weights as the checkpoint stores them: floating tensors in ``config["storage"]`` (float16 keeps a
        ~2 M-parameter network within the repository's weight budget), float32 by default. The model is then
        evaluated as stored (loading upcasts the stored values exactly), never with the unrounded weights."""
        storage = self.config.get("storage", "float32")
        if storage not in STORAGE_DTYPES:
            raise BenchError(f"'{self.key}': unknown checkpoint storage {storage!r}; use one of "
                             f"{sorted(STORAGE_DTYPES)}.")
        dtype = STORAGE_DTYPES[storage]
        return {k: (v.detach().cpu().to(dtype) if v.is_floating_point() else v.detach().cpu())
                for k, v in model.state_dict().items()}


@dataclass
class LoadedModel:
    """A model plus where it came from (recorded with every result)."""

    model: nn.Module
    key: str
    config_hash: str
    sha256: str
    source: str  # "zoo" | "cache" | "trained"

    def provenance(self) -> dict:
        return {"key": self.key, "config_hash": self.config_hash, "sha256": self.sha256, "source": self.source}


@dataclass
class ModelStore:
    """Resolves :class:`ModelSpec` to weights; see the module docstring for the order."""

    cache_dir: Path = field(default_factory=default_cache_dir)
    zoo_dir: Path = ZOO_DIR
    allow_train: bool = True
    write_zoo: bool = False
    device: str = "cpu"
    log: Callable[[str], None] = say  # not print: a message must not land inside a live progress bar
    loaded: dict[str, LoadedModel] = field(default_factory=dict)
    accessed: list[str] = field(default_factory=list)  # memo keys in order of request (per-task provenance)

    # ------------------------------------------------------------ public
    def get(self, spec: ModelSpec) -> LoadedModel:
        """The model for ``spec`` (memoised per key and config hash within this store)."""
        memo = f"{spec.key}@{spec.config_hash}"
        self.accessed.append(memo)
        if memo not in self.loaded:
            self.loaded[memo] = self._resolve(spec)
        return self.loaded[memo]

    def provenance(self, since: int | None = None) -> list[dict]:
        """Provenance of every loaded model, or of those requested since ``accessed[since]``."""
        if since is None:
            return [m.provenance() for m in self.loaded.values()]
        return [self.loaded[k].provenance() for k in dict.fromkeys(self.accessed[since:]) if k in self.loaded]

    # ----------------------------------------------------------- lookup
    def _resolve(self, spec: ModelSpec) -> LoadedModel:
        h = spec.config_hash
        entry = self._zoo_manifest().get("entries", {}).get(spec.key)
        if entry is not None and entry.get("config_hash") == h and not self.write_zoo:
            path = self.zoo_dir / entry["file"]
            return LoadedModel(self._load(spec, path, entry["sha256"], "zoo"), spec.key, h, entry["sha256"], "zoo")
        if entry is not None and entry.get("config_hash") != h:
            msg = (f"zoo entry '{spec.key}' was trained with config hash {entry.get('config_hash')} "
                   f"but the code now asks for {h} (its training config changed)")
            if not self.allow_train:
                raise BenchError(f"{msg}. Run `bench train --suite <suite>` to refresh the zoo, "
                                 "or drop --no-train/--offline to retrain into the local cache.")
        cached = self._cache_paths(spec)
        if entry is not None and entry.get("config_hash") != h:
            then = ("using the checkpoint the local cache holds for it" if cached[1].exists() else "retraining")
            self.log(f"note: {msg}; {then} (run `bench train` to update the packaged zoo).")
        if self.write_zoo and entry is not None and entry.get("config_hash") == h:
            path = self.zoo_dir / entry["file"]
            if path.exists() and sha256_file(path) == entry["sha256"]:
                return LoadedModel(self._load(spec, path, entry["sha256"], "zoo"), spec.key, h, entry["sha256"], "zoo")
        if cached[1].exists():
            meta = json.loads(cached[1].read_text())
            model = self._load(spec, cached[0], meta["sha256"], "cache")
            if not self.write_zoo:
                return LoadedModel(model, spec.key, h, meta["sha256"], "cache")
            # building the zoo: promote the cached checkpoint (same config hash = same training) instead of retraining
            self.log(f"promoting cached '{spec.key}' (config hash {h}) into the zoo")
            return LoadedModel(model, spec.key, h, self._save(spec, model, meta.get("environment")), "cache")
        if not self.allow_train:
            raise BenchError(
                f"no trained model for '{spec.key}' (config hash {h}) in the zoo or in {self.cache_dir}. "
                "Run `bench train --suite <suite>` first, or drop --no-train/--offline to train it now.")
        self.log(f"training '{spec.key}' (config hash {h}) ...")
        with epoch_checkpoints(self._epochs_base(spec)) as ckpt:
            model = self.train(spec)
        sha = self._save(spec, model, training_environment(self.device))
        model.load_state_dict(spec.stored_state(model))  # evaluate as stored, also right after training
        for partial in ckpt.files():  # the checkpoint is saved: the per-epoch states are no longer needed
            partial.unlink(missing_ok=True)
        return LoadedModel(model, spec.key, h, sha, "trained")

    def train(self, spec: ModelSpec) -> nn.Module:
        """Build and train ``spec`` reproducibly (seeded from its config hash; see determinism.py)."""
        with seeded_training(seed_from_hash(spec.config_hash), self.device):
            return spec.train(spec.build().to(self.device)).eval()

    def _epochs_base(self, spec: ModelSpec) -> Path:
        """Where the training of ``spec`` keeps its per-epoch states: the cache, keyed by the config hash."""
        return self._cache_paths(spec)[0].with_suffix(".epochs")

    def _load(self, spec: ModelSpec, path: Path, sha: str, source: str) -> nn.Module:
        if not path.exists():
            raise BenchError(f"checkpoint {path} for '{spec.key}' is missing; "
                             f"{'reinstall the package or run `bench train`' if source == 'zoo' else 'delete its .json record to retrain'}.")
        actual = sha256_file(path)
        if actual != sha:
            fix = "run `bench train --suite <suite>` to rebuild the zoo" if source == "zoo" else f"delete {path} and its .json to retrain"
            raise BenchError(f"checkpoint {path} for '{spec.key}' is corrupt: sha256 {actual[:12]}... "
                             f"does not match the recorded {sha[:12]}...; {fix}.")
        try:
            state = torch.load(path, map_location=self.device, weights_only=True)
            model = spec.build().to(self.device)
            model.load_state_dict(state)
        except Exception as exc:  # unreadable despite a matching hash: architecture changed
            raise BenchError(f"checkpoint {path} for '{spec.key}' cannot be loaded into the current "
                             f"architecture ({type(exc).__name__}: {exc}); retrain it with `bench train`.") from exc
        return model.eval()

    # ------------------------------------------------------------ saving
    def _save(self, spec: ModelSpec, model: nn.Module, env: dict | None) -> str:
        """Write the checkpoint with its config, sha256, weights digest and training environment."""
        buf = io.BytesIO()
        state = spec.stored_state(model)
        record = {"weights_sha256": weights_digest(state), "environment": env}
        torch.save(state, buf)
        data = buf.getvalue()
        if self.write_zoo:
            rel = f"files/{spec.key.replace('/', '__')}.pt"
            atomic_write_bytes(self.zoo_dir / rel, data)
            sha = sha256_file(self.zoo_dir / rel)
            # read-modify-write under the folder's lock: two `bench train` processes (say one per core, on
            # different defenses) would otherwise each write back a manifest without the other's new entry
            with locked(self.zoo_dir):
                manifest = self._zoo_manifest()
                manifest.setdefault("entries", {})[spec.key] = {
                    "config_hash": spec.config_hash, "config": spec.config, "sha256": sha, "file": rel,
                    "bytes": len(data), "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                    **record,
                }
                manifest["version"] = manifest.get("version", 0) + 1
                atomic_write_json(self.zoo_dir / "manifest.json", manifest)
            return sha
        pt, meta = self._cache_paths(spec)
        atomic_write_bytes(pt, data)
        sha = sha256_file(pt)
        atomic_write_json(meta, {"key": spec.key, "config": spec.config, "config_hash": spec.config_hash, "sha256": sha,
                                 **record})
        return sha

    def _cache_paths(self, spec: ModelSpec) -> tuple[Path, Path]:
        stem = f"{spec.key.replace('/', '__')}-{spec.config_hash}"
        base = self.cache_dir / "checkpoints"
        return base / f"{stem}.pt", base / f"{stem}.json"

    def _zoo_manifest(self) -> dict:
        path = self.zoo_dir / "manifest.json"
        if not path.exists():
            return {"version": 0, "entries": {}}
        try:
            return json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise BenchError(f"zoo manifest {path} is not valid JSON ({exc}); reinstall the package "
                             "or run `bench train` to rebuild it.") from exc
