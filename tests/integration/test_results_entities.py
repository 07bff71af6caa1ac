"""Real answers of the entity rows on a real redis-server, held to their declared types:
the writes that answer nothing (``None``, and the API's ``{deleted}``), and the JSON
bodies the core's read dataclasses give (``EntityContext.to_dict``, ``EventPage.to_dict``)
and the list page the surfaces build, through the core, HTTP and the MCP tools; with the
rare branches: a read cut at the page byte cap (next_cursor), legacy and unreadable
members, an entity with nothing stored, a list page that goes on."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from pydantic import TypeAdapter

from acmi_core import Acmi, create_acmi
from acmi_core.auth.apikeys import Scope
from acmi_core.base.model import EntityId
from acmi_core.base.settings import Settings
from acmi_core.entities.results import Deleted, EntityBody, EntityListBody, EventPageBody
from acmi_core.mcp.server import build_server
from acmi_core.store.redis import RedisStore
from acmi_core.testing.redis_server import RedisServer
from tests.kit import DB, FakeClock, RouteClient, fresh_tenant
from tests.results import assert_closed, assert_result, portable

BIG = 200_000  # seven events of this: over a page's byte cap (MAX_PAGE_BYTES, 1 MiB)


@pytest.fixture
def tenant(redis_server: RedisServer) -> Iterator[Acmi]:
    store = RedisStore.from_url(redis_server.url_for(DB["backends"]))
    yield fresh_tenant(create_acmi(store, Settings()), FakeClock())
    store.close()


@pytest.fixture
def raw(redis_server: RedisServer) -> Iterator[redis.Redis]:
    """Writes as another tool leaves them (members ACMI would refuse)."""
    with redis.Redis.from_url(redis_server.url_for(DB["backends"])) as client:
        yield client


@pytest.fixture
def http(tenant: Acmi) -> RouteClient:
    return RouteClient(tenant, "entities")


def held(kind: Any, value: Any, where: str) -> None:
    """``value`` is of ``kind`` (a body type): validated, nothing undeclared."""
    TypeAdapter(portable(kind)).validate_python(value)
    assert_closed(kind, value, where)


def body(response: Any) -> Any:
    assert response.status_code == 200, response.text
    return response.json()


def tool(acmi: Acmi, name: str, arguments: dict[str, Any]) -> Any:
    result = asyncio.run(build_server(acmi, Scope.ADMIN).call_tool(name, arguments))
    assert not result.isError, result.content
    assert result.structuredContent is not None
    return result.structuredContent


def event(n: int, **extra: Any) -> dict[str, Any]:
    return {"source": "user:x", "kind": "note", "correlationId": f"c-{n}", "summary": f"e{n}"} | {
        "ts": 1_000 + n,
        **extra,
    }


def test_the_writes_that_answer_nothing(tenant: Acmi, http: RouteClient) -> None:
    who = "user:quiet"
    tenant.profile.set(who, {"name": "Q"})
    tenant.signals.set(who, "mood", "ok")
    assert_result("entities.signals.patch", tenant.signals.update(who, {"load": 1}))
    assert_result("entities.signal.delete", tenant.signals.delete(who, "load"))
    assert_result("entities.signals.delete", tenant.signals.clear(who))
    assert_result("entities.profile.delete", tenant.profile.delete(who))
    assert_result("entities.delete", tenant.delete(who))
    assert tenant.get(who).to_dict()["profile"] is None  # each write did what it says

    tenant.profile.set(who, {"name": "Q"})
    tenant.signals.set(who, "mood", "ok")
    for path in (f"{who}/signals/mood", f"{who}/signals", f"{who}/profile", who):
        deleted = body(http.call("DELETE", f"/v1/entities/{path}"))
        assert deleted == {"deleted": path}
        held(Deleted, deleted, f"DELETE {path}")


def test_an_entity_read_in_every_shape(tenant: Acmi, http: RouteClient, raw: redis.Redis) -> None:
    nobody = tenant.get("user:nobody").to_dict()
    assert nobody["profile"] is None and nobody["timeline"] == []
    held(EntityBody, nobody, "get, nothing stored")

    who = "user:mixed"
    tenant.profile.set(who, {"name": "Mixed", "tags": ["a"]})
    tenant.signals.set(who, "mood", {"level": 3})
    tenant.timeline.extend(who, [event(1), event(2)])
    key = tenant.keys.timeline(EntityId.parse(who))
    # another tool's members: one without kind/correlationId (legacy), one not JSON
    raw.zadd(key, {json.dumps({"ts": 1_003, "source": "user:x", "summary": "old"}): 1_003})
    raw.zadd(key, {b"not json": 1_004})
    read = tenant.get(who).to_dict()
    assert read["legacy"] and read["skipped"] and "next_cursor" not in read
    held(EntityBody, read, "get")
    held(EntityBody, body(http.call("GET", f"/v1/entities/{who}", scope="read")), "GET entity")
    held(EntityBody, tool(tenant, "get", {"entity": who}), "get tool")

    page = tenant.timeline.page(who, limit=2).to_dict()
    assert page["next_cursor"] is not None
    held(EventPageBody, page, "timeline page")
    rest = body(
        http.call(
            "GET",
            f"/v1/entities/{who}/timeline?limit=2&cursor={page['next_cursor']}",
            scope="read",
        )
    )
    assert rest["next_cursor"] is None and rest["skipped"]
    held(EventPageBody, rest, "GET timeline, last page")


def test_a_read_cut_at_the_page_byte_cap(tenant: Acmi, raw: redis.Redis) -> None:
    who = "user:big"
    tenant.profile.set(who, {"name": "big"})
    key = tenant.keys.timeline(EntityId.parse(who))
    raw.zadd(key, {json.dumps(event(n, payload={"blob": "x" * BIG})): 1_000 + n for n in range(7)})
    cut = tenant.get(who, events=7).to_dict()
    assert "next_cursor" in cut and len(cut["timeline"]) < 7
    held(EntityBody, cut, "get, cut")


def test_a_list_page_that_goes_on(tenant: Acmi, http: RouteClient) -> None:
    for n in range(3):
        tenant.profile.set(f"user:l{n}", {"n": n})
    first = body(http.call("GET", "/v1/namespaces/user/entities?limit=2", scope="read"))
    assert first["next_cursor"] is not None and len(first["entities"]) == 2
    held(EntityListBody, first, "GET list")
    listed = tool(tenant, "list", {"category": "user", "limit": 5})
    assert listed["next_cursor"] is None and len(listed["entities"]) == 3
    held(EntityListBody, listed, "list tool")


def test_several_timelines_merged(tenant: Acmi) -> None:
    tenant.timeline.extend("user:c1", [event(1), event(3)])
    tenant.timeline.extend("user:c2", [event(2)])
    merged = tenant.timeline.cat(["user:c1", "user:c2", "user:none"], limit=2)
    assert [(entity, e.ts) for entity, e in merged] == [("user:c1", 1_003), ("user:c2", 1_002)]
    assert_result("entities.cat", merged)
