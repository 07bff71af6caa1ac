"""drift-diff: the fleet's alignment check, as a scheduled job (``rate(1 hour)``).

The reference's four checks, plus one, over what changed since the last run:

a. **model drift**: an agent's claimed model (signals ``model_id``, else profile
   ``model_id`` or ``model``) against the policy registry (``acmi:registry:agent-model-policy``,
   a STRING ``{"version": ..., "agents": {"<agent id>": "<provider/model>"}}``; the
   profile of the entity ``registry:agent-model-policy`` is read when that key is absent).
   Same text: fine; same model name without (or with another) provider prefix: *minor*;
   anything else: *major*. Agents the policy does not name, or that claim no model, are
   not judged.
b. **stale events**: a ``handoff-request``, ``hitl-required`` or ``merge-needed`` event
   older than 24 h that no event with the same correlationId resolved (``RESOLVING_KINDS``,
   on any entity: resolution is across threads), nor a ``comms-correction`` naming it.
c. **date drift**: an event of the last 7 days that set a due date (payload ``deadline``,
   ``due``, ``due_date``, ``expires_at``..., or a ``YYYY-MM-DD`` date after a trigger word
   such as "due" or "by" in its summary) later than its own time, now past, and not closed
   by an event with its correlationId (``CLOSING_KINDS``).
d. **Comms v1.1 violations** in the last 24 h: an event with ``correlation_id`` but no
   ``correlationId`` (``snake_only``), with neither (``missing_cid``), or with no ``kind``
   (``missing_kind``); a ``comms-correction`` naming the event's ts clears it.
e. **stale heartbeats**: agents whose last heartbeat (``keys.activity()``) is older
   than 24 h; a heartbeat clears it.

What a run reads, never a scan: the entities whose timeline changed since the watermark
(``jobs.changed_since``, at most ``max`` a run, the rest next run), the newest
``MAX_EVENTS_PER_ENTITY`` events of each with ts after the watermark (less ``SKEW_MS``,
for writers' clocks); the agents that heartbeated since the last run and those whose
heartbeat crossed the staleness line (``keys.activity()``, two ZRANGE BYSCORE); the
profile and signals of policy agents among those, of the agents already flagged and, when
the policy changed (the first run included), of every agent it names (at most
``MAX_POLICY_AGENTS``). The first run looks back ``FIRST_LOOKBACK_MS`` (7 days).

Open items are carried between runs in the report itself (``keys.drift_report()``), so
a resolution seen in a later run closes an item seen earlier: requests not yet stale,
future due dates, recent resolutions (what keeps an item read twice, or resolved before
it was read, closed). Each carried list keeps at most ``MAX_CARRIED`` items (the oldest:
they are the ones that become findings) and ``MAX_RESOLVED`` resolutions for
``RESOLVED_KEEP_MS``; what a cap drops is counted in ``run.dropped``.

Output, one WritePlan: the report (JSON: findings by check, counts, the run, the carried
state) under ``keys.drift_report()``, and ONE summary event (kind ``drift-delta``,
correlationId ``drift-<execution id>``, ts = the scheduled time) on ``REPORT_THREAD``,
a thread this job never scans. A retried execution finds its own report and writes
nothing; the event's bytes depend only on the execution, so even a replayed write
stores it once.

Round trips per run: 3 (one pipeline of indexes and the previous report, one pipeline of
the changed entities' events and the agents' profiles and signals, one WritePlan), plus
the 2 of ``run_job`` (the execution record, read and written). Commands: O(changed
entities + active agents + carried items + policy agents on a policy change), never
O(all entities).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from acmi_core.base.errors import AcmiValidationError, StoreCommandError
from acmi_core.base.model import EntityId, dumps, parse_event
from acmi_core.base.stored import Unreadable, decode_event, load_stored
from acmi_core.jobs.runner import MAX_PER_RUN
from acmi_core.store.base import Command, Reply
from acmi_core.store.writes import WritePlan

if TYPE_CHECKING:
    from acmi_core.client import Acmi
    from acmi_core.jobs.runner import JobRun

JOB: Final = "drift-diff"
REPORT_THREAD: Final = "thread:drift-reports"  # where the summary event goes; never scanned
REPORT_KIND: Final = "drift-delta"
POLICY_NAME: Final = "agent-model-policy"
POLICY_REGISTRY: Final = f"registry:{POLICY_NAME}"  # the entity read when the raw key is absent

HOUR_MS: Final = 3600 * 1000
DAY_MS: Final = 24 * HOUR_MS
STALE_REQUEST_MS: Final = DAY_MS  # (b) a request unresolved this long is a finding
COMMS_WINDOW_MS: Final = DAY_MS  # (d) violations are reported for a day
DATE_WINDOW_MS: Final = 7 * DAY_MS  # (c) events this recent are checked for due dates
HEARTBEAT_STALE_MS: Final = DAY_MS  # (e)
FIRST_LOOKBACK_MS: Final = 7 * DAY_MS  # what the first run reads back
SKEW_MS: Final = 5 * 60 * 1000  # events are read from the watermark less this
RESOLVED_KEEP_MS: Final = 7 * DAY_MS

MAX_RUN_LIMIT: Final = 10_000  # the highest ``max`` a run accepts
MAX_EVENTS_PER_ENTITY: Final = 200  # newest events of one changed entity a run reads
MAX_CARRIED: Final = 200  # items per carried list (requests, due dates, violations, agents)
MAX_RESOLVED: Final = 1000  # resolutions remembered
MAX_POLICY_AGENTS: Final = 500  # agents of a changed policy checked in one run
SUMMARY_CHARS: Final = 140  # of an event summary quoted in the report

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


# --- reading what other tools stored ---------------------------------------------------------


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
    kind = data.get("kind")
    return kind if isinstance(kind, str) else ""


def ts_of(data: Mapping[str, Any]) -> int:
    ts = data.get("ts")
    return int(ts) if isinstance(ts, int | float) and not isinstance(ts, bool) else 0


def summary_of(data: Mapping[str, Any]) -> str:
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
    if not isinstance(reply, bytes):
        return None
    try:
        return load_stored(reply)
    except Unreadable:
        return None


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat().replace("+00:00", "Z")


def _pipeline(acmi: Acmi, commands: Sequence[Command]) -> list[Reply | StoreCommandError]:
    return acmi.store.pipeline(commands) if commands else []


def max_per_run(run: JobRun) -> int:
    """The run's ``max`` parameter (default ``jobs.MAX_PER_RUN``), checked."""
    value = run.params.get("max", MAX_PER_RUN)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_RUN_LIMIT:
        raise AcmiValidationError(
            "max", "range", f"must be an integer from 1 to {MAX_RUN_LIMIT} (items a run handles)"
        )
    return value


