"""1. Round trips per operation, counted on the Upstash REST double (one HTTP request each),
next to the reference's counts (REFERENCE.md) and the reference's access pattern replayed
on the same double."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from acmi_core import Acmi
from acmi_core.store.upstash import UpstashStore
from bench import _workload as w
from bench._infra import Column, RedisServer, table_of


@dataclass(frozen=True)
class Op:
    name: str
    what: str
    call: Callable[[Acmi, w.ApiClient], Any]
    expected: int
    reference: str  # the reference's count, from REFERENCE.md (or the README's table)
    replay: Callable[[UpstashStore], Any] | None = None  # the reference pattern, measured


def _batch(acmi: Acmi) -> None:
    with acmi.batch() as b:
        b.profile.merge("user:rt", {"stage": "batched"})
        b.signals.set("user:rt", "mood", "focused")
        b.timeline.append("user:rt", {**w.EVENT, "summary": "batched"})


_seq = iter(range(1_000_000))


def _cold_webhook(acmi: Acmi, api: w.ApiClient) -> int:
    api.forget_keys()
    return api.webhook(next(_seq))


OPS: tuple[Op, ...] = (
    Op(
        "get",
        "profile + signals + newest 50 events",
        lambda a, _: a.get("user:rt"),
        1,
        "3",
        lambda s: w.reference_get(s, "user:rt"),
    ),
    Op(
        "append",
        "timeline.append (+ namespace index)",
        lambda a, _: a.timeline.append("user:rt", w.EVENT),
        1,
        "1+",
    ),
    Op("batch", "profile.merge + signals.set + append, atomic", lambda a, _: _batch(a), 1, "n/a"),
    Op(
        "signal set",
        "signals.set (one key, others kept)",
        lambda a, _: a.signals.set("user:rt", "k", "v"),
        1,
        "2 (racy)",
        lambda s: w.reference_signal_set(s, "user:rt", "k", "v"),
    ),
    Op(
        "merge",
        "profile.merge (shallow)",
        lambda a, _: a.profile.merge("user:rt", {"x": 1}),
        1,
        "2 (racy)",
        lambda s: w.reference_merge(s, "user:rt", {"x": 1}),
    ),
    Op("list", "entities of a category", lambda a, _: a.list("user"), 1, "1"),
    Op("delete", "every slot + index entry", lambda a, _: a.delete("user:gone"), 1, "n/a"),
    Op(
        "POST events",
        "HTTP POST /v1/entities/{e}/events, warm",
        lambda _, api: api.post_event(next(_seq)),
        1,
        "n/a",
    ),
    Op(
        "ingest webhook (warm)",
        "HTTP POST /v1/ingest/n8n, key and source caches warm",
        lambda _, api: api.webhook(next(_seq)),
        1,
        "n/a (no webhooks)",
    ),
    Op(
        "ingest webhook (cold)",
        "the same, first request of a process (+1 key lookup, +1 source config)",
        _cold_webhook,
        3,
        "n/a (no webhooks)",
    ),
)

REPEATS = 3
TITLE = "1. Round trips per operation (Upstash REST double)"
COLUMNS: tuple[Column, ...] = (
    ("operation", "op"),
    ("what", "what"),
    ("acmi", "acmi"),
    ("target", "expected"),
    ("reference (REFERENCE.md)", "reference"),
    ("ref. pattern here", "reference_pattern_measured"),
)


@dataclass(frozen=True)
class Counts:
    """Requests per call, one entry per repeat; replay: the reference pattern's."""

    acmi: list[int]
    replay: list[int]


def measure_first_write(rig: w.UpstashRig) -> int:
    """Requests for the first write on an empty script cache (EVALSHA, NOSCRIPT, EVAL)."""
    rig.double.reset_counts()
    rig.acmi.signals.set("user:warm", "k", 1)
    return rig.double.requests


def _count(rig: w.UpstashRig, call: Callable[[], Any]) -> int:
    rig.double.reset_counts()
    call()
    return rig.double.requests


def measure(rig: w.UpstashRig, api: w.ApiClient) -> dict[str, Counts]:
    acmi, store = rig.acmi, rig.store
    acmi.profile.set("user:rt", {"name": "rt"})
    acmi.timeline.append("user:rt", w.EVENT)
    api.webhook(next(_seq))  # warm the key cache
    api.post_event(next(_seq))
    counts: dict[str, Counts] = {}
    for op in OPS:
        ours: list[int] = []
        replays: list[int] = []
        for _ in range(REPEATS):
            acmi.profile.set("user:gone", {"a": 1})  # something for "delete" to delete
            ours.append(_count(rig, partial(op.call, acmi, api)))
            if op.replay is not None:
                replays.append(_count(rig, partial(op.replay, store)))
        counts[op.name] = Counts(ours, replays)
    return counts


def rows(counts: dict[str, Counts]) -> list[dict[str, Any]]:
    return [
        {
            "op": op.name,
            "what": op.what,
            "acmi": max(counts[op.name].acmi),
            "stable": len(set(counts[op.name].acmi)) == 1,
            "expected": op.expected,
            "reference": op.reference,
            "reference_pattern_measured": max(counts[op.name].replay, default=None),
        }
        for op in OPS
    ]


def run(server: RedisServer, *, quick: bool) -> dict[str, Any]:
    """quick changes nothing here: counts are exact, a few repeats suffice."""
    with w.upstash_rig(server, w.api_settings(store_timeout_s=5.0)) as rig:
        first_write = measure_first_write(rig)  # before anything else loads a script
        with w.ApiClient(rig.acmi) as api:
            ops = rows(measure(rig, api))
    return {
        "operations": {r["op"]: r for r in ops},
        "first_write_fresh_server": first_write,
        "table": table_of(COLUMNS, ops),
        "note": (
            f"Requests to the Upstash double per call (max of {REPEATS}). First write on a fresh "
            f"server: {first_write} (EVALSHA -> NOSCRIPT -> EVAL, once per script cache)."
        ),
    }
