"""``bench perf``: how close Monte-Carlo certification runs to the forward-pass limit of its networks.

For each certified smoothing defense and transformation, on the packaged zoo's models and the same
test images, in one process, three things are timed side by side, interleaved per example and repeat
(so machine noise hits all three alike; the ratios are the result, absolute seconds are not):

* ``certify``: the defense's own ``certify`` (selection + estimation sampling + certificate work);
* ``bare``: the same networks' forward passes over exactly the batches ``certify`` fed the base
  classifier (recorded by a forward hook), on inputs built beforehand: the physical limit of
  Monte-Carlo certification at that batch size (GSmooth: the encoder F2 once per image, then decoder H
  and classifier per batch; TSS: the classifier per batch);
* ``reference``: a straightforward loop in the style of Cohen et al.'s original ``core.py``
  (``_sample_noise``): per batch, repeat the input, draw the noise (``randn_like(batch) * sigma`` for
  pixel noise; the defense's parameter / semantic noise otherwise), predict, argmax, copy to the host,
  bincount; over the same batches.

``certify_over_bare`` and ``reference_over_bare`` are medians over examples x repeats of the per-run
time ratios. Written from scratch (no benchmarking library measures "the same batches as a
hook recorded"); ``time.perf_counter`` with a device synchronisation around each timed block.
"""
from __future__ import annotations

import dataclasses
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from benchmark.certify.smoothing import SmoothingParams, sample_ledger
from benchmark.context import Context
from benchmark.datasets import get_dataset
from benchmark.defenses import get_defense_class
from benchmark.errors import BenchError
from benchmark.models.store import ModelStore
from benchmark.suites import load_suite
from benchmark.transformations import get_transformation

#: the certified smoothing defenses bench perf knows how to time against their networks
SMOOTHING_DEFENSES = ("tss", "gsmooth", "spt")
DEFAULT_TRANSFORMATIONS = ("gaussian_blur", "rotation", "pixelate", "translation")


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def _timed(fn: Callable[[], object], device: str) -> float:
    _sync(device)
    start = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - start


