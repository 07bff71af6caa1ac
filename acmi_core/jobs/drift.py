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

The checks on plain data are ``jobs/drift_checks.py``; the carried state and how one event
moves it, ``jobs/drift_state.py``; the tolerant readers of other tools' events,
``jobs/foreign.py``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from acmi_core.base.errors import StoreCommandError
from acmi_core.base.model import EntityId, dumps, parse_event
from acmi_core.jobs.drift_checks import (
    COMMS_WINDOW_MS,
    DATE_WINDOW_MS,
    DAY_MS,
    HEARTBEAT_STALE_MS,
    HOUR_MS,
    RESOLVED_KEEP_MS,
    STALE_REQUEST_MS,
    claimed_model,
    model_severity,
    policy_agents,
)
from acmi_core.jobs.drift_state import Carried, Scan, bounded
from acmi_core.jobs.foreign import (
    NewestRead,
    decode_members,
    iso,
    kind_of,
    load_json,
    max_per_run,
    read_pipeline,
    ts_of,
)
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

FIRST_LOOKBACK_MS: Final = 7 * DAY_MS  # what the first run reads back
SKEW_MS: Final = 5 * 60 * 1000  # events are read from the watermark less this

MAX_EVENTS_PER_ENTITY: Final = 200  # newest events of one changed entity a run reads
MAX_CARRIED: Final = 200  # items per carried list (requests, due dates, violations, agents)
MAX_RESOLVED: Final = 1000  # resolutions remembered
MAX_POLICY_AGENTS: Final = 500  # agents of a changed policy checked in one run


def _pipeline(acmi: Acmi, commands: Sequence[Command]) -> list[Reply | StoreCommandError]:
    return read_pipeline(acmi.store, list(commands)) if commands else []


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
    after = max(0, window.since - SKEW_MS)
    reads = [  # each read stops at JOB_READ_BYTES inside Redis, the newest first
        NewestRead(keys.timeline(EntityId.parse(entity)), MAX_EVENTS_PER_ENTITY, after=after)
        for entity, _ in window.changed
    ]
    commands: list[Command] = [read.command() for read in reads]
    for agent in agents:
        eid = EntityId.parse(agent)
        commands += [("GET", keys.profile(eid)), ("GET", keys.signals(eid))]
    commands += [("ZSCORE", keys.activity(), agent) for agent in flagged]
    left_reads = _left_reads(acmi, window, now)
    replies = _pipeline(acmi, commands + left_reads)

    scan = Scan(now, carried)
    timelines = [
        read.members(acmi.store, reply)[0] for read, reply in zip(reads, replies, strict=False)
    ]
    _scan_events(scan, window.changed, timelines)
    at = len(window.changed)
    _judge_models(scan, agents, replies[at : at + 2 * len(agents)], expected)
    at += 2 * len(agents)
    _judge_heartbeats(scan, window, flagged, replies[at : at + len(flagged)])

    report = _report(acmi, run, now, window.since, carried, scan, digest, policy, window)
    counts = replies[len(replies) - len(left_reads) :] if left_reads else []
    report["run"]["backlog"] = sum(c for c in counts if isinstance(c, int))

    # 4. the report and the one summary event (one WritePlan)
    plan = WritePlan()
    plan.set(keys.drift_report(), dumps(report))
    event = summary_event(acmi, run, report)
    acmi.timeline.stage(plan, EntityId.parse(REPORT_THREAD), [event])
    plan.apply(acmi.store)
    return _result(report)


def _left_reads(acmi: Acmi, window: _Window, now: int) -> list[Command]:
    """With a backlog, what is left past the watermark: one ZCOUNT per bucket."""
    if not window.backlog:
        return []
    low = f"({window.watermark}"
    return [("ZCOUNT", view.changed(), low, now) for view in acmi.keys.every_bucket()]


def _window(acmi: Acmi, now: int, watermark: int | None, limit: int) -> _Window:
    keys = acmi.keys
    since = min(now, now - FIRST_LOOKBACK_MS if watermark is None else watermark)
    # the first run takes every agent already past the line (at most MAX_CARRIED)
    silent_low = "-inf" if watermark is None else f"({since - HEARTBEAT_STALE_MS}"
    views = keys.every_bucket()  # one report per tenant: every bucket's change index
    replies = acmi.store.pipeline(
        [
            # agents that heartbeated since the last run: model candidates, not stale
            ("ZRANGE", keys.activity(), f"({since}", now, "BYSCORE", "LIMIT", 0, MAX_CARRIED),
            # agents whose heartbeat crossed the staleness line since the last run
            ("ZRANGE", keys.activity(), silent_low, now - HEARTBEAT_STALE_MS, "BYSCORE", *_PAGE),
            # jobs.changed_since's read, here to share this round trip; with B > 1 the
            # same read of each bucket, merged by score below (one watermark covers all)
            *(
                (
                    "ZRANGE",
                    view.changed(),
                    f"({since}",
                    now,
                    "BYSCORE",
                    *("LIMIT", 0, limit + 1, "WITHSCORES"),
                )
                for view in views
            ),
        ]
    )
    page = sorted(
        ((entity, int(score)) for reply in replies[2:] for entity, score in _scored(reply)),
        key=lambda item: (item[1], item[0]),
    )[: limit + 1]
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
        active=_members(replies[0]),
        newly_silent=_scored(replies[1]),
    )


def _scan_events(
    scan: Scan, changed: list[tuple[str, int]], replies: Sequence[Reply | StoreCommandError]
) -> None:
    batches: list[tuple[str, dict[str, Any]]] = []
    for (entity, _), reply in zip(changed, replies, strict=False):
        batches += [(entity, data) for data in decode_members(reply)]
    # oldest first across entities: a resolution after its request closes it in one run
    for entity, data in sorted(batches, key=lambda pair: ts_of(pair[1])):
        if kind_of(data) != REPORT_KIND:
            scan.take(entity, data)


def _judge_models(
    scan: Scan,
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
    scan: Scan, window: _Window, flagged: list[str], replies: Sequence[Reply | StoreCommandError]
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
    scan: Scan,
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
    requests, dropped["requests"] = bounded(carried.requests, "ts", MAX_CARRIED)
    deadlines, dropped["deadlines"] = bounded(carried.deadlines, "due_ms", MAX_CARRIED)
    comms, dropped["comms"] = bounded(carried.comms, "ts", MAX_CARRIED, newest=True)
    heartbeats, dropped["heartbeats"] = bounded(
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
