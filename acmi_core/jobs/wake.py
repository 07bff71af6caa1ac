"""The wake tick (scheduled job ``wake``, every 5 minutes): wakes the agents whose slot
(``acmi_core.coordination.wake``) is due.

The tick (:func:`run`) takes only the agents due (ZRANGE BYSCORE -inf..now LIMIT max on
the due index, then one MGET of their profiles) and, for each:

1. claims the slot: one WritePlan that is idempotent per (agent, due slot) (``once`` on
   ``wake-claim:<agent>:<due ms>``), moves the agent's due time to its next slot after
   now (missed slots are skipped, not replayed) and posts ``wake-status`` to the
   coordination thread. A retried execution, or an overlapping tick, finds the record and
   wakes nobody twice. A claim that finds no readable slot in the profile drops the agent
   from the due index instead.
2. logs a spawn (``session_id: wake-<execution id>``, ``model_id``: the profile's
   ``model_id`` or ``model``, else ``unknown``) and builds the bundle, in ONE request
   (``acmi.bootstrap(..., format="markdown", max_tokens=WAKE_TOKENS)``).
3. escalates an agent silent for ``SILENT_ESCALATE_MS`` (3 h; no heartbeat at all counts
   as silent) that has pending work (open HITL items addressed to it, or open work items:
   the bundle's sections, cut items included) to the operator's HITL queue, once per
   silence (correlationId ``silent-<agent>-<last heartbeat ms or 0>``): one request.
4. delivers the bundle to the target (a :class:`Deliverer` per target type; the webhook
   one is here, EventBridge's lives in ``functions/delivery.py`` because ``acmi_core``
   never imports the AWS SDK, and the wake handler module registers it). A failed
   delivery posts ``wake-status`` with ``status: failed`` (one more request).

Delivery is at most once per slot: the claim comes first, so a crash after it loses
that slot's wake (the next slot wakes the agent) rather than waking it twice.

Round trips: a tick 2 (the due page, the profiles) + per agent woken 2 (claim, bundle)
+ 1 if escalated + 1 if delivery failed; ``run_job`` adds its own record. With nobody
due: 1 request (no MGET), whatever the number of agents with slots.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.keys import COORDINATION_THREAD
from acmi_core.base.model import EntityId, dumps, parse_event
from acmi_core.base.stored import load_object
from acmi_core.coordination.agents import agent_id
from acmi_core.coordination.wake import (
    CLAIM_TTL_MS,
    MAX_CID,
    MAX_WAKES_PER_RUN,
    SILENT_ESCALATE_MS,
    SOURCE,
    WAKE_TOKENS,
    int_in_range,
    next_due,
    read_slot,
)
from acmi_core.jobs.deliver import DELIVERERS, DeliveryResult, eventbridge_target, webhook_target
from acmi_core.store.scripts import new_request_id
from acmi_core.store.writes import Replayed, WritePlan

if TYPE_CHECKING:
    from acmi_core.bootstrap.bundle import Bundle
    from acmi_core.client import Acmi
    from acmi_core.jobs.runner import JobRun


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _cid(prefix: str, agent: str, ms: int) -> str:
    cid = f"{prefix}-{agent}-{ms}"
    if len(cid) <= MAX_CID:
        return cid
    return f"{prefix}-{hashlib.sha256(agent.encode()).hexdigest()[:32]}-{ms}"


_profile = load_object


def _model(profile: Mapping[str, Any]) -> str:
    for name in ("model_id", "model"):
        value = profile.get(name)
        if isinstance(value, str) and 1 <= len(value) <= 256:
            return value
    return "unknown"


def _status_event(
    acmi: Acmi, agent: str, due: int, status: str, payload: dict[str, Any], now: int
) -> Any:
    return parse_event(
        {
            "source": SOURCE,
            "kind": "wake-status",
            "correlationId": _cid("wake", agent, due),
            "summary": f"wake {agent} ({_iso(due)} slot): {status}"[:500],
            "payload": {"agent": agent, "due": due, "status": status, **payload},
        },
        now_ms=now,
        tenant=acmi.tenant,
    )


def _pending(bundle: Bundle) -> int:
    cut = bundle.cut
    count = 0
    for name in ("hitl", "work"):
        try:
            value = bundle.section(name).value
        except KeyError:
            continue
        count += (len(value) if isinstance(value, list) else 0) + cut.get(name, 0)
    return count


def _last_heartbeat(bundle: Bundle) -> int | None:
    try:
        signals = bundle.section("signals").value
    except KeyError:
        return None
    value = signals.get("last_heartbeat_ts") if isinstance(signals, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def _limit(run: JobRun) -> int:
    return int_in_range(run.params.get("max", MAX_WAKES_PER_RUN), "max", 1, 1000)


def _profiles(acmi: Acmi, due: list[tuple[str, int]]) -> list[dict[str, Any] | None]:
    """The decoded profiles of the due agents: one MGET (none when nobody is due)."""
    agents: list[EntityId | None] = []
    for member, _ in due:
        try:
            agents.append(agent_id(member))
        except AcmiValidationError:
            agents.append(None)  # another tool's member: dropped from the index
    keys = [acmi.keys.profile(eid) for eid in agents if eid is not None]
    reply = acmi.store.execute(("MGET", *keys)) if keys else []
    raws = iter(reply if isinstance(reply, list) else [])
    return [None if eid is None else _profile(next(raws, None)) for eid in agents]


def _claim(
    acmi: Acmi, run: JobRun, member: str, due_ms: int, slot: dict[str, Any] | None, now: int
) -> tuple[str, int, str]:
    """Step 1: ``(outcome, next due, session id)``; outcome woken | already | dropped."""
    session = f"wake-{run.execution_id}"[:256]
    # RECORD: a retry of this claim (a lost reply) answers with its results, not as the
    # replay of its own ONCE record (read as "already", the wake never delivered)
    plan = WritePlan(record=acmi.keys.request(new_request_id()))
    plan.once(
        acmi.keys.internal("wake-claim", member, str(due_ms)),
        CLAIM_TTL_MS,
        dumps({"execution_id": run.execution_id, "ts": now}),
    )
    following = 0
    if slot is None:
        plan.zrem(acmi.keys.wake_due(), member)
    else:
        target = slot["target"]
        following = next_due(now, slot["minute"], slot["every_hours"])
        payload = {
            "next_due": following,
            "session_id": session,
            "target": target["type"] if target else None,
        }
        plan.zset(acmi.keys.wake_due(), following, member)
        acmi.timeline.stage(
            plan,
            EntityId.parse(COORDINATION_THREAD),
            [_status_event(acmi, member, due_ms, "waking", payload, now)],
        )
    try:
        plan.apply(acmi.store)
    except Replayed:
        return "already", following, session
    return ("dropped" if slot is None else "woken"), following, session


def _escalate(acmi: Acmi, agent: str, due_ms: int, bundle: Bundle, now: int) -> bool | None:
    """Step 3: None when the agent is not silent with pending work; else whether this
    call created the operator's item (False: an earlier wake did)."""
    heartbeat = _last_heartbeat(bundle)
    pending = _pending(bundle)
    if not pending or (heartbeat is not None and now - heartbeat < SILENT_ESCALATE_MS):
        return None
    since = "never" if heartbeat is None else _iso(heartbeat)
    created = acmi.hitl.create(
        f"{agent[:160]} silent with pending work",  # topic <= 200 characters
        f"{agent} has not sent a heartbeat since {since} (3 h or more) and has "
        f"{pending} pending item(s) (HITL addressed to it, open work). It was woken "
        f"for the {_iso(due_ms)} slot; check on it or reassign its work.",
        asked_by=SOURCE,
        urgency="P1",
        addressee=acmi.settings.operator,
        correlation_id=_cid("silent", agent, heartbeat or 0),
    )
    return created.created