# --- the checks, on plain data -----------------------------------------------------------------


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


# --- the carried state ---------------------------------------------------------------------------


def _items(value: Any, *numbers: str) -> list[dict[str, Any]]:
    """The dicts of a stored list that have every field in ``numbers`` as a number: a
    report edited by hand (or by an older version) never breaks a run."""
    if not isinstance(value, list):
        return []
    return [
        item
        for item in value
        if isinstance(item, dict)
        and all(isinstance(item.get(n), int) and not isinstance(item.get(n), bool) for n in numbers)
    ]


@dataclass
class Carried:
    """What one run hands the next, read from and written to the report."""

    requests: dict[str, dict[str, Any]] = field(default_factory=dict)  # cid -> request
    deadlines: dict[str, dict[str, Any]] = field(default_factory=dict)
    comms: dict[str, dict[str, Any]] = field(default_factory=dict)
    heartbeats: dict[str, dict[str, Any]] = field(default_factory=dict)  # agent -> item
    models: dict[str, dict[str, Any]] = field(default_factory=dict)  # agent -> item
    resolved: dict[str, int] = field(default_factory=dict)  # cid -> ms it was resolved
    closed: dict[str, int] = field(default_factory=dict)  # cid -> ms its work closed
    corrected: dict[str, int] = field(default_factory=dict)  # str(event ts) -> ms
    policy_digest: str | None = None

    @classmethod
    def from_report(cls, report: Any) -> Carried:
        if not isinstance(report, dict):
            return cls()
        findings = report.get("findings") if isinstance(report.get("findings"), dict) else {}
        pending = report.get("pending") if isinstance(report.get("pending"), dict) else {}
        assert isinstance(findings, dict) and isinstance(pending, dict)
        carried = cls(policy_digest=_str(report.get("policy_digest")))
        for item in _items(findings.get("stale_events"), "ts") + _items(
            pending.get("requests"), "ts"
        ):
            if isinstance(item.get("correlationId"), str):
                carried.requests[item["correlationId"]] = item
        for item in _items(findings.get("date_drift"), "ts", "due_ms") + _items(
            pending.get("deadlines"), "ts", "due_ms"
        ):
            carried.deadlines[_deadline_key(item)] = item
        for item in _items(findings.get("comms"), "ts"):
            carried.comms[_comms_key(item)] = item
        for item in _items(findings.get("stale_heartbeats"), "last_heartbeat_ms"):
            if isinstance(item.get("agent"), str):
                carried.heartbeats[item["agent"]] = item
        models = findings.get("model_drift")
        if isinstance(models, dict):
            for item in _items(models.get("major")) + _items(models.get("minor")):
                if isinstance(item.get("agent"), str) and item.get("severity") in SEVERITIES:
                    carried.models[item["agent"]] = item
        for name, target in (
            ("resolved", carried.resolved),
            ("closed", carried.closed),
            ("corrected", carried.corrected),
        ):
            raw = pending.get(name)
            if isinstance(raw, dict):
                target.update((k, int(v)) for k, v in raw.items() if isinstance(v, int | float))
        return carried


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _deadline_key(item: Mapping[str, Any]) -> str:
    return f"{item.get('entity')}|{item.get('ts')}|{item.get('field')}"


