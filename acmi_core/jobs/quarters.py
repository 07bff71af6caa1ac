"""Quarters and days in UTC, as the memory hygiene schedule counts them: the quarter of a
timestamp, its bounds, and the seed's next monthly and quarterly dates."""

from __future__ import annotations

import datetime as dt
from typing import Final

from acmi_core.memory.layers import Quarter

DAY_MS: Final = 24 * 3600 * 1000


def day_of(ms: int) -> dt.date:
    """The UTC day of ``ms``."""
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).date()


def day_start_ms(day: dt.date) -> int:
    """The first ms of ``day`` (UTC)."""
    return int(dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC).timestamp() * 1000)


def quarter_of(ms: float) -> Quarter:
    return Quarter.of(day_of(int(ms)))


def quarter_start(q: Quarter) -> dt.date:
    return dt.date(q.year, 3 * (q.number - 1) + 1, 1)


def quarter_end_ms(q: Quarter) -> int:
    """The first ms after the quarter."""
    nxt = Quarter(q.year + 1, 1) if q.number == 4 else Quarter(q.year, q.number + 1)
    return day_start_ms(quarter_start(nxt))


def next_quarterly(today: dt.date) -> dt.date:
    """The last day of the quarter tomorrow is in (the seed's ``2026-03-31``)."""
    q = Quarter.of(today + dt.timedelta(days=1))
    return day_of(quarter_end_ms(q) - DAY_MS)


def next_monthly(today: dt.date) -> dt.date:
    """The first day of next month (the seed's ``2026-02-01``)."""
    return dt.date(today.year + today.month // 12, today.month % 12 + 1, 1)
