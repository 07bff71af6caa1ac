"""The bundle's sections, built from the script's named reply slots: the identity,
signals, threads, rollup, HITL, locks, work, lessons, coordination, timeline and spawns,
then memory (seed 002, DESIGN §6) in the seed's shapes.

Memory: first the startup files (``soul``, ``user``, ``agents``: SOUL.md, USER.md and
AGENTS.md as written, in the scopes bundle.SCOPE_SECTIONS gives them), the handoff
(HANDOFF.md), ``hot`` (the ``memory:hot`` slot as ACTIVE-CONTEXT.md),
``warm`` (the ``memory:warm`` slot as MEMORY.md: private), ``today`` (the day of
``now`` in heartbeat-state's time zone, else UTC, as memory/YYYY-MM-DD.md), ``conflicts``
(where the hot and warm layers disagree and which one wins, seed §8), ``topic``
(``topic=<slug>``: the ``topic:<slug>`` entity as memory/topics/<slug>.md) and, on demand
(level 3), the linked topics, yesterday's note and the newest archive quarters.
``profile`` is the identity: the profile (without ``warm.*`` fields a deployment from
before the memory slots may still hold there, until ``acmi migrate`` moves them);
``signals`` likewise without ``hot.*``. Tolerant: what does
not read is a problem, never an error.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Mapping
from typing import Any, Final

from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.model import EntityId
from acmi_core.base.stored import Unreadable, decode_events, load_stored
from acmi_core.bootstrap.budget import CAPS
from acmi_core.bootstrap.bundle import ON_DEMAND, SCOPE_SECTIONS, TITLES, Bundle, Section
from acmi_core.bootstrap.render import FILE_SECTIONS
from acmi_core.bootstrap.script import (
    SEP,
    STARTUP_SECTIONS,
    Reader,
    as_list,
    number,
    pairs,
    string,
)
from acmi_core.coordination.locks import parse_lease_entry
from acmi_core.store.base import Reply
from acmi_core.store.scripts import Slots

# acmi_core.memory is imported where it is used: every function imports the client, only
# a bootstrap needs the memory codecs (~20 ms of imports)


def build(
    eid: EntityId,
    tenant: str,
    scope: str,
    format: str,
    now: int,
    wanted: frozenset[str],
    reply: Slots,
) -> tuple[Bundle, dict[str, Any], dict[str, Any]]:
    """The bundle's sections other than memory, from the script's reply; and the stored
    profile and signals (whole)."""
    read = Reader()
    from acmi_core.entities.expiry import live
    from acmi_core.memory.slots import HOT, WARM, is_private

    stored_profile = read.obj(reply["profile"], "profile")
    stored_signals = read.obj(reply["signals"], "signals") or {}
    # identity: the profile without warm.* and the signals without hot.* fields an older
    # ACMI left there (memory is in its own slots, shown as its files; `acmi migrate`)
    profile = (
        {k: v for k, v in stored_profile.items() if not is_private(k)}
        if stored_profile is not None and _may_hold(reply["profile"], _key(WARM))
        else stored_profile
    )
    signals = (
        {k: v for k, v in stored_signals.items() if not k.startswith(HOT)}
        if _may_hold(reply["signals"], _key(HOT))
        else stored_signals
    )
    signals = live(signals, now)  # no expired signal, no expiry field (entities/expiry.py)
    timeline = read.events(reply["timeline"], "timeline")[::-1]
    spawns = read.events(reply["spawns"], "spawns")
    active: list[dict[str, Any]] = []
    for thread, value in pairs(reply["active"]):
        try:
            info: Any = load_stored(value) if isinstance(value, bytes) else None
        except Unreadable:
            info = string(value)
        active.append(
            {"thread": string(thread), **(info if isinstance(info, dict) else {"value": info})}
        )
    active.sort(key=_joined, reverse=True)
    rollup = read.obj(reply["rollup"], "rollup")
    if rollup is not None and isinstance(rollup.get("ts"), int | float):
        rollup = {**rollup, "age_ms": now - rollup["ts"]}
    hitl = read.events(reply["hitl"], "hitl")
    shared = read.events(reply["shared"], "hitl_shared")
    leases = [parse_lease_entry(member) for member in as_list(reply["leases"])]
    held = sorted(
        (x for x in leases if x and x.owner == str(eid) and x.expires_at > now),
        key=lambda lease: lease.expires_at,
    )
    locks = [
        {
            "resource": lease.resource,
            "fence": lease.fence,
            "expires_at": lease.expires_at,
            "expires_in_ms": lease.expires_at - now,
            "correlationId": lease.correlationId,
        }
        for lease in held
    ]
    work = []
    items = as_list(reply["work"])
    for i in range(0, len(items) - 3, 4):
        work_id = string(items[i])
        work.append(
            {
                "id": work_id,
                "updated_at": number(items[i + 1]),
                "profile": read.obj(items[i + 2], f"work:{work_id} profile"),
                "signals": read.obj(items[i + 3], f"work:{work_id} signals") or {},
            }
        )
    lessons = read.events(reply["lessons"], "lessons")
    coordination = read.events(reply["coordination"], "coordination")
    values: dict[str, Any] = {
        **dict.fromkeys(FILE_SECTIONS),
        "conflicts": [],
        "topics": [],
        "archive": [],
        "profile": profile,
        "signals": signals,
        "rollup": rollup,
        "hitl": hitl,
        "hitl_shared": shared,
        "locks": locks,
        "work": work,
        "active_threads": active,
        "lessons": lessons,
        "coordination": coordination,
        "timeline": timeline,
        "spawns": spawns,
    }
    problems = [string(p) for p in as_list(reply["problems"])] + read.problems
    bundle = Bundle(
        str(eid),
        tenant,
        scope,
        format,
        now,
        [Section(name, values[name]) for name in TITLES if name in wanted],
        problems=problems,
    )
    return bundle, stored_profile or {}, stored_signals


class Memory:
    """The memory sections of a bundle, from the script's reply (its hot, warm, heartbeat,
    daily, handoff, taken, topic and archive slots): tolerant, as the rest (what does not
    read is a problem)."""

    def __init__(self, bundle: Bundle, now: int, loaded: frozenset[str], slug: str | None) -> None:
        self.bundle, self.now, self.loaded, self.slug = bundle, now, loaded, slug
        # the hot and heartbeat fields (``signals``) and the warm ones (``profile``), as
        # the memory codecs read them
        self.signals: dict[str, Any] = {}
        self.profile: dict[str, Any] = {}

    def _slots(self, reply: Slots) -> None:
        read = Reader()
        from acmi_core.memory.expiry import unexpired
        from acmi_core.memory.slots import HOT, WARM

        # lines whose ttl ran out are not shown (memory/expiry.py)
        self.signals = unexpired(
            {
                **(read.obj(reply["hot"], "memory:hot") or {}),
                **(read.obj(reply["heartbeat"], "memory:heartbeat") or {}),
            },
            HOT,
            self.now,
        )
        self.profile = unexpired(read.obj(reply["warm"], "memory:warm") or {}, WARM, self.now)
        self.bundle.problems += read.problems

    def _startup(self, replies: Reply) -> None:
        """SOUL.md, USER.md and AGENTS.md, each its slot's text as written (what does not
        read is a problem)."""
        from acmi_core.memory.state import STARTUP_TEXT

        read = Reader()
        for (name, path), raw in zip(STARTUP_SECTIONS.items(), as_list(replies), strict=False):
            doc = read.obj(raw, f"memory:{name}")
            text = doc.get(STARTUP_TEXT) if doc is not None else None
            if isinstance(text, str):
                self.set(name, {"path": path, "text": text})
            elif doc is not None:
                self.bundle.problems.append(f"memory:{name}: has no text")
        self.bundle.problems += read.problems

    def problem(self, what: str, exc: Exception) -> None:
        message = exc.message if isinstance(exc, AcmiValidationError) else str(exc)
        self.bundle.problems.append(f"{what}: {message}")

    def set(self, name: str, value: Any) -> None:
        if name in self.loaded:
            self.bundle.section(name).value = value

    def _without_memory(self, reply: Slots) -> bool:
        """An agent with no memory at all (no memory:hot, memory:warm or memory:heartbeat, no daily
        line near now, no handoff, nothing on demand): only the day and its zone are said,
        nothing is parsed (issue 12: a bootstrap without memory costs what it did)."""
        if reply["daily"] or reply["handoff"] is not None or self.slug is not None:
            return False
        if "topics" in self.loaded or "archive" in self.loaded:
            return False
        if any(reply[slot] is not None for slot in ("hot", "warm", "heartbeat")):
            return False
        if any(text is not None for text in as_list(reply["startup"])):
            return False
        self.bundle.memory = {
            "today": (_EPOCH + dt.timedelta(days=self.now // 86_400_000)).isoformat(),
            "timezone": "UTC",
            "on_demand": list(on_demand(self.bundle.scope, self.loaded)),
        }
        if "handoff" in self.loaded:
            self.bundle.memory["handoff"] = "none"
        self.bundle.has_memory = False
        return True

    def read(self, reply: Slots) -> None:
        if self._without_memory(reply):
            return
        self._slots(reply)
        self._startup(reply["startup"])
        from acmi_core.memory.conflicts import hot_warm_conflicts
        from acmi_core.memory.slots import (
            HOT,
            TOPIC_LINKS,
            WARM,
            from_profile,
            from_signals,
            heartbeat_from_signals,
            zone,
        )

        bundle, loaded = self.bundle, self.loaded
        tz_name = "UTC"
        try:
            heartbeat = heartbeat_from_signals(self.signals)
            tz_name = "UTC" if heartbeat is None else heartbeat.timezone
            tz = zone(tz_name)
        except AcmiValidationError as exc:
            self.problem("memory:heartbeat heartbeat.*", exc)
            tz_name, tz = "UTC", zone("UTC")
        today = dt.datetime.fromtimestamp(self.now / 1000, tz).date()
        bundle.memory = {
            "today": today.isoformat(),
            "timezone": tz_name,
            "on_demand": list(on_demand(bundle.scope, loaded)),
        }
        active = memory = None
        # an agent without a hot or warm layer: not parsed
        if "hot" in loaded and any(k.startswith(HOT) for k in self.signals):
            try:
                active = from_signals(self.signals)
            except AcmiValidationError as exc:
                self.problem("memory:hot hot.*", exc)
            if active is not None:
                self.set("hot", {"path": "ACTIVE-CONTEXT.md", "text": active.render()})
        if "warm" in loaded and any(k.startswith(WARM) for k in self.profile):
            try:
                memory = from_profile(self.profile)
            except AcmiValidationError as exc:
                self.problem("memory:warm warm.*", exc)
            if memory is not None:
                self.set("warm", {"path": "MEMORY.md", "text": memory.render()})
        if "conflicts" in loaded:  # seed §8, the rule MemoryAPI.debug reports too
            self.set("conflicts", hot_warm_conflicts(active, memory))
        if {"today", "yesterday"} & loaded:
            self._days(reply["daily"], tz, today)
        if "handoff" in loaded:
            self._handoff(reply["handoff"], reply["taken"] == 1)
        if self.slug is not None:
            self._topic(reply["topic"], self.slug)
        if "topics" in loaded:
            links = self.profile.get(TOPIC_LINKS)
            names = [x for x in links if isinstance(x, str)] if isinstance(links, list) else []
            if len(names) > CAPS["topics"]:
                bundle.problems.append(
                    f"{TOPIC_LINKS}: {len(names)} topics, the first {CAPS['topics']} listed"
                )
            self.set(
                "topics",
                [
                    {"topic": link, "path": f"memory/topics/{link.removeprefix('topic:')}.md"}
                    for link in names[: CAPS["topics"]]
                ],
            )
        if "archive" in loaded:
            self._archive(reply["archive"])

    def _days(self, raw: Reply, tz: dt.tzinfo, today: dt.date) -> None:
        from acmi_core.memory.slots import daily_from_events

        if not isinstance(raw, bytes) or not raw:
            return
        decoded, _ = decode_events(raw.split(SEP))
        try:
            notes = {n.date: n for n in daily_from_events([e for e, _ in decoded], tz=tz)}
        except AcmiValidationError as exc:
            self.problem("daily notes", exc)
            return
        for name, day in (("today", today), ("yesterday", today - dt.timedelta(days=1))):
            note = notes.get(day)
            if note is not None:
                self.set(name, {"path": note.path, "date": day.isoformat(), "text": note.render()})

    def _handoff(self, raw: Reply, taken: bool) -> None:
        value = Reader().obj(raw, "handoff")
        text = value.get("text") if value is not None else None
        if value is None or not isinstance(text, str):
            self.bundle.memory["handoff"] = "taken, unreadable" if taken else "none"
            if raw is not None:
                self.bundle.problems.append("handoff: not a JSON object {text, ts}")
            return
        self.bundle.memory["handoff"] = "taken" if taken else "pending"
        self.set(
            "handoff", {"path": "HANDOFF.md", "ts": value.get("ts"), "taken": taken, "text": text}
        )

    def _topic(self, raw: Reply, slug: str) -> None:
        from acmi_core.memory.expiry import unexpired
        from acmi_core.memory.slots import TOPIC_PREFIX, topic_from_profile

        stored = unexpired(Reader().obj(raw, f"topic:{slug}") or {}, TOPIC_PREFIX, self.now)
        try:
            topic = topic_from_profile(slug, stored)
        except AcmiValidationError as exc:
            self.problem(f"topic:{slug}", exc)
            return
        if topic is None:
            self.bundle.problems.append(f"topic:{slug}: no topic file (memory topic-create)")
            return
        self.set("topic", {"topic": f"topic:{slug}", "path": topic.path, "text": topic.render()})

    def _archive(self, raw: Reply) -> None:
        from acmi_core.memory.layers import Quarter
        from acmi_core.memory.slots import archive_from_document

        quarters = []
        for name, value in pairs(raw):
            quarter = string(name)
            doc = Reader().obj(value, f"archive {quarter}")
            try:
                archive = archive_from_document(Quarter.parse(quarter, "archive"), doc or {})
            except AcmiValidationError as exc:
                self.problem(f"archive {quarter}", exc)
                continue
            quarters.append({"quarter": quarter, "path": archive.path, "text": archive.render()})
        self.set("archive", quarters)


_EPOCH: Final = dt.date(1970, 1, 1)


@functools.cache
def on_demand(scope: str, loaded: frozenset[str]) -> tuple[str, ...]:
    """The level-3 sections (and the topic file) of ``scope`` a bundle did not load."""
    return tuple(n for n in (*ON_DEMAND, "topic") if n in SCOPE_SECTIONS[scope] - loaded)


@functools.cache
def _key(prefix: str) -> bytes:
    """How a key starting with ``prefix`` begins in JSON: ``"hot.``."""
    return b'"' + prefix.encode()


def _may_hold(raw: Reply, *keys: bytes) -> bool:
    """Whether a stored JSON object may hold a key that starts with one of ``keys``
    (``b'"hot.'``): a byte search at C speed, so an agent without memory is not combed
    field by field. Exact unless the text has ``\\u`` escapes (a key may be spelt with
    them): then it may."""
    if not isinstance(raw, bytes):
        return False
    return b"\\u" in raw or any(key in raw for key in keys)


def _joined(thread: Mapping[str, Any]) -> float:
    joined = thread.get("joined_at")
    return float(joined) if isinstance(joined, int | float) else 0.0