class Workload:
    """One prepared defense on one transformation: its networks, noise and the reference loop."""

    def __init__(self, defense, transformation, budgets: list[float], device: str):
        self.d, self.t, self.budgets, self.device = defense, transformation, budgets, device
        # GSmooth on a row Theorem 1 resolves smooths the parameter with TSS's machinery: no surrogate to time
        self.parameter = getattr(defense, "theorem1", None)
        self.gsmooth = defense.name == "gsmooth" and self.parameter is None

    def classifier(self) -> torch.nn.Module:
        return self.d.model

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Per-image work the networks need once (GSmooth's encoder F2; nothing for TSS)."""
        return self.d.surrogate.F2(x) if self.gsmooth else x

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        """The networks on one batch of noisy inputs (GSmooth: decoder H then classifier)."""
        return self.d.model(self.d.surrogate.H(inputs)) if self.gsmooth else self.d.model(inputs)

    def noisy(self, base: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        """A batch of noisy network inputs from a batch of copies of the (encoded) image."""
        d = self.d
        if self.gsmooth:
            return base + d._eta(len(base), gen)
        if d.name == "tss" and hasattr(d, "mask"):  # TSS pixel noise (rotation / scaling): as Cohen et al.
            noise = torch.randn(base.shape, generator=gen).to(base.device) * d.sigma
            return d.mask * base + noise
        return (self.parameter or d)._noisy(base, gen)

    def reference(self, x: torch.Tensor, sizes: list[int], gen: torch.Generator) -> np.ndarray:
        """Cohen et al.'s sampling loop (core.py ``_sample_noise``) over the given batch sizes."""
        counts = np.zeros(self.d.num_classes, dtype=np.int64)
        with torch.no_grad():
            base = self.encode(x)
            for k in sizes:
                batch = base.repeat((k, 1, 1, 1))
                predictions = self.forward(self.noisy(batch, gen)).argmax(1)
                counts += np.bincount(predictions.cpu().numpy(), minlength=len(counts))[:len(counts)]
        return counts

    def bare(self, x: torch.Tensor, sizes: list[int], gen: torch.Generator) -> Callable[[], None]:
        """The forward passes alone over the batch sizes, on inputs drawn now (outside the timing)."""
        with torch.no_grad():
            base = self.encode(x)
            inputs = [self.noisy(base.expand(k, *base.shape[1:]), gen) for k in sizes]

        def run() -> None:
            with torch.no_grad():
                self.encode(x)
                for inp in inputs:
                    self.forward(inp).argmax(1)
        return run


def _record_batches(model: torch.nn.Module, fn: Callable[[], object]) -> list[int]:
    """Batch sizes of every forward call of ``model`` while ``fn`` runs."""
    sizes: list[int] = []
    handle = model.register_forward_pre_hook(lambda _m, args: sizes.append(int(args[0].shape[0])))
    try:
        fn()
    finally:
        handle.remove()
    return sizes


def prepare(defense: str, transformation: str, profile: str, n: int | None, device: str) -> Workload:
    """The defense as the suite configures it, on the zoo's models, with ``n`` overriding the profile's
    n (and, for TSS slice certification, its samples per slice endpoint), under the fixed-n rule."""
    if defense not in SMOOTHING_DEFENSES:
        raise BenchError(f"bench perf times smoothing defenses only: {list(SMOOTHING_DEFENSES)}, got '{defense}'.")
    suite = load_suite("semantic")
    p = suite.profile(profile)
    tasks = suite.tasks(p, 0, transformations=[transformation], defenses=[defense])
    if not tasks:
        raise BenchError(f"suite 'semantic' has no task for {defense} on {transformation}.")
    task, t = tasks[0], get_transformation(transformation)
    # the fixed-n CERTIFY whatever the profile's rule: the Monte-Carlo limit at n is about drawing n samples, and a
    # sequential CERTIFY that stops after a few dozen would time its per-image fixed work instead
    settings = {**p.to_dict(), "certify": "fixed"}
    smoothing = dataclasses.replace(SmoothingParams.from_profile(p), rule="fixed")
    if n is not None:
        smoothing = dataclasses.replace(smoothing, n=n)
        tss = {**(settings.get("defense_settings") or {}).get("tss", {}), "n_slice": n}
        settings["defense_settings"] = {**(settings.get("defense_settings") or {}), "tss": tss}
    ds = get_dataset(task.dataset)
    ctx = Context(dataset=ds, transformation=t, smoothing=smoothing, store=ModelStore(allow_train=False),
                  device=device, budgets=task.budgets, profile={**settings, "surrogate_quality": False})
    d = get_defense_class(defense)(**task.defense_config)
    if not d.supports(t):
        raise BenchError(f"{defense} does not support {transformation}.")
    d.prepare(ctx)
    return Workload(d, t, list(task.budgets), device)


def measure(work: Workload, images: torch.Tensor, repeats: int, seed: int = 0) -> dict:
    """Interleaved timings of certify / bare / reference per image and repeat, as medians of ratios.

    Every repeat of one image certifies from the same seed, so it feeds the classifier the same batches
    (checked); the first repeat runs certify first (a forward hook records the batches), later ones rotate
    the order so that none of the three is always first."""
    dev = work.device
    other_gen = torch.Generator().manual_seed(seed + 1)
    ratios_c, ratios_r, rates = [], [], {"certify": [], "bare": [], "reference": []}
    samples = 0
    for i in range(-1, len(images)):  # i = -1: warm-up on the first image (imports, allocator), not recorded
        x = images[max(i, 0):max(i, 0) + 1].to(dev)
        sizes: list[int] = []

        def certify() -> None:
            gen = torch.Generator().manual_seed(seed + 1000 + max(i, 0))
            with sample_ledger() as ledger:
                seen = _record_batches(work.classifier(), lambda: work.d.certify(x, work.t, work.budgets, gen))
            if sum(seen) != ledger["certify"] or (sizes and seen != sizes):
                raise BenchError(f"{work.d.name}/{work.t.name}: certify's classifier batches do not match its "
                                 "sample ledger or differ between repeats; bench perf cannot pair them.")
            sizes[:] = seen

        for r in range(repeats if i >= 0 else 1):
            names = ["certify", "bare", "reference"]
            order = names[r % 3:] + names[:r % 3]  # rotate who goes first (certify first on repeat 0)
            took = {}
            for name in order:
                if name == "certify":
                    took[name] = _timed(certify, dev)
                elif name == "bare":
                    took[name] = _timed(work.bare(x, sizes, other_gen), dev)
                else:
                    took[name] = _timed(lambda: work.reference(x, sizes, other_gen), dev)
            samples = sum(sizes)
            if i < 0:
                continue
            ratios_c.append(took["certify"] / took["bare"])
            ratios_r.append(took["reference"] / took["bare"])
            for name, s in took.items():
                rates[name].append(samples / s)
    return {"samples": samples, "certify_samples_per_s": statistics.median(rates["certify"]),
            "bare_samples_per_s": statistics.median(rates["bare"]),
            "reference_samples_per_s": statistics.median(rates["reference"]),
            "certify_over_bare": statistics.median(ratios_c), "reference_over_bare": statistics.median(ratios_r)}


def run_perf(defenses: list[str] | None = None, transformations: list[str] | None = None,
             ns: list[int | None] | None = None, n_examples: int = 3, repeats: int = 3, profile: str = "default",
             device: str = "cpu", log: Callable[[str], None] | None = None) -> list[dict]:
    """One row per (defense, transformation, n) that the suite defines; see the module docstring."""
    x, _ = get_dataset("digits").load("test")
    step = max(1, len(x) // max(n_examples, 1))
    images = x[::step][:n_examples]
    rows = []
    for defense in defenses or list(SMOOTHING_DEFENSES):
        for name in transformations or list(DEFAULT_TRANSFORMATIONS):
            if not get_defense_class(defense)().supports(get_transformation(name)):
                continue
            for n in ns or [None]:
                work = prepare(defense, name, profile, n, device)
                res = measure(work, images, repeats)
                row = {"defense": defense, "transformation": name, "n": n if n is not None else work.d.smoothing.n,
                       **res, "examples": len(images), "repeats": repeats, "profile": profile, "device": device,
                       "threads": torch.get_num_threads()}
                rows.append(row)
                if log:
                    log(format_row(row))
    return rows


HEADER = (f"{'defense':<8} {'transformation':<20} {'n':>7} {'samples':>8} {'certify/s':>10} {'bare/s':>10} "
          f"{'ref/s':>10} {'cert/bare':>9} {'ref/bare':>9}")


def format_row(r: dict) -> str:
    return (f"{r['defense']:<8} {r['transformation']:<20} {r['n']:>7} {r['samples']:>8} "
            f"{r['certify_samples_per_s']:>10.0f} {r['bare_samples_per_s']:>10.0f} {r['reference_samples_per_s']:>10.0f} "
            f"{r['certify_over_bare']:>9.2f} {r['reference_over_bare']:>9.2f}")


def write_json(rows: list[dict], path: Path, environment: dict) -> None:
    path.write_text(json.dumps({"environment": environment, "rows": rows}, indent=1) + "\n")
