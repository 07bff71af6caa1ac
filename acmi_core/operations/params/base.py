"""What every params model shares: the base class, and the defaults the core's modules
hold (this package may import nothing above base)."""

from __future__ import annotations

from typing import ClassVar, Final

from pydantic import BaseModel, ConfigDict

# Held equal to acmi_core.bootstrap.bundle.DEFAULT_EVENTS and memory.state.DEFAULT_PRUNE_DAYS
# by tests/unit/test_params.py (this module may import nothing above base).
BUNDLE_EVENTS: Final = 20
PRUNE_DAYS: Final = 7


class Params(BaseModel):
    """An operation's parameters: only its own fields, frozen once validated."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool_function: ClassVar[str | None] = None
    # fields the MCP tool does not take (its arguments are a contract older than them)
    not_tool_arguments: ClassVar[frozenset[str]] = frozenset()

    def writes(self) -> bool:
        """Whether this call writes although its operation reads (see the module)."""
        return False
