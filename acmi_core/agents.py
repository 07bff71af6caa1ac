"""Long-context extensions of an agent (reference layout): spawns, active threads and
the latest rollup. Agents are ``agent:<id>`` entities; a bare ``<id>`` means the same."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from acmi_core.errors import AcmiValidationError
from acmi_core.keys import ACTIVE_CONTEXT, ROLLUP_LATEST, SPAWNS
from acmi_core.model import MAX_SUMMARY_LEN, EntityId, check_json_object, dumps
from acmi_core.writes import WritePlan

if TYPE_CHECKING:
    from acmi_core.client import Acmi


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
        record: dict[str, Any] = {
            "ts": self._acmi.clock(),
            "session_id": _text(session_id, "session_id"),
            "model_id": _text(model_id, "model_id"),
        }
        if host is not None:
            record["host"] = _text(host, "host")
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
        doc = {"ts": self._acmi.clock(), "summary": _text(summary, "summary", 20 * MAX_SUMMARY_LEN)}
        doc.update(check_json_object(extra, "rollup"))
        plan = WritePlan()
        plan.set(self._keys.slot(eid, ROLLUP_LATEST), dumps(doc))
        self._apply(eid, plan)
        return doc

    def rollup(self, agent: str) -> dict[str, Any] | None:
        reply = self._acmi.store.execute(("GET", self._keys.slot(agent_id(agent), ROLLUP_LATEST)))
        doc = _loads(reply)
        return doc if isinstance(doc, dict) else None
