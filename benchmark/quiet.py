"""Dependency warnings nobody running the benchmark can act on, silenced exactly where they arise."""
from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def no_jit_script_deprecation() -> Iterator[None]:
    """torch >= 2.10 deprecates ``torch.jit.script`` with a FutureWarning, but dependencies still call it:
    ``bound_propagation`` decorates functions with it at import, and torch's own forward-mode AD scripts its
    JVP decompositions on the first ``torch.func.jvp``. Only that warning is silenced, only inside the block."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"`torch\.jit\.script` is deprecated", category=FutureWarning)
        yield
