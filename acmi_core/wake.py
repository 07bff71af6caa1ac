"""Wake slots and the wake tick (scheduled job ``wake``, every 5 minutes).

An agent's wake slot is data::

    acmi.wake.set("claude", minute=15)                                  # every hour at :15
    acmi.wake.set("claude", minute=30, every_hours=6,
                  target={"type": "webhook", "url": "https://agent.example/wake",
                          "secret_env": "CLAUDE_WAKE_SECRET"})
    acmi.wake.set("claude", minute=45, target={"type": "eventbridge", "bus": "agents"})

``set`` stores ``wake: {minute, every_hours, target}`` in the agent's profile and its next
due time in ``keys.wake_due()`` (ZSET agent -> next due ms), in one WritePlan (one round
trip, atomic). Slots are UTC: minute ``m`` of every hour ``h`` with ``h % every_hours ==
0`` (``every_hours`` divides 24: 1, 2, 3, 4, 6, 8, 12 or 24). ``clear`` removes both.
Targets: ``webhook`` (an ``https://`` URL of at most 2,048 characters and ``secret_env``,
the NAME of the environment variable of the wake function that holds the HMAC secret:
the secret itself is never stored), ``eventbridge`` (a bus name or ARN), or none (the
wake is recorded, nothing is delivered).

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

Webhook delivery (:class:`WebhookDeliverer`): POST of the JSON body with ``X-Acmi-Timestamp``
(unix seconds) and ``X-Acmi-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<body>">``
(the same scheme ACMI's own ingest verifies), ``WEBHOOK_TIMEOUT_S`` per attempt, at most
``WEBHOOK_ATTEMPTS`` attempts with backoff on 5xx, 429 and network errors (never on other
4xx), redirects refused, and hosts that resolve to a private, loopback, link-local,
multicast, reserved or unspecified address refused (``allow_private`` for tests). The
address check resolves the name before the request; a DNS answer that changes between the
check and the connection (rebinding) is not caught.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, Protocol
from urllib.parse import urlsplit

from acmi_core.agents import agent_id
from acmi_core.errors import AcmiValidationError
from acmi_core.keys import COORDINATION_THREAD
from acmi_core.model import EntityId, dumps, parse_event, profile_defaults
from acmi_core.stored import load_object, scored
from acmi_core.writes import Replayed, WritePlan

if TYPE_CHECKING:
    import httpx

    from acmi_core.bootstrap import Bundle
    from acmi_core.client import Acmi
    from acmi_core.jobs import JobRun

EVERY_HOURS: Final = (1, 2, 3, 4, 6, 8, 12, 24)  # divisors of 24: the same hours every day
HOUR_MS: Final = 3600 * 1000
MAX_WAKES_PER_RUN: Final = 50  # deliveries take time: a tick wakes at most this many
WAKE_TOKENS: Final = 8000  # the bundle's budget (about 24 KB: fits an EventBridge event)
SILENT_ESCALATE_MS: Final = 3 * HOUR_MS
CLAIM_TTL_MS: Final = 7 * 24 * HOUR_MS  # longer than Scheduler retries an execution
SOURCE: Final = "system:acmi-wake"
MAX_URL_LEN: Final = 2048
SECRET_ENV_RE: Final = re.compile(r"[A-Z_][A-Z0-9_]{0,127}")
BUS_RE: Final = re.compile(r"[A-Za-z0-9/._:-]{1,1600}")
MAX_CID: Final = 128
WEBHOOK_TIMEOUT_S: Final = 5.0
WEBHOOK_ATTEMPTS: Final = 3
WEBHOOK_BACKOFF_S: Final = 0.5  # doubled each retry


# ---- the slot ---------------------------------------------------------------------------


def _int(value: object, field: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise AcmiValidationError(field, "range", f"must be an integer from {low} to {high}")
    return value


def check_target(target: object) -> dict[str, Any] | None:
    """The stored form of a wake target (module docstring); None: recorded only."""
    if target is None:
        return None
    if not isinstance(target, Mapping):
        raise AcmiValidationError("target", "object", "must be an object with a type")
    kind = target.get("type")
    allowed = {"webhook": {"type", "url", "secret_env"}, "eventbridge": {"type", "bus"}}
    if kind not in allowed:
        raise AcmiValidationError("target.type", "enum", "must be webhook or eventbridge")
    unknown = sorted(set(target) - allowed[kind])
    if unknown:
        raise AcmiValidationError(f"target.{unknown[0]}", "unknown", f"is not a {kind} field")
    if kind == "eventbridge":
        bus = target.get("bus")
        if not isinstance(bus, str) or not BUS_RE.fullmatch(bus):
            raise AcmiValidationError(
                "target.bus", "event_bus", "must be an event bus name or ARN (1-1600 characters)"
            )
        return {"type": kind, "bus": bus}
    url = target.get("url")
    if not isinstance(url, str) or not 1 <= len(url) <= MAX_URL_LEN:
        raise AcmiValidationError(
            "target.url", "url", f"must be a string of 1-{MAX_URL_LEN} characters"
        )
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname or parts.username or parts.password:
        raise AcmiValidationError(
            "target.url", "https", "must be an https:// URL with a host and no credentials"
        )
    secret_env = target.get("secret_env")
    if not isinstance(secret_env, str) or not SECRET_ENV_RE.fullmatch(secret_env):
        raise AcmiValidationError(
            "target.secret_env",
            "env_name",
            "must name the environment variable holding the HMAC secret ([A-Z_][A-Z0-9_]*)",
        )
    return {"type": kind, "url": url, "secret_env": secret_env}


def next_due(after_ms: int, minute: int, every_hours: int) -> int:
    """The first slot strictly after ``after_ms``: ms since the epoch congruent to
    ``minute`` minutes modulo ``every_hours`` hours (UTC, since every_hours divides 24)."""
    period, offset = every_hours * HOUR_MS, minute * 60_000
    return after_ms - (after_ms - offset) % period + period


def read_slot(profile: object) -> dict[str, Any] | None:
    """The wake slot of a decoded profile, or None when it has none that reads."""
    slot = profile.get("wake") if isinstance(profile, dict) else None
    if not isinstance(slot, dict):
        return None
    try:
        minute = _int(slot.get("minute"), "minute", 0, 59)
        every = slot.get("every_hours", 1)
        if every not in EVERY_HOURS or isinstance(every, bool):
            return None
        target = check_target(slot.get("target"))
    except AcmiValidationError:
        return None
    return {"minute": minute, "every_hours": every, "target": target}


class WakeAPI:
    """``acmi.wake``: an agent's wake slot (module docstring). ``set`` is one WritePlan
    (one round trip); ``clear`` two (an EXISTS, so clearing never creates a profile, then
    one WritePlan); every read one command."""

    def __init__(self, acmi: Acmi) -> None:
        self._acmi = acmi
        self._keys = acmi.keys

    def set(
        self,
        agent: str,
        minute: int,
        *,
        every_hours: int = 1,
        target: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Store the slot in the profile and the next due time in the due index, in one
        step. Returns ``{agent, minute, every_hours, target, next_due}``."""
        eid = agent_id(agent)
        minute = _int(minute, "minute", 0, 59)
        if isinstance(every_hours, bool) or every_hours not in EVERY_HOURS:
            raise AcmiValidationError(
                "every_hours", "enum", f"must divide 24: one of {', '.join(map(str, EVERY_HOURS))}"
            )
        slot = {"minute": minute, "every_hours": every_hours, "target": check_target(target)}
        due = next_due(self._acmi.clock(), minute, every_hours)
        fields: list[tuple[Any, str, str]] = [("set", "wake", dumps(slot))]
        fields += [
            ("setnx", name, dumps(value))
            for name, value in profile_defaults(eid, self._keys.tenant).items()
        ]
        plan = WritePlan()
        plan.edit_object(self._keys.profile(eid), fields, field="profile")
        plan.zset(self._keys.wake_due(), due, str(eid))
        plan.sadd(self._keys.index(eid.category), eid.local_id)
        plan.apply(self._acmi.store)
        return {"agent": str(eid), **slot, "next_due": due}

    def clear(self, agent: str) -> None:
        """Remove the slot and the agent's due time (one step)."""
        eid = agent_id(agent)
        plan = WritePlan()
        if self._acmi.store.execute(("EXISTS", self._keys.profile(eid))):
            plan.edit_object(self._keys.profile(eid), [("del", "wake", "null")], field="profile")
        plan.zrem(self._keys.wake_due(), str(eid))
        plan.apply(self._acmi.store)

    def due(self, until_ms: int, limit: int = MAX_WAKES_PER_RUN) -> list[tuple[str, int]]:
        """``(agent, due ms)`` of the agents due by ``until_ms``, soonest first, at most
        ``limit``: one ZRANGE BYSCORE on the due index (O(log N + limit))."""
        reply = self._acmi.store.execute(
            (
                "ZRANGE",
                self._keys.wake_due(),
                "-inf",
                until_ms,
                "BYSCORE",
                "LIMIT",
                0,
                limit,
                "WITHSCORES",
            )
        )
        return scored(reply)

    def next(self, agent: str) -> int | None:
        """The agent's next due time (ms), or None without a slot: one ZSCORE."""
        score = self._acmi.store.execute(("ZSCORE", self._keys.wake_due(), str(agent_id(agent))))
        return int(float(score)) if isinstance(score, bytes) else None


