"""What every params model shares: the base class, and the defaults the core's modules
hold (this package may import nothing above base)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Final

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from acmi_core.base.pages import MAX_CURSOR_LEN, MAX_PAGE_SIZE

# Held equal to acmi_core.bootstrap.bundle.DEFAULT_EVENTS and memory.state.DEFAULT_PRUNE_DAYS
# by tests/unit/test_params.py (this module may import nothing above base).
BUNDLE_EVENTS: Final = 20
PRUNE_DAYS: Final = 7

# What the core checks of these, in the OpenAPI document (``json_schema_extra``: shown,
# not checked here, so every surface gets the core's own field, rule and message).
Entity = Annotated[
    str,
    Field(description="<category>:<id>, e.g. user:mikey", json_schema_extra={"maxLength": 256}),
]
Cursor = Annotated[
    str | None,
    Field(
        description="next_cursor of the previous page, unchanged; omit for the first page",
        json_schema_extra={"minLength": 1, "maxLength": MAX_CURSOR_LEN},
    ),
]
PageLimit = Annotated[
    int,
    Field(
        description=f"page size, at most {MAX_PAGE_SIZE}",
        json_schema_extra={"minimum": 1, "maximum": MAX_PAGE_SIZE},
    ),
]
# A time in ms, finite: checked here (the timeline's core took ``inf`` as a bound).
Ms = Annotated[float | None, Field(allow_inf_nan=False)]


def bounded(default: Any = ..., *, description: str | None = None, **bounds: int) -> Any:
    """A field (``...``: required) with its description and the JSON Schema bounds the
    core checks (shown only)."""
    extra: dict[str, JsonValue] = dict(bounds)
    return Field(default, description=description, json_schema_extra=extra)


class Params(BaseModel):
    """An operation's parameters: only its own fields, frozen once validated."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool_function: ClassVar[str | None] = None
    # fields the MCP tool does not take (its arguments are a contract older than them)
    not_tool_arguments: ClassVar[frozenset[str]] = frozenset()

    def writes(self) -> bool:
        """Whether this call writes although its operation reads (see the module)."""
        return False
