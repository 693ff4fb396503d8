"""Dependency warnings nobody running the benchmark can act on, silenced exactly where they arise."""
from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def no_jit_script_deprecation() -> Iterator[None]:
    """torch >= 2.10 deprecates ``torch.jit.script`` with a FutureWarning, but torch's own forward-mode AD
    still scripts its JVP decompositions on the first ``torch.func.jvp``. Only that warning is silenced,
    only inside the block."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"`torch\.jit\.script` is deprecated", category=FutureWarning)
        yield
