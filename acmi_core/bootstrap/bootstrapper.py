"""The wake bundle: everything an agent needs when it wakes, in one round trip.

    bundle = acmi.bootstrap("claude", spawn={"session_id": "s-42", "model_id": "opus-4"})
    bundle.to_dict()                      # labelled sections, as JSON
    acmi.bootstrap("claude", format="markdown", max_tokens=4000).text   # for a prompt

One run of ``store/lua/bootstrap.lua`` logs the spawn (when given) and reads every section:
profile, signals, active threads, ``rollup:latest`` (with its age), the newest timeline
events, the last spawns, open HITL items addressed to the agent and the shared queue,
the leases it holds, its open work items, the newest lessons of the workflows it works
on, and the newest coordination-thread events that mention it. One request on Upstash
whatever the agent's history: each section reads at most its cap (``CAPS``).

Memory (seed 002, DESIGN §6), read in the same run and rendered in the seed's shapes:
the handoff (HANDOFF.md), ``hot`` (the ``memory:hot`` slot as ACTIVE-CONTEXT.md), ``warm``
(the ``memory:warm`` slot as MEMORY.md: private), ``today`` (the day of ``now`` in
heartbeat-state's time zone, else UTC, as memory/YYYY-MM-DD.md), ``conflicts`` (where the
hot and warm layers disagree and which one wins, seed §8), ``topic`` (``topic=<slug>``:
the ``topic:<slug>`` entity as memory/topics/<slug>.md) and, on demand (level 3,
``include=topics,yesterday,archive``), the linked topics, yesterday's note and the newest
archive quarters. ``profile`` is the identity: the profile (without ``warm.*`` fields an
older ACMI may have left there); ``signals`` likewise without ``hot.*``.
``timeline`` leaves out daily-note lines (they are today's note; older days are level 3).
Memory costs what the agent has of it: the writers of daily-note lines keep their stamps
in ``keys.MEMORY_STAMPS`` (in the same write), and the script reads the timeline only at
the stamps around now (the UTC day, or +-26 h when the agent has a zone: the script
cannot convert zones), newest first, at most ``CAPS["daily_scanned"]`` (past it the
window's oldest lines are left out, said in ``problems``), so its cost grows with the
window's note lines, not with the day's events. An agent with no stamps (no memory,
reference or foreign data) gets no daily read, and its timeline is exactly its newest
``events`` (``Bundle.reads`` says what the run took from the timeline).

Scopes (which sections a bundle carries; seed §7 and §12):

- ``main``: all of them (levels 1-2 loaded, level 3 labelled and loaded on demand). A
  main bootstrap that logs a new spawn takes the handoff (read and cleared at once); one
  without a spawn, or whose spawn is a retry, only shows it.
- ``group``: what a shared channel may see: hot, today (yesterday on demand), signals,
  active threads, timeline, the shared HITL queue, coordination, locks and work. No
  profile and no MEMORY.md (private long-term memory), no handoff (a note from the last
  private session: never shown, never taken), no conflicts (they quote MEMORY.md), no
  topic files or archive (seed §13: sensitive business data; refused, 400), no rollup,
  no private HITL items, no spawns, no lessons.
- ``subagent``: the task context (signals, HITL addressed to the agent, locks, work,
  lessons), the one topic it names and hot; topics, yesterday and archive on demand. No
  MEMORY.md, no handoff (it is the next main session's), no today.


Modules: ``bundle`` (the sections' vocabulary, :class:`Bundle`), ``script`` (the one
script run, by name), ``sections`` (the sections from its reply, memory included),
``budget`` (caps, the token estimate, what a budget cuts first), ``render`` (JSON and
markdown).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.keys import MEMORY_HANDOFF
from acmi_core.base.model import EntityId, Event
from acmi_core.bootstrap import script
from acmi_core.bootstrap.allowance import charge, current
from acmi_core.bootstrap.budget import check_budget, count_in, fit, floor
from acmi_core.bootstrap.bundle import (
    DEFAULT_EVENTS,
    FORMATS,
    GROUP_ON_DEMAND,
    MAX_EVENTS,
    MAX_PROBLEMS,
    ON_DEMAND,
    PROBLEM_CHARS,
    SCOPE_SECTIONS,
    SCOPES,
    TITLES,
    Bundle,
    Section,
)
from acmi_core.bootstrap.render import render
from acmi_core.bootstrap.script import as_list, pairs, string
from acmi_core.bootstrap.sections import Memory, build, on_demand
from acmi_core.bootstrap.text import iso
from acmi_core.coordination.agents import agent_id, spawn_record
from acmi_core.coordination.results import SpawnRecord
from acmi_core.store.base import Reply

if TYPE_CHECKING:
    from acmi_core.entities.context import Context


class Bootstrapper:
    """``acmi.bootstrap(agent, ...)``: see the module docstring."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx

    def __call__(
        self,
        agent: str | EntityId,
        *,
        scope: str = "main",
        format: str = "json",
        events: int = DEFAULT_EVENTS,
        spawn: Mapping[str, Any] | None = None,
        max_bytes: int | None = None,
        max_tokens: int | None = None,
        include: str | Sequence[str] | None = None,
        topic: str | None = None,
    ) -> Bundle:
        eid = agent_id(agent)
        if scope not in SCOPES:
            raise AcmiValidationError("scope", "enum", f"must be one of {', '.join(SCOPES)}")
        if format not in FORMATS:
            raise AcmiValidationError("format", "enum", f"must be one of {', '.join(FORMATS)}")
        events = count_in(events, "events", 0, MAX_EVENTS)
        budget = check_budget(max_bytes, max_tokens)
        extra = _include(include, scope)
        slug = _topic(topic, scope)
        now = self._ctx.clock()
        record = (
            spawn_record(self._ctx.guard(spawn, "spawn"), now, field="spawn")
            if spawn is not None
            else None
        )
        wanted = SCOPE_SECTIONS[scope]
        loaded = wanted - (set(ON_DEMAND) - extra) - (set() if slug else {"topic"})
        if budget is not None:
            floor(budget, _skeleton(self._ctx.tenant, eid, scope, format, now, loaded, record))
        allowance = current()  # a bound key's hourly tokens (allowance.py), checked first
        start = self._start_line(eid, record)
        reply = script.run(
            self._ctx, eid, now, events, wanted, loaded, record, slug, allowance, start
        )
        bundle, _, _ = build(eid, self._ctx.tenant, scope, format, now, wanted, reply)
        took = zip(("timeline", "daily", "stamps"), as_list(reply["read"]), strict=False)
        bundle.reads = {name: n for name, n in took if isinstance(n, int)}
        Memory(bundle, now, loaded, slug).read(reply)
        zone_name = str(bundle.memory.get("timezone", "UTC"))
        script.SEEN_ZONE.put(script.recent_key(self._ctx, eid), zone_name)
        _capped(bundle, reply["capped"])
        bundle.problems = [p[:PROBLEM_CHARS] for p in bundle.problems[:MAX_PROBLEMS]]
        if record is not None:
            bundle.spawn = {**record} if reply["spawned"] == 1 else {**record, "duplicate": True}
            # seed §8: a session start is logged in the daily note, once a session id
            if reply["spawned"] == 1 and reply["start_logged"] != 1:
                self._log_start(bundle, eid, record)
            elif reply["start_written"] == 1 and start is not None and start[0] != zone_name:
                # the script read the zone it assumed, the bundle another (a heartbeat
                # that no longer checks, a hot layer naming one): the line, rewritten
                self._log_start(bundle, eid, record, replacing=start[1].to_json())
        bundle.text = render(bundle)
        if budget is not None:
            bundle.max_bytes, bundle.max_tokens = budget.max_bytes, budget.max_tokens
            bundle.text = render(bundle)
            if budget.excess(bundle.text) > 0:
                fit(bundle, budget)
                self._keep_handoff(bundle, eid, reply["handoff"])
        if allowance is not None:  # what was served, as the bundle counts it
            charge(self._ctx.store, self._ctx.keys, allowance, now, bundle.tokens)
        return bundle

    def _start_line(self, eid: EntityId, record: SpawnRecord | None) -> tuple[str, Event] | None:
        """The new spawn's session-start line in the zone this process last saw the agent
        in (else UTC), for the script to write when that is still its zone: a bootstrap
        that logs a new spawn in one round trip. None: no spawn, or a line the writes
        refuse (``_log_start`` then says why, as before)."""
        if record is None:
            return None
        from acmi_core.memory.writes import session_start_event

        zone_name = script.assumed_zone(self._ctx, eid)
        try:
            event = session_start_event(
                eid, record["session_id"], record["model_id"], record["ts"], zone_name
            )
        except AcmiValidationError:
            return None
        return zone_name, event

    def _log_start(
        self, bundle: Bundle, eid: EntityId, record: SpawnRecord, replacing: str | None = None
    ) -> None:
        """The new spawn's line in today's note (its zone: the bundle's), once per session
        id, when the script could not write it (the agent's zone not the one assumed):
        one round trip more, only then. ``replacing``: the line the script wrote."""
        from acmi_core.memory.writes import MemoryWrites, rewrite_session_start

        zone_name = str(bundle.memory.get("timezone", "UTC"))
        session, model, ts = record["session_id"], record["model_id"], record["ts"]
        if replacing is None:
            MemoryWrites(self._ctx).log_session_start(eid, session, model, ts, zone_name)
        else:
            rewrite_session_start(self._ctx, eid, session, model, ts, zone_name, replacing)

    def _keep_handoff(self, bundle: Bundle, eid: EntityId, raw: Reply) -> None:
        """A handoff this bootstrap took and the budget then cut is put back (SET NX: a
        newer one written meanwhile wins), so nothing is lost: one more round trip, only
        then."""
        if "handoff" not in bundle.cut or not isinstance(raw, bytes):
            return
        if bundle.memory.get("handoff") != "taken":
            return
        key = self._ctx.keys.slot(eid, MEMORY_HANDOFF)
        self._ctx.store.execute(("SET", key, raw, "NX"))
        bundle.memory["handoff"] = "put back: cut to fit the budget, still pending"
        bundle.text = render(bundle)


