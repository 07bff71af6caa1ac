"""standup-brief: the operator's daily brief (wins, blockers, actions), a scheduled job
(``cron(0 9 ? * MON-FRI *)``).

The brief covers the last ``WINDOW_MS`` (24 h) before the scheduled time, on the
coordination thread (``thread:agent-coordination``) and every other ``thread:*`` entity
whose timeline changed in the window (``keys.changed()``: at most ``max`` entities read
from the index, newest change first, then ``MAX_THREADS`` threads, the newest
``MAX_EVENTS_PER_THREAD`` events of each; ``truncated`` in the result says a cap bit).
Heartbeats, ticks, wake statuses and drift-diff's own summaries are left out
(``NOISE_KINDS``, and the reference's summary markers for events with no kind).

Deterministic and offline by default (extractive, the events' own summaries):

- wins: ``deployment-shipped``, ``task-end``, ``handoff-complete``... (``WIN_KINDS``);
- blockers: ``hitl-required``, ``blocked``, ``handoff-request``, ``merge-needed``...
  (``BLOCKER_KINDS``) that no later event with the same correlationId resolved in the
  window (drift-diff's ``RESOLVING_KINDS``);
- actions: the open HITL items of the operator's queue and the shared queue (most
  urgent first, ``MAX_HITL`` of each) and the unresolved handoff and merge requests.

An optional ``summarizer`` (any callable ``(BriefInput) -> str``, e.g. an LLM one from
elsewhere) writes the text instead; the lists stay extractive, and if it fails the
deterministic text is used and the error recorded (``summarizer_error``). Nothing here
imports one: ``run`` is the deterministic job, ``run_with(summarizer)`` builds another.

Output, one WritePlan: the operator's (``settings.operator``) signals ``last_brief_ts``
and ``standup_brief`` (the text), and its ``last_brief`` slot (``keys.LAST_BRIEF``, JSON
``{ts, window, wins, blockers, actions, text, summarizer, threads, events}``). The brief's
ts is the scheduled time, so a retried execution writes the same brief again.

Round trips per run: 3 (one pipeline: the changed-index window and the HITL queues; one
pipeline of the threads' events; one WritePlan), plus the 2 of ``run_job``. Commands:
O(entities changed in the window + threads read), never O(all entities).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from acmi_core.base.keys import COORDINATION_THREAD, LAST_BRIEF
from acmi_core.base.model import EntityId, dumps
from acmi_core.jobs.drift_checks import RESOLVING_KINDS
from acmi_core.jobs.foreign import (
    NewestRead,
    correlation_of,
    decode_members,
    iso,
    kind_of,
    max_per_run,
    read_pipeline,
    summary_of,
    ts_of,
)
from acmi_core.store.writes import WritePlan

if TYPE_CHECKING:
    from acmi_core.client import Acmi
    from acmi_core.jobs.runner import JobRun

JOB: Final = "standup-brief"
WINDOW_MS: Final = 24 * 3600 * 1000
MAX_THREADS: Final = 50  # threads read in one run (the coordination thread first)
MAX_EVENTS_PER_THREAD: Final = 200  # newest events of a thread in the window
MAX_HITL: Final = 50  # open items read from each queue
MAX_ITEMS: Final = 10  # per list in the brief
MAX_TEXT: Final = 4000  # characters of the brief's text (a signal value)

NOISE_KINDS: Final = frozenset(
    {"heartbeat", "tick-start", "tick-end", "wake-status", "drift-delta", "rollup"}
)
NOISE_MARKERS: Final = ("heartbeat", "Aggregated:", "tick-start", "tick-end")
WIN_KINDS: Final = frozenset(
    {
        "deployment-shipped",
        "task-end",
        "task-complete",
        "handoff-complete",
        "merge-complete",
        "merge-done",
        "hitl-resolved",
        "roundtable-synthesis",
    }
)
BLOCKER_KINDS: Final = frozenset(
    {"hitl-required", "blocked", "handoff-request", "merge-needed", "task-failed"}
)
ACTION_KINDS: Final = frozenset({"handoff-request", "merge-needed"})


@dataclass(frozen=True)
class BriefInput:
    """What a summarizer gets: the window, the substantive events (oldest first, as
    stored: untrusted text), and the extractive lists."""

    since_ms: int
    until_ms: int
    events: list[dict[str, Any]]
    wins: list[dict[str, Any]]
    blockers: list[dict[str, Any]]
    actions: list[dict[str, Any]]
    threads: list[str] = field(default_factory=list)


Summarizer = Callable[[BriefInput], str]


def is_noise(data: Mapping[str, Any]) -> bool:
    kind = kind_of(data)
    if kind:
        return kind in NOISE_KINDS
    summary = data.get("summary")
    return isinstance(summary, str) and any(m in summary for m in NOISE_MARKERS)


def _line(thread: str, data: Mapping[str, Any]) -> dict[str, Any]:
    item: dict[str, Any] = {
        "thread": thread,
        "ts": ts_of(data),
        "kind": kind_of(data),
        "source": data.get("source") if isinstance(data.get("source"), str) else "",
        "summary": summary_of(data),
    }
    cid = correlation_of(data)
    if cid:
        item["correlationId"] = cid
    return item


def extract(
    events: Sequence[tuple[str, dict[str, Any]]], hitl: Sequence[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(wins, blockers, actions) from ``(thread, event)`` pairs, oldest first, and the
    open HITL items: the deterministic brief."""
    resolved: dict[str, int] = {}
    for _, data in events:
        cid = correlation_of(data)
        if cid and kind_of(data) in RESOLVING_KINDS:
            resolved[cid] = max(ts_of(data), resolved.get(cid, 0))
    wins: list[dict[str, Any]] = []
    blockers: list[dict[str, Any]] = []
    actions: list[dict[str, Any]] = []
    seen: set[str] = set()
    for thread, data in events:
        kind, cid = kind_of(data), correlation_of(data)
        if kind in WIN_KINDS:
            wins.append(_line(thread, data))
        elif kind in BLOCKER_KINDS:
            if cid and resolved.get(cid, -1) >= ts_of(data):
                continue  # resolved later in the window
            if cid and cid in seen:
                continue  # one entry per correlationId (the first ask)
            if cid:
                seen.add(cid)
            blockers.append(_line(thread, data))
            if kind in ACTION_KINDS:
                actions.append({**_line(thread, data), "action": f"answer the {kind}"})
    urgent: list[dict[str, Any]] = []
    for item in hitl:
        payload = item.get("payload") if isinstance(item.get("payload"), dict) else {}
        assert isinstance(payload, dict)
        deadline = payload.get("deadline")
        action = {
            "thread": "hitl",
            "ts": ts_of(item),
            "kind": "hitl-required",
            "source": item.get("source") if isinstance(item.get("source"), str) else "",
            "summary": summary_of(item),
            "action": "resolve the HITL item",
        }
        cid = correlation_of(item)
        if cid:
            action["correlationId"] = cid
        if isinstance(deadline, int | float) and not isinstance(deadline, bool):
            action["due"] = iso(int(deadline))
        urgent.append(action)
    # newest wins first; HITL items by deadline, then requests oldest (longest waiting) first
    return wins[::-1][:MAX_ITEMS], blockers[:MAX_ITEMS], (urgent + actions)[:MAX_ITEMS]


