"""The wake bundle's JSON (``Bundle.to_dict``: the body of a ``format=json`` bundle over
HTTP and the ``bootstrap`` tool's text) held to its declared type on a real
redis-server: an agent with nothing stored, one with memory and a handoff taken by a
spawn, a retried spawn (marked duplicate), a budget that cuts, the group scope."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import TypeAdapter

from acmi_core import Acmi, create_acmi
from acmi_core.auth.apikeys import Scope
from acmi_core.base.settings import Settings
from acmi_core.bootstrap.results import BundleBody
from acmi_core.mcp.server import build_server
from acmi_core.store.redis import RedisStore
from acmi_core.testing.redis_server import RedisServer
from tests.kit import DB, FakeClock, RouteClient, fresh_tenant
from tests.results import assert_closed, portable

AGENT = "agent:claude"
SPAWN = {"session_id": "s-1", "model_id": "opus-4"}


@pytest.fixture
def tenant(redis_server: RedisServer) -> Iterator[Acmi]:
    store = RedisStore.from_url(redis_server.url_for(DB["backends"]))
    yield fresh_tenant(create_acmi(store, Settings()), FakeClock())
    store.close()


def held(value: Any, where: str) -> None:
    TypeAdapter(portable(BundleBody)).validate_python(value)
    assert_closed(BundleBody, value, where)


def test_every_kind_of_bundle(tenant: Acmi) -> None:
    empty = tenant.bootstrap(AGENT).to_dict()
    assert empty["spawn"] is None and empty["budget_bytes"] is None
    held(empty, "nothing stored")

    tenant.profile.set(AGENT, {"name": "Claude"})
    tenant.timeline.extend(
        AGENT,
        [
            {"source": AGENT, "kind": "note", "correlationId": f"c-{n}", "summary": "x" * 400}
            for n in range(30)
        ],
    )
    tenant.memory.remember(AGENT, "Ship on Friday", layer="hot")
    tenant.memory.remember(AGENT, "Draft first, then ask")
    tenant.memory.remember(AGENT, "Standup done", layer="daily")
    tenant.memory.handoff(AGENT, "next: ship")
    spawned = tenant.bootstrap(AGENT, spawn=SPAWN).to_dict()
    assert spawned["spawn"] is not None and spawned["memory"]["handoff"] == "taken"
    held(spawned, "spawn, handoff taken")
    again = tenant.bootstrap(AGENT, spawn=SPAWN).to_dict()
    assert again["spawn"] is not None and again["spawn"]["duplicate"] is True
    held(again, "spawn retried")

    cut = tenant.bootstrap(AGENT, max_bytes=4_000).to_dict()
    assert cut["cut"] and cut["budget_bytes"] == 4_000
    held(cut, "cut by the budget")
    group = tenant.bootstrap(AGENT, scope="group", include="yesterday").to_dict()
    assert "profile" not in group["sections"]
    held(group, "group scope")


def test_the_json_bundle_over_http_and_the_tool(tenant: Acmi) -> None:
    tenant.memory.remember(AGENT, "Ship on Friday", layer="hot")
    http = RouteClient(tenant, "bootstrap")
    read = http.call("GET", f"/v1/agents/{AGENT}/bootstrap?events=5", scope="read")
    assert read.status_code == 200, read.text
    held(read.json(), "GET bootstrap")
    posted = http.call("POST", f"/v1/agents/{AGENT}/bootstrap", {"spawn": SPAWN})
    assert posted.status_code == 200, posted.text
    assert posted.json()["spawn"]["session_id"] == "s-1"
    held(posted.json(), "POST bootstrap")

    # the tool answers the bundle's text (a str; markdown unless asked), the same JSON
    result = asyncio.run(
        build_server(tenant, Scope.ADMIN).call_tool("bootstrap", {"agent": AGENT, "format": "json"})
    )
    assert not result.isError and result.structuredContent is not None
    held(json.loads(result.structuredContent["result"]), "bootstrap tool")
