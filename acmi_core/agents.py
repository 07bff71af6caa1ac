"""Long-context extensions of an agent (reference layout): spawns, active threads, the
latest rollup, and heartbeats. Agents are ``agent:<id>`` entities; a bare ``<id>`` means
the same.

Heartbeats (the liveness contract the sweep and the bootstrap read)::

    acmi.agents.heartbeat("claude", "ACTIVE", note="reviewing PR 42")

sets the agent's signals ``last_heartbeat_ts`` (ms), ``status`` and ``status_note`` (a
heartbeat without a note removes the previous one: a note belongs to the status it came
with; every other signal is untouched), and moves the agent in the tenant's activity
index ``keys.activity()`` (ZSET, member ``agent:<id>``, score = last heartbeat ms), all
in one WritePlan: one round trip, atomic. ``silent_since(cutoff)`` reads that index
(one ZRANGE BYSCORE): agents whose last heartbeat is older than ``cutoff``, oldest first,
without a scan. Status: 1-64 characters of ``[A-Za-z0-9_ -]`` (e.g. ACTIVE, IDLE,
BLOCKED, STALLED); note: 1-500 characters.

Round trips: every write here = 1 (one WritePlan), every read = 1.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from acmi_core.errors import AcmiValidationError
from acmi_core.keys import ACTIVE_CONTEXT, ROLLUP_LATEST, SPAWNS
from acmi_core.model import MAX_SUMMARY_LEN, MAX_TS_MS, EntityId, check_json_object, dumps
from acmi_core.stored import scored
from acmi_core.writes import WritePlan

if TYPE_CHECKING:
    from acmi_core.client import Acmi


STATUS_RE: Final = re.compile(r"[A-Za-z0-9_ -]{1,64}")
MAX_NOTE_LEN: Final = 500
MAX_SILENT_PAGE: Final = 1000


def check_status(status: object) -> str:
    if not isinstance(status, str) or not STATUS_RE.fullmatch(status):
        raise AcmiValidationError("status", "status", "must be 1-64 characters of [A-Za-z0-9_ -]")
    return status


def _ms(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TS_MS:
        raise AcmiValidationError(
            field, "timestamp", f"must be an integer ms from 0 to {MAX_TS_MS}"
        )
    return value


def agent_id(raw: str | EntityId, field: str = "agent") -> EntityId:
    if isinstance(raw, str) and ":" not in raw:
        raw = f"agent:{raw}"
    eid = EntityId.parse(raw, field)
    if eid.category != "agent":
        raise AcmiValidationError(field, "category", "must be an agent:<id> entity")
    return eid


def _text(value: object, field: str, max_len: int = 256) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= max_len:
        raise AcmiValidationError(field, "string", f"must be a string of 1-{max_len} characters")
    return value


def _loads(raw: object) -> Any:
    """Tolerant decode: what another tool wrote must never break a read (nesting too
    deep for the decoder included: json.loads raises RecursionError, not ValueError)."""
    try:
        return json.loads(raw) if isinstance(raw, bytes) else None
    except (ValueError, RecursionError):
        return None


SPAWN_FIELDS: Final = ("session_id", "model_id", "host")


def spawn_record(fields: Mapping[str, Any], ts: int, *, field: str | None = None) -> dict[str, Any]:
    """The spawns member of a session start, ``{ts, session_id, model_id, host?}`` (each
    1-256 characters). ``field`` prefixes the names an error reports (``spawn.model_id``)."""

    def name(part: str) -> str:
        return f"{field}.{part}" if field else part

    if not isinstance(fields, Mapping):
        raise AcmiValidationError(
            field or "spawn", "object", "must be an object {session_id, model_id, host?}"
        )
    unknown = sorted(set(fields) - set(SPAWN_FIELDS))
    if unknown:
        raise AcmiValidationError(
            name(unknown[0]), "unknown", "is not a spawn field (session_id, model_id, host)"
        )
    record: dict[str, Any] = {"ts": ts}
    for part in ("session_id", "model_id"):
        if part not in fields:
            raise AcmiValidationError(name(part), "required", "is required")
        record[part] = _text(fields[part], name(part))
    if fields.get("host") is not None:
        record["host"] = _text(fields["host"], name("host"))
    return record


class AgentAPI:
    def __init__(self, acmi: Acmi) -> None:
        self._acmi = acmi
        self._keys = acmi.keys

    def _apply(self, eid: EntityId, plan: WritePlan) -> None:
        plan.sadd(self._keys.index(eid.category), eid.local_id)
        plan.apply(self._acmi.store)

    # spawns ---------------------------------------------------------------------------

    def spawn(
        self, agent: str, session_id: str, model_id: str, host: str | None = None
    ) -> dict[str, Any]:
        """Log a session start (only in the spawns ZSET, never in the timeline)."""
        eid = agent_id(agent)
        guard = self._acmi.guard
        metadata = {
            "session_id": guard(session_id, "session_id"),
            "model_id": guard(model_id, "model_id"),
            "host": guard(host, "host"),
        }
        record = spawn_record(metadata, self._acmi.clock())
        plan = WritePlan()
        plan.zadd(self._keys.slot(eid, SPAWNS), record["ts"], dumps(record))
        self._apply(eid, plan)
        return record

    def spawns(self, agent: str, limit: int = 5) -> list[dict[str, Any]]:
        """The newest ``limit`` spawns, newest first."""
        key = self._keys.slot(agent_id(agent), SPAWNS)
        reply = self._acmi.store.execute(("ZRANGE", key, 0, limit - 1, "REV"))
        records = [_loads(m) for m in reply] if isinstance(reply, list) else []
        return [r for r in records if isinstance(r, dict)]

    # active threads -------------------------------------------------------------------

    def join(self, agent: str, thread: str, role: str = "participant") -> dict[str, Any]:
        eid = agent_id(agent)
        role = self._acmi.guard(role, "role")
        thread = self._acmi.guard(thread, "thread")
        entry = {"role": _text(role, "role"), "joined_at": self._acmi.clock()}
        plan = WritePlan()
        plan.hset(self._keys.slot(eid, ACTIVE_CONTEXT), _text(thread, "thread"), dumps(entry))
        self._apply(eid, plan)
        return entry

    def leave(self, agent: str, thread: str) -> None:
        eid = agent_id(agent)
        plan = WritePlan()
        plan.hdel(self._keys.slot(eid, ACTIVE_CONTEXT), _text(thread, "thread"))
        plan.apply(self._acmi.store)

    def active(self, agent: str) -> dict[str, Any]:
        """thread -> {role, joined_at}; a value that is not JSON is kept as its text."""
        reply = self._acmi.store.execute(
            ("HGETALL", self._keys.slot(agent_id(agent), ACTIVE_CONTEXT))
        )
        items = reply if isinstance(reply, list) else []
        threads: dict[str, Any] = {}
        for field, value in zip(items[::2], items[1::2], strict=True):
            if isinstance(field, bytes) and isinstance(value, bytes):
                decoded = _loads(value)
                threads[field.decode("utf-8", "replace")] = (
                    decoded if decoded is not None else value.decode("utf-8", "replace")
                )
        return threads

    # rollup ---------------------------------------------------------------------------

    def set_rollup(self, agent: str, summary: str, **extra: Any) -> dict[str, Any]:
        eid = agent_id(agent)
        summary = self._acmi.guard(summary, "summary")
        doc = {"ts": self._acmi.clock(), "summary": _text(summary, "summary", 20 * MAX_SUMMARY_LEN)}
        doc.update(check_json_object(self._acmi.guard(extra, "rollup"), "rollup"))
        plan = WritePlan()
        plan.set(self._keys.slot(eid, ROLLUP_LATEST), dumps(doc))
        self._apply(eid, plan)
        return doc

    def rollup(self, agent: str) -> dict[str, Any] | None:
        reply = self._acmi.store.execute(("GET", self._keys.slot(agent_id(agent), ROLLUP_LATEST)))
        doc = _loads(reply)
        return doc if isinstance(doc, dict) else None

    # heartbeats -----------------------------------------------------------------------

    def heartbeat(
        self, agent: str, status: str = "ACTIVE", note: str | None = None, *, now: int | None = None
    ) -> dict[str, Any]:
        """Record that ``agent`` is alive (module docstring): signals + activity index in
        one WritePlan, one round trip. Returns ``{agent, ts, status}`` (and ``note``)."""
        eid = agent_id(agent)
        status = check_status(status)
        ts = self._acmi.clock() if now is None else _ms(now, "now")
        fields: list[tuple[Any, str, str]] = [
            ("set", "last_heartbeat_ts", dumps(ts)),
            ("set", "status", dumps(status)),
        ]
        note = self._acmi.guard(note, "note")
        if note is None:
            fields.append(("del", "status_note", "null"))
        else:
            fields.append(("set", "status_note", dumps(_text(note, "note", MAX_NOTE_LEN))))
        plan = WritePlan()
        plan.edit_object(self._keys.signals(eid), fields, field="signals")
        plan.zset(self._keys.activity(), ts, str(eid))
        self._apply(eid, plan)
        beat: dict[str, Any] = {"agent": str(eid), "ts": ts, "status": status}
        if note is not None:
            beat["note"] = note
        return beat

    def silent_since(
        self, cutoff_ms: int, limit: int = 100, offset: int = 0
    ) -> list[tuple[str, int]]:
        """``(agent, last heartbeat ms)`` of the agents whose last heartbeat is older
        than ``cutoff_ms``, oldest first, ``limit`` (1-1000) from ``offset``: one
        ZRANGE BYSCORE on the activity index, never a scan. Page with ``offset``, or
        call again once the sweep has moved the agents it handled."""
        cutoff_ms = _ms(cutoff_ms, "cutoff_ms")
        if (
            isinstance(limit, bool)
            or not isinstance(limit, int)
            or not 1 <= limit <= MAX_SILENT_PAGE
        ):
            raise AcmiValidationError(
                "limit", "range", f"must be an integer from 1 to {MAX_SILENT_PAGE}"
            )
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise AcmiValidationError("offset", "range", "must be an integer >= 0")
        reply = self._acmi.store.execute(
            (
                "ZRANGE",
                self._keys.activity(),
                "-inf",
                f"({cutoff_ms}",
                "BYSCORE",
                "LIMIT",
                offset,
                limit,
                "WITHSCORES",
            )
        )
        return scored(reply)  # a score another tool wrote as inf/nan: not a heartbeat