def render(brief: BriefInput) -> str:
    """The deterministic text: a heading and three short lists."""
    lines = [
        f"Standup brief {iso(brief.until_ms)[:10]} (last 24 h: "
        f"{len(brief.events)} events on {len(brief.threads)} threads)"
    ]
    for title, items in (
        ("Wins", brief.wins),
        ("Blockers", brief.blockers),
        ("Actions", brief.actions),
    ):
        lines.append(f"{title}:")
        if not items:
            lines.append("- none")
        for item in items:
            who = f"{item['source']}: " if item.get("source") else ""
            due = f" (due {item['due']})" if item.get("due") else ""
            lines.append(f"- {who}{item['summary']}{due}")
    return "\n".join(lines)[:MAX_TEXT]


def run(acmi: Acmi, run: JobRun) -> dict[str, Any]:
    """The deterministic brief (module docstring)."""
    return brief(acmi, run)


def run_with(summarizer: Summarizer) -> Callable[[Acmi, JobRun], dict[str, Any]]:
    """A job writing the text with ``summarizer`` (the lists stay extractive)."""

    def job(acmi: Acmi, run: JobRun) -> dict[str, Any]:
        return brief(acmi, run, summarizer=summarizer)

    return job


def brief(acmi: Acmi, run: JobRun, *, summarizer: Summarizer | None = None) -> dict[str, Any]:
    """Read the window, extract, write the brief: three round trips."""
    keys = acmi.keys
    until = run.scheduled_ms
    since = until - WINDOW_MS
    limit = max_per_run(run)
    operator = EntityId.parse(acmi.settings.operator, "operator")

    # 1. what changed in the window, the open HITL queues (one pipeline)
    first = acmi.store.pipeline(
        [
            # newest changes first: past the limit, the least recent threads are left out
            ("ZRANGE", keys.changed(), until, f"({since}", "BYSCORE", "REV", "LIMIT", 0, limit),
            ("ZRANGE", keys.hitl_queue(operator, "open"), 0, MAX_HITL - 1),
            ("ZRANGE", keys.hitl_queue(None, "open"), 0, MAX_HITL - 1),
        ]
    )
    changed = first[0] if isinstance(first[0], list) else []
    threads = [COORDINATION_THREAD]
    for member in changed:
        name = member.decode("utf-8", "replace") if isinstance(member, bytes) else ""
        if name.startswith("thread:") and name not in threads:
            threads.append(name)
    threads = threads[:MAX_THREADS]
    hitl = decode_members(first[1]) + decode_members(first[2])

    # 2. the threads' events in the window (one pipeline), each read stopping at
    # JOB_READ_BYTES inside Redis: a day of 256 KB events cannot take the job's memory
    # (and with it every tenant after this one)
    windows = [
        NewestRead(keys.timeline(EntityId.parse(t)), MAX_EVENTS_PER_THREAD, until, since)
        for t in threads
    ]
    replies = read_pipeline(acmi.store, [w.command() for w in windows])
    events, cut = [], 0
    for thread, window, reply in zip(threads, windows, replies, strict=True):
        members, more = window.members(acmi.store, reply)
        cut += more
        events += [(thread, data) for data in decode_members(members or []) if not is_noise(data)]
    events.sort(key=lambda pair: ts_of(pair[1]))
    wins, blockers, actions = extract(events, hitl)
    source = BriefInput(
        since_ms=since,
        until_ms=until,
        events=[data for _, data in events],
        wins=wins,
        blockers=blockers,
        actions=actions,
        threads=threads,
    )
    text, used, error = render(source), "extractive", None
    if summarizer is not None:
        try:
            written = summarizer(source)
        except Exception as exc:  # an LLM outage must not cost the operator the brief
            error = f"{type(exc).__name__}: {exc}"[:300]
        else:
            if isinstance(written, str) and written.strip():
                text, used = written[:MAX_TEXT], str(getattr(summarizer, "name", "custom"))

    doc: dict[str, Any] = {
        "ts": until,
        "window": {"since_ms": since, "until_ms": until, "since": iso(since), "until": iso(until)},
        "wins": wins,
        "blockers": blockers,
        "actions": actions,
        "text": text,
        "summarizer": used,
        "threads": threads,
        "events": len(events),
    }
    if error is not None:
        doc["summarizer_error"] = error

    # 3. the operator's signals and last_brief slot (one WritePlan)
    plan = WritePlan()
    plan.sadd(keys.index(operator.category), operator.local_id)
    plan.edit_object(
        keys.signals(operator),
        [("set", "last_brief_ts", dumps(until)), ("set", "standup_brief", dumps(text))],
        field="signals",
    )
    plan.set(keys.slot(operator, LAST_BRIEF), dumps(doc))
    plan.apply(acmi.store)
    return {
        "operator": str(operator),
        "threads": len(threads),
        "events": len(events),
        "wins": len(wins),
        "blockers": len(blockers),
        "actions": len(actions),
        "summarizer": used,
        "truncated": len(changed) >= limit or len(threads) >= MAX_THREADS or cut > 0,
        "watermark": until,
        "backlog": 0,  # a brief covers its window or what fits: nothing is left for later
    }
