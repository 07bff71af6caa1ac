"""The ``acmi`` command line (also ``python -m acmi_core``): typer commands, one module a
group (``entities``, ``agents``, ``work``, ``coordination``, ``memory``, ``operator``,
``local``), on a :class:`~acmi_core.cli.backend.Backend` (the store, or a deployed API)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from acmi_core.base.extras import install_hint, missing_extra

if TYPE_CHECKING:
    from acmi_core.cli.state import CliState

try:
    from acmi_core.cli.app import app
except ModuleNotFoundError as exc:  # the library alone: `main` says which extra to install
    if missing_extra(exc) is None:
        raise


def main(argv: Sequence[str] | None = None, *, state: CliState | None = None) -> int:
    """The console script (``acmi_core.cli.app.main``); without the ``cli`` extra, one
    line on stderr saying what to install, and the usage exit code."""
    try:
        from acmi_core.cli.app import main as run
    except ModuleNotFoundError as exc:
        extra = missing_extra(exc)
        if extra is None:
            raise
        print(
            f"error: {exc.name}: the acmi command needs {exc.name}: {install_hint(extra)} "
            "(rule: installed)",
            file=sys.stderr,
        )
        return 2  # output.EXIT_USAGE, as for every other missing extra (that module needs rich)
    return run(argv, state=state)


__all__ = ["app", "main"]
