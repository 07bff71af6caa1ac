"""The ``acmi`` command line (also ``python -m acmi_core``): typer commands, one module a
group (``entities``, ``agents``, ``work``, ``coordination``, ``memory``, ``operator``,
``local``), on a :class:`~acmi_core.cli.backend.Backend` (the store, or a deployed API)."""

from acmi_core.cli.app import app, main

__all__ = ["app", "main"]
