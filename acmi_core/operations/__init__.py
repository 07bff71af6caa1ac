"""The operation table: every operation ACMI offers, one row each, declared once.

A row (:class:`Operation`) names the operation, says in one line what it does, who may
call it (:class:`Access`: the scope of the caller's key, whose tenant it always acts on;
or, for the few that are not key-scoped, how the caller is known instead) and which core
callable does the work, and where each surface exposes it: the HTTP route (method, path
and the Lambda function that mounts it), the MCP tool, the ``acmi`` command. The HTTP API
registers its routes from these rows and applies their access before a handler runs
(``acmi_core.api.access``); tests hold the MCP server and the CLI to the names here.

Pure data, grouped by capability in the modules beside this one; importing it imports
nothing of ACMI above ``acmi_core.base``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Final

from acmi_core.base.lambdas import function
from acmi_core.operations import coordination, entities, ingest, memory, service
from acmi_core.operations.model import KEYED, Access, Capability, Operation

__all__ = ["KEYED", "OPERATIONS", "Access", "Capability", "Operation", "of_function", "operation"]

OPERATIONS: Final[tuple[Operation, ...]] = (
    *ingest.OPERATIONS,
    *entities.OPERATIONS,
    *coordination.OPERATIONS,
    *memory.OPERATIONS,
    *service.OPERATIONS,
)


def _repeated(values: Iterable[object]) -> list[object]:
    return sorted((v for v, n in Counter(values).items() if n > 1), key=str)


def _check(rows: tuple[Operation, ...]) -> None:
    """One row per name, route, MCP tool and command; every route on an HTTP function."""
    for what, values in (
        ("names", [row.name for row in rows]),
        ("routes", [(row.method, row.openapi_path) for row in rows if row.http]),
        ("MCP tools", [row.mcp for row in rows if row.mcp]),
        ("commands", [row.cli for row in rows if row.cli]),
    ):
        repeated = _repeated(values)
        if repeated:
            raise ValueError(f"operations: {what} given twice: {repeated}")
    for row in rows:
        if row.function is not None and function(row.function).kind != "http":
            raise ValueError(f"operation {row.name!r}: {row.function} is not an HTTP function")


_check(OPERATIONS)
_BY_NAME: Final = {row.name: row for row in OPERATIONS}


def operation(name: str) -> Operation:
    """The row called ``name``."""
    row = _BY_NAME.get(name)
    if row is None:
        raise KeyError(f"no operation {name!r}")
    return row


def of_function(name: str) -> tuple[Operation, ...]:
    """The HTTP rows the function ``name`` mounts, in table order."""
    return tuple(row for row in OPERATIONS if row.function == name)
