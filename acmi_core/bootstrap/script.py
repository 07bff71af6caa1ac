"""The bundle's one script run (``store/lua/bootstrap.lua``): its arguments packed by
name (``acmi_core.store.scripts.BOOTSTRAP`` declares them), its reply decoded into named
slots, and the tolerant reading of a slot's stored JSON.

Reads are bounded by ``budget.CAPS``; the daily-note window is the UTC days around now
(or +-26 h when the agent names a zone: the script cannot convert zones).

One round trip in the steady state. The script names every key it touches before it
runs, so two things it learns while running would each cost one more: the open work
items (their keys come from the ids in the agent's index) and the session-start line of
a new spawn (its day and [HH:MM] are in the agent's zone, which the script reads). So
this process remembers, per tenant and agent (``_Recent``, bounded), the open work ids
and the zone it saw last: the script reads the guessed items still open (the others
cost the second pipeline, as before), and writes the start line the client computed in
the remembered zone (else UTC) when heartbeat-state names that zone; otherwise the
client logs it as before. A first bootstrap per process of an agent with open work (or
a zone) costs what it did.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar

from acmi_core.base.errors import StoreCommandError
from acmi_core.base.keys import (
    ACTIVE_CONTEXT,
    CHANGED,
    MEMORY_AGENTS,
    MEMORY_ARCHIVE,
    MEMORY_HANDOFF,
    MEMORY_HEARTBEAT,
    MEMORY_HOT,
    MEMORY_SOUL,
    MEMORY_STAMPS,
    MEMORY_USER,
    MEMORY_WARM,
    ROLLUP_LATEST,
    SPAWNS,
)
from acmi_core.base.model import EntityId, dumps
from acmi_core.base.stored import Unreadable, load_stored
from acmi_core.bootstrap.allowance import Allowance, refusal
from acmi_core.bootstrap.budget import CAPS, READ_BYTES
from acmi_core.coordination.results import SpawnRecord
from acmi_core.store import scripts
from acmi_core.store.base import Reply
from acmi_core.store.writes import register_marked, script_error

if TYPE_CHECKING:
    from acmi_core.base.model import Event
    from acmi_core.entities.context import Context

T = TypeVar("T")
# how many (tenant, agent) pairs each memory below holds, the least recent dropped first
RECENT_AGENTS: Final = 4096


class _Recent(Generic[T]):
    """A bounded, thread-safe LRU map from (key prefix, agent) to what the last bootstrap
    of that agent in this process saw. Only a guess: a wrong one costs a round trip,
    never a wrong bundle (the script checks each against what it reads)."""

    def __init__(self, size: int = RECENT_AGENTS) -> None:
        self._size = size
        self._items: OrderedDict[tuple[str, str], T] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str]) -> T | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: tuple[str, str], value: T) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


# the open work ids the agent's last bootstrap found, and the zone its bundle was in
SEEN_WORK: Final[_Recent[tuple[str, ...]]] = _Recent()
SEEN_ZONE: Final[_Recent[str]] = _Recent()


def recent_key(ctx: Context, eid: EntityId) -> tuple[str, str]:
    return ctx.keys.prefix, str(eid)


def assumed_zone(ctx: Context, eid: EntityId) -> str:
    """The zone to compute a session-start line in before the script reads the agent's:
    the one its last bundle in this process was in, else UTC."""
    return SEEN_ZONE.get(recent_key(ctx, eid)) or "UTC"


BOOTSTRAP: Final = scripts.BOOTSTRAP.script
# the marker of a run refused by a bound key's hourly allowance (allowance.py)
TIER_TOKENS: Final = "ACMI_TIER_TOKENS"
# the startup files' sections, in KEYS[23..25]'s order, with their file names
STARTUP_SECTIONS: Final = {"soul": "SOUL.md", "user": "USER.md", "agents": "AGENTS.md"}
SEP: Final = b"\n\xff\n"  # what store/lua/bootstrap.lua joins a section's members with
HOUR_MS: Final = 3_600_000
# How far from now a local day can reach in any zone (UTC-12..UTC+14, a 25-hour DST day).
DAY_REACH_MS: Final = 26 * HOUR_MS


def run(
    ctx: Context,
    eid: EntityId,
    now: int,
    events: int,
    wanted: frozenset[str],
    loaded: frozenset[str],
    record: SpawnRecord | None,
    slug: str | None,
    allowance: Allowance | None = None,
    start: tuple[str, Event] | None = None,
) -> scripts.Slots:
    """One run of bootstrap.lua for the sections ``wanted`` (``loaded``: those read now),
    logging the spawn ``record`` when given, and with it ``start`` (its session-start
    line computed in that zone) when the agent's zone is that one. Its reply, by name.
    With ``allowance`` (a bound key's), refused first (429 ``tier_tokens``) when its
    counter this hour is at the limit."""
    from acmi_core.memory.writes import SESSION_MARK_TTL_MS

    keys = ctx.keys
    own = keys.of(eid)

    def cap(name: str, section: str | None = None) -> int:
        return CAPS[name] if (section or name) in wanted else 0

    guessed = _guesses(ctx, eid) if cap("work") else []
    script_keys = {
        "profile": keys.profile(eid),
        "signals": keys.signals(eid),
        "timeline": keys.timeline(eid),
        "spawns": keys.slot(eid, SPAWNS),
        "active_context": keys.slot(eid, ACTIVE_CONTEXT),
        "rollup": keys.slot(eid, ROLLUP_LATEST),
        "hitl": keys.hitl_queue(eid, "open"),
        "hitl_shared": keys.hitl_queue(None, "open"),
        "leases": keys.leases(),
        "work_open": keys.work_open(eid),
        "workflows": keys.agent_workflows(eid),
        "lessons": keys.lessons(),
        "coordination": keys.mentions(eid.local_id),
        "agent_index": keys.index(eid.category),
        "handoff": keys.slot(eid, MEMORY_HANDOFF),
        "archive": keys.slot(eid, MEMORY_ARCHIVE),
        "topic": keys.profile(EntityId.parse(f"topic:{slug}")) if slug else keys.profile(eid),
        "stamps": keys.slot(eid, MEMORY_STAMPS),
        "memory_hot": keys.slot(eid, MEMORY_HOT),
        "memory_warm": keys.slot(eid, MEMORY_WARM),
        "memory_heartbeat": keys.slot(eid, MEMORY_HEARTBEAT),
        # one id per call: the transport's retries of it carry the same (a lost reply)
        "replay": keys.request(scripts.new_request_id()),
        "memory_soul": keys.slot(eid, MEMORY_SOUL),
        "memory_user": keys.slot(eid, MEMORY_USER),
        "memory_agents": keys.slot(eid, MEMORY_AGENTS),
        "session_mark": (
            keys.session_logged(eid, record["session_id"])
            if record is not None
            else keys.profile(eid)
        ),
        "memory_index": own.memory_index(),
        "changed": own.changed(),
        "tenants": own.tenants_with(CHANGED),
        "tier_tokens": (
            allowance.counter(keys, now) if allowance is not None else keys.profile(eid)
        ),
        "work_items": [
            key
            for work_id in guessed
            for key in (keys.profile(_work(work_id)), keys.signals(_work(work_id)))
        ],
    }
    days = {"today", "yesterday"} & loaded
    # a new spawn in main takes the handoff; anything else only reads it
    handoff = 0 if "handoff" not in loaded else 2 if record is not None else 1
    utc_from, utc_to = utc_days(now, 2 if "yesterday" in days else 1)
    args: dict[str, scripts.Value] = {
        "now": now,
        "agent": str(eid),
        "local_id": eid.local_id,
        "prefix": keys.prefix,
        "events": events if "timeline" in wanted else 0,
        "spawns": max(cap("spawns"), 1),  # ZRANGE 0 -1 would read them all: read one, drop it
        "hitl": CAPS["hitl"] if wanted & {"hitl", "hitl_shared"} else 0,
        "locks": cap("locks"),
        "work": cap("work"),
        "lessons": cap("lessons"),
        "lessons_scanned": CAPS["lessons_scanned"],
        "workflows": CAPS["workflows"],
        "coordination": cap("coordination"),
        "coordination_scanned": CAPS["coordination_scanned"],
        "spawn_member": dumps(record) if record is not None else "",
        "spawn_score": record["ts"] if record is not None else 0,
        "threads": CAPS["threads"],
        "daily_from": now - (2 * DAY_REACH_MS if "yesterday" in days else DAY_REACH_MS),
        "daily_to": now + DAY_REACH_MS,
        "daily": CAPS["daily"] if days else 0,
        "daily_scanned": CAPS["daily_scanned"],
        "handoff": handoff,
        "topic": 1 if slug else 0,
        "archive": CAPS["archive"] if "archive" in loaded else 0,
        "archive_scanned": CAPS["archive_scanned"],
        "timeline_scanned": min(10 * events, CAPS["timeline_scanned"]),
        "utc_from": utc_from,
        "utc_to": utc_to,
        "read_bytes": READ_BYTES,
        # what finds this session among the newest spawns (the member's own text)
        "spawn_session": '"session_id":' + dumps(record["session_id"]) if record else "",
        "spawn_window": CAPS["spawn_sessions"],
        "startup": "".join("1" if s in loaded else "0" for s in STARTUP_SECTIONS),
        "start_zone": start[0] if start is not None and record is not None else "",
        "start_line": start[1].to_json() if start is not None and record is not None else "",
        "start_ts": start[1].ts if start is not None and record is not None else 0,
        "start_mark": str(record["ts"]) if record is not None else "",
        "start_ttl": SESSION_MARK_TTL_MS,
        "tenant": own.tenant,
        "token_limit": allowance.limit if allowance is not None else -1,
        "guessed": guessed,
    }
    try:
        reply = scripts.BOOTSTRAP.eval(ctx.store, script_keys, args, script=BOOTSTRAP)
    except StoreCommandError as exc:
        _, refused, served = str(exc).partition(f"{TIER_TOKENS} ")
        if refused and allowance is not None:
            raise refusal(allowance, int(float(served.split()[0])), now) from None
        error = script_error(exc)
        if error is exc:
            raise
        raise error from None
    _read_work_items(ctx, reply, recent_key(ctx, eid) if cap("work") else None)
    if reply["start_written"] == 1:
        # the index of tenants with changes, as every marked write keeps it
        register_marked(ctx.store, [own.tenants_with(CHANGED)])
    return reply


def _work(work_id: str) -> EntityId:
    return EntityId.parse(f"work:{work_id}")


def _guesses(ctx: Context, eid: EntityId) -> list[str]:
    """The open work ids this agent's last bootstrap found (at most ``CAPS["work"]``), on
    a cluster only those whose keys are in the script's slot (its bucket)."""
    seen = SEEN_WORK.get(recent_key(ctx, eid)) or ()
    keys = ctx.keys
    if keys.buckets > 1:
        mine = keys.bucket_of(str(eid))
        seen = tuple(w for w in seen if keys.bucket_of(f"work:{w}") == mine)
    return list(seen[: CAPS["work"]])


def _read_work_items(ctx: Context, reply: scripts.Slots, remember: tuple[str, str] | None) -> None:
    """The open work items' profile and signals, into ``reply["work"]`` as the script once
    gave them (id, score, profile, signals). The script returns the ids it read from the
    agent's open-work index, and the items among those guessed (``work_read``): the
    others' keys depend on those ids, and a script names every key it touches before it
    runs (Redis Cluster, Upstash's key locking). So an open item not guessed costs a
    second round trip (one pipeline of GETs, each of an object capped at
    MAX_OBJECT_BYTES by the writes, at most CAPS["work"] items); none when every one was
    guessed. An item deleted in between reads as absent (profile None), as an index
    entry left behind did before; a key of another type is a problem (the script's read
    or this one). The ids found are the next bootstrap's guesses."""
    found = reply["work"]
    pairs = (
        [(i, s) for i, s in zip(found[::2], found[1::2], strict=False)]
        if isinstance(found, list)
        else []
    )
    read = as_list(reply["work_read"])
    have = {string(read[i]): (read[i + 1], read[i + 2]) for i in range(0, len(read) - 2, 3)}
    ids = [string(work_id) for work_id, _ in pairs]
    if remember is not None:
        SEEN_WORK.put(remember, tuple(ids))
    if not pairs:
        return
    commands: list[tuple[str, str]] = []
    for work_id in ids:
        if work_id not in have:
            eid = _work(work_id)
            commands += [("GET", ctx.keys.profile(eid)), ("GET", ctx.keys.signals(eid))]
    replies = ctx.store.pipeline(commands) if commands else []
    items: list[Reply] = []
    problems = reply["problems"]
    at = 0
    for work_id, (raw_id, score) in zip(ids, pairs, strict=True):
        items += [raw_id, score]
        if work_id in have:
            items += list(have[work_id])
            continue
        for key, got in zip(commands[at : at + 2], replies[at : at + 2], strict=True):
            if isinstance(got, StoreCommandError):  # as the script's tolerant reads did
                if isinstance(problems, list):
                    problems.append(
                        f"{key[1]}: WRONGTYPE, another type than the read needs".encode()
                    )
                items.append(None)
            else:
                items.append(got)
        at += 2
    reply.named["work"] = items


def utc_days(now: int, days: int) -> tuple[int, int]:
    """The window of the last ``days`` UTC days up to today's end, in ms (inclusive)."""
    midnight = now - now % (24 * HOUR_MS)
    return midnight - (days - 1) * 24 * HOUR_MS, midnight + 24 * HOUR_MS - 1


def string(raw: Reply) -> str:
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)