# ---- delivery ---------------------------------------------------------------------------


@dataclass(frozen=True)
class DeliveryResult:
    ok: bool
    detail: str  # what happened, for the job's result and the wake-status event
    attempts: int = 1
    status: int | None = None  # the HTTP status, when there was one


class Deliverer(Protocol):
    """Delivers one wake: ``target`` is the stored target, ``body`` the JSON bytes."""

    def deliver(self, target: Mapping[str, Any], body: bytes) -> DeliveryResult: ...


def _public(address: str) -> bool:
    import ipaddress  # only a tick that delivers a webhook pays for it

    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not (
        ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
    )


def resolve_host(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (the system resolver)."""
    import socket

    infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    return sorted({str(info[4][0]) for info in infos})


def sign(secret: str, body: bytes, timestamp_s: int) -> dict[str, str]:
    """The signature headers of a webhook delivery (module docstring)."""
    stamp = str(int(timestamp_s))
    digest = hmac.new(secret.encode("utf-8"), stamp.encode("ascii") + b"." + body, hashlib.sha256)
    return {"X-Acmi-Timestamp": stamp, "X-Acmi-Signature": f"sha256={digest.hexdigest()}"}


class WebhookDeliverer:
    """HTTPS webhooks (module docstring). ``transport``: an httpx transport (tests pass
    ``httpx.MockTransport``); ``resolve``: host, port -> addresses; ``env``: where
    ``secret_env`` is looked up (default ``os.environ``)."""

    def __init__(
        self,
        *,
        timeout_s: float = WEBHOOK_TIMEOUT_S,
        attempts: int = WEBHOOK_ATTEMPTS,
        backoff_s: float = WEBHOOK_BACKOFF_S,
        allow_private: bool = False,
        resolve: Callable[[str, int], list[str]] = resolve_host,
        env: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        now_s: Callable[[], float] = time.time,
    ) -> None:
        self.timeout_s, self.attempts, self.backoff_s = timeout_s, attempts, backoff_s
        self.allow_private = allow_private
        self._resolve, self._env, self._transport = resolve, env, transport
        self._sleep, self._now_s = sleep, now_s
        self._client: httpx.Client | None = None

    def _http(self) -> httpx.Client:
        if self._client is None:  # built on the first delivery: a tick without one pays nothing
            import httpx

            self._client = httpx.Client(
                timeout=self.timeout_s, follow_redirects=False, transport=self._transport
            )
        return self._client

    def _refused(self, url: str) -> str | None:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if parts.scheme != "https":
            return "refused: not an https:// URL"
        if self.allow_private:
            return None
        try:
            addresses = self._resolve(host, parts.port or 443)
        except (OSError, UnicodeError) as exc:
            return f"refused: {host} does not resolve ({type(exc).__name__})"
        if not addresses:
            return f"refused: {host} does not resolve"
        for address in addresses:
            try:
                public = _public(address)
            except ValueError:
                return f"refused: {host} resolves to {address!r}, not an address"
            if not public:
                return f"refused: {host} resolves to a private or local address ({address})"
        return None

    def deliver(self, target: Mapping[str, Any], body: bytes) -> DeliveryResult:
        import httpx

        url = str(target.get("url", ""))
        refused = self._refused(url)
        if refused:
            return DeliveryResult(False, refused, attempts=0)
        name = str(target.get("secret_env", ""))
        secret = (os.environ if self._env is None else self._env).get(name)
        if not secret:
            return DeliveryResult(False, f"no secret: environment variable {name} is not set", 0)
        detail, status = "", None
        for attempt in range(1, self.attempts + 1):
            if attempt > 1:
                self._sleep(self.backoff_s * 2 ** (attempt - 2))
            headers = {
                "Content-Type": "application/json",
                "User-Agent": "acmi-wake",
                **sign(secret, body, int(self._now_s())),
            }
            try:
                response = self._http().post(url, content=body, headers=headers)
            except httpx.HTTPError as exc:  # timeouts and network errors: retried
                detail, status = f"network error: {type(exc).__name__}", None
                continue
            status = response.status_code
            if 200 <= status < 300:
                return DeliveryResult(True, f"delivered: HTTP {status}", attempt, status)
            if 300 <= status < 400:
                return DeliveryResult(False, f"refused: redirect (HTTP {status})", attempt, status)
            detail = f"failed: HTTP {status}"
            if status < 500 and status != 429:
                return DeliveryResult(False, detail, attempt, status)
        return DeliveryResult(False, detail, self.attempts, status)


# Deliverers by target type. The wake handler module (functions/wake.py) registers the
# EventBridge one; `acmi jobs run wake` without it records such wakes as undelivered.
DELIVERERS: dict[str, Deliverer] = {"webhook": WebhookDeliverer()}


def register_deliverer(kind: str, deliverer: Deliverer) -> None:
    DELIVERERS[kind] = deliverer


# ---- the tick ---------------------------------------------------------------------------


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
    return _int(run.params.get("max", MAX_WAKES_PER_RUN), "max", 1, 1000)


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
    plan = WritePlan()
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
    if deliverer is None:
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
