"""What every bench section shares: a redis-server of its own, the Upstash REST double,
statistics and the one plain-text table renderer."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from operator import itemgetter
from pathlib import Path
from typing import Any

from acmi_core.testing.redis_server import RedisServer, RedisServerError
from acmi_core.testing.redis_server import redis_server as start_redis_server
from acmi_core.testing.upstash_double import UpstashDouble

ROOT = Path(__file__).resolve().parent.parent

__all__ = [
    "ROOT",
    "Column",
    "RedisServer",
    "UpstashDouble",
    "fmt_table",
    "median",
    "percentile",
    "redis_server",
    "table_of",
]


@contextmanager
def redis_server() -> Iterator[RedisServer]:
    """A throwaway redis-server; a missing or broken one ends the run with its reason."""
    try:
        with start_redis_server() as server:
            yield server
    except RedisServerError as exc:
        raise SystemExit(f"bench: {exc}") from None


# --- statistics -----------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100): p99 of 100 samples is the 99th smallest."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else math.nan


# --- tables ---------------------------------------------------------------------------------


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isnan(value):
            return "n/a"
        if abs(value) >= 100:
            return f"{value:,.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}"
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10_000 else str(value)
    if isinstance(value, list | tuple):
        return ", ".join(_cell(v) for v in value) or "none"
    return str(value)


def fmt_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-flavoured Markdown table (readable as plain text too)."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(h), *(len(row[i]) for row in cells)]) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        return "| " + " | ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)) + " |"

    out = [line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(row) for row in cells]
    return "\n".join(out)


# A column: its header, and the record's key or a function of the record.
Column = tuple[str, str | Callable[[Mapping[str, Any]], Any]]


def table_of(columns: Sequence[Column], records: Iterable[Mapping[str, Any]]) -> str:
    """fmt_table over report records, so each section declares columns, not loops."""
    getters = [itemgetter(k) if isinstance(k, str) else k for _, k in columns]
    return fmt_table([h for h, _ in columns], [[get(r) for get in getters] for r in records])
