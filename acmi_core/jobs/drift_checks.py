"""drift-diff's checks, on plain data (one event, one profile, the policy document): what
a model claim, a due date, a Comms v1.1 violation and a correction are, and the windows
each check looks back over. The job that reads and carries them is ``jobs/drift.py``."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

from acmi_core.jobs.foreign import kind_of, ts_of

HOUR_MS: Final = 3600 * 1000
DAY_MS: Final = 24 * HOUR_MS
STALE_REQUEST_MS: Final = DAY_MS  # (b) a request unresolved this long is a finding
COMMS_WINDOW_MS: Final = DAY_MS  # (d) violations are reported for a day
DATE_WINDOW_MS: Final = 7 * DAY_MS  # (c) events this recent are checked for due dates
HEARTBEAT_STALE_MS: Final = DAY_MS  # (e)
RESOLVED_KEEP_MS: Final = 7 * DAY_MS

TRACKED_KINDS: Final = frozenset({"handoff-request", "hitl-required", "merge-needed"})
RESOLVING_KINDS: Final = frozenset(
    {
        "handoff-ack",
        "handoff-delegated",
        "handoff-rejected",
        "handoff-resolved",
        "handoff-superseded",
        "handoff-status-update",
        "handoff-complete",
        "hitl-resolved",
        "hitl-cleared",
        "merge-resolved",
        "merge-complete",
        "merge-done",
    }
)
# what closes a due date besides a resolution: the work it was due for is done
CLOSING_KINDS: Final = RESOLVING_KINDS | {
    "task-end",
    "task-complete",
    "deployment-shipped",
    "work-done",
}
CORRECTION_KIND: Final = "comms-correction"

DUE_FIELDS: Final = (
    "deadline",
    "due",
    "due_date",
    "dueDate",
    "due_by",
    "dueBy",
    "due_at",
    "dueAt",
    "expires",
    "expires_at",
    "expiresAt",
)
DATE_RE: Final = re.compile(r"\b(20\d{2}-\d{2}-\d{2})\b")
TRIGGER_RE: Final = re.compile(r"\b(due|deadline|by|scheduled|expire|expires|expired)\b", re.I)
CORRECTED_TS_RE: Final = re.compile(r"\bat\s+(\d{12,13})\b")

SEVERITIES: Final = ("major", "minor")


def model_severity(claimed: str, expected: str) -> str | None:
    """None when they agree; ``minor`` when only the provider prefix differs."""
    if claimed == expected:
        return None
    if claimed.rsplit("/", 1)[-1].lower() == expected.rsplit("/", 1)[-1].lower():
        return "minor"
    return "major"


def claimed_model(profile: Any, signals: Any) -> str | None:
    for doc, names in ((signals, ("model_id",)), (profile, ("model_id", "model"))):
        if isinstance(doc, Mapping):
            for name in names:
                value = doc.get(name)
                if isinstance(value, str) and value:
                    return value
    return None


def policy_agents(policy: Any) -> dict[str, str]:
    """agent entity id -> expected model, from the registry document (ids bare or
    ``agent:<id>``; entries that are not strings are ignored)."""
    agents = policy.get("agents") if isinstance(policy, Mapping) else None
    out: dict[str, str] = {}
    if isinstance(agents, Mapping):
        for name, model in agents.items():
            if isinstance(name, str) and name and isinstance(model, str) and model:
                out[name if name.startswith("agent:") else f"agent:{name}"] = model
    return out


def _day_end_ms(day: str) -> int | None:
    try:
        start = datetime.fromisoformat(day).replace(tzinfo=UTC)
    except ValueError:
        return None
    return int(start.timestamp() * 1000) + DAY_MS


def due_dates(data: Mapping[str, Any]) -> list[tuple[str, int]]:
    """(where, due ms) of each due date an event sets later than its own time: a payload
    field (ms, an ISO time, or a date: due at its end) or a date after a trigger word in
    the summary (the reference's reading). A date on or before the event's own day is a
    historical mention, not a due date."""
    ts = ts_of(data)
    found: list[tuple[str, int]] = []
    payload = data.get("payload")
    if isinstance(payload, Mapping):
        for name in DUE_FIELDS:
            due = _due_ms(payload.get(name))
            if due is not None and due > ts:
                found.append((f"payload.{name}", due))
    summary = data.get("summary")
    if isinstance(summary, str) and TRIGGER_RE.search(summary):
        for day in dict.fromkeys(DATE_RE.findall(summary)):
            end = _day_end_ms(day)
            if end is not None and end - DAY_MS > ts:
                found.append((f"summary:{day}", end))
    return found


def _due_ms(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float) and 0 < value < 1e15:
        return int(value)
    if isinstance(value, str):
        if len(value) == 10:
            return _day_end_ms(value)
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return int(moment.timestamp() * 1000)
    return None


def comms_rule(data: Mapping[str, Any]) -> str | None:
    """The Comms v1.1 rule an event breaks, if any (correlationId first: the rule the
    reference enforces)."""
    camel = data.get("correlationId")
    if not (isinstance(camel, str) and camel):
        snake = data.get("correlation_id")
        return "snake_only" if isinstance(snake, str) and snake else "missing_cid"
    if not kind_of(data):
        return "missing_kind"
    return None


def corrected(data: Mapping[str, Any]) -> tuple[set[int], set[str]]:
    """What a ``comms-correction`` event names: original event times and inferred
    correlationIds (the reference's shapes: structured payload or a ``details`` text)."""
    times: set[int] = set()
    cids: set[str] = set()
    payload = data.get("payload")
    if isinstance(payload, Mapping):
        original = payload.get("original_event")
        candidates = [
            original.get("ts") if isinstance(original, Mapping) else None,
            payload.get("original_ts"),
            payload.get("target_event_ts"),
            payload.get("event_ts"),
        ]
        times.update(
            int(v) for v in candidates if isinstance(v, int | float) and not isinstance(v, bool)
        )
        for name in ("inferred_correlationId", "inferred_cid"):
            value = payload.get(name)
            if isinstance(value, str) and value:
                cids.add(value)
    for text in (data.get("details"), data.get("summary")):
        if isinstance(text, str):
            times.update(int(m) for m in CORRECTED_TS_RE.findall(text))
    return times, cids