def _comms_key(item: Mapping[str, Any]) -> str:
    return f"{item.get('entity')}|{item.get('ts')}|{item.get('source')}|{item.get('kind')}"


def _bounded(
    items: dict[str, dict[str, Any]], order: str, cap: int, newest: bool = False
) -> tuple[list[dict[str, Any]], int]:
    """At most ``cap`` items sorted by ``order`` (oldest first: the oldest are kept,
    since they are the ones that become or stay findings), and how many were dropped."""
    ranked = sorted(items.values(), key=lambda i: (i.get(order) or 0, str(i)), reverse=newest)
    return ranked[:cap], max(0, len(ranked) - cap)


# --- the job ------------------------------------------------------------------------------


@dataclass
class _Scan:
    now: int
    carried: Carried
    closed: int = 0
    opened: int = 0
    events: int = 0

    def resolve(self, cid: str, at: int) -> None:
        self.carried.resolved[cid] = max(at, self.carried.resolved.get(cid, 0))
        if self.carried.requests.pop(cid, None) is not None:
            self.closed += 1

    def close_deadlines(self, cid: str) -> None:
        for key in [k for k, v in self.carried.deadlines.items() if v.get("correlationId") == cid]:
            del self.carried.deadlines[key]
            self.closed += 1

    def take(self, entity: str, data: dict[str, Any]) -> None:
        """One event read from a changed entity (events arrive oldest first)."""
        self.events += 1
        kind, cid, ts = kind_of(data), correlation_of(data), ts_of(data)
        carried = self.carried
        if kind == CORRECTION_KIND:
            times, cids = corrected(data)
            for original in times:
                carried.corrected[str(original)] = ts
                for key in [k for k, v in carried.comms.items() if v.get("ts") == original]:
                    del carried.comms[key]
                    self.closed += 1
                # the reference also counts a request the correction points at as handled
                for rid in [c for c, v in carried.requests.items() if v.get("ts") == original]:
                    self.resolve(rid, ts)
            for inferred in cids:
                self.resolve(inferred, ts)
        if cid and kind in RESOLVING_KINDS:
            self.resolve(cid, ts)
        if cid and kind in CLOSING_KINDS:
            carried.closed[cid] = max(ts, carried.closed.get(cid, 0))
            self.close_deadlines(cid)
        if (
            cid
            and kind in TRACKED_KINDS
            and cid not in carried.resolved
            and str(ts) not in carried.corrected
        ):
            if cid not in carried.requests:
                self.opened += 1
            carried.requests[cid] = {
                "correlationId": cid,
                "kind": kind,
                "entity": entity,
                "ts": ts,
                "summary": summary_of(data),
            }
        if self.now - ts <= DATE_WINDOW_MS and not (cid and cid in carried.closed):
            for where, due in due_dates(data):
                item = {
                    "entity": entity,
                    "ts": ts,
                    "kind": kind,
                    "correlationId": cid,
                    "field": where,
                    "due_ms": due,
                    "due": iso(due),
                    "summary": summary_of(data),
                }
                key = _deadline_key(item)
                if key not in carried.deadlines:
                    self.opened += 1
                carried.deadlines[key] = item
        rule = comms_rule(data)
        if rule and self.now - ts <= COMMS_WINDOW_MS and str(ts) not in carried.corrected:
            item = {
                "entity": entity,
                "ts": ts,
                "kind": kind,
                "source": data.get("source") if isinstance(data.get("source"), str) else "",
                "rule": rule,
                "summary": summary_of(data),
            }
            if rule == "snake_only":
                item["correlation_id"] = data.get("correlation_id")
            key = _comms_key(item)
            if key not in carried.comms:
                self.opened += 1
            carried.comms[key] = item


