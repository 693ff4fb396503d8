"""Build a "-C" test set of any image split in exactly the CIFAR-10-C file layout.

Layout (what :mod:`benchmark.infra.robustbench` reads for the released files):
``<root>/CIFAR-10-C/<corruption>.npy`` is uint8 ``[5*N, H, W, C]`` with the five
severities stacked in order (rows ``(s-1)*N .. s*N-1`` hold severity ``s``), and
``<root>/CIFAR-10-C/labels.npy`` is uint8 ``[5*N]``, the labels repeated once per
severity. Grey images keep one channel (``C = 1``), so the model input shape is
the clean dataset's.

Where each corruption comes from:

* the seven that are registry transformations (gaussian_blur, defocus_blur,
  motion_blur, zoom_blur, pixelate, brightness, contrast): our own
  transformations at the CIFAR-10-C severity constants, mapped in
  :mod:`benchmark.transformations.severities` (deterministic);
* ten others from ``imagecorruptions`` 1.1.2, which uses the ImageNet-C
  constants (stronger than CIFAR-10-C's, e.g. gaussian_noise sigma .08-.38
  instead of .04-.10) and needs images of at least 32x32 with 3 channels:
  each image is edge-padded to 32x32 and repeated to 3 channels, corrupted, then
  cropped back and reduced to its first channel (exact for the corruptions that
  treat channels alike; for per-channel noise it keeps one channel's full noise).
  Its random draws come from numpy's global generator, which is seeded per
  (corruption, severity, image) from an explicit torch.Generator and restored
  afterwards;
* glass_blur and fog fail in imagecorruptions 1.1.2 under numpy 2 /
  scikit-image 0.2x and are not built (the runner lists them as absent).

Images are quantised to uint8 before corrupting (as the released set corrupts
the uint8 CIFAR-10 test images) and the result is rounded to uint8.
"""
from __future__ import annotations

import hashlib
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from benchmark.datasets.cifar10c import ALL_CORRUPTIONS, SEVERITIES
from benchmark.errors import BenchError
from benchmark.infra.io import atomic_write_json
from benchmark.infra.robustbench import CIFAR10C_DIRNAME
from benchmark.transformations.severities import CIFAR10C_CONSTANTS, apply_severity

#: Bump when the built images change: the cache key includes it.
BUILDER_VERSION = 2  # 2: the registry's Gaussian blur is computed in float64 and rounded once
#: corruptions made by imagecorruptions (ImageNet-C constants); glass_blur and fog fail there.
IMAGECORRUPTIONS: tuple[str, ...] = ("gaussian_noise", "shot_noise", "impulse_noise", "snow", "frost",
                                     "elastic_transform", "jpeg_compression", "speckle_noise", "spatter", "saturate")
OURS: tuple[str, ...] = tuple(CIFAR10C_CONSTANTS)
#: what a built set holds, in CIFAR-10-C's order
BUILT: tuple[str, ...] = tuple(c for c in ALL_CORRUPTIONS if c in OURS or c in IMAGECORRUPTIONS)
NOT_BUILT: tuple[str, ...] = tuple(c for c in ALL_CORRUPTIONS if c not in BUILT)
_MIN_SIDE = 32  # imagecorruptions refuses smaller images


def source_of(corruption: str) -> str:
    if corruption in OURS:
        return "ours (registry transformations, CIFAR-10-C constants)"
    if corruption in IMAGECORRUPTIONS:
        return "imagecorruptions 1.1.2 (ImageNet-C constants)"
    return "not built (fails in imagecorruptions 1.1.2)"


def _seed_for(seed: int, corruption: str) -> int:
    return int(hashlib.sha256(f"{seed}:{corruption}".encode()).hexdigest()[:15], 16)


def _ours(x_u8: np.ndarray, corruption: str, severity: int, gen: torch.Generator) -> np.ndarray:
    x = torch.from_numpy(x_u8).permute(0, 3, 1, 2).to(torch.float32) / 255
    out = apply_severity(x, corruption, severity)
    return (out.permute(0, 2, 3, 1).numpy() * 255).round().astype(np.uint8)


def _imagecorruptions(x_u8: np.ndarray, corruption: str, severity: int, gen: torch.Generator) -> np.ndarray:

    with warnings.catch_warnings():
        # imagecorruptions 1.1.2 imports scipy.ndimage.interpolation, which scipy deprecates: nothing a user can do
        warnings.filterwarnings("ignore", message="Please import `map_coordinates`", category=DeprecationWarning)
        from imagecorruptions import corrupt

    n, h, w, c = x_u8.shape
    ph, pw = max(0, _MIN_SIDE - h), max(0, _MIN_SIDE - w)
    top, left = ph // 2, pw // 2
    seeds = torch.randint(0, 2 ** 31 - 1, (n,), generator=gen).tolist()
    state = np.random.get_state()
    out = np.empty_like(x_u8)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for i in range(n):
                img = np.pad(x_u8[i], ((top, ph - top), (left, pw - left), (0, 0)), mode="edge")
                if c == 1:
                    img = np.repeat(img, 3, axis=2)
                np.random.seed(seeds[i])
                res = np.asarray(corrupt(img, severity=severity, corruption_name=corruption))
                res = res[top:top + h, left:left + w]
                out[i] = res[..., :1] if c == 1 else res[..., :c]
    except Exception as exc:
        raise BenchError(f"imagecorruptions failed on '{corruption}' severity {severity}: "
                         f"{type(exc).__name__}: {exc}. Use imagecorruptions 1.1.2.") from exc
    finally:
        np.random.set_state(state)
    return out


def build_corrupted_split(x: torch.Tensor, y: torch.Tensor, root: Path, seed: int,
                          corruptions: tuple[str, ...] = BUILT, log: Callable[[str], None] | None = None,
                          about: dict | None = None) -> dict:
    """Write ``corruptions`` of ``x [N,C,H,W]`` (floats in [0,1]) and ``labels.npy`` under ``root/CIFAR-10-C``.

    Returns the manifest (what was built from where, plus ``about``: what the images are); the same seed gives
    identical files.
    """
    log = log or (lambda m: print(m, file=sys.stderr))
    bad = [c for c in corruptions if c not in BUILT]
    if bad:
        raise BenchError(f"cannot build corruption(s) {bad}: the builder makes {', '.join(BUILT)}.")
    folder = Path(root) / CIFAR10C_DIRNAME
    folder.mkdir(parents=True, exist_ok=True)
    x_u8 = (x.clamp(0, 1).permute(0, 2, 3, 1).numpy() * 255).round().astype(np.uint8)  # [N,H,W,C]
    np.save(folder / "labels.npy", np.tile(y.numpy().astype(np.uint8), len(SEVERITIES)))
    sources = {}
    for corruption in corruptions:
        gen = torch.Generator().manual_seed(_seed_for(seed, corruption))
        fn = _ours if corruption in OURS else _imagecorruptions
        blocks = [fn(x_u8, corruption, s, gen) for s in SEVERITIES]
        np.save(folder / f"{corruption}.npy", np.concatenate(blocks))
        sources[corruption] = source_of(corruption)
        log(f"  built {corruption:<18} from {sources[corruption]}")
    manifest = {**(about or {}), "builder_version": BUILDER_VERSION, "seed": seed, "n_images": int(len(x)),
                "image_shape": list(x_u8.shape[1:]), "sources": sources,
                "not_built": {c: source_of(c) for c in ALL_CORRUPTIONS if c not in corruptions}}
    atomic_write_json(Path(root) / "manifest.json", manifest)  # written last: marks a complete build
    return manifest
