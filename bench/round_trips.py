"""1. Round trips per operation, counted on the Upstash REST double (one HTTP request each),
next to the reference's counts (REFERENCE.md) and the reference's access pattern replayed
on the same double."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from acmi_core import Acmi
from acmi_core.store.upstash import UpstashStore
from bench import _workload as w
from bench._infra import RedisServer, UpstashDouble, fmt_table


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


def run(server: RedisServer, *, quick: bool) -> dict[str, Any]:
    server.flush()
    settings = w.api_settings(store_timeout_s=5.0)
    rows: list[dict[str, Any]] = []
    with UpstashDouble(server.url_for()) as double:
        store = UpstashStore(double.url, double.token, settings=settings)
        acmi = Acmi(store, settings)
        # A fresh server's script cache is empty: the first write costs EVALSHA + EVAL.
        double.reset_counts()
        acmi.signals.set("user:warm", "k", 1)
        first_write = double.requests
        api = w.ApiClient(acmi)
        acmi.profile.set("user:rt", {"name": "rt"})
        acmi.timeline.append("user:rt", w.EVENT)
        api.webhook(next(_seq))  # warm the key cache
        api.post_event(next(_seq))
        for op in OPS:
            counts: list[int] = []
            replays: list[int] = []
            for _ in range(REPEATS):
                acmi.profile.set("user:gone", {"a": 1})
                double.reset_counts()
                op.call(acmi, api)
                counts.append(double.requests)
                if op.replay is not None:
                    double.reset_counts()
                    op.replay(store)
                    replays.append(double.requests)
            rows.append(
                {
                    "op": op.name,
                    "what": op.what,
                    "acmi": max(counts),
                    "stable": len(set(counts)) == 1,
                    "expected": op.expected,
                    "reference": op.reference,
                    "reference_pattern_measured": max(replays) if replays else None,
                }
            )
        api.close()
        store.close()
    table = fmt_table(
        ["operation", "what", "acmi", "target", "reference (REFERENCE.md)", "ref. pattern here"],
        [
            [
                r["op"],
                r["what"],
                r["acmi"],
                r["expected"],
                r["reference"],
                r["reference_pattern_measured"],
            ]
            for r in rows
        ],
    )
    note = (
        f"Requests to the Upstash double per call (max of {REPEATS}). First write on a fresh "
        f"server: {first_write} (EVALSHA -> NOSCRIPT -> EVAL, once per script cache)."
    )
    return {
        "operations": {r["op"]: r for r in rows},
        "first_write_fresh_server": first_write,
        "table": table,
        "note": note,
    }