_PAGE: Final = ("LIMIT", 0, MAX_CARRIED, "WITHSCORES")


@dataclass
class _Window:
    """What a run covers: changed entities, agents from the activity index."""

    since: int
    watermark: int
    backlog: bool
    changed: list[tuple[str, int]]
    active: list[str]
    newly_silent: list[tuple[str, float]]


def run(acmi: Acmi, run: JobRun) -> dict[str, Any]:
    """One drift-diff execution (module docstring): three reads, one WritePlan."""
    keys = acmi.keys
    now = run.scheduled_ms
    limit = max_per_run(run)  # bad input is refused before anything is read or written

    # 1. the state, the previous report, the policy (one pipeline)
    first = acmi.store.pipeline(
        [
            ("GET", keys.job_state(run.job)),
            ("GET", keys.drift_report()),
            ("GET", keys.registry(POLICY_NAME)),  # the reference's raw registry STRING
            ("GET", keys.profile(EntityId.parse(POLICY_REGISTRY))),
        ]
    )
    state = load_json(first[0])
    previous = load_json(first[1])
    if isinstance(previous, dict) and previous.get("execution_id") == run.execution_id:
        return _result(previous, replayed_report=True)  # a retry whose writes landed
    policy = load_json(first[2])
    if not isinstance(policy, dict):
        policy = load_json(first[3])
    expected = policy_agents(policy)
    digest = None
    if isinstance(policy, dict):
        digest = hashlib.sha256(dumps(expected).encode()).hexdigest()[:16]
    carried = Carried.from_report(previous)
    raw = state.get("watermark") if isinstance(state, dict) else None
    watermark = int(raw) if isinstance(raw, int | float) and not isinstance(raw, bool) else None

    # 2. what changed: entities, heartbeats (one pipeline)
    window = _window(acmi, now, watermark, limit)

    # 3. the changed entities' new events, the candidates' profiles and signals, the
    #    flagged agents' heartbeats, the backlog (one pipeline)
    candidates: set[str] = set(carried.models)
    candidates.update(a for a in window.active if a in expected)
    candidates.update(e for e, _ in window.changed if e in expected)
    if digest != carried.policy_digest:  # a new policy (or the first run): judge all
        candidates.update(sorted(expected)[:MAX_POLICY_AGENTS])
    agents = sorted(candidates)
    flagged = sorted(set(carried.heartbeats) - {a for a, _ in window.newly_silent})
    low = f"({max(0, window.since - SKEW_MS)}"
    commands: list[Command] = [
        (
            "ZRANGE",
            keys.timeline(EntityId.parse(entity)),
            "+inf",
            low,
            "BYSCORE",
            "REV",
            "LIMIT",
            0,
            MAX_EVENTS_PER_ENTITY,
        )
        for entity, _ in window.changed
    ]
    for agent in agents:
        eid = EntityId.parse(agent)
        commands += [("GET", keys.profile(eid)), ("GET", keys.signals(eid))]
    commands += [("ZSCORE", keys.activity(), agent) for agent in flagged]
    if window.backlog:
        commands.append(("ZCOUNT", keys.changed(), f"({window.watermark}", now))
    replies = _pipeline(acmi, commands)

    scan = _Scan(now, carried)
    _scan_events(scan, window.changed, replies)
    at = len(window.changed)
    _judge_models(scan, agents, replies[at : at + 2 * len(agents)], expected)
    at += 2 * len(agents)
    _judge_heartbeats(scan, window, flagged, replies[at : at + len(flagged)])

    report = _report(acmi, run, now, window.since, carried, scan, digest, policy, window)
    left = replies[-1] if window.backlog else 0
    report["run"]["backlog"] = left if isinstance(left, int) else 0

    # 4. the report and the one summary event (one WritePlan)
    plan = WritePlan()
    plan.set(keys.drift_report(), dumps(report))
    event = summary_event(acmi, run, report)
    acmi.timeline.stage(plan, EntityId.parse(REPORT_THREAD), [event])
    plan.apply(acmi.store)
    return _result(report)


