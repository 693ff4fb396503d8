"""The only place that touches :mod:`robustbench` (imported lazily, inside functions).

Compatibility shim
------------------
robustbench 1.1.1 does ``from autoattack import AutoAttack`` and
``from autoattack.state import EvaluationState`` (in ``robustbench/eval.py``,
which ``robustbench/__init__.py`` imports, so even ``import robustbench.data``
needs it). The AutoAttack code is installed from PyPI as the distribution
``pyautoattack`` whose top-level module is also called ``pyautoattack``. If
``import autoattack`` fails, :func:`_ensure_autoattack` imports ``pyautoattack``
and registers it and all of its loaded submodules (``state``, ``autopgd_base``,
``fab_pt``, ``square``, ``checks``, ``other_utils`` ...) under the ``autoattack.``
names in :data:`sys.modules` before robustbench is imported.

Nothing here downloads
----------------------
robustbench's loaders download missing data (CIFAR-10-C from Zenodo) and
checkpoints (Google Drive / Hugging Face). This module checks that every file
exists locally *before* calling robustbench and otherwise raises a
:class:`BenchError` saying which file is missing and where to put it.

CIFAR-10-C layout
-----------------
``<data_root>/CIFAR-10-C/<corruption>.npy`` holds uint8 ``[5*k, 32, 32, 3]``
images: five consecutive blocks of ``k`` images, one per severity 1..5
(``k = 10000`` in the released files) and ``labels.npy`` holds the ``5*k``
labels (the test labels repeated once per severity). robustbench's
``load_cifar10c`` hard-codes ``k = 10000``, so it is used only when the files
have exactly that layout (and robustbench imports); otherwise (e.g. small
fabricated files in tests) the same selection is read with a numpy memmap:
for ``n`` examples over ``P`` corruptions, the first ``ceil(n / P)`` images of
the requested severity block of each corruption, concatenated in the given
corruption order and truncated to ``n`` -- exactly robustbench's semantics
(``shuffle=False``). Labels are validated to be identical across the five
severity blocks, so both readers return the same labels.
"""
from __future__ import annotations

import functools
import math
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from benchmark.errors import BenchError, unknown_name

if TYPE_CHECKING:  # pragma: no cover - typing only
    from torch import Tensor, nn

#: Images per severity in the released CIFAR-10-C files (hard-coded in robustbench).
ROBUSTBENCH_BLOCK = 10000
CIFAR10C_DIRNAME = "CIFAR-10-C"
CIFAR10C_URL = "https://zenodo.org/record/2535967 (CIFAR-10-C.tar)"
N_SEVERITIES = 5

_INSTALL_HINT = "Install it with: pip install robustbench==1.1.1 pyautoattack"


# ---------------------------------------------------------------------------
# import machinery
# ---------------------------------------------------------------------------
def _ensure_autoattack() -> str:
    """Make ``import autoattack`` work; return the name of the providing module."""
    existing = sys.modules.get("autoattack")
    if existing is not None:
        return getattr(existing, "__name__", "autoattack")
    try:
        import autoattack  # noqa: F401
        import autoattack.state  # noqa: F401

        return "autoattack"
    except ImportError:
        # a failed import may leave half-registered entries behind
        for key in [k for k in sys.modules if k == "autoattack" or k.startswith("autoattack.")]:
            del sys.modules[key]
    try:
        import pyautoattack
        import pyautoattack.state  # noqa: F401  (robustbench imports autoattack.state)
    except ImportError as exc:
        raise BenchError(
            "robustbench needs the AutoAttack package, but neither 'autoattack' nor 'pyautoattack' "
            f"can be imported ({exc}). {_INSTALL_HINT}."
        ) from exc
    sys.modules["autoattack"] = pyautoattack
    for key, mod in list(sys.modules.items()):
        if key.startswith("pyautoattack.") and mod is not None:
            sys.modules["autoattack." + key[len("pyautoattack."):]] = mod
    return "pyautoattack"


def _import_robustbench() -> Any:
    """Import and return ``robustbench`` (with ``data``/``utils`` loaded) or raise BenchError."""
    provider = _ensure_autoattack()
    try:
        with warnings.catch_warnings():
            # robustbench imports the deprecated pkg_resources; torch warns about torch.jit
            warnings.simplefilter("ignore")
            import robustbench
            import robustbench.data  # noqa: F401
            import robustbench.utils  # noqa: F401
    except BenchError:
        raise
    except Exception as exc:  # ImportError, or an incompatible dependency failing at import
        raise BenchError(
            f"robustbench cannot be imported ({type(exc).__name__}: {exc}). {_INSTALL_HINT}."
        ) from exc
    robustbench._benchmark_autoattack_provider = provider  # type: ignore[attr-defined]
    return robustbench


