"""What the group modules share: a valid event, timestamps, raw reads of stored JSON, the
auto-filled profile a check should expect, and a thread runner."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

from acmi_core.base.model import EntityId, Event, tenant_id_fill
from acmi_core.client import Acmi
from acmi_core.testing.conformance.harness import ConformanceFailure, expect_equal, short

BASE_TS: Final = 1_700_000_000_000


def make_event(n: int = 1, /, **fields: Any) -> dict[str, Any]:
    """A valid Comms v1.1 event; ``fields`` override or add (``ts=`` included)."""
    event: dict[str, Any] = {
        "source": "agent:conformance",
        "kind": "note",
        "correlationId": f"conf-c-{n}",
        "summary": f"event {n}",
    }
    event.update(fields)
    return event


def stamps(events: Sequence[Event]) -> list[Any]:
    """The events' ``ts`` values, in order."""
    return [e.ts for e in events]


def cids(events: Sequence[Event]) -> list[Any]:
    """The events' ``correlationId`` values, in order."""
    return [e.correlationId for e in events]


def append_at(acmi: Acmi, entity: str, times: Iterable[int | float]) -> None:
    """One event per timestamp (``correlationId`` conf-c-<position>)."""
    for n, ts in enumerate(times):
        acmi.timeline.append(entity, make_event(n, ts=ts, summary=f"at {ts}"))


def raw_json(acmi: Acmi, key: str) -> Any:
    """A stored STRING, decoded as JSON (what another client reading the key would see)."""
    raw = acmi.store.execute(("GET", key))
    if not isinstance(raw, bytes):
        raise ConformanceFailure(f"raw GET {key}: expected a string, got {short(raw)}")
    return json.loads(raw.decode("utf-8"))


def raw_members(acmi: Acmi, key: str) -> list[Any]:
    """A stored ZSET's members, decoded as JSON."""
    raw = acmi.store.execute(("ZRANGE", key, 0, -1))
    if not isinstance(raw, list):
        raise ConformanceFailure(f"raw ZRANGE {key}: expected an array, got {short(raw)}")
    return [json.loads(m.decode("utf-8")) for m in raw if isinstance(m, bytes)]


def entity_keys(acmi: Acmi, entity: str) -> tuple[str, str, str]:
    """The entity's profile, signals and timeline keys."""
    eid = EntityId.parse(entity)
    return acmi.keys.profile(eid), acmi.keys.signals(eid), acmi.keys.timeline(eid)


def exists(acmi: Acmi, key: str) -> bool:
    return acmi.store.execute(("EXISTS", key)) == 1


def expect_empty(acmi: Acmi, entity: str, what: str) -> None:
    """The entity has no profile, no signals and no events."""
    expect_equal(acmi.profile.get(entity), None, f"{what}: profile")
    expect_equal(acmi.signals.all(entity), {}, f"{what}: signals")
    expect_equal(acmi.timeline.size(entity), 0, f"{what}: timeline size")


def filled_profile(acmi: Acmi, entity: str, doc: dict[str, Any]) -> dict[str, Any]:
    """What a stored profile of ``entity`` looks like after auto-fill."""
    filled = dict(doc)
    category = EntityId.parse(entity).category
    if category in ("user", "agent"):
        filled.setdefault("actor_type", "human" if category == "user" else "agent")
    filled.setdefault("tenant_id", tenant_id_fill(acmi.tenant))
    return filled


def run_together(count: int, work: Callable[[int], object]) -> None:
    """Run ``work(i)`` for i in range(count) on ``count`` threads released together by a
    barrier; the first exception is raised, and a hung thread fails within 60 s."""
    barrier = threading.Barrier(count)

    def job(i: int) -> object:
        barrier.wait(timeout=30)
        return work(i)

    with ThreadPoolExecutor(max_workers=count) as pool:
        futures = [pool.submit(job, i) for i in range(count)]
        for future in futures:
            future.result(timeout=60)