def _skeleton(
    tenant: str,
    eid: EntityId,
    scope: str,
    format: str,
    now: int,
    loaded: frozenset[str],
    record: Mapping[str, Any] | None,
) -> Bundle:
    """The request's bundle with nothing read, for ``budget.floor`` to price."""
    sections = [Section(name, None) for name in TITLES if name in SCOPE_SECTIONS[scope]]
    bundle = Bundle(str(eid), tenant, scope, format, now, sections)
    bundle.spawn = None if record is None else {**record}
    bundle.memory = {"today": iso(now)[:10], "on_demand": list(on_demand(scope, loaded))}
    return bundle


def _capped(bundle: Bundle, raw: Reply) -> None:
    """The reads the script stopped at its byte cap (``budget.READ_BYTES``): each is a
    cut of its section, the items left out counted as a budget's cut counts them (1 when
    the script cannot tell how many)."""
    names = {s.name: s for s in bundle.sections}
    for name, count in pairs(raw):
        section = names.get(string(name))
        if section is not None and isinstance(count, int):
            section.cut += count


def _include(include: object, scope: str) -> set[str]:
    """``include``: level-3 sections to load (a list, or one comma-separated string)."""
    if include is None:
        return set()
    names = include.split(",") if isinstance(include, str) else include
    if not isinstance(names, list | tuple) or not all(isinstance(n, str) for n in names):
        raise AcmiValidationError("include", "type", "must be a comma-separated string or a list")
    wanted = {n.strip() for n in names if n.strip()}
    unknown = wanted - set(ON_DEMAND)
    if unknown:
        raise AcmiValidationError(
            "include", "enum", f"{sorted(unknown)[0]!r}: must name {', '.join(ON_DEMAND)}"
        )
    if scope == "group" and wanted - GROUP_ON_DEMAND:
        raise AcmiValidationError(
            "include",
            "scope",
            "a group bundle loads yesterday on demand, never topics or the archive "
            "(seed §13: they may hold private or sensitive business context)",
        )
    return wanted


def _topic(topic: object, scope: str) -> str | None:
    """``topic``: the one topic file to load (``client-acme`` or ``topic:client-acme``)."""
    from acmi_core.memory.layers import SLUG_RE

    if topic is None:
        return None
    slug = topic.removeprefix("topic:") if isinstance(topic, str) else None
    if slug is None or not SLUG_RE.fullmatch(slug) or len(slug) > 128:
        raise AcmiValidationError("topic", "topic_slug", "must match [A-Za-z0-9_.-]{1,128}")
    if scope == "group":
        raise AcmiValidationError(
            "topic",
            "scope",
            "a group bundle never loads a topic file (seed §13: it may hold sensitive "
            "business context); use scope main or subagent",
        )
    return slug
