"""A bound key's identity (``tier_identity``) and hourly bundle tokens (``tier_tokens``)
through the MCP surfaces, a real redis-server, two tenants: the mcp function (the
official SDK client over the Lambda handler) with both tool sets (ours and the
reference's ``acmi_*``) and the bootstrap prompt, and ``acmi mcp`` over stdio (a
subprocess with ``ACMI_API_KEY``). A key bound to no agent is not affected."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from mcp import ClientSession
from mcp.shared.exceptions import McpError

from acmi_core import Acmi, Settings
from acmi_core.auth import apikeys
from acmi_core.base.keys import PERMISSIONS
from acmi_core.base.model import EntityId
from acmi_core.store.redis import RedisStore
from acmi_core.testing.redis_server import RedisServer
from functions.mcp import handler as mcp_handler
from functions.runtime import LambdaFunction
from tests.e2e.test_mcp_http import error_text, note, payload, run_session
from tests.e2e.test_mcp_stdio import McpClient
from tests.kit import TEST_DBS, configured

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")

DB = TEST_DBS["tier_mcp"]  # this module's own database (tests/kit.py TEST_DBS)


@pytest.fixture
def store(redis_server: RedisServer) -> Iterator[RedisStore]:
    redis_server.flush(DB)
    store = RedisStore.from_url(redis_server.url_for(DB))
    yield store
    store.close()


@pytest.fixture
def handler(store: RedisStore) -> Iterator[LambdaFunction]:
    env = {"ACMI_DEFAULT_TENANT": "default", "ACMI_MCP_TOOLS": "all"}
    yield from configured(mcp_handler, store, env)


def limit(store: RedisStore, tenant: str, agent: str, tokens: int) -> None:
    """``agent``'s tier in ``tenant``: Specialist's namespaces, ``tokens`` an hour."""
    acmi = Acmi(store, Settings()).for_tenant(tenant)
    doc = {
        "role_tier": "Specialist",
        "allowed_namespaces": ["agent", "thread", "issue"],
        "write_access": True,
        "max_tokens_per_hour": tokens,
    }
    store.execute(("SET", acmi.keys.slot(EntityId.parse(agent), PERMISSIONS), json.dumps(doc)))


def key(store: RedisStore, tenant: str, agent: str | None) -> str:
    minted, _ = apikeys.mint(store, tenant=tenant, scope="write", name="k", now_ms=0, agent=agent)
    return minted


def identity_refused(text: str, field: str) -> None:
    assert text.startswith(f"{field}: ") or f'"{field}: ' in text, text
    assert "tier_identity" in text and "agent:scout" in text, text


def tokens_refused(text: str) -> None:
    assert "max_tokens_per_hour" in text and "tier_tokens" in text, text
    assert "retry in" in text, text


def test_a_bound_key_acts_only_as_its_agent_on_both_tool_sets(
    handler: LambdaFunction, store: RedisStore
) -> None:
    acmi = Acmi(store, Settings())
    for tenant in ("default", "acme"):
        limit(store, tenant, "agent:scout", 10_000_000)

    async def as_scout(s: ClientSession) -> None:
        calls: list[tuple[str, dict[str, Any], str]] = [
            ("lock_claim", {"resource": "r", "owner": "agent:other", "ttl_ms": 60_000}, "owner"),
            ("heartbeat", {"agent": "other"}, "agent"),
            ("hitl_create", {"topic": "t", "request": "ok?", "asked_by": "agent:other"},
             "asked_by"),
            ("hitl_resolve", {"correlation_id": "h-1", "resolution": "y", "by": "user:mikey"},
             "by"),
            ("event", {"entity": "thread:x", "event": note("x", "c1", "agent:other")},
             "event.source"),
            ("bootstrap", {"agent": "other", "spawn": {"session_id": "s", "model_id": "m"}},
             "agent"),
        ]  # fmt: skip
        for name, args, field in calls:
            identity_refused(error_text(await s.call_tool(name, args)), field)
        reference: list[tuple[str, dict[str, Any], str]] = [
            ("acmi_spawn", {"agentId": "other"}, "agentId"),
            ("acmi_active", {"agentId": "other", "threadKey": "x"}, "agentId"),
            ("acmi_rollup_set", {"agentId": "agent:other", "rollup": "{}"}, "agentId"),
            ("acmi_event",
             {"namespace": "thread", "id": "x", "source": "agent:other", "summary": "no"},
             "source"),
        ]  # fmt: skip
        for name, args, field in reference:
            result = await s.call_tool(name, args)
            assert result.isError, (name, result.content)
            identity_refused(error_text(result), field)
        # as itself: served
        ok = await s.call_tool(
            "lock_claim", {"resource": "r", "owner": "agent:scout", "ttl_ms": 60_000}
        )
        assert not ok.isError, ok.content
        ref = await s.call_tool(
            "acmi_event",
            {"namespace": "thread", "id": "x", "source": "agent:scout", "summary": "mine"},
        )
        assert not ref.isError, ref.content

    async def unbound(s: ClientSession) -> None:
        beat = await s.call_tool("heartbeat", {"agent": "other"})
        assert not beat.isError, beat.content
        ref = await s.call_tool("acmi_spawn", {"agentId": "other"})
        assert not ref.isError, ref.content

    for tenant in ("default", "acme"):
        run_session(handler, key(store, tenant, "agent:scout"), as_scout)
        client = acmi.for_tenant(tenant)
        assert [e.summary for e in client.get("thread:x").timeline] == ["mine"]
        assert client.agents.spawns("agent:other") == []
        assert client.locks.get("r").to_dict()["owner"] == "agent:scout"
    run_session(handler, key(store, "default", None), unbound)
    assert len(acmi.agents.spawns("agent:other")) == 1


def test_bundle_tokens_are_counted_across_tools_and_the_prompt(
    handler: LambdaFunction, store: RedisStore
) -> None:
    """ours' bootstrap tool and prompt and the reference's acmi_bootstrap share the
    key's counter; the bundle that crosses is served, the next refused, before anything
    is written (no spawn logged); the other tenant's scout and an unbound key are not."""
    acmi = Acmi(store, Settings())
    limit(store, "default", "agent:scout", 1)
    limit(store, "acme", "agent:scout", 1)

    async def ours_first(s: ClientSession) -> None:
        text = (await s.call_tool("bootstrap", {"agent": "scout"})).content[0]
        assert getattr(text, "text", "").startswith("#"), text  # served: the markdown bundle
        refused = await s.call_tool(
            "bootstrap", {"agent": "scout", "spawn": {"session_id": "s-1", "model_id": "m"}}
        )
        tokens_refused(error_text(refused))
        tokens_refused(error_text(await s.call_tool("acmi_bootstrap", {"agentId": "scout"})))
        with pytest.raises(McpError) as caught:
            await s.get_prompt("bootstrap", {"agent": "scout"})
        tokens_refused(str(caught.value))

    async def reference_first(s: ClientSession) -> None:
        served = payload(await s.call_tool("acmi_bootstrap", {"agentId": "scout"}))
        assert served["tenant"] == "acme"
        tokens_refused(error_text(await s.call_tool("acmi_bootstrap", {"agentId": "scout"})))
        tokens_refused(error_text(await s.call_tool("bootstrap", {"agent": "scout"})))

    async def unbound(s: ClientSession) -> None:
        for _ in range(2):
            result = await s.call_tool(
                "bootstrap", {"agent": "scout", "spawn": {"session_id": "s-2", "model_id": "m"}}
            )
            assert not result.isError, result.content

    run_session(handler, key(store, "default", "agent:scout"), ours_first)
    assert acmi.agents.spawns("agent:scout") == []  # refused before the spawn was logged
    run_session(handler, key(store, "acme", "agent:scout"), reference_first)
    run_session(handler, key(store, "default", None), unbound)
    assert [s["session_id"] for s in acmi.agents.spawns("agent:scout")] == ["s-2"]


def test_stdio_holds_a_bound_key_to_its_identity_and_tokens(
    redis_server: RedisServer, store: RedisStore
) -> None:
    limit(store, "default", "agent:scout", 1)
    limit(store, "acme", "agent:scout", 1)
    bound = key(store, "acme", "agent:scout")
    with McpClient(redis_server.url_for(DB), bound) as mcp:
        identity_refused(mcp.error("heartbeat", {"agent": "other"}), "agent")
        assert mcp.ok("heartbeat", {"agent": "scout"})
        assert mcp.text("bootstrap", {"agent": "scout"})  # crosses the limit: served
        tokens_refused(mcp.error("bootstrap", {"agent": "scout"}))
    acme = Acmi(store, Settings()).for_tenant("acme")
    assert acme.signals.get("agent:scout", "status") == "ACTIVE"
    assert Acmi(store, Settings()).signals.get("agent:scout", "status") is None
