"""Signals with a time to live (issue 24): ``signals.set(entity, key, value, ttl="24h")``
stores the signal and, beside it in the same object edit, its expiry as the field
``_acmi_ttl:<key>`` (epoch ms); a ``set`` without a ttl deletes that field in the same
edit, so the signal lives until changed. A ``replace`` or ``clear`` of the signals drops
every expiry with them; an ``update`` (PATCH) of a signal keeps its ttl.

Expiry is checked at read: every read of the signals ACMI serves (``signals.all`` and
``get``, the entity read, the wake bundle) goes through :func:`live`, which drops each
expired signal and every expiry field, so nothing scans for them. An expired signal's
bytes stay in the object until the next ``set`` of that key, a ``replace``, a ``clear``
or a delete (the reference CLI, reading the raw object, sees them and the expiry fields:
added keys, as its readers tolerate)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from acmi_core.base.durations import parse_duration
from acmi_core.base.errors import AcmiValidationError

TTL_PREFIX: Final = "_acmi_ttl:"
MAX_TTL_MS: Final = 366 * 86_400_000  # a year (and a day): longer is no time to live


def ttl_field(key: str) -> str:
    """The field holding ``key``'s expiry."""
    return TTL_PREFIX + key


def ttl_ms(ttl: object) -> int:
    """A ttl (``30m``, ``24h``, ``7d``) in ms, at most ``MAX_TTL_MS`` (400 ``ttl``)."""
    if not isinstance(ttl, str):
        raise AcmiValidationError("ttl", "duration", "must be a duration like 30m, 24h or 7d")
    ms = parse_duration(ttl, "ttl")
    if not 1_000 <= ms <= MAX_TTL_MS:
        raise AcmiValidationError("ttl", "range", "must be from 1s to 366d")
    return ms


def live(signals: Mapping[str, Any], now: int | Callable[[], int]) -> dict[str, Any]:
    """``signals`` as a read shows them: no expiry field, no expired signal. The same
    mapping when none has a ttl (no copy, and ``now``, a clock, is not read: the common
    case)."""
    if not any(k.startswith(TTL_PREFIX) for k in signals):
        return signals if isinstance(signals, dict) else dict(signals)
    now_ms = now if isinstance(now, int) else now()
    expired = {
        k[len(TTL_PREFIX) :]
        for k, v in signals.items()
        if k.startswith(TTL_PREFIX)
        and isinstance(v, int | float)
        and not isinstance(v, bool)
        and v <= now_ms
    }
    return {k: v for k, v in signals.items() if not k.startswith(TTL_PREFIX) and k not in expired}


__all__ = ["MAX_TTL_MS", "TTL_PREFIX", "live", "ttl_field", "ttl_ms"]
