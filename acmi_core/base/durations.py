"""Durations as people type them (``30m``, ``24h``, ``7d``, ``2w``) and the time
window ``since``/``until`` durations name. The reference's ``cat --since`` took a
timestamp where it documented a duration: here both CLI and MCP read this one rule."""

from __future__ import annotations

import re
from typing import Final

from acmi_core.base.errors import AcmiValidationError

_DURATION: Final = re.compile(r"^(\d{1,9})([smhdw])$")
_UNIT_MS: Final = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}


def parse_duration(value: str, field: str = "since") -> int:
    """``30m``, ``24h``, ``7d``, ``2w`` -> milliseconds."""
    match = _DURATION.match(value.strip()) if isinstance(value, str) else None
    if match is None:
        raise AcmiValidationError(field, "duration", "must be a duration like 30m, 24h or 7d")
    return int(match.group(1)) * _UNIT_MS[match.group(2)]


def window(
    now_ms: int,
    since: str | None,
    until: str | None,
    *,
    since_field: str = "since",
    until_field: str = "until",
) -> tuple[int | None, int | None]:
    """(start, end) in ms for events newer than ``since`` ago and older than ``until``
    ago (either open when None); an ``until`` longer ago than ``since`` is refused."""
    start = None if since is None else now_ms - parse_duration(since, since_field)
    end = None if until is None else now_ms - parse_duration(until, until_field)
    if start is not None and end is not None and end < start:
        raise AcmiValidationError(
            until_field, "range", f"must be a shorter time ago than {since_field}"
        )
    return start, end