def _window(acmi: Acmi, now: int, watermark: int | None, limit: int) -> _Window:
    keys = acmi.keys
    since = min(now, now - FIRST_LOOKBACK_MS if watermark is None else watermark)
    # the first run takes every agent already past the line (at most MAX_CARRIED)
    silent_low = "-inf" if watermark is None else f"({since - HEARTBEAT_STALE_MS}"
    replies = acmi.store.pipeline(
        [
            # jobs.changed_since's read, here to share this round trip
            (
                "ZRANGE",
                keys.changed(),
                f"({since}",
                now,
                "BYSCORE",
                *("LIMIT", 0, limit + 1, "WITHSCORES"),
            ),
            # agents that heartbeated since the last run: model candidates, not stale
            ("ZRANGE", keys.activity(), f"({since}", now, "BYSCORE", "LIMIT", 0, MAX_CARRIED),
            # agents whose heartbeat crossed the staleness line since the last run
            ("ZRANGE", keys.activity(), silent_low, now - HEARTBEAT_STALE_MS, "BYSCORE", *_PAGE),
        ]
    )
    page = [(entity, int(score)) for entity, score in _scored(replies[0])]
    backlog = len(page) > limit
    out = now
    if backlog:
        # one more than the limit was read: if it shares the last score, the entities of
        # that score are visited again next run (idempotent), unless the whole page
        # shares it (then the rest of that millisecond is skipped, to move on)
        first_score, last_score = page[0][1], page[limit - 1][1]
        out = last_score
        if page[limit][1] == last_score and first_score < last_score:
            out = last_score - 1
        page = page[:limit]
    return _Window(
        since=since,
        watermark=max(out, watermark or 0),
        backlog=backlog,
        changed=[(entity, score) for entity, score in page if entity != REPORT_THREAD],
        active=_members(replies[1]),
        newly_silent=_scored(replies[2]),
    )


def _scan_events(
    scan: _Scan, changed: list[tuple[str, int]], replies: Sequence[Reply | StoreCommandError]
) -> None:
    batches: list[tuple[str, dict[str, Any]]] = []
    for (entity, _), reply in zip(changed, replies, strict=False):
        batches += [(entity, data) for data in decode_members(reply)]
    # oldest first across entities: a resolution after its request closes it in one run
    for entity, data in sorted(batches, key=lambda pair: ts_of(pair[1])):
        if kind_of(data) != REPORT_KIND:
            scan.take(entity, data)


