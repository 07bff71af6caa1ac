"""Wake slots: when an agent is woken and where its bundle goes.

An agent's wake slot is data::

    acmi.wake.set("claude", minute=15)                                  # every hour at :15
    acmi.wake.set("claude", minute=30, every_hours=6,
                  target={"type": "webhook", "url": "https://agent.example/wake"})
    acmi.wake.set("claude", minute=45, target={"type": "eventbridge", "bus": "agents"})

``set`` stores ``wake: {minute, every_hours, target}`` in the agent's profile and its next
due time in ``keys.wake_due()`` (ZSET agent -> next due ms), in one WritePlan (one round
trip, atomic). Slots are UTC: minute ``m`` of every hour ``h`` with ``h % every_hours ==
0`` (``every_hours`` divides 24: 1, 2, 3, 4, 6, 8, 12 or 24). ``clear`` removes both.
Targets: ``webhook`` (an ``https://`` URL of at most 2,048 characters within the
operator's ``ACMI_WAKE_ALLOWED_URLS``), ``eventbridge`` (a bus name or ARN among the
operator's ``ACMI_WAKE_ALLOWED_BUSES``, exactly, where ``{tenant}`` in an entry is the
slot's own tenant: ``acmi-wake-{tenant}`` lets each tenant wake on its own bus only), or
none (the wake is recorded, nothing is delivered). A webhook is signed with the tenant's own secret,
derived by the deployment from ``ACMI_WAKE_SECRET`` (``acmi_core.jobs.deliver``): no
tenant names a secret, so no tenant can sign with another's. A target stored before that
with ``secret_env`` still reads (the name is ignored); a new one naming it is refused.
A profile written whole can hold any ``wake`` value: the wake job checks the URL or the
bus against its allow-list again before it delivers.

The tick that wakes agents at their slot is the ``wake`` job (``acmi_core.jobs.wake``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.keys import WAKE
from acmi_core.base.model import dumps, profile_defaults
from acmi_core.base.settings import TENANT_PLACEHOLDER, wake_buses, wake_url_prefixes
from acmi_core.base.stored import scored
from acmi_core.coordination.agents import agent_id
from acmi_core.coordination.results import WakeSet, WakeSlot, WakeTarget
from acmi_core.store.writes import WritePlan

if TYPE_CHECKING:
    from acmi_core.entities.context import Context

EVERY_HOURS: Final = (1, 2, 3, 4, 6, 8, 12, 24)  # divisors of 24: the same hours every day
HOUR_MS: Final = 3600 * 1000
MAX_WAKES_PER_RUN: Final = 50  # deliveries take time: a tick wakes at most this many
WAKE_TOKENS: Final = 8000  # the bundle's budget (about 24 KB: fits an EventBridge event)
SILENT_ESCALATE_MS: Final = 3 * HOUR_MS
CLAIM_TTL_MS: Final = 7 * 24 * HOUR_MS  # longer than Scheduler retries an execution
SOURCE: Final = "system:acmi-wake"
MAX_URL_LEN: Final = 2048
BUS_RE: Final = re.compile(r"[A-Za-z0-9/._:-]{1,1600}")
MAX_CID: Final = 128


# ---- the slot ---------------------------------------------------------------------------


def int_in_range(value: object, field: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise AcmiValidationError(field, "range", f"must be an integer from {low} to {high}")
    return value


SECRET_ENV_REMOVED: Final = (
    "is no longer a target field: each tenant's webhooks are signed with its own secret, "
    "derived from the deployment's ACMI_WAKE_SECRET (README, wake); drop secret_env"
)


def check_target(
    target: object,
    allowed_urls: tuple[str, ...] | None = None,
    *,
    allowed_buses: tuple[str, ...] = (),
    tenant: str = "",
) -> WakeTarget | None:
    """The stored form of a wake target (module docstring); None: recorded only.
    ``allowed_urls``: a new target, whose webhook URL must be within them, whose bus must
    be among ``allowed_buses`` (for ``tenant``) and which may not name ``secret_env``;
    None: a stored one, read tolerantly (``secret_env`` dropped)."""
    if target is None:
        return None
    if not isinstance(target, Mapping):
        raise AcmiValidationError("target", "object", "must be an object with a type")
    kind = target.get("type")
    if kind == "webhook" and "secret_env" in target:
        if allowed_urls is not None:
            raise AcmiValidationError("target.secret_env", "removed", SECRET_ENV_REMOVED)
        target = {k: v for k, v in target.items() if k != "secret_env"}
    allowed = {"webhook": {"type", "url"}, "eventbridge": {"type", "bus"}}
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
        if allowed_urls is not None and not bus_allowed(bus, allowed_buses, tenant):
            raise AcmiValidationError(
                "target.bus",
                "allowed_bus",
                "must be among the event buses the operator allows (ACMI_WAKE_ALLOWED_BUSES"
                + (f": {', '.join(allowed_buses)})" if allowed_buses else ", which is empty)"),
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
    if allowed_urls is not None and not url_allowed(url, allowed_urls):
        raise AcmiValidationError(
            "target.url",
            "allowed_url",
            "must be within the URLs the operator allows (ACMI_WAKE_ALLOWED_URLS"
            + (f": {', '.join(allowed_urls)})" if allowed_urls else ", which is empty)"),
        )
    return {"type": "webhook", "url": url}


def bus_allowed(bus: str, entries: tuple[str, ...], tenant: str) -> bool:
    """Whether ``bus`` is one of ``entries`` exactly, ``{tenant}`` in an entry read as
    ``tenant`` (a name and its ARN are different entries: list the form targets use)."""
    return any(entry.replace(TENANT_PLACEHOLDER, tenant) == bus for entry in entries)


def url_allowed(url: str, prefixes: tuple[str, ...]) -> bool:
    """Whether ``url`` is within one of ``prefixes`` (https, the same host and port, and
    the prefix's path as whole segments; a URL with a dot segment never is)."""
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname:
        return False
    segments = parts.path.split("/")
    if any(s in (".", "..") or s.lower() in ("%2e", "%2e%2e", ".%2e", "%2e.") for s in segments):
        return False
    for prefix in prefixes:
        allowed = urlsplit(prefix)
        if (allowed.hostname or "").lower() != parts.hostname.lower():
            continue
        if (allowed.port or 443) != (parts.port or 443):
            continue
        base = allowed.path.rstrip("/")
        if not base or parts.path == base or parts.path.startswith(base + "/"):
            return True
    return False


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
        minute = int_in_range(slot.get("minute"), "minute", 0, 59)
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

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._keys = ctx.keys

    def set(
        self,
        agent: str,
        minute: int,
        *,
        every_hours: int = 1,
        target: Mapping[str, Any] | None = None,
    ) -> WakeSet:
        """Store the slot in the profile and the next due time in the due index, in one
        step. Returns ``{agent, minute, every_hours, target, next_due}``."""
        eid = agent_id(agent)
        self._ctx.guard_id(str(eid), "agent")
        minute = int_in_range(minute, "minute", 0, 59)
        if isinstance(every_hours, bool) or every_hours not in EVERY_HOURS:
            raise AcmiValidationError(
                "every_hours", "enum", f"must divide 24: one of {', '.join(map(str, EVERY_HOURS))}"
            )
        settings = self._ctx.settings
        buses = wake_buses(settings.wake_allowed_buses)
        checked = check_target(
            target,
            wake_url_prefixes(settings.wake_allowed_urls),
            allowed_buses=buses,
            tenant=self._keys.tenant,
        )
        slot: WakeSlot = {"minute": minute, "every_hours": every_hours, "target": checked}
        due = next_due(self._ctx.clock(), minute, every_hours)
        fields: list[tuple[Any, str, str]] = [("set", "wake", dumps(slot))]
        fields += [
            ("setnx", name, dumps(value))
            for name, value in profile_defaults(eid, self._keys.tenant).items()
        ]
        plan = WritePlan()
        plan.edit_object(self._keys.profile(eid), fields, field="profile")
        plan.zset(self._keys.wake_due(), due, str(eid))
        plan.zmin(self._keys.tenants_with(WAKE), due, self._keys.tenant)  # for the tick
        plan.sadd(self._keys.index(eid.category), eid.local_id)
        plan.apply(self._ctx.store)
        return {"agent": str(eid), **slot, "next_due": due}

    def clear(self, agent: str) -> None:
        """Remove the slot and the agent's due time (one step)."""
        eid = agent_id(agent)
        plan = WritePlan()
        if self._ctx.store.execute(("EXISTS", self._keys.profile(eid))):
            plan.edit_object(self._keys.profile(eid), [("del", "wake", "null")], field="profile")
        plan.zrem(self._keys.wake_due(), str(eid))
        plan.apply(self._ctx.store)

    def due(self, until_ms: int, limit: int = MAX_WAKES_PER_RUN) -> list[tuple[str, int]]:
        """``(agent, due ms)`` of the agents due by ``until_ms``, soonest first, at most
        ``limit``: one ZRANGE BYSCORE on the due index (O(log N + limit))."""
        reply = self._ctx.store.execute(
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
        score = self._ctx.store.execute(("ZSCORE", self._keys.wake_due(), str(agent_id(agent))))
        return int(float(score)) if isinstance(score, bytes) else None
