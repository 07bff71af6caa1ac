"""Shared workload pieces: events, ACMI over the Upstash double, an API app over a store,
and the reference's access patterns re-implemented naively (sequential reads,
read-modify-write) as baselines."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from acmi_core import Acmi, Settings
from acmi_core.api.app import create_app
from acmi_core.api.context import ApiContext
from acmi_core.auth import apikeys
from acmi_core.store.base import Store
from acmi_core.store.upstash import UpstashStore
from acmi_core.testing.fleet import Fleet, build_agent
from bench._infra import RedisServer, UpstashDouble

EVENT: dict[str, Any] = {
    "source": "agent:bench",
    "kind": "note",
    "correlationId": "bench-1",
    "summary": "hello from the bench",
}


def webhook_body(seq: int) -> bytes:
    """An n8n item; every seq is a different delivery (body-derived idempotency key)."""
    return json.dumps(
        {"event": "ticket.updated", "id": f"T-{seq}", "message": f"update {seq}", "seq": seq}
    ).encode()


class ApiClient:
    """The whole HTTP app in process (starlette's TestClient), with a write key."""

    def __init__(self, acmi: Acmi) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            from fastapi.testclient import TestClient

        self.acmi = acmi
        self.key, _ = apikeys.mint(
            acmi.store, tenant=acmi.tenant, scope="write", name="bench", now_ms=acmi.clock()
        )
        self.ctx = ApiContext(acmi)
        self.app = create_app(self.ctx)
        self.client = TestClient(self.app, raise_server_exceptions=False)
        self.headers = {"authorization": f"Bearer {self.key}"}

    def forget_keys(self) -> None:
        """A cold process: the next request looks its key up again."""
        self.ctx = ApiContext(self.acmi)
        self.app.state.acmi = self.ctx

    def webhook(self, seq: int, entity: str = "ticket:bench") -> int:
        response = self.client.post(
            f"/v1/ingest/n8n?entity={entity}", content=webhook_body(seq), headers=self.headers
        )
        status: int = response.status_code
        return status

    def post_event(self, seq: int, entity: str = "user:bench") -> int:
        response = self.client.post(
            f"/v1/entities/{entity}/events",
            json={**EVENT, "correlationId": f"bench-{seq}"},
            headers=self.headers,
        )
        status: int = response.status_code
        return status

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def api_settings(**overrides: Any) -> Settings:
    return Settings(**{"auth_cache_s": 3600.0, **overrides})


@dataclass(frozen=True)
class UpstashRig:
    """ACMI on the Upstash double: every store call is one HTTP request, counted."""

    double: UpstashDouble
    store: UpstashStore
    acmi: Acmi


@contextmanager
def upstash_rig(server: RedisServer, settings: Settings) -> Iterator[UpstashRig]:
    """A fresh double over a flushed db 0 and an empty script cache, as on a new server."""
    server.flush()
    with UpstashDouble(server.url_for()) as double:
        store = UpstashStore(double.url, double.token, settings=settings)
        try:
            yield UpstashRig(double, store, Acmi(store, settings))
        finally:
            store.close()


# --- a realistic agent (issue 10: bootstrap, locks, work, HITL) ---------------------------

AGENT = "agent:bench-engineer"


def realistic_agent(acmi: Acmi, agent: str = AGENT, events: int = 300) -> Fleet:
    """``build_agent``'s agent (hundreds of events, threads, work, leases, HITL, lessons,
    coordination traffic), then every script its operations run loaded once (a fresh
    server's first run of a script is EVALSHA + NOSCRIPT + EVAL), untimed."""
    fleet = build_agent(acmi, agent, events=events)
    acmi.bootstrap(agent)
    lease = acmi.locks.claim("bench:warm", agent, 60_000)
    acmi.locks.release("bench:warm", lease.owner_token or "")
    acmi.hitl.create("warm", "warm the script", asked_by=agent, correlation_id="bench-warm")
    acmi.hitl.resolve("bench-warm", "warm", by=agent)
    acmi.agents.heartbeat(agent)
    return fleet


# --- the reference's patterns, as baselines --------------------------------------------------


def ref_keys(entity: str) -> tuple[str, str, str]:
    return (f"acmi:{entity}:profile", f"acmi:{entity}:signals", f"acmi:{entity}:timeline")


def reference_get(store: Store, entity: str, events: int = 50) -> None:
    """The reference's get: three sequential commands (profile, signals, timeline)."""
    profile, signals, timeline = ref_keys(entity)
    store.execute(("GET", profile))
    store.execute(("GET", signals))
    store.execute(("ZRANGE", timeline, -events, -1))


def reference_bootstrap(store: Store, agent: str, spawn: dict[str, Any] | None = None) -> None:
    """The reference CLI's bootstrap (``cmdBootstrap``): six sequential reads (profile,
    signals, active threads, latest rollup, newest 20 events, last 5 spawns); a spawn is
    a separate ZADD before them (7 requests)."""
    profile, signals, timeline = ref_keys(agent)
    if spawn is not None:
        member = json.dumps(spawn, separators=(",", ":"))
        store.execute(("ZADD", f"acmi:{agent}:spawns", spawn["ts"], member))
    store.execute(("GET", profile))
    store.execute(("GET", signals))
    store.execute(("HGETALL", f"acmi:{agent}:active_context"))
    store.execute(("GET", f"acmi:{agent}:rollup:latest"))
    store.execute(("ZREVRANGE", timeline, 0, 19))
    store.execute(("ZREVRANGE", f"acmi:{agent}:spawns", 0, 4, "WITHSCORES"))


def reference_work_get(store: Store, work: str) -> None:
    """The reference CLI's ``work get``: four sequential reads (profile, signals, newest
    50 events, every session id)."""
    profile, signals, timeline = ref_keys(work)
    store.execute(("GET", profile))
    store.execute(("GET", signals))
    store.execute(("ZREVRANGE", timeline, 0, 49))
    store.execute(("SMEMBERS", f"acmi:{work}:sessions"))


def reference_signal_set(store: Store, entity: str, key: str, value: Any) -> None:
    """The reference's signals.set: GET the JSON map, change it, SET it back (racy)."""
    _, signals, _ = ref_keys(entity)
    raw = store.execute(("GET", signals))
    current = json.loads(raw) if isinstance(raw, bytes) else {}
    current[key] = value
    store.execute(("SET", signals, json.dumps(current, separators=(",", ":"))))


def reference_merge(store: Store, entity: str, partial: dict[str, Any]) -> None:
    """The reference's profile.merge: GET, shallow-merge, SET (racy)."""
    profile, _, _ = ref_keys(entity)
    raw = store.execute(("GET", profile))
    current = json.loads(raw) if isinstance(raw, bytes) else {}
    current.update(partial)
    store.execute(("SET", profile, json.dumps(current, separators=(",", ":"))))


# Compare-and-set on the whole stored text: what a CAS design (DESIGN.md §3) would do.
CAS_SCRIPT = """
local cur = redis.call('GET', KEYS[1])
if (cur == false and ARGV[1] == '') or cur == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2])
  return 1
end
return 0
"""