# what Reader.events puts between members: random per process, so no stored member can
# hold it (it is never shown: only parsed)
_TOKEN: Final = os.urandom(8).hex()
_MARK: Final = f',"{_TOKEN}",'.encode()


class Reader:
    """Decodes the script's reply tolerantly: what does not read is a problem, not a 500."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def obj(self, raw: Reply, what: str) -> dict[str, Any] | None:
        if not isinstance(raw, bytes):
            return None
        try:
            value = load_stored(raw)
        except Unreadable as exc:
            self.problems.append(f"{what}: {exc.reason}")
            return None
        if value is not None and not isinstance(value, dict):
            self.problems.append(f"{what}: not a JSON object")
            return None
        return value

    def events(self, raw: Reply, what: str) -> list[dict[str, Any]]:
        """A section the script joined (``SEP``): parsed as one JSON array (one C-speed
        parse) when that is exactly the members one by one, else member by member.

        ``[m1,m2,...]`` alone can mislead: members that are not JSON on their own can join
        into a valid array of as many objects (``{"k":"``, ``"}``, ``{"p":1},{"q":2}``
        make ``[{"k":","},{"p":1},{"q":2}]``). So a random string, unknown to whoever
        wrote the members, goes between them: ``[m1,"<token>",m2,...]`` has the token at
        every odd place only if each member is one whole JSON value."""
        if not isinstance(raw, bytes) or not raw:
            return []
        members = raw.split(SEP)
        try:
            values = load_stored(b"[" + _MARK.join(members) + b"]")
        except Unreadable:
            values = None
        if (
            type(values) is list
            and len(values) == 2 * len(members) - 1
            and values[1::2].count(_TOKEN) == len(members) - 1
        ):
            found = values[::2]
            if all(type(v) is dict for v in found):
                return found
        out = []
        for member in members:  # one by one: what does not read is named
            try:
                value = load_stored(member)
            except Unreadable as exc:
                self.problems.append(f"{what}: a member was skipped ({exc.reason})")
                continue
            if type(value) is dict:
                out.append(value)
            else:
                self.problems.append(f"{what}: a member was skipped (not a JSON object)")
        return out


def pairs(raw: Reply) -> list[tuple[Reply, Reply]]:
    items = raw if isinstance(raw, list) else []
    return list(zip(items[::2], items[1::2], strict=False))


def as_list(raw: Reply) -> list[Reply]:
    return raw if isinstance(raw, list) else []


def number(raw: Reply) -> float | int:
    try:
        value = float(string(raw))
    except ValueError:
        return 0
    return int(value) if value.is_integer() else value