@functools.lru_cache(maxsize=1)
def robustbench_available() -> tuple[bool, str]:
    """Try to import robustbench (with the autoattack shim); return ``(ok, reason)``."""
    try:
        rb = _import_robustbench()
    except BenchError as exc:
        return False, str(exc)
    try:
        from importlib.metadata import version

        ver = version("robustbench")
    except Exception:  # pragma: no cover - metadata missing
        ver = "unknown version"
    provider = getattr(rb, "_benchmark_autoattack_provider", "autoattack")
    if provider == "pyautoattack":
        return True, f"robustbench {ver} importable (module 'autoattack' aliased to the installed 'pyautoattack')"
    return True, f"robustbench {ver} importable (with module '{provider}')"


# ---------------------------------------------------------------------------
# CIFAR-10-C
# ---------------------------------------------------------------------------
def _cifar10c_fix(root: Path) -> str:
    return (
        f"Download {CIFAR10C_URL} and extract it in {root} so that the released .npy files "
        f"are in {root / CIFAR10C_DIRNAME}/ (e.g. {root / CIFAR10C_DIRNAME / 'gaussian_noise.npy'} "
        f"and {root / CIFAR10C_DIRNAME / 'labels.npy'})"
    )


def _open_npy(path: Path, root: Path) -> Any:
    import numpy as np

    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except Exception as exc:  # bad magic/header, pickled object array, truncated file
        raise BenchError(
            f"Malformed CIFAR-10-C file {path}: cannot be read as a .npy array ({exc}). "
            f"Replace it with the released file: {_cifar10c_fix(root)}."
        ) from exc


def inspect_cifar10c(data_root: Path, corruptions: Sequence[str],
                     image_shape: tuple[int, int, int] = (32, 32, 3)) -> int:
    """Validate ``<data_root>/CIFAR-10-C`` for ``corruptions``; return images per severity ``k``.

    ``image_shape`` is ``(H, W, C)`` of one stored image: (32, 32, 3) for the released files,
    other shapes for the same layout built from other datasets (e.g. ``digits-c``).

    Raises a :class:`BenchError` naming the missing or malformed file.
    """
    import numpy as np

    root = Path(data_root).expanduser()
    folder = root / CIFAR10C_DIRNAME
    needed = [folder / "labels.npy"] + [folder / f"{c}.npy" for c in corruptions]
    missing = [p for p in needed if not p.is_file()]
    if missing:
        names = ", ".join(p.name for p in missing)
        raise BenchError(
            f"CIFAR-10-C file(s) missing in {folder}: {names}. {_cifar10c_fix(root)}."
        )

    labels_path = folder / "labels.npy"
    labels = _open_npy(labels_path, root)
    if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer):
        raise BenchError(
            f"Malformed CIFAR-10-C file {labels_path}: expected a 1-D integer array, got dtype "
            f"{labels.dtype} and shape {labels.shape}. {_cifar10c_fix(root)}."
        )
    n_labels = labels.shape[0]
    if n_labels == 0 or n_labels % N_SEVERITIES:
        raise BenchError(
            f"Malformed CIFAR-10-C file {labels_path}: {n_labels} labels is not a positive multiple of "
            f"{N_SEVERITIES} (one block per severity). {_cifar10c_fix(root)}."
        )
    k = n_labels // N_SEVERITIES
    lab = np.asarray(labels).reshape(N_SEVERITIES, k)
    if lab.min() < 0 or lab.max() > 9:
        raise BenchError(
            f"Malformed CIFAR-10-C file {labels_path}: labels must be in 0..9. {_cifar10c_fix(root)}."
        )
    if not (lab == lab[:1]).all():
        raise BenchError(
            f"Malformed CIFAR-10-C file {labels_path}: the {N_SEVERITIES} severity blocks of {k} labels "
            f"differ (the released file repeats the test labels once per severity). {_cifar10c_fix(root)}."
        )

    for c in corruptions:
        path = folder / f"{c}.npy"
        arr = _open_npy(path, root)
        if arr.dtype != np.uint8 or arr.ndim != 4 or tuple(arr.shape[1:]) != tuple(image_shape):
            raise BenchError(
                f"Malformed CIFAR-10-C file {path}: expected uint8 images of shape "
                f"[{N_SEVERITIES}*k, {', '.join(map(str, image_shape))}], got dtype {arr.dtype} and shape {tuple(arr.shape)}. "
                f"{_cifar10c_fix(root)}."
            )
        n = arr.shape[0]
        if n == 0 or n % N_SEVERITIES:
            raise BenchError(
                f"Malformed CIFAR-10-C file {path}: {n} images is not a positive multiple of "
                f"{N_SEVERITIES} (one block per severity). {_cifar10c_fix(root)}."
            )
        if n != n_labels:
            raise BenchError(
                f"Malformed CIFAR-10-C file {path}: {n} images but {labels_path.name} has {n_labels} "
                f"labels. {_cifar10c_fix(root)}."
            )
    return k