def _judge_models(
    scan: _Scan,
    agents: list[str],
    replies: Sequence[Reply | StoreCommandError],
    expected: Mapping[str, str],
) -> None:
    models = scan.carried.models
    for index, agent in enumerate(agents):
        profile, signals = load_json(replies[2 * index]), load_json(replies[2 * index + 1])
        claimed, want = claimed_model(profile, signals), expected.get(agent)
        severity = None if claimed is None or want is None else model_severity(claimed, want)
        if severity is None:
            if models.pop(agent, None) is not None:
                scan.closed += 1
            continue
        if agent not in models:
            scan.opened += 1
        models[agent] = {"agent": agent, "claimed": claimed, "expected": want, "severity": severity}


def _judge_heartbeats(
    scan: _Scan, window: _Window, flagged: list[str], replies: Sequence[Reply | StoreCommandError]
) -> None:
    heartbeats, line = scan.carried.heartbeats, scan.now - HEARTBEAT_STALE_MS
    for agent, reply in zip(flagged, replies, strict=True):
        score = _float(reply)
        if score is None or score > line:
            del heartbeats[agent]  # a heartbeat since, or no longer in the index
            scan.closed += 1
    for agent, score in window.newly_silent:
        if agent not in heartbeats:
            scan.opened += 1
        heartbeats[agent] = {
            "agent": agent,
            "last_heartbeat_ms": int(score),
            "last_heartbeat": iso(int(score)),
        }


def summary_event(acmi: Acmi, run: JobRun, report: Mapping[str, Any]) -> Any:
    """The one ``drift-delta`` event of a run: its bytes depend on the execution and the
    findings only (ts = the scheduled time), so a replayed write stores it once."""
    counts = report["counts"]
    summary = (
        f"[drift] {counts['model_major']} major-model / {counts['stale_events']} stale-events"
        f" / {counts['date_drift']} date-drift / {counts['model_minor']} minor-prefix"
        f" / {counts['comms']} comms / {counts['stale_heartbeats']} stale-heartbeats"
    )
    return parse_event(
        {
            "ts": run.scheduled_ms,
            "source": f"system:{JOB}",
            "kind": REPORT_KIND,
            "correlationId": correlation_id(run.execution_id),
            "summary": summary,
            "payload": {"counts": counts, "report_key": acmi.keys.drift_report()},
        },
        now_ms=run.scheduled_ms,
        tenant=acmi.keys.tenant,
    )


def correlation_id(execution_id: str) -> str:
    """``drift-<execution id>``; a long or unusual id is hashed, so the correlationId
    stays short and plain."""
    if re.fullmatch(r"[A-Za-z0-9_.:-]{1,100}", execution_id):
        return f"drift-{execution_id}"
    return f"drift-{hashlib.sha256(execution_id.encode()).hexdigest()[:32]}"


def _members(reply: Reply | StoreCommandError) -> list[str]:
    items = reply if isinstance(reply, list) else []
    return [m.decode("utf-8", "replace") for m in items if isinstance(m, bytes)]


def _float(reply: Reply | StoreCommandError) -> float | None:
    try:
        return float(reply) if isinstance(reply, bytes | int | float) else None
    except ValueError:
        return None


def _scored(reply: Reply | StoreCommandError) -> list[tuple[str, float]]:
    items = reply if isinstance(reply, list) else []
    out = []
    for member, score in zip(items[::2], items[1::2], strict=False):
        value = _float(score)
        if isinstance(member, bytes) and value is not None:
            out.append((member.decode("utf-8", "replace"), value))
    return out


