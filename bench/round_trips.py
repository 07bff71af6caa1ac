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


# Issue 10's operations run on the realistic agent (w.realistic_agent, built in measure).
WORK_ID = f"{w.AGENT.split(':')[1]}-task-0"  # build_agent's first open work item
_leases: list[tuple[str, str]] = []  # (resource, owner token): claimed, for "lock release"
_hitl: list[str] = []  # correlation ids: created, for "HITL resolve"


def _spawn() -> dict[str, Any]:
    return {"session_id": f"rt-{next(_seq)}", "model_id": "claude-opus-4"}


def _claim(acmi: Acmi) -> None:
    resource = f"bench:rt-{next(_seq)}"
    lease = acmi.locks.claim(resource, w.AGENT, 60_000)
    _leases.append((resource, lease.owner_token or ""))


def _release(acmi: Acmi) -> None:
    resource, token = _leases.pop()
    acmi.locks.release(resource, token)


def _hitl_create(acmi: Acmi) -> None:
    cid = f"rt-hitl-{next(_seq)}"
    acmi.hitl.create(
        "rt", "approve the rt", asked_by="agent:bentley", addressee=w.AGENT, correlation_id=cid
    )
    _hitl.append(cid)


def _hitl_resolve(acmi: Acmi) -> None:
    acmi.hitl.resolve(_hitl.pop(), "approved", by="user:mikey")


def _work_event(acmi: Acmi) -> None:
    event = {**w.EVENT, "correlationId": WORK_ID, "summary": "progress"}
    acmi.work.event(WORK_ID, event, session_id=f"rt-sess-{next(_seq)}")


def _reference_spawn(store: UpstashStore) -> None:
    spawn = {"ts": next(_seq), **_spawn()}
    w.reference_bootstrap(store, w.AGENT, spawn)


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
    Op(
        "bootstrap (+spawn)",
        "acmi.bootstrap of the realistic agent, logging a spawn: every section",
        lambda a, _: a.bootstrap(w.AGENT, spawn=_spawn()),
        1,
        "6 (+1 spawn)",
        _reference_spawn,
    ),
    Op(
        "bootstrap, markdown, 3k-token budget",
        "acmi.bootstrap as markdown for a prompt, cut to 3,000 estimated tokens",
        lambda a, _: a.bootstrap(w.AGENT, format="markdown", max_tokens=3000),
        1,
        "n/a",
    ),
    Op(
        "work get",
        "profile + signals + 50 events + sessions + owner",
        lambda a, _: a.work.get(WORK_ID),
        1,
        "4",
        lambda s: w.reference_work_get(s, f"work:{WORK_ID}"),
    ),
    Op("work event (+session)", "event + session id, atomic", lambda a, _: _work_event(a), 1, "2"),
    Op(
        "lock claim",
        "lease with fence + coord-claim event",
        lambda a, _: _claim(a),
        1,
        "n/a (advisory events)",
    ),
    Op(
        "lock release",
        "owner-token release + coord-release event",
        lambda a, _: _release(a),
        1,
        "n/a (advisory events)",
    ),
    Op(
        "heartbeat",
        "signals + activity index",
        lambda a, _: a.agents.heartbeat(w.AGENT, note="rt"),
        1,
        "n/a",
    ),
    Op("HITL create", "item + its queue", lambda a, _: _hitl_create(a), 1, "n/a"),
    Op("HITL resolve", "close + hitl-resolved event", lambda a, _: _hitl_resolve(a), 1, "n/a"),
    Op(
        "assess",
        "workflows.assess: a scored step",
        lambda a, _: a.workflows.assess("workflow:deploy", "build", 90, {"speed": 4}, w.AGENT),
        1,
        "n/a",
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
    acmi.get("user:rt")  # loads the page script a get's newest events run
    api.webhook(next(_seq))  # warm the key cache
    api.post_event(next(_seq))
    fleet = w.realistic_agent(acmi)  # and every script its operations run
    assert WORK_ID in fleet.work, (WORK_ID, fleet.work)
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
            f"server: {first_write} (EVALSHA -> NOSCRIPT -> EVAL, once per script cache). "
            "Bootstrap, work, lock, heartbeat, HITL and assess rows run on a realistic agent "
            "(acmi_core.testing.fleet.build_agent: 300 events, threads, work items, leases, "
            "HITL items, lessons, coordination traffic), its scripts loaded first."
        ),
    }
