"""``bench train --verify``: retrain zoo entries into a temporary store and compare them with the packaged ones.

Per entry the verdict is
* ``identical``: the retrained weights equal the packaged ones bitwise (same weights digest);
* ``different``: same recorded training environment but other weights (a reproducibility bug),
  with the largest absolute weight difference;
* ``not comparable``: the packaged entry was trained in another environment (torch version,
  device, CPU instruction set / GPU, thread count; see determinism.py), where bitwise equality is
  not promised; the difference is still reported;
* ``stale``: the packaged entry's config hash differs from what the code asks for (rebuild the zoo);
* ``missing``: the zoo has no entry for a model the suite needs.
"""
from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

from benchmark.infra.progress import say
from benchmark.models.determinism import comparable, max_weight_difference, training_environment, weights_digest
from benchmark.models.store import ZOO_DIR, ModelStore
from benchmark.suites.loader import Suite
from benchmark.train.driver import prepare_suite


@dataclass
class EntryCheck:
    key: str
    status: str  # identical | different | not comparable | stale | missing
    max_difference: float | None
    recorded: dict | None
    current: dict

    def line(self) -> str:
        diff = "" if self.max_difference in (None, 0.0) else f"  max |Δw| = {self.max_difference:.3g}"
        why = ""
        if self.status == "not comparable":
            rec = self.recorded or {}
            why = "  (recorded " + (", ".join(f"{k}={rec.get(k)}" for k in sorted(self.current)
                                              if rec.get(k) != self.current[k]) or "no environment") + ")"
        return f"{self.status:>15}  {self.key}{diff}{why}"


def verify_zoo(suite: Suite, datasets=None, defenses=None, transformations=None, device: str = "cpu",
               data_root: Path | None = None, offline: bool = False, zoo_dir: Path = ZOO_DIR,
               log=say) -> list[EntryCheck]:
    """Retrain the selected entries from scratch in a temporary store and compare with ``zoo_dir``."""
    manifest = json.loads((zoo_dir / "manifest.json").read_text()) if (zoo_dir / "manifest.json").exists() else {}
    entries = manifest.get("entries", {})
    threads = {(e.get("environment") or {}).get("threads") for e in entries.values()} - {None}
    if len(threads) == 1 and not os.environ.get("BENCH_THREADS"):
        # weights depend on the thread count: retrain with the one the zoo was trained with
        torch.set_num_threads(int(threads.pop()))
        log(f"verifying with {torch.get_num_threads()} torch thread(s), as recorded in the zoo")
    env = training_environment(device)
    with tempfile.TemporaryDirectory(prefix="bench-verify-") as tmp:
        store = ModelStore(cache_dir=Path(tmp) / "cache", zoo_dir=Path(tmp) / "empty-zoo", allow_train=True,
                           write_zoo=False, device=device, log=log)
        prepare_suite(suite, store, datasets, defenses, transformations, device, data_root, offline)
        checks = []
        for loaded in store.loaded.values():
            entry = entries.get(loaded.key)
            if entry is None:
                checks.append(EntryCheck(loaded.key, "missing", None, None, env))
                continue
            if entry.get("config_hash") != loaded.config_hash:
                checks.append(EntryCheck(loaded.key, "stale", None, entry.get("environment"), env))
                continue
            packaged = torch.load(zoo_dir / entry["file"], map_location="cpu", weights_only=True)
            # in the packaged dtypes (float16 storage): a fresh model already holds the stored values, exactly
            fresh = {k: v.detach().cpu().to(packaged[k].dtype) if k in packaged else v.detach().cpu()
                     for k, v in loaded.model.state_dict().items()}
            same = weights_digest(packaged) == weights_digest(fresh)
            diff = 0.0 if same else max_weight_difference(packaged, fresh)
            status = "identical" if same else ("different" if comparable(entry.get("environment"), env)
                                               else "not comparable")
            checks.append(EntryCheck(loaded.key, status, diff, entry.get("environment"), env))
    return checks
