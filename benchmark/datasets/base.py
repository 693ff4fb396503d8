"""Dataset contract: a frozen description (:class:`DatasetSpec`) plus a loader.

Every dataset returns the whole requested split as two tensors::

    x: float32 [N, C, H, W] with values in [0, 1]
    y: int64   [N]

Normalisation (``spec.mean`` / ``spec.std``) is *not* applied by the loader;
models carry their own normalisation layer so that transformations and
certificates always act on images in [0, 1].
"""
from __future__ import annotations

import abc
import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from benchmark.errors import BenchError

if TYPE_CHECKING:  # pragma: no cover - typing only
    from torch import Tensor

Split = Literal["train", "test"]
SPLITS: tuple[str, ...] = ("train", "test")


@dataclass(frozen=True)
class DatasetSpec:
    """Static description of a dataset.

    Attributes:
        name: registry name (``digits``, ``cifar10`` ...).
        version: version of *our* preprocessing/split; bump when results change.
        num_classes: number of labels; ``y`` takes values in ``range(num_classes)``.
        shape: ``(C, H, W)`` of one image.
        mean, std: per-channel statistics of the training split (for model
            normalisation layers).
        description: one line for ``bench list datasets``.
        source: where the data comes from (package, URL or paper).
    """

    name: str
    version: str
    num_classes: int
    shape: tuple[int, int, int]
    mean: tuple[float, ...]
    std: tuple[float, ...]
    description: str = ""
    source: str = ""

    def __post_init__(self) -> None:
        if len(self.shape) != 3:
            raise ValueError(f"DatasetSpec.shape must be (C, H, W), got {self.shape}")
        channels = self.shape[0]
        if len(self.mean) != channels or len(self.std) != channels:
            raise ValueError(
                f"DatasetSpec '{self.name}': mean/std need one value per channel ({channels})"
            )
        if any(s <= 0 for s in self.std):
            raise ValueError(f"DatasetSpec '{self.name}': std must be positive")


#: the defense whose code is running (set by the harness around every call into a defense), else None
_DEFENSE_CODE: ContextVar[str | None] = ContextVar("defense_code", default=None)


class TestSplitAccess(BenchError):
    """Defense code asked a dataset for its test split."""

    __test__ = False  # not a pytest class


@contextmanager
def defense_code(name: str) -> Iterator[None]:
    """While defense ``name`` runs, every dataset refuses every split but ``train``, and the sandbox's audit
    hook (``benchmark.infra.sandbox``) refuses reading protected files, writing outside the run, sockets, processes."""
    from benchmark.infra import sandbox

    token = _DEFENSE_CODE.set(name)
    try:
        with sandbox.confined(name):
            yield
    finally:
        _DEFENSE_CODE.reset(token)


def _train_only_in_defense_code(load: Callable) -> Callable:
    @functools.wraps(load)
    def guarded(self, *args, **kwargs):
        split = kwargs.get("split", args[0] if args else "test")
        who = _DEFENSE_CODE.get()
        if who is not None and split != "train":
            raise TestSplitAccess(
                f"defense '{who}' tried to load the '{split}' split of dataset '{self.name}'. A defense gets the "
                "training split only (ctx.train_data()); the test split and its labels belong to the harness "
                "(docs/submitting.md, 'No access to the test split').")
        from benchmark.infra import sandbox

        with sandbox.harness():  # the harness reads the training split's files for the defense
            return load(self, *args, **kwargs)
    return guarded


class Dataset(abc.ABC):
    """A registry entry: ``spec`` plus :meth:`load` (which refuses the test split inside defense code)."""

    spec: DatasetSpec
    #: whether ``load`` reads ``data_root`` (False for data bundled with a package or built into the cache)
    uses_data_root: bool = True

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if "load" in cls.__dict__:
            cls.load = _train_only_in_defense_code(cls.__dict__["load"])

    @property
    def name(self) -> str:
        return self.spec.name

    def protected_paths(self, data_root: Path | None = None) -> list[Path]:
        """Files and folders the dataset reads: defense code may not open them (``benchmark.infra.sandbox``).
        Default: ``data_root`` for datasets that read it, else nothing."""
        return [Path(data_root).expanduser()] if self.uses_data_root and data_root is not None else []

    @abc.abstractmethod
    def load(
        self, split: Split = "test", data_root: Path | None = None, offline: bool = False
    ) -> tuple[Tensor, Tensor]:
        """Return ``(x, y)`` for ``split``; see the module docstring for the format.

        Args:
            split: ``"train"`` or ``"test"``.
            data_root: directory holding downloaded data (unused by bundled datasets).
            offline: never touch the network; missing files raise :class:`BenchError`.
        """

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec.name!r})"


def check_split(name: str, split: str, allowed: tuple[str, ...] = SPLITS) -> None:
    """Raise a :class:`BenchError` unless ``split`` is one of ``allowed``."""
    if split not in allowed:
        raise BenchError(
            f"Dataset '{name}' has no split '{split}'. Use one of: {', '.join(allowed)}."
        )


def test_subset(n: int | None, skip: int, total: int) -> list[int]:
    """Deterministic, evenly spaced indices into a split of ``total`` examples.

    Follows the convention of the randomized-smoothing literature ("certify every
    k-th test image"): ``stride = max(1, (total - skip) // n)`` and the indices
    are ``skip + i * stride`` for ``i < n`` (clipped to the available examples).
    ``n=None`` selects every example after ``skip``.

    Raises:
        BenchError: if ``skip``/``n`` are negative, ``skip >= total`` or the
            selection is empty; the message says how many examples exist.
    """
    if total <= 0:
        raise BenchError("The dataset split is empty: there are no examples to evaluate.")
    if skip < 0:
        raise BenchError(f"skip must be >= 0 (got {skip}).")
    if skip >= total:
        raise BenchError(
            f"skip={skip} leaves no examples: the split has only {total} examples "
            f"(indices 0..{total - 1}). Use a skip below {total}."
        )
    available = total - skip
    if n is None:
        return list(range(skip, total))
    if n <= 0:
        raise BenchError(
            f"The number of examples must be positive (got n={n}); "
            f"the split has {total} examples ({available} after skip={skip})."
        )
    stride = max(1, available // n)
    indices = [skip + i * stride for i in range(n)]
    return [i for i in indices if i < total]


# pytest would otherwise try to collect ``test_subset`` when it is imported into a test module.
test_subset.__test__ = False  # type: ignore[attr-defined]
