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

Invitations (the reference's ``invite-agent``)::

    acmi.agents.invite("scout", "Operator", model="claude-sonnet-4", role="research")

onboards ``agent:scout`` with one of the closed set of permission tiers ``TIERS``
(Admin, Operator, Specialist, Utility: the reference's, with its namespaces, token
budget and write flag; a name is matched in any case, stored as spelled here; anything
else is refused, where the reference silently granted Utility under the bad name). One
WritePlan writes the profile fields (a merge: ``rbac_tier``, ``permissions``, the fields
given, and on the first invite ``id``, ``created_at_ms``, ``onboarded_at_ms``,
``invited_by``), the reference's ``:permissions`` key (the same document, replaced on a
tier change), the onboarding signals as the reference writes them (``status: active``,
``last_heartbeat_ts`` and ``current_focus: initialized``, only where absent: a live
agent's own signals win), and one ``agent-onboarded`` event on the coordination thread
(where the reference posts it). An agent the reference invited (a tier in its profile,
its permissions in the ``:permissions`` key only) keeps its profile so: ``permissions``
is never merged into it.
Idempotent: the same invite again writes nothing (``created: False``, ``action:
unchanged``); new profile fields with the same tier are merged without an event.

A different tier is applied and announced with ``agent-tier-changed``: whoever runs the
invite again with another tier means to change it (the reference overwrote it too), and
the event keeps the history. Concurrency: the tier transition is a compare-and-set. The
tenant's HASH ``keys.internal("invites")`` holds each agent's transition count
(``version``); a transition from version v carries ``WritePlan.once`` on
``keys.internal("invite", agent, "v<v>")``, so of two invites that read the same v, one
writes and the other is replayed, reads again and finds the tier already set (or changes
it from there). The count outlives ``acmi.delete``, so an agent deleted and invited again
is onboarded again. Round trips: 1 read (pipeline) + 1 write; a lost race adds 2.

Round trips: every write here = 1 (one WritePlan), every read = 1.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, cast

from acmi_core.base.errors import AcmiValidationError, Conflict
from acmi_core.base.keys import (
    ACTIVE_CONTEXT,
    ACTIVITY,
    COORDINATION_THREAD,
    PERMISSIONS,
    ROLLUP_LATEST,
    SPAWNS,
)
from acmi_core.base.model import (
    MAX_SUMMARY_LEN,
    MAX_TS_MS,
    EntityId,
    check_json_object,
    dumps,
    encode_event,
)
from acmi_core.base.stored import StoredObject, Unreadable, decode_object, load_stored, scored
from acmi_core.coordination.results import (
    Heartbeat,
    Invite,
    Permissions,
    SpawnRecord,
    ThreadEntry,
    Transition,
)
from acmi_core.entities.api import ProfileAPI, TimelineAPI
from acmi_core.store import scripts
from acmi_core.store.writes import Replayed, WritePlan

if TYPE_CHECKING:
    from acmi_core.entities.context import Context


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
    """Tolerant decode: what another tool wrote must never break a read (``load_stored``:
    too deep, NaN, not UTF-8 are None here; a number no double holds stays as written, so
    the surfaces render it back digit for digit instead of failing on an infinity)."""
    if not isinstance(raw, bytes):
        return None
    try:
        return load_stored(raw)
    except Unreadable:
        return None


SPAWN_FIELDS: Final = ("session_id", "model_id", "host")


def spawn_record(fields: Mapping[str, Any], ts: int, *, field: str | None = None) -> SpawnRecord:
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

    def required(part: str) -> str:
        if part not in fields:
            raise AcmiValidationError(name(part), "required", "is required")
        return _text(fields[part], name(part))

    session_id = required("session_id")  # checked in this order: the first error names it
    record: SpawnRecord = {"ts": ts, "session_id": session_id, "model_id": required("model_id")}
    if fields.get("host") is not None:
        record["host"] = _text(fields["host"], name("host"))
    return record


# --- invitations ------------------------------------------------------------------------


@dataclass(frozen=True)
class Tier:
    """A permission tier: what ``permissions`` in the profile says the agent may do."""

    namespaces: tuple[str, ...]  # categories it may touch; "*" = all
    max_tokens_per_hour: int
    write_access: bool

    def permissions(self, name: str) -> Permissions:
        """The reference's permissions document (its field names, so its readers agree)."""
        return {
            "role_tier": name,
            "allowed_namespaces": list(self.namespaces),
            "write_access": self.write_access,
            "max_tokens_per_hour": self.max_tokens_per_hour,
        }


# The reference's four tiers and defaults (invite-agent v1.3), most privileged first.
TIERS: Final[dict[str, Tier]] = {
    "Admin": Tier(("*",), 1_000_000, True),
    "Operator": Tier(("agent", "thread", "tracker", "issue", "workspace"), 800_000, True),
    "Specialist": Tier(("agent", "thread", "issue"), 500_000, True),
    "Utility": Tier(("agent",), 200_000, False),
}
DEFAULT_TIER: Final = "Utility"
_TIER_BY_LOWER: Final = {name.lower(): name for name in TIERS}

ONBOARDED: Final = "agent-onboarded"
TIER_CHANGED: Final = "agent-tier-changed"
INVITER: Final = "system:acmi-invite"
# A once-record only has to outlive the gap between an invite's read and its write (ms);
# the version count, not the record, is what stays.
INVITE_RACE_MS: Final = 10 * 60 * 1000
INVITE_ATTEMPTS: Final = 5
INVITE_FIELDS: Final = ("name", "model_id", "role", "lane")


def check_tier(tier: object, field: str = "tier") -> str:
    """The tier's name as ``TIERS`` spells it; matched in any case."""
    name = _TIER_BY_LOWER.get(tier.lower()) if isinstance(tier, str) else None
    if name is None:
        raise AcmiValidationError(field, "enum", f"must be one of {', '.join(TIERS)}")
    return name


def _stored_tier(profile: Mapping[str, Any] | None) -> str | None:
    """The tier a stored profile holds, canonical when it names one (the reference may
    have written any spelling), else its raw text; None when there is none."""
    raw = None if profile is None else profile.get("rbac_tier")
    if not isinstance(raw, str) or not raw:
        return None
    return _TIER_BY_LOWER.get(raw.lower(), raw)


def _version(raw: object) -> int:
    """The transition count of an invites-hash value; 0 when absent or unreadable."""
    record = _loads(raw)
    version = record.get("version") if isinstance(record, dict) else None
    if isinstance(version, int) and not isinstance(version, bool) and version >= 0:
        return version
    return 0


def _same(stored: object, wanted: object) -> bool:
    """Whether a stored profile value already says what an invite wants, whatever its
    key order; a value that cannot be encoded (another tool's) never does."""
    try:
        return json.dumps(stored, sort_keys=True) == json.dumps(wanted, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        return False


def _clip(text: str, limit: int = MAX_SUMMARY_LEN) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


class AgentAPI:
    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._keys = ctx.keys
        self._profile = ProfileAPI(ctx)
        self._timeline = TimelineAPI(ctx)

    def _apply(self, eid: EntityId, plan: WritePlan) -> None:
        # every agent write passes here before it is applied: the agent id is checked once
        self._ctx.guard_id(str(eid), "agent")
        plan.sadd(self._keys.index(eid.category), eid.local_id)
        plan.apply(self._ctx.store)

    # spawns ---------------------------------------------------------------------------

    def spawn(
        self, agent: str, session_id: str, model_id: str, host: str | None = None
    ) -> SpawnRecord:
        """Log a session start (only in the spawns ZSET, never in the timeline)."""
        eid = agent_id(agent)
        guard = self._ctx.guard
        metadata = {
            "session_id": guard(session_id, "session_id"),
            "model_id": guard(model_id, "model_id"),
            "host": guard(host, "host"),
        }
        record = spawn_record(metadata, self._ctx.clock())
        plan = WritePlan()
        plan.zadd(self._keys.slot(eid, SPAWNS), record["ts"], dumps(record))
        self._apply(eid, plan)
        return record

    def spawns(self, agent: str, limit: int = 5) -> list[SpawnRecord]:
        """The newest ``limit`` spawns, newest first."""
        key = self._keys.slot(agent_id(agent), SPAWNS)
        reply = self._ctx.store.execute(("ZRANGE", key, 0, limit - 1, "REV"))
        records = [_loads(m) for m in reply] if isinstance(reply, list) else []
        # decoded JSON: the members spawn() wrote (another tool's are objects of its own)
        return [cast(SpawnRecord, r) for r in records if isinstance(r, dict)]

    # active threads -------------------------------------------------------------------

    def join(self, agent: str, thread: str, role: str = "participant") -> ThreadEntry:
        eid = agent_id(agent)
        role = self._ctx.guard(role, "role")
        self._ctx.guard_ids((eid, "agent"), (thread, "thread"))  # ids: refused, never redacted
        entry: ThreadEntry = {"role": _text(role, "role"), "joined_at": self._ctx.clock()}
        plan = WritePlan()
        plan.hset(self._keys.slot(eid, ACTIVE_CONTEXT), _text(thread, "thread"), dumps(entry))
        self._apply(eid, plan)
        return entry

    def leave(self, agent: str, thread: str) -> None:
        eid = agent_id(agent)
        plan = WritePlan()
        plan.hdel(self._keys.slot(eid, ACTIVE_CONTEXT), _text(thread, "thread"))
        plan.apply(self._ctx.store)

    def active(self, agent: str) -> StoredObject:
        """thread -> {role, joined_at}; a value that is not JSON is kept as its text."""
        reply = self._ctx.store.execute(
            ("HGETALL", self._keys.slot(agent_id(agent), ACTIVE_CONTEXT))
        )
        items = reply if isinstance(reply, list) else []
        threads: StoredObject = {}
        for field, value in zip(items[::2], items[1::2], strict=True):
            if isinstance(field, bytes) and isinstance(value, bytes):
                decoded = _loads(value)
                threads[field.decode("utf-8", "replace")] = (
                    decoded if decoded is not None else value.decode("utf-8", "replace")
                )
        return threads

    # rollup ---------------------------------------------------------------------------

    def set_rollup(self, agent: str, summary: str, **extra: Any) -> StoredObject:
        eid = agent_id(agent)
        summary = self._ctx.guard(summary, "summary")
        doc: StoredObject = {
            "ts": self._ctx.clock(),
            "summary": _text(summary, "summary", 20 * MAX_SUMMARY_LEN),
        }
        doc.update(check_json_object(self._ctx.guard(extra, "rollup"), "rollup"))
        plan = WritePlan()
        plan.set(self._keys.slot(eid, ROLLUP_LATEST), dumps(doc))
        self._apply(eid, plan)
        return doc

    def rollup(self, agent: str) -> StoredObject | None:
        reply = self._ctx.store.execute(("GET", self._keys.slot(agent_id(agent), ROLLUP_LATEST)))
        doc = _loads(reply)
        return doc if isinstance(doc, dict) else None

    # heartbeats -----------------------------------------------------------------------

    def heartbeat(
        self, agent: str, status: str = "ACTIVE", note: str | None = None, *, now: int | None = None
    ) -> Heartbeat:
        """Record that ``agent`` is alive (module docstring): signals + activity index in
        one WritePlan, one round trip. Returns ``{agent, ts, status}`` (and ``note``)."""
        eid = agent_id(agent)
        status = check_status(status)
        ts = self._ctx.clock() if now is None else _ms(now, "now")
        fields: list[tuple[Any, str, str]] = [
            ("set", "last_heartbeat_ts", dumps(ts)),
            ("set", "status", dumps(status)),
        ]
        note = self._ctx.guard(note, "note")
        if note is None:
            fields.append(("del", "status_note", "null"))
        else:
            fields.append(("set", "status_note", dumps(_text(note, "note", MAX_NOTE_LEN))))
        plan = WritePlan()
        plan.edit_object(self._keys.signals(eid), fields, field="signals")
        plan.zset(self._keys.activity(), ts, str(eid))
        plan.zmax(self._keys.tenants_with(ACTIVITY), ts, self._keys.tenant)  # for the sweep
        self._apply(eid, plan)
        beat: Heartbeat = {"agent": str(eid), "ts": ts, "status": status}
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
        reply = self._ctx.store.execute(
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

    # invitations ----------------------------------------------------------------------

    def invite(
        self,
        agent: str,
        tier: str = DEFAULT_TIER,
        *,
        name: str | None = None,
        model: str | None = None,
        role: str | None = None,
        lane: str | None = None,
        invited_by: str = INVITER,
    ) -> Invite:
        """Onboard ``agent`` with ``tier``, or change its tier (module docstring).

        Returns ``{agent, tier, previous_tier, created, action, changed, permissions,
        profile, event}``: ``action`` is ``onboarded`` | ``tier-changed`` | ``updated``
        (profile fields only) | ``unchanged``; ``changed`` the profile fields written;
        ``event`` the event posted, or None."""
        eid = agent_id(agent)
        self._ctx.guard_id(str(eid), "agent")
        tier = check_tier(tier)
        source = _text(self._ctx.guard(invited_by, "invited_by"), "invited_by")
        given = {"name": name, "model_id": model, "role": role, "lane": lane}
        wanted: dict[str, Any] = {
            key: _text(value, key if key != "model_id" else "model")
            for key, value in self._ctx.guard(given, "profile").items()
            if value is not None
        }
        wanted["rbac_tier"] = tier
        permissions = TIERS[tier].permissions(tier)
        for _ in range(INVITE_ATTEMPTS):
            profile, version = self._invite_state(eid)
            previous = _stored_tier(profile)
            stored = profile or {}
            wanted.pop("permissions", None)
            if previous is None or "permissions" in stored:  # not the reference's agent
                wanted["permissions"] = permissions
            changed = [k for k, v in wanted.items() if k not in stored or not _same(stored[k], v)]
            result: Invite = {
                "agent": str(eid),
                "tier": tier,
                "previous_tier": previous,
                "created": False,
                "action": "unchanged",
                "changed": changed,
                "permissions": permissions,
                "profile": profile,
                "event": None,
            }
            if previous == tier:
                if changed:  # same tier, new details: a merge, nothing to announce
                    result["action"] = "updated"
                    result["profile"] = self._profile.merge(eid, {k: wanted[k] for k in changed})
                return result
            try:
                transition = self._transition(
                    eid, tier, previous, version, wanted, permissions, source
                )
            except Replayed:
                continue  # another invite moved this agent from `version` first: read again
            # keys the answer has already: assigned in place, so the key order stays
            result["created"] = transition["created"]
            result["action"] = transition["action"]
            result["changed"] = transition["changed"]
            result["profile"] = transition["profile"]
            result["event"] = transition["event"]
            return result
        raise Conflict(
            f"agent {eid}: the tier kept changing under {INVITE_ATTEMPTS} invites",
            field="agent",
        )

    def _invite_state(self, eid: EntityId) -> tuple[dict[str, Any] | None, int]:
        """The agent's profile and transition count: one round trip. The count is read
        first (a pipeline is not atomic): a profile newer than its count is safe, as the
        once-record of a stale count is taken and the invite reads again; a count newer
        than its profile would start a transition from a tier already replaced."""
        key = self._keys.profile(eid)
        replies = self._ctx.store.pipeline(
            [("HGET", self._keys.internal("invites"), str(eid)), ("GET", key)]
        )
        if isinstance(replies[1], Exception):
            raise replies[1]
        version = 0 if isinstance(replies[0], Exception) else _version(replies[0])
        return decode_object(replies[1], key), version

    def _transition(
        self,
        eid: EntityId,
        tier: str,
        previous: str | None,
        version: int,
        wanted: dict[str, Any],
        permissions: Permissions,
        source: str,
    ) -> Transition:
        """Onboard (no tier yet) or change the tier, as one WritePlan guarded by the
        once-record of ``version``; raises Replayed when another invite took it."""
        now = self._ctx.clock()
        onboarding = previous is None
        fields: dict[str, Any] = dict(wanted)
        if onboarding:
            fields |= {"onboarded_at_ms": now, "invited_by": source}
        setnx = {"id": eid.local_id, "created_at_ms": now} if onboarding else {}
        profile_edit: list[tuple[Any, str, str]] = [("set", k, dumps(v)) for k, v in fields.items()]
        profile_edit += [("setnx", k, dumps(v)) for k, v in setnx.items()]
        profile_edit += [("setnx", k, text) for k, text in self._ctx.profile_fills(eid.category)]
        local = eid.local_id
        if onboarding:
            kind = ONBOARDED
            summary = f"Agent '{local}' onboarded with {tier} permissions."
        else:
            kind = TIER_CHANGED
            summary = f"Agent '{local}' moved from {previous} to {tier} permissions."
        details = {k: wanted[k] for k in INVITE_FIELDS if k in wanted}
        event, text = encode_event(
            {
                "source": source,
                "kind": kind,
                "correlationId": f"agent-invite-{local}-v{version + 1}",
                "summary": _clip(summary),
                "payload": {
                    "agent": str(eid),
                    "tier": tier,
                    "previous_tier": previous,
                    "permissions": permissions,
                    **details,
                },
            },
            now_ms=now,
            tenant=self._keys.tenant,
        )
        record = dumps({"version": version + 1, "tier": tier, "ts": now})
        # RECORD: a retry of this very run (a lost reply) answers with its results, not
        # as the replay of its own ONCE record (which reads as another invite's)
        plan = WritePlan(record=self._keys.request(scripts.new_request_id()))
        plan.once(self._keys.internal("invite", str(eid), f"v{version}"), INVITE_RACE_MS, record)
        plan.hset(self._keys.internal("invites"), str(eid), record)
        merged_at = plan.edit_object(self._keys.profile(eid), profile_edit, field="profile")
        plan.set(self._keys.slot(eid, PERMISSIONS), dumps(permissions))
        if onboarding:
            # the reference's onboarding signals (invite-agent.mjs), where absent
            signals: list[tuple[Any, str, str]] = [
                ("setnx", "status", dumps("active")),
                ("setnx", "last_heartbeat_ts", dumps(now)),
                ("setnx", "current_focus", dumps("initialized")),
            ]
            plan.edit_object(self._keys.signals(eid), signals, field="signals")
        self._timeline.stage(plan, EntityId.parse(COORDINATION_THREAD), [event], [text])
        plan.sadd(self._keys.index(eid.category), eid.local_id)
        replies = plan.apply(self._ctx.store)
        profile_key = self._keys.profile(eid)
        return {
            "created": onboarding,
            "action": "onboarded" if onboarding else "tier-changed",
            "changed": sorted(set(fields) | set(setnx)),
            "profile": decode_object(replies[merged_at], profile_key),
            "event": event.to_dict(),
        }