def _deliver(
    acmi: Acmi,
    run: JobRun,
    agent: str,
    due_ms: int,
    session: str,
    bundle: Bundle,
    target: Mapping[str, Any],
    now: int,
) -> DeliveryResult:
    """Step 4: the bundle to the target; a failure is posted as wake-status failed."""
    body = json.dumps(
        {
            "type": "acmi.wake",
            "agent": agent,
            "tenant": acmi.tenant,
            "session_id": session,
            "execution_id": run.execution_id,
            "due": due_ms,
            "due_iso": _iso(due_ms),
            "generated_at": bundle.generated_at,
            "format": "markdown",
            "bundle": bundle.text,
            "cut": bundle.cut,
            "pending": _pending(bundle),
        },
        ensure_ascii=False,
        separators=(",", ":"),
    ).encode("utf-8")
    deliverer = DELIVERERS.get(target["type"])
    refused: str | None = None
    if target["type"] == "webhook":  # the allow-list again, and this tenant's own secret
        delivered, refused = webhook_target(acmi.settings, acmi.tenant, target)
        target = delivered or target
    elif target["type"] == "eventbridge":  # the bus allow-list again, for this tenant
        delivered, refused = eventbridge_target(acmi.settings, acmi.tenant, target)
        target = delivered or target
    if refused is not None:
        result = DeliveryResult(False, refused, 0)
    elif deliverer is None:
        result = DeliveryResult(False, f"no deliverer for {target['type']} here", 0)
    else:
        try:
            result = deliverer.deliver(target, body)
        except Exception as exc:  # one target's fault must not stop the other wakes
            result = DeliveryResult(False, f"error: {type(exc).__name__}", 0)
    if not result.ok:
        failed = {"detail": result.detail, "attempts": result.attempts}
        plan = WritePlan()
        acmi.timeline.stage(
            plan,
            EntityId.parse(COORDINATION_THREAD),
            [_status_event(acmi, agent, due_ms, "failed", failed, now)],
        )
        plan.apply(acmi.store)
    return result


