"""The CLI's remote backend (``HttpBackend``) against the real API served by uvicorn (as
``acmi serve`` runs it) on a real redis-server: every Backend method answers exactly what
``LocalBackend`` answers for the same store state, errors map to the same AcmiErrors,
and each call is one HTTP request (``cat``: one per entity).

Writes are compared from the same starting state: the tenant's keys are wiped and the
setup replayed before each side runs, on a clock that does not move, and the keys each
side leaves behind are compared too."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass
from typing import Any, Final

import httpx
import pytest
import redis
from starlette.applications import Starlette
from starlette.routing import Mount

from acmi_core import Acmi
from acmi_core.api.app import create_app
from acmi_core.api.context import ApiContext
from acmi_core.auth import apikeys
from acmi_core.base.errors import (
    AcmiError,
    AcmiValidationError,
    Forbidden,
    NotFound,
    Unauthenticated,
    Unavailable,
)
from acmi_core.base.settings import Settings
from acmi_core.cli.backend import Backend, LocalBackend
from acmi_core.cli.remote import HttpBackend
from acmi_core.memory.embeddings import GEN_FIELD
from acmi_core.store.redis import RedisStore
from acmi_core.testing.redis_server import RedisServer, free_port
from tests.kit import DB, FakeClock, serving

EVENT = {"source": "agent:claude", "kind": "note", "correlationId": "c-1", "summary": "hi"}


class Counting(httpx.BaseTransport):
    """The real transport, recording each request (method and raw path with query)."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport(retries=0)
        self.sent: list[tuple[str, str]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append((request.method, request.url.raw_path.decode()))
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


GEN: Final = GEN_FIELD.encode()


@dataclass
class Served:
    acmi: Acmi
    clock: FakeClock
    raw: redis.Redis
    url: str
    keys: dict[str, str]
    local: LocalBackend
    remote: HttpBackend
    counter: Counting

    def backend(self, scope: str = "write", url: str | None = None) -> HttpBackend:
        return HttpBackend(url or self.url, self.keys[scope])

    def tenant_keys(self) -> list[bytes]:
        return sorted(self.raw.scan_iter(match=f"*{self.acmi.tenant}*", count=1000))

    def wipe(self) -> None:
        keys = self.tenant_keys()
        if keys:
            self.raw.delete(*keys)

    def snapshot(self) -> dict[bytes, Any]:
        """The tenant's keys and values, by type."""
        state: dict[bytes, Any] = {}
        for key in self.tenant_keys():
            kind = self.raw.type(key)
            if kind == b"string":
                state[key] = self.raw.get(key)
            elif kind == b"hash":
                # a vector index's write token is fresh per write (memory/vectors.py)
                fields = self.raw.hgetall(key)
                if GEN in fields:
                    fields[GEN] = b"*"
                state[key] = fields
            elif kind == b"zset":
                state[key] = self.raw.zrange(key, 0, -1, withscores=True)
            elif kind == b"set":
                state[key] = sorted(self.raw.smembers(key))
            else:
                state[key] = (kind, self.raw.dump(key))
        # request records are named by a fresh id per call: compare the replies they hold
        records = f"acmi:_req:{self.acmi.tenant}:".encode()
        held = sorted(state.pop(k) for k in [k for k in state if k.startswith(records)])
        if held:
            state[records + b"*"] = held
        return state


@pytest.fixture(scope="module")
def served(redis_server: RedisServer) -> Iterator[Served]:
    """The whole API (create_app, offload, as ``acmi serve``) under uvicorn in a thread,
    at / and under a stage path /prod, on a tenant of its own."""
    store = RedisStore.from_url(redis_server.url_for(DB["backends"]))
    clock = FakeClock()
    acmi = Acmi(store, Settings(), tenant=f"t-{uuid.uuid4().hex[:12]}", clock=clock)
    api = create_app(ApiContext(acmi, offload=True))
    # API Gateway's stage path: the same app answers under /prod
    root = Starlette(routes=[Mount("/prod", app=api), Mount("", app=api)])
    keys = {
        scope: apikeys.mint(store, tenant=acmi.tenant, scope=scope, name=scope, now_ms=clock())[0]
        for scope in ("read", "write")
    }
    counter = Counting()
    with (
        serving(root) as url,
        redis.Redis.from_url(redis_server.url_for(DB["backends"]), protocol=2) as raw,
    ):
        remote = HttpBackend(url, keys["write"], transport=counter)
        yield Served(acmi, clock, raw, url, keys, LocalBackend(acmi, "store"), remote, counter)
        remote.close()
    store.close()


@pytest.fixture
def s(served: Served) -> Iterator[Served]:
    served.wipe()
    served.clock.now = 1_790_000_000_000
    served.counter.sent.clear()
    yield served
    served.wipe()


Setup = Callable[[Acmi], Any]
Op = Callable[[Backend, Any], Any]


def same_write(s: Served, setup: Setup, op: Op, requests: int = 1, *, state: bool = True) -> Any:
    """``op`` on each backend from the same state (setup replayed, clock reset): equal
    results, equal keys left behind (``state``), ``requests`` HTTP requests on the
    remote side."""
    results, states = [], []
    for backend in (s.local, s.remote):
        s.wipe()
        s.clock.now = 1_790_000_000_000
        given = setup(s.acmi)
        s.counter.sent.clear()
        results.append(op(backend, given))
        states.append(s.snapshot())
    assert len(s.counter.sent) == requests, s.counter.sent
    assert results[0] == results[1]
    assert states[0] == states[1] or not state
    s.wipe()  # the caller builds the next state itself
    return results[1]


def same_read(s: Served, op: Callable[[Backend], Any], requests: int = 1) -> Any:
    local = op(s.local)
    s.counter.sent.clear()
    remote = op(s.remote)
    assert len(s.counter.sent) == requests, s.counter.sent
    assert local == remote
    return remote


def same_error(s: Served, op: Callable[[Backend], Any], requests: int | None = None) -> AcmiError:
    """``op`` raises the same AcmiError (class, field, rule, message) on both backends."""
    with pytest.raises(AcmiError) as local:
        op(s.local)
    s.counter.sent.clear()
    with pytest.raises(AcmiError) as remote:
        op(s.remote)
    if requests is not None:
        assert len(s.counter.sent) == requests
    got, want = remote.value, local.value
    assert (type(got), got.field, got.rule, got.message) == (
        type(want),
        want.field,
        want.rule,
        want.message,
    )
    return got


def nothing(acmi: Acmi) -> None:
    return None


# --- parity, row by row ----------------------------------------------------------------


def test_entity_writes_match(s: Served) -> None:
    def profiled(acmi: Acmi) -> None:
        acmi.profile.set("user:mikey", {"name": "Mikey", "tags": ["a"]})
        acmi.signals.replace("user:mikey", {"mood": "ok", "n": 1})

    doc = {"name": "Mikey", "n": 1.5, "deep": {"x": [1, None, "é"]}}
    same_write(
        s,
        nothing,
        lambda b, _: b.call("entities.profile.put", entity="user:mikey", profile=doc, merge=False),
    )
    same_write(
        s,
        profiled,
        lambda b, _: b.call(
            "entities.profile.put", entity="user:mikey", profile={"age": 3}, merge=True
        ),
    )
    same_write(
        s,
        profiled,
        lambda b, _: b.call(
            "entities.signals.put", entity="user:mikey", signals={"n": 2}, merge=True
        ),
    )
    same_write(
        s,
        profiled,
        lambda b, _: b.call(
            "entities.signals.put", entity="user:mikey", signals={"z": [1]}, merge=False
        ),
    )
    stored = same_write(
        s, nothing, lambda b, _: b.call("entities.events.append", entity="user:mikey", event=EVENT)
    )
    assert "entity" not in stored and stored["summary"] == "hi"
    own = {**EVENT, "entity": "mine", "payload": {"k": 1}}
    assert (
        same_write(
            s,
            nothing,
            lambda b, _: b.call("entities.events.append", entity="user:mikey", event=own),
        )["entity"]
        == "mine"
    )
    assert (
        same_write(
            s, profiled, lambda b, _: b.call("entities.delete", entity="user:mikey", dry_run=False)
        )
        is None
    )


def test_entity_reads_match(s: Served) -> None:
    assert same_read(s, lambda b: b.call("entities.profile.get", entity="user:nobody")) is None
    s.acmi.profile.set("user:mikey", {"name": "Mikey"})
    s.acmi.signals.replace("user:mikey", {"mood": "ok"})
    for i in range(5):
        s.acmi.timeline.append("user:mikey", {**EVENT, "correlationId": f"c-{i}", "ts": 10 + i})
    s.acmi.profile.set("user:ann", {"name": "Ann"})
    assert (
        same_read(s, lambda b: b.call("entities.profile.get", entity="user:mikey"))["name"]
        == "Mikey"
    )
    assert (
        len(
            same_read(s, lambda b: b.call("entities.get", entity="user:mikey", events=3))[
                "timeline"
            ]
        )
        == 3
    )
    assert (
        same_read(s, lambda b: b.call("entities.get", entity="user:mikey", events=0))["timeline"]
        == []
    )
    first = same_read(s, lambda b: b.call("entities.list", category="user", cursor=None, limit=1))
    assert set(first) == {"entities", "next_cursor"}
    if first["next_cursor"] is not None:
        same_read(
            s,
            lambda b: b.call(
                "entities.list", category="user", cursor=first["next_cursor"], limit=1
            ),
        )
    assert sorted(
        same_read(s, lambda b: b.call("entities.list", category="user", cursor=None, limit=1000))[
            "entities"
        ]
    ) == [
        "user:ann",
        "user:mikey",
    ]


def test_cat_merges_like_the_client(s: Served) -> None:
    # equal ts across entities keep the given order; within one, ties by stored bytes
    for entity, stamps in (("user:a", [5, 3, 3, 1]), ("user:b", [4, 3, 2]), ("user:c", [3])):
        for n, ts in enumerate(stamps):
            event = {**EVENT, "correlationId": f"{entity}-{n}", "ts": ts, "summary": f"s{n}"}
            s.acmi.timeline.append(entity, event)
    for order in (["user:a", "user:b", "user:c"], ["user:c", "user:b", "user:a", "user:c"]):
        distinct = len(dict.fromkeys(order))
        merged = same_read(
            s,
            lambda b, o=order: b.cat(o, limit=50, since_ms=None, until_ms=None),  # type: ignore[misc]
            requests=distinct,
        )
        assert [e["ts"] for e in merged] == [5, 4, 3, 3, 3, 3, 2, 1]
    assert len(same_read(s, lambda b: b.cat(["user:a"], limit=2, since_ms=None, until_ms=None)))
    ranged = same_read(
        s, lambda b: b.cat(["user:a", "user:b"], limit=3, since_ms=2, until_ms=4), requests=2
    )
    assert [e["entity"] for e in ranged] == ["user:b", "user:a", "user:a"]
    assert same_read(s, lambda b: b.cat(["user:none"], limit=5, since_ms=None, until_ms=None)) == []


def test_cat_errors_match_before_any_request(s: Served) -> None:
    many = [f"user:u{i}" for i in range(21)]
    assert same_error(s, lambda b: b.cat(many, limit=5, since_ms=None, until_ms=None), 0).rule == (
        "count"
    )
    assert same_error(s, lambda b: b.cat([], limit=5, since_ms=None, until_ms=None), 0)
    for limit in (0, 1001):

        def cat(b: Backend, n: int = limit) -> Any:
            return b.cat(["user:a"], limit=n, since_ms=None, until_ms=None)

        error = same_error(s, cat, 0)
        assert (error.field, error.rule) == ("limit", "range")
    same_error(s, lambda b: b.cat(["nocolon"], limit=5, since_ms=None, until_ms=None), 0)
    # checked by the API (the client checks it before its pipeline): the same error
    error = same_error(s, lambda b: b.cat(["user:a"], limit=5, since_ms=9, until_ms=1), 1)
    assert (error.field, error.rule) == ("since_ms", "range")


def test_agent_operations_match(s: Served) -> None:
    def joined(acmi: Acmi) -> None:
        acmi.agents.join("claude", "room 1?x=#%/é", "lead")  # "/" in the route's last segment
        acmi.agents.join("claude", "room 2?x=#%é", "lead")

    same_write(
        s,
        nothing,
        lambda b, _: b.call(
            "agents.spawn", agent="claude", session_id="s-1", model_id="opus", host=None
        ),
    )
    same_write(
        s,
        nothing,
        lambda b, _: b.call(
            "agents.spawn", agent="agent:claude", session_id="s-1", model_id="opus", host="box"
        ),
    )
    same_write(
        s,
        nothing,
        lambda b, _: b.call("agents.join", agent="claude", thread="room 2?x=#%é", role="lead"),
    )
    same_write(
        s, joined, lambda b, _: b.call("agents.leave", agent="claude", thread="room 2?x=#%é")
    )
    same_write(
        s, nothing, lambda b, _: b.call("agents.rollup.put", agent="claude", summary="a summary")
    )
    same_write(
        s,
        nothing,
        lambda b, _: b.call("agents.heartbeat", agent="claude", status="ACTIVE", note=None),
    )
    same_write(
        s,
        nothing,
        lambda b, _: b.call("agents.heartbeat", agent="claude", status="BUSY", note="on it"),
    )
    joined(s.acmi)
    assert len(same_read(s, lambda b: b.call("agents.threads", agent="claude"))) == 2
    # "/" travels too: the route's last segment takes the rest of the path
    same_write(
        s,
        nothing,
        lambda b, _: b.call("agents.join", agent="claude", thread="team/room 1?x=#%é", role="lead"),
    )
    left = same_write(
        s,
        joined,
        lambda b, _: (
            b.call("agents.leave", agent="claude", thread="room 1?x=#%/é"),
            b.call("agents.threads", agent="claude"),
        )[1],
        2,
    )
    assert list(left) == ["room 2?x=#%é"]


def test_bootstrap_matches(s: Served) -> None:
    s.acmi.profile.set("agent:claude", {"name": "Claude"})
    s.acmi.timeline.append("agent:claude", EVENT)
    options: dict[str, Any] = {
        "format": "json",
        "scope": "main",
        "events": 5,
        "include": None,
        "topic": None,
        "max_tokens": None,
        "spawn": None,
    }
    text = same_read(s, lambda b: b.call("bootstrap.read", agent="claude", **options))
    assert '"Claude"' in text
    markdown = {**options, "format": "markdown", "max_tokens": 4000, "scope": "subagent"}
    same_read(s, lambda b: b.call("bootstrap.read", agent="claude", **markdown))
    spawn = {**options, "spawn": {"session_id": "s-9", "model_id": "opus"}}
    same_write(s, nothing, lambda b, _: b.call("bootstrap.read", agent="claude", **spawn))


def test_work_operations_match(s: Served) -> None:
    def item(acmi: Acmi) -> None:
        acmi.work.create("launch", {"title": "Launch"}, owner="claude")

    same_write(
        s,
        nothing,
        lambda b, _: b.call("work.create", id="launch", profile={"title": "L"}, owner="claude"),
    )
    same_write(
        s,
        nothing,
        lambda b, _: b.call("work.create", id="..", profile={"title": "dots"}, owner=None),
    )
    same_write(
        s, item, lambda b, _: b.call("work.event", id="launch", event=EVENT, session_id="sess-1")
    )
    same_write(
        s, item, lambda b, _: b.call("work.event", id="launch", event=EVENT, session_id=None)
    )
    same_write(
        s,
        item,
        lambda b, _: b.call("work.signals", id="launch", signals={"status": "done", "p": 1}),
    )
    item(s.acmi)
    s.acmi.work.create("..", {"title": "dots"})
    s.acmi.work.event("launch", EVENT, "sess-1")
    assert (
        same_read(s, lambda b: b.call("work.get", id="launch", events=10))["profile"]["title"]
        == "Launch"
    )
    assert same_read(s, lambda b: b.call("work.get", id="..", events=0))["id"] == ".."
    assert same_read(s, lambda b: b.call("work.sessions", id="launch", cursor=None, limit=10))[
        "sessions"
    ] == ["sess-1"]
    for owner, status in (("claude", "open"), ("claude", None), (None, None), (None, "open")):
        same_read(
            s,
            lambda b, o=owner, st=status: b.call(
                "work.list", owner=o, status=st, cursor=None, limit=10
            ),  # type: ignore[misc]
        )
    error = same_error(
        s, lambda b: b.call("work.list", owner=None, status="any", cursor=None, limit=10), 0
    )
    assert (error.field, error.rule) == ("status", "enum")
    error = same_error(s, lambda b: b.call("work.get", id="nope", events=1), 1)
    assert isinstance(error, NotFound)


def test_memory_operations_match(s: Served) -> None:
    entity = "agent:atlas"

    def remembered(acmi: Acmi) -> None:
        acmi.memory.remember(entity, "Mikey prefers async updates", layer="warm")
        acmi.memory.remember(entity, "- [ ] ship the memory CLI", layer="hot")

    same_write(
        s,
        nothing,
        lambda b, _: b.call("memory.remember", entity=entity, text="a lesson", layer="warm"),
    )
    same_write(
        s,
        nothing,
        lambda b, _: b.call("memory.remember", entity=entity, text="today", layer="daily"),
    )
    same_write(
        s,
        remembered,
        lambda b, _: b.call("memory.active.get", entity=entity, text="# Active\n- shipping\n"),
        2,
    )
    same_write(
        s,
        nothing,
        lambda b, _: b.call("memory.topics.create", entity=entity, slug="pricing", name="Pricing"),
    )
    same_write(s, remembered, lambda b, _: b.call("memory.prune", entity=entity, days=7))
    same_write(s, remembered, lambda b, _: b.call("memory.review", entity=entity))
    same_write(
        s,
        nothing,
        lambda b, _: b.call("memory.handoff", entity=entity, text="next: verify the deploy"),
    )
    taken = same_write(
        s,
        lambda a: a.memory.handoff(entity, "next: verify"),
        lambda b, _: b.call("memory.handoff.take", entity=entity),
    )
    assert taken is not None and "next: verify" in str(taken)
    remembered(s.acmi)
    assert same_read(s, lambda b: b.call("memory.status", entity=entity))["entity"] == entity
    found = same_read(
        s, lambda b: b.call("memory.search", entity=entity, query="async updates", limit=5)
    )
    assert found["hits"], found
    same_read(s, lambda b: b.call("memory.active.get", entity=entity, text=None))
    same_read(s, lambda b: b.call("memory.daily_summary", entity=entity, date=None))
    same_read(s, lambda b: b.call("memory.debug", entity=entity))
    assert same_read(s, lambda b: b.call("memory.handoff.take", entity=entity)) is None
    error = same_error(
        s, lambda b: b.call("memory.remember", entity=entity, text="x", layer="cold"), 1
    )
    assert error.field == "layer"


def test_lock_operations_match(s: Served) -> None:
    def claimed(acmi: Acmi) -> str:
        token = acmi.locks.claim("deploy:prod", "agent:claude", 60_000).owner_token
        assert token is not None
        return token

    def masked(lease: dict[str, Any]) -> dict[str, Any]:
        # the owner token and the claim's correlationId are random per claim: compared by
        # presence (and so is the stored state, which holds them)
        assert lease.pop("owner_token", "absent") and lease.pop("correlationId", "absent")
        return lease

    def claim(b: Backend, _: Any) -> dict[str, Any]:
        return masked(
            b.call("locks.claim", resource="deploy:prod", owner="agent:claude", ttl_ms=60_000)
        )

    same_write(s, nothing, claim, state=False)
    renew = same_write(
        s,
        claimed,
        lambda b, token: masked(
            b.call("locks.renew", resource="deploy:prod", owner_token=token, ttl_ms=90_000)
        ),
        state=False,
    )
    assert renew["expires_at"] == 1_790_000_000_000 + 90_000
    same_write(
        s,
        claimed,
        lambda b, token: masked(b.call("locks.release", resource="deploy:prod", owner_token=token)),
        state=False,
    )
    claimed(s.acmi)
    assert (
        same_read(s, lambda b: b.call("locks.get", resource="deploy:prod"))["owner"]
        == "agent:claude"
    )
    error = same_error(
        s,
        lambda b: b.call("locks.claim", resource="deploy:prod", owner="agent:other", ttl_ms=60_000),
        1,
    )
    assert (error.field, error.rule) == ("resource", "held")
    error = same_error(
        s, lambda b: b.call("locks.claim", resource="deploy:x", owner="agent:other", ttl_ms=5), 1
    )
    assert (error.field, error.rule) == ("ttl_ms", "range")


def test_hitl_operations_match(s: Served) -> None:
    def queued(acmi: Acmi) -> None:
        acmi.hitl.create(
            "deploy",
            "approve?",
            asked_by="agent:claude",
            addressee="user:mikey",
            correlation_id="h-1",
        )

    def create(b: Backend, _: Any) -> dict[str, Any]:
        return b.call(
            "hitl.create",
            topic="deploy",
            request="approve?",
            asked_by="agent:claude",
            urgency="P0",
            addressee="user:mikey",
            correlation_id="h-1",
        )

    assert same_write(s, nothing, create)["created"] is True
    assert same_write(s, queued, create)["created"] is False  # idempotent: 200 on the API
    same_write(
        s,
        queued,
        lambda b, _: b.call(
            "hitl.resolve", correlation_id="h-1", resolution="yes", by="user:mikey"
        ),
    )
    queued(s.acmi)
    page = same_read(
        s,
        lambda b: b.call("hitl.list", addressee="user:mikey", state="open", cursor=None, limit=10),
    )
    assert [i["correlationId"] for i in page["items"]] == ["h-1"]
    same_read(
        s, lambda b: b.call("hitl.list", addressee=None, state="closed", cursor=None, limit=10)
    )
    s.acmi.hitl.resolve("h-1", "yes", by="user:mikey")
    assert same_error(
        s,
        lambda b: b.call("hitl.resolve", correlation_id="h-1", resolution="again", by="user:mikey"),
        1,
    ).rule


# --- errors -----------------------------------------------------------------------------------


def test_validation_errors_match(s: Served) -> None:
    missing = {k: v for k, v in EVENT.items() if k != "summary"}
    error = same_error(
        s, lambda b: b.call("entities.events.append", entity="user:mikey", event=missing), 1
    )
    assert isinstance(error, AcmiValidationError)
    assert (error.field, error.rule) == ("events[0].summary", "required")
    # ids are checked by the core's own rules before a request (the API would 404 a "/")
    for bad in ("user:a b/c", "nocolon", "User:x"):
        error = same_error(s, lambda b, e=bad: b.call("entities.profile.get", entity=e), 0)  # type: ignore[misc]
        assert error.field == "entity"
    error = same_error(
        s,
        lambda b: b.call(
            "entities.profile.put", entity="user:x", profile={"n": float("nan")}, merge=False
        ),
    )
    assert error.field.startswith("profile")
    error = same_error(
        s, lambda b: b.call("entities.list", category="user", cursor=None, limit=0), 0
    )
    assert (error.field, error.rule) == ("limit", "range")
    assert s.snapshot() == {}


def test_bad_key_and_read_only_key(s: Served) -> None:
    unknown = "acmi_" + "x" * 43
    with closing(HttpBackend(s.url, unknown)) as bad:
        with pytest.raises(Unauthenticated) as refused:
            bad.call("entities.profile.get", entity="user:mikey")
        assert (refused.value.field, refused.value.rule) == ("authorization", "known_key")
        assert unknown not in str(refused.value) and unknown not in repr(bad)
    with closing(s.backend("read")) as reader:
        with pytest.raises(Forbidden) as forbidden:
            reader.call("entities.profile.put", entity="user:mikey", profile={"a": 1}, merge=False)
        assert forbidden.value.field == "authorization"
        assert (
            reader.call("entities.profile.get", entity="user:mikey") is None
        )  # reading is allowed
    assert s.snapshot() == {}


def test_server_down_is_unavailable_naming_the_url(s: Served) -> None:
    port = free_port()
    # nothing listens there: the port was free a moment ago
    key = s.keys["write"]
    with closing(HttpBackend(f"http://localhost:{port}/", key, timeout=2.0)) as down:
        calls: list[Callable[[], Any]] = [
            lambda: down.call("entities.profile.get", entity="user:a"),
            lambda: down.call("entities.events.append", entity="user:a", event=EVENT),
        ]
        for call in calls:
            with pytest.raises(Unavailable) as failed:
                call()
            text = f"{failed.value} {failed.value.field} {failed.value.rule}"
            assert f"http://localhost:{port}" in text and key not in text
            assert failed.value.field == "--api"


def test_wrong_base_url_names_the_route(s: Served) -> None:
    staging = HttpBackend(s.url + "/staging", s.keys["write"])
    with closing(staging), pytest.raises(NotFound) as missing:
        staging.call("entities.profile.get", entity="user:mikey")
    assert (missing.value.field, missing.value.rule) == ("--api", "route_exists")


# --- URL, key, label ---------------------------------------------------------------------------


def test_plain_http_is_refused_off_this_machine() -> None:
    key = "acmi_secret_never_shown_0001"
    for url in ("http://api.example.com", "http://10.0.0.5:8080/prod", "HTTP://Example.COM/"):
        with pytest.raises(AcmiValidationError) as refused:
            HttpBackend(url, key)
        assert (refused.value.field, refused.value.rule) == ("--api", "https")
        assert "--api" in str(refused.value) and key not in str(refused.value)
    for url, bad in (
        ("ftp://example.com", "url"),
        ("https://", "url"),
        ("https://user:pw@example.com", "no_credentials"),
        ("https://example.com/prod?x=1", "base_url"),
    ):
        with pytest.raises(AcmiValidationError) as refused:
            HttpBackend(url, key)
        assert (refused.value.field, refused.value.rule) == ("--api", bad)
        assert "pw" not in str(refused.value)
    for url in ("http://localhost:8000", "http://127.0.0.1:1/", "http://[::1]:9"):
        with closing(HttpBackend(url, key)) as near:
            assert near.label == f"api {url.rstrip('/')}"
    with closing(HttpBackend("https://x.execute-api.eu-west-1.amazonaws.com/prod/", key)) as far:
        assert far.label == "api https://x.execute-api.eu-west-1.amazonaws.com/prod"
        assert key not in repr(far) and key not in far.label and key not in repr(vars(far))
    with pytest.raises(AcmiValidationError) as bad_key:
        HttpBackend("https://example.com", "two words")
    assert "two words" not in str(bad_key.value)
    with pytest.raises(AcmiValidationError):
        HttpBackend("https://example.com", key, timeout=httpx.Timeout(5.0, read=None))


def test_stage_path_and_trailing_slash(s: Served) -> None:
    s.acmi.profile.set("user:mikey", {"name": "Mikey"})
    for url in (s.url + "/", s.url + "/prod", s.url + "/prod/"):
        with closing(HttpBackend(url, s.keys["read"])) as staged:
            assert staged.call("entities.profile.get", entity="user:mikey") == s.local.call(
                "entities.profile.get", entity="user:mikey"
            )


def test_one_request_per_call_and_the_key_only_in_the_header(s: Served) -> None:
    s.acmi.work.create("launch", {"title": "L"})
    sent: list[httpx.Request] = []
    key = s.keys["write"]
    with closing(HttpBackend(s.url, key, transport=_Recording(sent))) as remote:
        remote.call("agents.join", agent="claude", thread="a b?c#d%e", role="lead")
        remote.call("entities.profile.get", entity="user:a")
        remote.call("work.get", id="launch", events=1)
    assert len(sent) == 3
    for request in sent:
        assert request.headers["authorization"] == f"Bearer {key}"
        assert key not in str(request.url)
    # the thread's "?", "#", "%" and space travel inside its segment
    assert sent[0].url.raw_path == b"/v1/agents/claude/threads/a%20b%3Fc%23d%25e"


# --- helpers ----------------------------------------------------------------------------------


class _Recording(httpx.BaseTransport):
    def __init__(self, sent: list[httpx.Request]) -> None:
        self.inner = httpx.HTTPTransport()
        self.sent = sent

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        return self.inner.handle_request(request)
