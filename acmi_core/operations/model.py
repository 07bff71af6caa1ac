"""One operation: what it does, who may call it, and where each surface exposes it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Final, TypedDict, Unpack


class Access(StrEnum):
    """Who may call an operation.

    ``read`` / ``write`` / ``admin``: an API key of at least that scope (``admin`` allows
    everything, ``write`` allows reads); the tenant is always the key's, never a
    parameter. The kinds that are not a key's scope say how the caller is known instead:
    ``webhook``: the source's credential policy (its row in ``acmi_core.ingest.sources``:
    an API key of write scope, a push token in the URL, or, for sources that accept it
    such as Gmail's Pub/Sub push, Google's OIDC token), then the body's signature when the
    source's config holds a secret; ``public``: no credential at all (the docs)."""

    READ = "read"
    WRITE = "write"
    ADMIN = "admin"
    WEBHOOK = "webhook"
    PUBLIC = "public"

    @property
    def keyed(self) -> bool:
        """A key-scoped kind: the caller's API key decides the tenant and the scope."""
        return self in KEYED


KEYED: Final = frozenset({Access.READ, Access.WRITE, Access.ADMIN})
# The results of the operations that serve stored JSON as written (a profile, the
# signals, a rollup, a lesson): its shape is the writer's, so the type is "JSON".
STORED: Final = "acmi_core.base.stored:StoredObject"
STORED_VALUE: Final = "acmi_core.base.stored:StoredValue"
NONE: Final = "types:NoneType"
HTTP_METHODS: Final = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE"})
_CONVERTER: Final = re.compile(r"\{(\w+):\w+\}")


@dataclass(frozen=True)
class Operation:
    """One operation, declared once for every surface.

    ``name``: ``<capability>.<what>``, e.g. ``entities.get``. ``summary``: one line (the
    HTTP route's OpenAPI summary, verbatim). ``call``: the core callable doing the work,
    ``"<module>:<qualname>"`` (named, not imported: a cold start imports only what its
    routes call). ``method`` + ``path`` (a Starlette path, converters included) and
    ``function`` (the ``FunctionSpec`` mounting it): its HTTP route, if any. ``metric``:
    what the API counts once the caller is authorized (None: the route counts what it
    stores itself). ``mcp``: its MCP tool; ``cli``: its ``acmi`` command (words as typed,
    e.g. ``memory export``). ``store_only``: that command works on the store directly,
    never through ``--api``. ``params``: its parameters' model, ``"<module>:<qualname>"``
    (``acmi_core.operations.params``; every row with an MCP tool has one: the tool's
    arguments, schema and description are derived from it). ``result``: the type of what
    the core callable returns, ``"<module>:<qualname>"`` (``acmi_core.operations.results``:
    a TypedDict, so the JSON every surface prints stays the dict it always was, with its
    keys and types declared once and held to real answers by the table's tests)."""

    name: str
    summary: str
    access: Access
    call: str | None = None
    method: str | None = None
    path: str | None = None
    function: str | None = None
    metric: str | None = None
    mcp: str | None = None
    cli: str | None = None
    store_only: bool = False
    params: str | None = None
    result: str | None = None

    def __post_init__(self) -> None:
        if (self.method is None) != (self.path is None) or (self.path is None) != (
            self.function is None
        ):
            raise ValueError(f"operation {self.name!r}: give method, path and function, or none")
        if self.method is not None and self.method not in HTTP_METHODS:
            raise ValueError(f"operation {self.name!r}: no HTTP method {self.method!r}")
        if self.metric is not None and not self.access.keyed:
            raise ValueError(f"operation {self.name!r}: only key-scoped access is metered")
        if self.store_only and self.cli is None:
            raise ValueError(f"operation {self.name!r}: store_only describes its CLI command")
        if self.call is not None and ":" not in self.call:
            raise ValueError(f"operation {self.name!r}: call is '<module>:<qualname>'")
        if self.params is not None and ":" not in self.params:
            raise ValueError(f"operation {self.name!r}: params is '<module>:<qualname>'")
        if self.result is not None and ":" not in self.result:
            raise ValueError(f"operation {self.name!r}: result is '<module>:<qualname>'")
        if self.mcp is not None and self.params is None:
            raise ValueError(f"operation {self.name!r}: an MCP tool needs its params model")

    @property
    def http(self) -> bool:
        return self.path is not None

    @property
    def openapi_path(self) -> str | None:
        """The path as the OpenAPI document lists it (``{thread:path}`` -> ``{thread}``)."""
        return None if self.path is None else _CONVERTER.sub(r"{\1}", self.path)


class Exposure(TypedDict, total=False):
    """Where a :class:`Capability` row is exposed besides HTTP, and its types."""

    mcp: str | None
    cli: str | None
    store_only: bool
    params: str | None
    result: str | None


@dataclass(frozen=True)
class Capability:
    """The HTTP rows of one Lambda function, and the metrics its access counts."""

    function: str
    reads: str | None = None
    writes: str | None = None

    def read(
        self, name: str, method: str, path: str, summary: str, call: str | None,
        **rest: Unpack[Exposure],
    ) -> Operation:  # fmt: skip
        """A read row of this function (key scope ``read``, counted as ``reads``)."""
        return Operation(
            name, summary, Access.READ, call, method, path, self.function, self.reads, **rest
        )  # fmt: skip

    def write(
        self, name: str, method: str, path: str, summary: str, call: str | None,
        **rest: Unpack[Exposure],
    ) -> Operation:  # fmt: skip
        """A write row of this function (key scope ``write``, counted as ``writes``)."""
        return Operation(
            name, summary, Access.WRITE, call, method, path, self.function, self.writes, **rest
        )  # fmt: skip