def _load_cifar10c_numpy(
    folder: Path, corruptions: Sequence[str], severity: int, n_examples: int, k: int
) -> tuple[Any, Any]:
    import numpy as np
    import torch

    n_img = int(math.ceil(n_examples / len(corruptions)))
    lo = (severity - 1) * k
    labels = np.load(folder / "labels.npy", mmap_mode="r")
    xs, ys = [], []
    for c in corruptions:
        imgs = np.load(folder / f"{c}.npy", mmap_mode="r")
        xs.append(np.array(imgs[lo : lo + k][:n_img]))
        ys.append(np.array(labels[lo : lo + k][:n_img]))
    x = np.concatenate(xs).transpose(0, 3, 1, 2).astype(np.float32) / 255
    y = np.concatenate(ys).astype(np.int64)
    return torch.from_numpy(np.ascontiguousarray(x))[:n_examples], torch.from_numpy(y)[:n_examples]


def load_cifar10c(
    data_root: Path | str | None,
    corruptions: str | Sequence[str],
    severity: int,
    n_examples: int | None = None,
    backend: Literal["auto", "robustbench", "numpy"] = "auto",
    image_shape: tuple[int, int, int] = (32, 32, 3),
) -> tuple[Tensor, Tensor]:
    """Load CIFAR-10-C images of ``severity`` for ``corruptions`` (never downloads).

    Args:
        data_root: directory containing ``CIFAR-10-C/``.
        corruptions: one corruption name or a sequence of them.
        severity: 1..5.
        n_examples: total number of examples (split evenly over the corruptions,
            robustbench's convention); ``None`` means the whole severity block of
            every corruption.
        backend: ``"auto"`` uses robustbench's loader when the files have the
            released layout (10000 images per severity) and robustbench imports,
            the numpy reader otherwise; ``"robustbench"``/``"numpy"`` force one.
        image_shape: ``(H, W, C)`` of the stored images (see :func:`inspect_cifar10c`);
            robustbench's reader is used only for the released (32, 32, 3).

    Returns:
        ``x`` float32 ``[N, C, H, W]`` in [0, 1] (``[N, 3, 32, 32]`` for the released files) and
        ``y`` int64 ``[N]``.
    """
    import torch

    if data_root is None:
        raise BenchError("CIFAR-10-C needs a data directory: pass --data-root DIR (containing DIR/CIFAR-10-C/).")
    root = Path(data_root).expanduser()
    if isinstance(corruptions, str):
        corruptions = [corruptions]
    corruptions = list(corruptions)
    if not corruptions:
        raise BenchError("No CIFAR-10-C corruption given: name at least one corruption.")
    if isinstance(severity, bool) or not isinstance(severity, int) or not 1 <= severity <= N_SEVERITIES:
        raise BenchError(f"CIFAR-10-C severity must be an integer in 1..{N_SEVERITIES}, got {severity!r}.")
    if backend not in ("auto", "robustbench", "numpy"):
        raise unknown_name("CIFAR-10-C backend", str(backend), ["auto", "robustbench", "numpy"])

    k = inspect_cifar10c(root, corruptions, image_shape)
    released = tuple(image_shape) == (32, 32, 3)
    if n_examples is None:
        n_examples = k * len(corruptions)
    if n_examples <= 0:
        raise BenchError(f"n_examples must be positive, got {n_examples}.")

    use_rb = False
    if backend == "robustbench":
        if k != ROBUSTBENCH_BLOCK or not released:
            raise BenchError(
                f"robustbench's CIFAR-10-C loader needs {ROBUSTBENCH_BLOCK} images per severity, but the files "
                f"in {root / CIFAR10C_DIRNAME} have {k}. Use the released files or backend='numpy'."
            )
        ok, reason = robustbench_available()
        if not ok:
            raise BenchError(reason)
        use_rb = True
    elif backend == "auto":
        use_rb = k == ROBUSTBENCH_BLOCK and released and robustbench_available()[0]

    if use_rb:
        rb = _import_robustbench()
        try:
            x, y = rb.data.load_cifar10c(
                n_examples=n_examples,
                severity=severity,
                data_dir=str(root),
                shuffle=False,
                corruptions=tuple(corruptions),
            )
        except Exception as exc:
            raise BenchError(
                f"robustbench failed to read CIFAR-10-C from {root / CIFAR10C_DIRNAME} "
                f"({type(exc).__name__}: {exc}). {_cifar10c_fix(root)}."
            ) from exc
        x = x.to(torch.float32).contiguous()
        y = y.to(torch.int64).contiguous()
    else:
        x, y = _load_cifar10c_numpy(root / CIFAR10C_DIRNAME, corruptions, severity, n_examples, k)
    return x, y