def _report(
    acmi: Acmi,
    run: JobRun,
    now: int,
    since: int,
    carried: Carried,
    scan: _Scan,
    digest: str | None,
    policy: Any,
    window: _Window,
) -> dict[str, Any]:
    dropped: dict[str, int] = {}
    # forget what no longer matters: old resolutions, old violations and due dates
    carried.resolved = {c: t for c, t in carried.resolved.items() if now - t <= RESOLVED_KEEP_MS}
    carried.closed = {c: t for c, t in carried.closed.items() if now - t <= RESOLVED_KEEP_MS}
    carried.corrected = {c: t for c, t in carried.corrected.items() if now - t <= RESOLVED_KEEP_MS}
    carried.comms = {k: v for k, v in carried.comms.items() if now - v["ts"] <= COMMS_WINDOW_MS}
    carried.deadlines = {
        k: v for k, v in carried.deadlines.items() if now - v["ts"] <= DATE_WINDOW_MS
    }
    requests, dropped["requests"] = _bounded(carried.requests, "ts", MAX_CARRIED)
    deadlines, dropped["deadlines"] = _bounded(carried.deadlines, "due_ms", MAX_CARRIED)
    comms, dropped["comms"] = _bounded(carried.comms, "ts", MAX_CARRIED, newest=True)
    heartbeats, dropped["heartbeats"] = _bounded(
        carried.heartbeats, "last_heartbeat_ms", MAX_CARRIED
    )
    models = sorted(carried.models.values(), key=lambda i: i["agent"])
    resolved_pairs = sorted(carried.resolved.items(), key=lambda kv: -kv[1])
    dropped["resolved"] = max(0, len(resolved_pairs) - MAX_RESOLVED)
    closed_pairs = sorted(carried.closed.items(), key=lambda kv: -kv[1])
    corrected_pairs = sorted(carried.corrected.items(), key=lambda kv: -kv[1])

    stale = [r for r in requests if now - r["ts"] >= STALE_REQUEST_MS]
    for item in stale:
        item["age_hours"] = (now - item["ts"]) // HOUR_MS
    past_due = [d for d in deadlines if d["due_ms"] <= now]
    findings: dict[str, Any] = {
        "model_drift": {
            "major": [m for m in models if m["severity"] == "major"],
            "minor": [m for m in models if m["severity"] == "minor"],
        },
        "stale_events": stale,
        "date_drift": past_due,
        "comms": comms,
        "stale_heartbeats": heartbeats,
    }
    counts = {
        "model_major": len(findings["model_drift"]["major"]),
        "model_minor": len(findings["model_drift"]["minor"]),
        "stale_events": len(stale),
        "date_drift": len(past_due),
        "comms": len(comms),
        "stale_heartbeats": len(heartbeats),
    }
    counts["total"] = sum(v for k, v in counts.items() if k != "model_minor")
    return {
        "job": JOB,
        "execution_id": run.execution_id,
        "ts": now,
        "today": iso(now)[:10],
        "policy_version": policy.get("version") if isinstance(policy, dict) else "missing",
        "policy_digest": digest,
        "counts": counts,
        "findings": findings,
        "pending": {
            "requests": [r for r in requests if now - r["ts"] < STALE_REQUEST_MS],
            "deadlines": [d for d in deadlines if d["due_ms"] > now],
            "resolved": dict(resolved_pairs[:MAX_RESOLVED]),
            "closed": dict(closed_pairs[:MAX_RESOLVED]),
            "corrected": dict(corrected_pairs[:MAX_RESOLVED]),
        },
        "run": {
            "since_ms": since,
            "until_ms": now,
            "entities": len(window.changed),
            "watermark": window.watermark,
            "events": scan.events,
            "opened": scan.opened,
            "closed": scan.closed,
            "dropped": dropped,
            "report_thread": REPORT_THREAD,
            "tenant": acmi.tenant,
        },
    }


def _result(report: dict[str, Any], *, replayed_report: bool = False) -> dict[str, Any]:
    """What ``run_job`` records: counts, watermark, backlog (not the findings)."""
    run_info = report.get("run") if isinstance(report.get("run"), dict) else {}
    assert isinstance(run_info, dict)
    result: dict[str, Any] = {
        "counts": report.get("counts", {}),
        "entities": run_info.get("entities", 0),
        "events": run_info.get("events", 0),
        "opened": run_info.get("opened", 0),
        "closed": run_info.get("closed", 0),
        "watermark": run_info.get("watermark"),
        "backlog": run_info.get("backlog", 0),
    }
    if replayed_report:
        result["report_replayed"] = True
    return result


def open_requests(report: Any) -> Iterable[dict[str, Any]]:
    """The requests a report carries (stale or pending), for other readers."""
    carried = Carried.from_report(report)
    return carried.requests.values()
