"""User-facing errors: one clear message naming the problem and the fix."""
from __future__ import annotations

import difflib
from collections.abc import Iterable


class BenchError(Exception):
    """An error caused by user input or environment, shown without a traceback by the CLI."""


def unknown_name(kind: str, name: str, valid: Iterable[str], where: str = "") -> BenchError:
    """The error for an unknown registry name, with a close match and the valid names, e.g. "Unknown
    transformation 'rotaton' in suite 'semantic'. Did you mean 'rotation'? Valid: brightness, ..."."""
    valid = sorted(valid)
    close = difflib.get_close_matches(name, valid, n=1, cutoff=0.5)
    hint = f" Did you mean '{close[0]}'?" if close else ""
    return BenchError(f"Unknown {kind} '{name}'{' ' + where if where else ''}.{hint} Valid: {', '.join(valid)}.")