# ---------------------------------------------------------------------------
# model zoo
# ---------------------------------------------------------------------------
def _checkpoint_hint(name: str, dataset: str, threat: str, model_dir: Path) -> str:
    return (
        "Download it on a machine with internet access, e.g. "
        f"python -c \"from robustbench.utils import load_model; load_model('{name}', "
        f"model_dir='models', dataset='{dataset}', threat_model='{threat}')\", then copy "
        f"models/{dataset}/{threat}/ to {model_dir / dataset / threat}/"
    )


def load_robustbench_model(
    name: str, dataset: str, threat_model: str, model_dir: Path | str | None
) -> nn.Module:
    """Load a RobustBench model-zoo entry from local checkpoint files only.

    Checkpoints are looked up where robustbench stores them:
    ``<model_dir>/<dataset>/<threat_model>/<name>.pt`` (ensembles:
    ``<name>.pt_m0.pt``, ``<name>.pt_m1.pt`` ...). For entries robustbench serves
    through timm, the same ``<name>.pt`` path is loaded as a timm checkpoint
    instead of fetching pretrained weights. Returns the model in eval mode.
    """
    if model_dir is None:
        raise BenchError(
            f"RobustBench model '{name}' needs a checkpoint directory: pass --model-dir DIR "
            "(checkpoints in DIR/<dataset>/<threat_model>/<name>.pt)."
        )
    model_dir = Path(model_dir).expanduser()
    rb = _import_robustbench()
    from robustbench.model_zoo import model_dicts
    from robustbench.model_zoo.enums import BenchmarkDataset, ThreatModel

    try:
        ds = BenchmarkDataset(dataset)
    except ValueError:
        raise unknown_name("robustbench dataset", str(dataset), [d.value for d in BenchmarkDataset]) from None
    try:
        tm = ThreatModel(threat_model)
    except ValueError:
        raise unknown_name("robustbench threat model", str(threat_model), [t.value for t in ThreatModel]) from None
    # robustbench keeps corruptions_3d checkpoints in the 'corruptions' folder
    tm = ThreatModel(tm.value.replace("_3d", ""))
    entries = model_dicts.get(ds, {}).get(tm)
    if not entries:
        raise BenchError(f"RobustBench has no models for dataset '{ds.value}' and threat model '{tm.value}'.")
    if name not in entries:
        raise unknown_name(f"robustbench {ds.value}/{tm.value} model", name, entries.keys())

    folder = model_dir / ds.value / tm.value
    model_path = folder / f"{name}.pt"
    hint = _checkpoint_hint(name, ds.value, tm.value, model_dir)

    import timm

    timm_name = f"{name.lower().replace('-', '_')}_{ds.value.lower()}_{tm.value.lower()}"
    if timm.is_model(timm_name):
        if not model_path.is_file():
            raise BenchError(f"Checkpoint for RobustBench model '{name}' not found: {model_path}. {hint}.")
        try:
            num_classes = rb.utils.DATASET_CLASSES[ds]
            return timm.create_model(
                timm_name, num_classes=num_classes, pretrained=False, checkpoint_path=str(model_path)
            ).eval()
        except Exception as exc:
            raise BenchError(
                f"Could not load RobustBench model '{name}' from {model_path} ({type(exc).__name__}: {exc}). "
                f"Replace the file. {hint}."
            ) from exc

    gid = entries[name].get("gdrive_id")
    if gid is None:
        raise BenchError(f"RobustBench model '{name}' has no downloadable checkpoint; it cannot be loaded.")
    if isinstance(gid, list):
        files = [Path(f"{model_path}_m{i}.pt") for i in range(len(gid))]
    elif ds == BenchmarkDataset.imagenet and "Standard" in name:
        files = []  # robustbench builds these from torchvision weights, no checkpoint file
    else:
        files = [model_path]
    missing = [p for p in files if not p.is_file()]
    if missing:
        raise BenchError(
            f"Checkpoint for RobustBench model '{name}' not found: {', '.join(map(str, missing))}. {hint}."
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = rb.utils.load_model(name, model_dir=str(model_dir), dataset=ds.value, threat_model=tm.value)
    except Exception as exc:
        raise BenchError(
            f"Could not load RobustBench model '{name}' from {folder} ({type(exc).__name__}: {exc}). "
            f"Replace the checkpoint file(s). {hint}."
        ) from exc
    return model.eval()