def run(acmi: Acmi, run: JobRun) -> dict[str, Any]:
    """The wake tick (module docstring). Returns counts: ``woken``, ``delivered``,
    ``failed``, ``recorded`` (no target), ``already`` (slot claimed by an earlier
    execution), ``dropped`` (due without a readable slot), ``escalated``, ``backlog``
    (still due), ``wakes`` (per agent: due, next, delivery detail) and ``watermark``
    (the due times up to now are handled)."""
    limit = _limit(run)
    now = acmi.clock()
    due = acmi.wake.due(now, limit)
    counts = dict.fromkeys(
        ("woken", "delivered", "failed", "recorded", "already", "dropped", "escalated"), 0
    )
    wakes: list[dict[str, Any]] = []
    for (agent, due_ms), profile in zip(due, _profiles(acmi, due) if due else [], strict=True):
        slot = read_slot(profile) if profile is not None else None
        outcome, following, session = _claim(acmi, run, agent, due_ms, slot, now)
        counts[outcome] += 1
        if outcome != "woken" or slot is None or profile is None:
            continue
        # step 2: the spawn and the bundle, one request
        bundle = acmi.bootstrap(
            agent,
            spawn={"session_id": session, "model_id": _model(profile)},
            format="markdown",
            max_tokens=WAKE_TOKENS,
        )
        wake: dict[str, Any] = {"agent": agent, "due": due_ms, "next_due": following}
        escalated = _escalate(acmi, agent, due_ms, bundle, now)
        if escalated is not None:
            wake["escalated"] = True
            counts["escalated"] += int(escalated)
        target = slot["target"]
        if target is None:
            counts["recorded"] += 1
            wake["delivery"] = "recorded: no target"
        else:
            result = _deliver(acmi, run, agent, due_ms, session, bundle, target, now)
            counts["delivered" if result.ok else "failed"] += 1
            wake["delivery"] = result.detail
        wakes.append(wake)
    backlog = 0
    if len(due) == limit:
        counted = acmi.store.execute(("ZCOUNT", acmi.keys.wake_due(), "-inf", now))
        backlog = counted if isinstance(counted, int) else 0
    return {**counts, "watermark": now, "backlog": backlog, "wakes": wakes}


wake = run  # the job's name in the issue
