"""The bundle's one script run (``store/lua/bootstrap.lua``): its arguments packed by
name (``acmi_core.store.scripts.BOOTSTRAP`` declares them), its reply decoded into named
slots, and the tolerant reading of a slot's stored JSON.

Reads are bounded by ``budget.CAPS``; the daily-note window is the UTC days around now
(or +-26 h when the agent names a zone: the script cannot convert zones).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Final

from acmi_core.base.errors import StoreCommandError
from acmi_core.base.keys import (
    ACTIVE_CONTEXT,
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
from acmi_core.store.base import Arg, Reply
from acmi_core.store.writes import script_error

if TYPE_CHECKING:
    from acmi_core.entities.context import Context

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
) -> scripts.Slots:
    """One run of bootstrap.lua for the sections ``wanted`` (``loaded``: those read now),
    logging the spawn ``record`` when given. Its reply, by name. With ``allowance`` (a
    bound key's), refused first (429 ``tier_tokens``) when its counter this hour is at
    the limit."""
    keys = ctx.keys

    def cap(name: str, section: str | None = None) -> int:
        return CAPS[name] if (section or name) in wanted else 0

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
        "tier_tokens": (
            allowance.counter(keys, now) if allowance is not None else keys.profile(eid)
        ),
    }
    days = {"today", "yesterday"} & loaded
    # a new spawn in main takes the handoff; anything else only reads it
    handoff = 0 if "handoff" not in loaded else 2 if record is not None else 1
    utc_from, utc_to = utc_days(now, 2 if "yesterday" in days else 1)
    args: dict[str, Arg] = {
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
        "token_limit": allowance.limit if allowance is not None else -1,
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
    _read_work_items(ctx, reply)
    return reply


def _read_work_items(ctx: Context, reply: scripts.Slots) -> None:
    """The open work items' profile and signals, into ``reply["work"]`` as the script once
    gave them (id, score, profile, signals). The script returns the ids it read from the
    agent's open-work index, not the items: their keys depend on those ids, and a script
    names every key it touches before it runs (Redis Cluster, Upstash's key locking). So
    an agent with open work costs a second round trip (one pipeline of GETs, each of an
    object capped at MAX_OBJECT_BYTES by the writes, at most CAPS["work"] items), one
    without costs none. An item deleted in between reads as absent (profile None), as
    an index entry left behind did before; a key of another type is a problem."""
    found = reply["work"]
    pairs = (
        [(i, s) for i, s in zip(found[::2], found[1::2], strict=False)]
        if isinstance(found, list)
        else []
    )
    if not pairs:
        return
    commands: list[tuple[str, str]] = []
    for work_id, _ in pairs:
        eid = EntityId.parse(f"work:{string(work_id)}")
        commands += [("GET", ctx.keys.profile(eid)), ("GET", ctx.keys.signals(eid))]
    replies = ctx.store.pipeline(commands)
    items: list[Reply] = []
    problems = reply["problems"]
    for n, (work_id, score) in enumerate(pairs):
        items += [work_id, score]
        for key, got in zip(commands[2 * n : 2 * n + 2], replies[2 * n : 2 * n + 2], strict=True):
            if isinstance(got, StoreCommandError):  # as the script's tolerant reads did
                if isinstance(problems, list):
                    problems.append(
                        f"{key[1]}: WRONGTYPE, another type than the read needs".encode()
                    )
                items.append(None)
            else:
                items.append(got)
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
