"""The reference CLI's JSON, kept: each command's answer reshaped so the keys the
reference ``acmi`` printed come first, in its order and shape, and ours follow as extra
keys. Scripts written against the reference parse it unchanged.

The yardstick is the reference's ``cli/acmi.mjs`` (madezmedia/acmi at 886dfc0): ``get``
prints ``{profile, signals, timeline_recent}`` (the newest 10 events, newest first),
``bootstrap`` ``{agent_id, bootstrapped_at, profile, signals, active_context,
rollup_latest, timeline_recent, recent_spawns}``, ``work get`` ``{work_id, profile,
signals, timeline (newest first), sessions}``; ``list``, ``work list`` and ``work
sessions`` a bare array of strings. The core answers (and so the HTTP API's bodies,
our own contract) are left as they are: only the CLI reshapes, here.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from typing import Any, Final

RECENT_EVENTS: Final = 10  # `get`: ZREVRANGE 0 9
BOOTSTRAP_EVENTS: Final = 20  # `bootstrap`: ZREVRANGE 0 19
BOOTSTRAP_SPAWNS: Final = 5  # `bootstrap`: ZREVRANGE 0 4 WITHSCORES


def newest_first(events: Iterable[Mapping[str, Any]], limit: int | None = None) -> list[Any]:
    """Events newest first, as ZREVRANGE gives them (equal ts: the later one first)."""
    shown = list(events)[::-1]
    return shown if limit is None else shown[:limit]


def _rest(answer: Mapping[str, Any], taken: Iterable[str]) -> dict[str, Any]:
    skip = set(taken)
    return {k: v for k, v in answer.items() if k not in skip}


def entity_view(context: Mapping[str, Any]) -> dict[str, Any]:
    """``acmi get``: the reference's three keys, then ours (``timeline`` oldest first,
    as many as ``--events``). ``signals`` is null when there are none, as the reference
    printed for an entity without its signals key."""
    return {
        "profile": context.get("profile"),
        "signals": context.get("signals") or None,
        "timeline_recent": newest_first(context.get("timeline") or [], RECENT_EVENTS),
        **_rest(context, ("profile", "signals", "timeline_recent")),
    }


def work_view(item: Mapping[str, Any]) -> dict[str, Any]:
    """``acmi work get``: ``work_id`` and ``timeline`` newest first, as the reference;
    our keys after (``id`` too). ``legacy`` indexes the events oldest first: it is
    re-indexed to the reversed timeline."""
    timeline = list(item.get("timeline") or [])
    last = len(timeline) - 1
    legacy = [{**entry, "index": last - entry["index"]} for entry in item.get("legacy") or []]
    return {
        "work_id": item.get("id"),
        "profile": item.get("profile"),
        "signals": item.get("signals") or None,
        "timeline": newest_first(timeline),
        "sessions": list(item.get("sessions") or []),
        **_rest(item, ("work_id", "profile", "signals", "timeline", "sessions")),
        "legacy": sorted(legacy, key=lambda entry: entry["index"]),
    }


def agent_id(agent: str) -> str:
    """The reference's argument: the agent's id without ``agent:``."""
    return agent.removeprefix("agent:")


def iso_ms(ms: int) -> str:
    """``new Date(ms).toISOString()``: UTC, milliseconds, ``Z``."""
    moment = datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def bootstrap_view(bundle: Mapping[str, Any]) -> dict[str, Any]:
    """``acmi bootstrap`` (JSON): the reference's object, then every key of our bundle.

    ``active_context`` is the reference's hash (thread -> ``{role, joined_at}``),
    ``rollup_latest`` its stored ``{ts, summary}``, ``recent_spawns`` its
    ``[{ts, data}]`` newest first."""
    sections: Mapping[str, Any] = bundle.get("sections") or {}
    threads = sections.get("active_threads") or []
    rollup = sections.get("rollup")
    spawns = sorted(sections.get("spawns") or [], key=lambda s: s.get("ts", 0), reverse=True)
    generated = bundle.get("generated_at")
    return {
        "agent_id": agent_id(str(bundle.get("agent", ""))),
        "bootstrapped_at": iso_ms(generated) if isinstance(generated, int) else None,
        "profile": sections.get("profile"),
        "signals": sections.get("signals") or None,
        "active_context": {
            t["thread"]: {k: v for k, v in t.items() if k != "thread"} for t in threads
        },
        "rollup_latest": (
            {k: v for k, v in rollup.items() if k != "age_ms"} if isinstance(rollup, dict) else None
        ),
        # the bundle's timeline is newest first already
        "timeline_recent": list(sections.get("timeline") or [])[:BOOTSTRAP_EVENTS],
        "recent_spawns": [{"ts": s.get("ts"), "data": dict(s)} for s in spawns[:BOOTSTRAP_SPAWNS]],
        **bundle,
    }
