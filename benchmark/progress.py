"""Progress bars on stderr (tqdm), silenced when BENCH_QUIET is set or stderr is not a terminal in tests."""
from __future__ import annotations

import os
import sys

from tqdm.auto import tqdm


def progress_bar(total: int | None = None, desc: str = "", **kw) -> tqdm:
    """A tqdm bar on stderr; disabled under BENCH_QUIET=1."""
    disable = os.environ.get("BENCH_QUIET") == "1"
    return tqdm(total=total, desc=desc, file=sys.stderr, disable=disable, leave=False, dynamic_ncols=True, **kw)
