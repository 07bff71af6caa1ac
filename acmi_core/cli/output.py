"""How the CLI answers: JSON for scripts, tables for people, errors on stderr, and
exit codes that mean something (``EXIT_CODES``, also in ``acmi --help``)."""

from __future__ import annotations

import datetime
import math
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import StrEnum
from typing import Any, Final

from acmi_core.base.errors import (
    AcmiError,
    AcmiValidationError,
    Conflict,
    Forbidden,
    NotFound,
    RateLimited,
    StoreAuthError,
    Unauthenticated,
    Unavailable,
)
from acmi_core.base.stored import render_json

EXIT_OK: Final = 0
EXIT_PROBLEMS: Final = 1  # a check ran and found problems (doctor, memory debug, quota red)
EXIT_USAGE: Final = 2  # the command line or its input breaks a rule (nothing was written)
EXIT_NOT_FOUND: Final = 3
EXIT_CONFLICT: Final = 4  # a lease is held by another owner, a compare-and-set deadline passed
EXIT_AUTH: Final = 5  # the key is unknown, revoked or lacks the scope
# the store or the API did not answer, or asked to be called later (a 429 or 503: retry
# after the seconds the error line gives)
EXIT_UNAVAILABLE: Final = 6
EXIT_ERROR: Final = 7  # any other ACMI error (e.g. stored data another tool wrote is corrupt)

EXIT_CODES: Final = (
    f"Exit codes: {EXIT_OK} ok, {EXIT_PROBLEMS} a check found problems, {EXIT_USAGE} bad usage "
    f"or input (nothing written), {EXIT_NOT_FOUND} not found, {EXIT_CONFLICT} conflict (lease "
    f"held), {EXIT_AUTH} key refused, {EXIT_UNAVAILABLE} store/API unavailable or rate "
    "limited (retry later), "
    f"{EXIT_ERROR} other error."
)

# most specific first: StoreUnavailable is both a StoreError and Unavailable
_CODES: Final[tuple[tuple[type[AcmiError], int], ...]] = (
    (AcmiValidationError, EXIT_USAGE),
    (NotFound, EXIT_NOT_FOUND),
    (Conflict, EXIT_CONFLICT),
    (Unauthenticated, EXIT_AUTH),
    (Forbidden, EXIT_AUTH),
    (StoreAuthError, EXIT_AUTH),
    (Unavailable, EXIT_UNAVAILABLE),
    (RateLimited, EXIT_UNAVAILABLE),  # allowed again later, as after a 503: retry then
)


class Output(StrEnum):
    AUTO = "auto"  # a table on a terminal, JSON when piped (what reference scripts parse)
    JSON = "json"
    TABLE = "table"


def exit_code(exc: AcmiError) -> int:
    for kind, code in _CODES:
        if isinstance(exc, kind):
            return code
    return EXIT_ERROR


def error_text(exc: AcmiError) -> str:
    """``field: message (rule: name)``: what to fix and which rule said so; a 429 or 503
    (retry later) adds ``; retry after N s``."""
    text = exc.message if exc.message.startswith(exc.field) else f"{exc.field}: {exc.message}"
    if isinstance(exc, (Unavailable, RateLimited)):
        # a script waits this long before it calls again (the API's Retry-After)
        return f"{text} (rule: {exc.rule}); retry after {max(1, math.ceil(exc.retry_after))} s"
    return f"{text} (rule: {exc.rule})"


def note(text: str) -> None:
    """Chatter for people, never mixed into what a script parses."""
    print(text, file=sys.stderr)


Renderer = Callable[[Any], Any]  # value -> a rich renderable


def emit(value: Any, mode: Output, render: Renderer | None = None) -> None:
    """Print one answer: ``render_json`` (stored values exactly: huge integers, lone
    surrogates other clients wrote) or a rich rendering of it."""
    table = mode is Output.TABLE or (mode is Output.AUTO and sys.stdout.isatty())
    if not table:
        sys.stdout.write(render_json(value, indent=2).decode("utf-8") + "\n")
        return
    from rich.console import Console  # only people get rich output: keep scripts lean
    from rich.json import JSON

    console = Console()
    if render is not None:
        console.print(render(value))
    elif isinstance(value, str):
        console.print(value, markup=False, highlight=False)
    else:
        console.print(JSON(render_json(value).decode("utf-8")))


def table(
    rows: Iterable[Mapping[str, Any]], columns: Sequence[str], title: str | None = None
) -> Any:
    """A rich table of ``columns`` (values shown as JSON when not text)."""
    from rich.table import Table

    grid = Table(title=title, show_lines=False)
    for name in columns:
        grid.add_column(name, overflow="fold")
    for row in rows:
        grid.add_row(*(_cell(row.get(name), name) for name in columns))
    return grid


def pairs(value: Mapping[str, Any], title: str | None = None) -> Any:
    """A two-column table of a mapping."""
    return table(({"key": k, "value": v} for k, v in value.items()), ("key", "value"), title)


def _cell(value: Any, column: str = "") -> Any:
    from rich.text import Text  # plain Text: stored strings are never read as rich markup

    if value is None:
        return Text("")
    if (column == "ts" or column.endswith("_at")) and _is_ms(value):
        # people read times; --json keeps the stored milliseconds
        moment = datetime.datetime.fromtimestamp(value / 1000, datetime.UTC)
        return Text(moment.strftime("%Y-%m-%d %H:%M:%SZ"))
    return Text(value if isinstance(value, str) else render_json(value).decode("utf-8"))


def _is_ms(value: Any) -> bool:
    return type(value) in (int, float) and 0 <= value < 253_402_300_800_000  # year 9999


def one_of(field: str, value: str, allowed: Sequence[str]) -> str:
    """``value`` when it is one of ``allowed``, else a usage error listing them."""
    if value not in allowed:
        raise AcmiValidationError(field, "enum", f"must be one of {', '.join(allowed)}")
    return value
