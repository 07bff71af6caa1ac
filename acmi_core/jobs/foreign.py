"""Events and values other tools stored, read tolerantly: an event's correlationId, kind, ts
and summary wherever a writer put them, a timeline page's events, a JSON value, and what
the fleet jobs (drift-diff, standup-brief) share besides (their ``max`` parameter, the
ISO time they print). Nothing here raises on a foreign shape: it reads as empty."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from acmi_core.base.errors import AcmiValidationError, CorruptData, StoreCommandError
from acmi_core.base.stored import Unreadable, decode_event, load_stored
from acmi_core.entities.api import PAGE, newest_command, newest_members
from acmi_core.jobs.runner import MAX_PER_RUN
from acmi_core.store.base import Command, Reply, Store, is_noscript

if TYPE_CHECKING:
    from acmi_core.jobs.runner import JobRun

MAX_RUN_LIMIT: Final = 10_000  # the highest ``max`` a run accepts
# of a timeline's newest events, what a job reads per entity (the first one whatever its
# size): a job's input stays bounded by bytes, not only by counts, however large events are
JOB_READ_BYTES: Final = 256 * 1024
SUMMARY_CHARS: Final = 140  # of an event summary quoted in a report


def correlation_of(data: Mapping[str, Any]) -> str | None:
    """An event's correlationId wherever a writer put it (camelCase, the legacy snake
    case, or inside the payload)."""
    payload = data.get("payload")
    places: list[Any] = [data.get("correlationId"), data.get("correlation_id")]
    if isinstance(payload, Mapping):
        places += [
            payload.get("correlationId"),
            payload.get("correlation_id"),
            payload.get("responding_to_correlation_id"),
        ]
    for value in places:
        if isinstance(value, str) and value:
            return value
    return None


def kind_of(data: Mapping[str, Any]) -> str:
    """An event's kind, "" when it has none."""
    kind = data.get("kind")
    return kind if isinstance(kind, str) else ""


def ts_of(data: Mapping[str, Any]) -> int:
    """An event's ts in ms, 0 when it has none."""
    ts = data.get("ts")
    return int(ts) if isinstance(ts, int | float) and not isinstance(ts, bool) else 0


def summary_of(data: Mapping[str, Any]) -> str:
    """An event's summary, cut to ``SUMMARY_CHARS``."""
    summary = data.get("summary")
    return summary[:SUMMARY_CHARS] if isinstance(summary, str) else ""


def decode_members(reply: Reply | StoreCommandError) -> list[dict[str, Any]]:
    """The stored dicts of a ZRANGE reply; what cannot be read as an event is skipped
    (a key of another type, written by another tool, reads as empty)."""
    members = reply if isinstance(reply, list) else []
    out = []
    for member in members:
        decoded = decode_event(member)
        if not isinstance(decoded, str):
            out.append(decoded[1])
    return out


def load_json(reply: Reply | StoreCommandError) -> Any:
    """A stored JSON value, None when it is absent or unreadable."""
    if not isinstance(reply, bytes):
        return None
    try:
        return load_stored(reply)
    except Unreadable:
        return None


def iso(ms: int) -> str:
    """``ms`` as an ISO 8601 UTC time ending in ``Z``."""
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat().replace("+00:00", "Z")


def max_per_run(run: JobRun) -> int:
    """The run's ``max`` parameter (default ``jobs.MAX_PER_RUN``), checked."""
    value = run.params.get("max", MAX_PER_RUN)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_RUN_LIMIT:
        raise AcmiValidationError(
            "max", "range", f"must be an integer from 1 to {MAX_RUN_LIMIT} (items a run handles)"
        )
    return value


@dataclass(frozen=True)
class NewestRead:
    """The newest ``count`` events of a timeline with ts in (``after``, ``until``] (None:
    unbounded), read inside Redis up to ``max_bytes`` (page.lua): one command of a job's
    pipeline (``command``) and the members of its reply (``members``)."""

    key: str
    count: int
    until: float | None = None
    after: float | None = None
    max_bytes: int = JOB_READ_BYTES

    def _bounds(self) -> dict[str, Any]:
        since = None if self.after is None else math.nextafter(self.after, math.inf)
        return {"until": self.until, "since": since, "max_bytes": self.max_bytes}

    def command(self) -> Command:
        return newest_command(self.key, self.count, **self._bounds())

    def members(
        self, store: Store, reply: Reply | StoreCommandError
    ) -> tuple[list[Reply] | None, bool]:
        """The members, newest first (None: a key of another type, another tool's), and
        whether the byte cap cut the read."""
        try:
            members, more = newest_members(store, reply, self.key, self.count, **self._bounds())
        except CorruptData:
            return None, False
        return members[::-1], more is not None


def read_pipeline(store: Store, commands: list[Command]) -> list[Reply | StoreCommandError]:
    """``store.pipeline``, with a cold script cache (a restarted or failed-over server)
    costing one more request, not one per read: the page reads that met NOSCRIPT are sent
    again together, the first as EVAL, which loads page.lua for the rest."""
    replies = list(store.pipeline(commands))
    cold = [i for i, r in enumerate(replies) if isinstance(r, StoreCommandError) and is_noscript(r)]
    if cold:
        again = [commands[i] for i in cold]
        if again[0][:2] == ("EVALSHA", PAGE.sha):
            again[0] = ("EVAL", PAGE.source, *again[0][2:])
        for i, reply in zip(cold, store.pipeline(again), strict=True):
            replies[i] = reply
    return replies
