"""A bound key's identity on memory writes and on the writes that name agents, and the
CLI's exit code on a 429 or 503, over a real redis-server, two tenants, two agents
(scout and other, a bound key each, in both tenants):

- a memory write (remember, forget, the hot layer, handoff and its take, import,
  topics, prune, review, archive) on another agent's entity is a 403 ``tier_identity``
  naming ``entity``, whatever the tier's namespaces (``agent`` allowed here), through
  HTTP, MCP (the SDK client over the mcp function, and ``acmi mcp`` over stdio) and
  ``acmi --api``; nothing stored. The key's own memory and an entity that is no
  agent's (``thread:x``) are served, reads of another agent's memory too, and a key
  bound to no agent writes anyone's;
- an invite's ``invited_by`` and a minted key's ``agent`` (tenant-wide writes, routed
  by no HTTP route or MCP tool: the CLI on the store only) are held to the key's agent
  by the same table, and ``--api`` refuses them before any request;
- ``acmi --api`` exits 6 (retry later) on every 429 and 503 the API gives (the hourly
  bundle tokens, a store it cannot reach, and each error the API's own map answers with
  429 or 503, and a gateway's), its error line naming the rule and the Retry-After.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from mcp import ClientSession
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from acmi_core import Acmi, Settings, create_acmi
from acmi_core.api.app import create_app
from acmi_core.api.context import ApiContext
from acmi_core.api.status import error_answer
from acmi_core.auth import apikeys
from acmi_core.auth.tiers import ACTORS, EffectiveTier, TierGate, check_write, effective_tier
from acmi_core.base.errors import (
    AcmiError,
    Forbidden,
    RateLimited,
    StoreBusy,
    StoreUnavailable,
    Throttled,
    Unavailable,
)
from acmi_core.base.keys import PERMISSIONS
from acmi_core.base.model import EntityId
from acmi_core.cli import main
from acmi_core.cli.output import EXIT_AUTH, EXIT_UNAVAILABLE, EXIT_USAGE
from acmi_core.mcp import reference
from acmi_core.memory.tree import tree_texts
from acmi_core.operations import OPERATIONS, Access
from acmi_core.store.redis import RedisStore
from acmi_core.testing.redis_server import RedisServer
from functions.mcp import handler as mcp_handler
from functions.runtime import LambdaFunction
from tests.e2e.test_mcp_http import error_text, payload, run_session
from tests.e2e.test_mcp_stdio import McpClient
from tests.kit import TEST_DBS, configured, serving

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")

DB = TEST_DBS["tier_identity"]  # this module's own database (tests/kit.py TEST_DBS)
TENANTS = ("default", "acme")
AGENTS = ("agent:scout", "agent:other")
# namespaces that include "agent": the namespace check alone would let the write pass
TIER = {
    "role_tier": "Specialist",
    "allowed_namespaces": ["agent", "thread"],
    "write_access": True,
    "max_tokens_per_hour": 10_000_000,
}

# every memory write route, with a body it would serve
BODIES: dict[str, Any] = {
    "memory.remember": {"text": "a lesson"},
    "memory.forget": {"path": "MEMORY.md", "text": "a lesson"},
    "memory.review": {},
    "memory.active.put": {"text": "# Active\n- [ ] ship\n"},
    "memory.topics.create": {"slug": "pricing", "name": "Pricing"},
    "memory.prune": {},
    "memory.handoff": {"text": "next: ship"},
    "memory.handoff.take": None,
    "memory.import": {"files": {"MEMORY.md": "# Memory\n"}},
    "memory.archive": {},
}
# the MCP tools of the memory writes (memory_active writes only with a text)
TOOLS: list[tuple[str, dict[str, Any]]] = [
    ("memory_remember", {"text": "a lesson"}),
    ("memory_forget", {"path": "MEMORY.md", "text": "a lesson"}),
    ("memory_active", {"text": "# Active\n"}),
    ("memory_topic_create", {"slug": "pricing", "name": "Pricing"}),
    ("memory_prune", {}),
    ("memory_handoff", {"text": "next: ship"}),
    ("memory_handoff", {}),  # the take
    ("memory_import", {"files": {"MEMORY.md": "# Memory\n"}}),
    ("memory_review", {}),
]


@pytest.fixture
def store(redis_server: RedisServer) -> Iterator[RedisStore]:
    redis_server.flush(DB)
    store = RedisStore.from_url(redis_server.url_for(DB))
    for tenant in TENANTS:
        acmi = Acmi(store, Settings()).for_tenant(tenant)
        for agent in AGENTS:
            slot = acmi.keys.slot(EntityId.parse(agent), PERMISSIONS)
            store.execute(("SET", slot, json.dumps(TIER)))
    yield store
    store.close()


@pytest.fixture
def handler(store: RedisStore) -> Iterator[LambdaFunction]:
    env = {"ACMI_DEFAULT_TENANT": "default", "ACMI_MCP_TOOLS": "all"}
    yield from configured(mcp_handler, store, env)


def key(store: RedisStore, tenant: str, agent: str | None) -> str:
    minted, _ = apikeys.mint(store, tenant=tenant, scope="write", name="k", now_ms=0, agent=agent)
    return minted


def dbsize(store: RedisStore) -> int:
    size = store.execute(("DBSIZE",))
    assert isinstance(size, int)
    return size


def memory_of(store: RedisStore, tenant: str, entity: str) -> dict[str, str]:
    """The entity's memory as its seed's files (empty: nothing was ever written)."""
    files = tree_texts(Acmi(store, Settings()).for_tenant(tenant).memory.export_snapshot(entity))
    return {path: text for path, text in files.items() if text.strip()}


def memory_routes() -> list[tuple[str, str, str]]:
    """(row, method, path template) of every memory write with an HTTP route."""
    rows = [
        (row.name, row.method, row.path)
        for row in OPERATIONS
        if row.name.startswith("memory.") and row.access is Access.WRITE and row.path
    ]
    assert {name for name, _, _ in rows} == set(BODIES)  # every one of them tried here
    order = list(BODIES)  # each as served after the one before (a remember, then forget)
    rows.sort(key=lambda r: order.index(r[0]))
    return [(name, method, path) for name, method, path in rows if method and path]


def error_line(err: str) -> str:
    """The one error line of a command's stderr (after its ``# api ...`` note)."""
    lines = [line for line in err.splitlines() if not line.startswith("# ")]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def identity_refused(status: int, body: dict[str, Any], agent: str) -> None:
    assert status == 403, body
    assert (body["error"], body["field"], body["rule"]) == ("forbidden", "entity", "tier_identity")
    assert body["message"].startswith("entity: ") and agent in body["message"], body
    assert "own agent's memory" in body["message"], body


def test_http_memory_writes_are_the_key_s_own_agent_s(store: RedisStore) -> None:
    app = TestClient(create_app(ApiContext(create_acmi(store, Settings(auth_cache_s=0)))))
    routes = memory_routes()

    def call(key_: str, method: str, path: str, body: Any) -> Any:
        headers = {"authorization": f"Bearer {key_}"}
        return app.request(method, path, headers=headers, json=body)

    for tenant in TENANTS:
        keys = {agent: key(store, tenant, agent) for agent in AGENTS}
        for me, them in (AGENTS, AGENTS[::-1]):
            before = dbsize(store)
            for name, method, path in routes:
                answer = call(keys[me], method, path.format(entity=them), BODIES[name])
                identity_refused(answer.status_code, answer.json(), me)
            assert dbsize(store) == before, (tenant, me)  # nothing stored
            # reads of another agent's memory are not limited
            status = call(keys[me], "GET", f"/v1/memory/{them}/active", None)
            assert status.status_code == 200, status.text
        for me in AGENTS:  # its own memory, and an entity that is no agent's
            for entity in (me, f"thread:{me[6:]}"):  # a thread each: its topic is new
                for name, method, path in routes:
                    answer = call(keys[me], method, path.format(entity=entity), BODIES[name])
                    assert answer.status_code in (200, 201), (name, entity, answer.text)
    # scout's writes stayed in its tenant's own memory, other's in its
    for tenant in TENANTS:
        for agent in AGENTS:
            assert "next: ship" not in json.dumps(memory_of(store, tenant, agent))  # taken
            assert "MEMORY.md" in memory_of(store, tenant, agent)
    # a key bound to no agent writes anyone's memory
    unbound = key(store, "acme", None)
    answer = call(unbound, "POST", "/v1/memory/agent:other/remember", {"text": "from ops"})
    assert answer.status_code == 201, answer.text
    assert "from ops" in memory_of(store, "acme", "agent:other")["MEMORY.md"]
    assert "from ops" not in json.dumps(memory_of(store, "default", "agent:other"))


def test_mcp_memory_writes_are_the_key_s_own_agent_s(
    handler: LambdaFunction, store: RedisStore
) -> None:
    def refused_on(them: str, me: str) -> Any:
        async def body(s: ClientSession) -> None:
            for tool, args in TOOLS:
                text = error_text(await s.call_tool(tool, {"entity": them, **args}))
                assert text.startswith("entity: ") and "(rule: tier_identity)" in text, text
                assert me in text and "own agent's memory" in text, text
            # reading it is served
            read = payload(await s.call_tool("memory_active", {"entity": them}))
            assert read["entity"] == them
            for entity in (me, "thread:x"):
                mine = await s.call_tool("memory_remember", {"entity": entity, "text": "mine"})
                assert not mine.isError, mine.content

        return body

    for tenant in TENANTS:
        for me, them in (AGENTS, AGENTS[::-1]):
            before = dbsize(store)
            run_session(handler, key(store, tenant, me), refused_on(them, me))
            assert dbsize(store) > before  # the own writes landed
            assert "mine" in memory_of(store, tenant, me)["MEMORY.md"]
    for tenant in TENANTS:
        for agent in AGENTS:  # each holds its own line once: none of the other's writes
            assert memory_of(store, tenant, agent)["MEMORY.md"].count("mine") == 1


def test_stdio_memory_writes_are_the_key_s_own_agent_s(
    redis_server: RedisServer, store: RedisStore
) -> None:
    """``acmi mcp`` (a subprocess with a key bound to scout in acme): other's memory
    refused, scout's own written, the default tenant's untouched."""
    with McpClient(redis_server.url_for(DB), key(store, "acme", "agent:scout")) as mcp:
        before = dbsize(store)
        for tool, args in TOOLS[:3]:
            text = mcp.error(tool, {"entity": "agent:other", **args})
            assert text.startswith("entity: ") and "(rule: tier_identity)" in text, text
        assert dbsize(store) == before
        assert mcp.ok("memory_remember", {"entity": "agent:scout", "text": "mine"})
    assert "mine" in memory_of(store, "acme", "agent:scout")["MEMORY.md"]
    assert memory_of(store, "acme", "agent:other") == {}
    assert memory_of(store, "default", "agent:scout") == {}


def test_acmi_api_memory_writes_are_the_key_s_own_agent_s(
    store: RedisStore, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    served = ApiContext(create_acmi(store, Settings(auth_cache_s=0)), offload=True)
    with serving(create_app(served)) as url:
        for tenant in TENANTS:
            for me, them in (AGENTS, AGENTS[::-1]):
                monkeypatch.setenv("ACMI_API_KEY", key(store, tenant, me))
                before = dbsize(store)
                for args in (
                    ["memory", "remember", them, "a lesson"],
                    ["memory", "forget", them, "MEMORY.md", "--text", "a lesson"],
                    ["memory", "handoff", them, "--take"],
                    ["memory", "prune", them],
                ):
                    assert main(["--api", url, *args]) == EXIT_AUTH, args
                    err = error_line(capsys.readouterr().err)
                    assert err.startswith("error: entity: ") and me in err, err
                    assert "(rule: tier_identity)" in err, err
                assert dbsize(store) == before
                assert main(["--api", url, "memory", "remember", me, "mine"]) == 0
                capsys.readouterr()
            for agent in AGENTS:
                assert memory_of(store, tenant, agent)["MEMORY.md"].count("mine") == 1


def test_invites_and_minted_keys_name_the_key_s_agent(
    store: RedisStore, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The rules (check_write, what every surface's gate runs): with '*' (Admin) a bound
    key invites as itself only and mints keys bound to itself only; without '*' both are
    tenant-wide refusals first. No surface routes them for a key: no HTTP route, no MCP
    tool (either set), and --api refuses them before any request."""
    admin = EffectiveTier("Admin", frozenset({"*"}), True, 10, "permissions")
    specialist = effective_tier(Acmi(store, Settings()), "agent:scout")
    invite = {"agent": "newbie", "tier": "Utility", "invited_by": "agent:scout"}
    check_write(admin, "agent:scout", "agents.invite", invite)  # as itself: allowed
    check_write(admin, "agent:scout", "agents.invite", {**invite, "invited_by": "scout"})
    mint = {"tenant": "default", "scope": "write", "name": "k", "agent": "agent:scout"}
    check_write(admin, "agent:scout", "keys.create", mint)
    refusals = [
        ("agents.invite", {**invite, "invited_by": "agent:other"}, "invited_by", "another"),
        ("agents.invite", {**invite, "invited_by": "user:mikey"}, "invited_by", "someone"),
        # the model's default (system:acmi-invite) is not the key's agent either
        ("agents.invite", {**invite, "invited_by": "system:acmi-invite"}, "invited_by", "some"),
        ("keys.create", {**mint, "agent": "other"}, "agent", "another agent"),
        ("keys.create", {**mint, "agent": None}, "agent", "names no agent"),
    ]
    for row, values, field, said in refusals:
        with pytest.raises(Forbidden) as caught:
            check_write(admin, "agent:scout", row, values)
        assert (caught.value.field, caught.value.rule) == (field, "tier_identity"), row
        assert said in caught.value.message and "agent:scout" in caught.value.message
        with pytest.raises(Forbidden) as first:  # a tier without '*': tenant-wide first
            check_write(specialist, "agent:scout", row, values)
        assert (first.value.field, first.value.rule) == ("authorization", "tier_namespace")
    assert {"agents.invite", "keys.create"} <= set(ACTORS)
    # no surface routes them for a key
    rows = {row.name: row for row in OPERATIONS}
    for name in ("agents.invite", "keys.create"):
        assert rows[name].path is None and rows[name].mcp is None and rows[name].store_only
    assert not [t.name for t in reference.REFERENCE if "invite" in t.name or "key" in t.name]
    monkeypatch.setenv("ACMI_API_KEY", key(store, "acme", "agent:scout"))
    before = dbsize(store)
    url = "http://127.0.0.1:9"  # never asked: refused before any request
    for args in (
        ["invite-agent", "newbie", "--invited-by", "agent:other"],
        ["keys", "create", "--tenant", "acme", "--scope", "admin", "--name", "k"],
    ):
        assert main(["--api", url, *args]) == EXIT_USAGE, args
        assert "(rule: store_only)" in capsys.readouterr().err
    assert dbsize(store) == before  # nothing written


# --- the CLI on a 429 or 503 --------------------------------------------------------------


def retry_line(err: str, rule: str, seconds: int) -> None:
    line = error_line(err)
    assert line.endswith(f"(rule: {rule}); retry after {seconds} s"), err


def test_acmi_api_exits_retry_later_on_the_bundle_tokens(
    store: RedisStore, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both tenants: the bundle that crosses the limit is served, the next exits 6 with
    the rule and the Retry-After the API sent; the other agent's counter is its own."""
    for tenant in TENANTS:
        acmi = Acmi(store, Settings()).for_tenant(tenant)
        slot = acmi.keys.slot(EntityId.parse("agent:scout"), PERMISSIONS)
        store.execute(("SET", slot, json.dumps({**TIER, "max_tokens_per_hour": 1})))
    served = ApiContext(create_acmi(store, Settings()), offload=True, tiers=TierGate())
    with serving(create_app(served)) as url:
        for tenant in TENANTS:
            monkeypatch.setenv("ACMI_API_KEY", key(store, tenant, "agent:scout"))
            assert main(["--api", url, "bootstrap", "scout"]) == 0
            capsys.readouterr()
            assert main(["--api", url, "bootstrap", "scout"]) == EXIT_UNAVAILABLE
            err = capsys.readouterr().err
            assert "max_tokens_per_hour" in err, err
            wait = int(err.split("retry in ")[1].split(" s")[0])  # the API's own seconds
            retry_line(err, "tier_tokens", wait)
            monkeypatch.setenv("ACMI_API_KEY", key(store, tenant, "agent:other"))
            assert main(["--api", url, "bootstrap", "other"]) == 0
            capsys.readouterr()


def test_acmi_api_exits_retry_later_when_the_api_s_store_is_down(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    down = RedisStore.from_url(f"redis://127.0.0.1:{port}/0")
    monkeypatch.setenv("ACMI_API_KEY", "acmi_" + "k" * 40)
    try:
        with serving(create_app(ApiContext(create_acmi(down, Settings())))) as url:
            assert main(["--api", url, "get", "agent", "scout"]) == EXIT_UNAVAILABLE
    finally:
        down.close()
    err = capsys.readouterr().err
    assert "store: the store cannot be reached" in err and str(port) not in err, err
    retry_line(err, "available", 1)


def answering(status: int, body: bytes, headers: dict[str, str]) -> Starlette:
    """An app answering every request so (the API's error answers, or a gateway's)."""

    async def endpoint(request: Request) -> Response:
        return Response(body, status, headers, media_type="application/json")

    return Starlette(routes=[Route("/{path:path}", endpoint, methods=["GET", "POST"])])


def test_acmi_api_exits_retry_later_on_every_429_and_503(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each error the API's map answers with 429 or 503 (its wire bytes and Retry-After,
    from api/status.py), and what a gateway in front answers: exit 6, the rule and the
    seconds on the one error line."""
    errors: list[AcmiError] = [
        RateLimited("x: later", retry_after=42, field="x", rule="tier_tokens"),
        RateLimited("x: later", retry_after=7.2, field="x", rule="some_limit"),
        Throttled("store: throttled", retry_after=3),
        StoreUnavailable("store: down", retry_after=2),
        StoreBusy("store: BUSY", retry_after=5),
        Unavailable("source: no config yet", retry_after=60, field="source", rule="no_config"),
    ]
    cases: list[tuple[int, bytes, dict[str, str], str, int]] = []
    for exc in errors:
        status, body, headers = error_answer(exc)
        assert status in (429, 503), exc
        cases.append(
            (status, json.dumps(body).encode(), headers, body["rule"], int(headers["Retry-After"]))
        )
    # an ACMI body whose code this CLI does not know, on a 429: later all the same
    unknown = json.dumps({"error": "new_code", "message": "m", "field": "f", "rule": "r"})
    cases.append((429, unknown.encode(), {"Retry-After": "9"}, "r", 9))
    # a gateway's own: API Gateway's throttle, a 503 with no ACMI body
    cases.append((429, b'{"message":"Too Many Requests"}', {"Retry-After": "4"}, "throttled", 4))
    cases.append((503, b"<html>down</html>", {}, "acmi_api", 1))
    monkeypatch.setenv("ACMI_API_KEY", "acmi_" + "k" * 40)
    for status, body, headers, rule, seconds in cases:
        with serving(answering(status, body, headers)) as url:
            code = main(["--api", url, "get", "agent", "scout"])
        err = capsys.readouterr().err
        assert code == EXIT_UNAVAILABLE, (status, body, err)
        retry_line(err, rule, seconds)


# every entity write that overwrites or deletes, with a body it would serve
ENTITY_WRITES: list[tuple[str, str, Any]] = [
    ("PUT", "/v1/entities/{entity}/profile", {"name": "X"}),
    ("PATCH", "/v1/entities/{entity}/profile", {"name": "Y"}),
    ("PUT", "/v1/entities/{entity}/signals", {"status": "ok"}),
    ("PATCH", "/v1/entities/{entity}/signals", {"status": "busy"}),
    ("PUT", "/v1/entities/{entity}/signals/mood", "calm"),
    ("DELETE", "/v1/entities/{entity}/signals/mood", None),
    ("DELETE", "/v1/entities/{entity}/signals", None),
    ("DELETE", "/v1/entities/{entity}/profile", None),
    ("POST", "/v1/entities/{entity}/timeline/delete", {"ts": 1, "id": "e-1"}),
    ("DELETE", "/v1/entities/{entity}", None),
]


def test_http_an_entity_is_overwritten_or_deleted_by_its_own_agent_s_key_only(
    store: RedisStore,
) -> None:
    app = TestClient(create_app(ApiContext(create_acmi(store, Settings(auth_cache_s=0)))))
    rows = {
        row.name
        for row in OPERATIONS
        if row.name.startswith("entities.") and row.access is Access.WRITE and row.path
    }
    assert rows - {"entities.events.append"} <= set(ACTORS)  # each one is in the table

    def call(key_: str, method: str, path: str, body: Any) -> Any:
        return app.request(method, path, headers={"authorization": f"Bearer {key_}"}, json=body)

    for tenant in TENANTS:
        keys = {agent: key(store, tenant, agent) for agent in AGENTS}
        for me, them in (AGENTS, AGENTS[::-1]):
            assert call(keys[them], "PUT", f"/v1/entities/{them}/profile", {"n": 1}).is_success
            before = dbsize(store)
            for method, path, body in ENTITY_WRITES:
                answer = call(keys[me], method, path.format(entity=them), body)
                assert answer.status_code == 403, (method, path, answer.text)
                error = answer.json()
                assert (error["field"], error["rule"]) == ("entity", "tier_identity"), error
                assert "own agent's entity" in error["message"] and me in error["message"]
            assert dbsize(store) == before, (tenant, me)  # nothing stored
            # a message to another agent's timeline is allowed, its source its own
            event = {"source": me, "kind": "note", "correlationId": "c-1", "summary": "hi"}
            answer = call(keys[me], "POST", f"/v1/entities/{them}/events", event)
            assert answer.status_code == 201, answer.text
        for me in AGENTS:  # its own entity, and one that is no agent's
            for entity in (me, f"thread:{me[6:]}"):
                for method, path, body in ENTITY_WRITES:
                    answer = call(keys[me], method, path.format(entity=entity), body)
                    assert answer.status_code < 400 or answer.status_code == 404, answer.text
    unbound = key(store, "acme", None)  # a key bound to no agent writes anyone's
    assert call(unbound, "PUT", "/v1/entities/agent:other/profile", {"n": 2}).is_success


def test_the_reference_tools_overwrite_only_the_key_s_own_agent_s_entity() -> None:
    from acmi_core.auth.tiers import check_identity

    for tool in ("acmi_profile", "acmi_signal"):
        row = f"reference.{tool}"
        with pytest.raises(Forbidden) as refused:
            check_identity("agent:scout", row, {"namespace": "agent", "id": "other"})
        assert (refused.value.field, refused.value.rule) == ("id", "tier_identity")
        assert "own agent's entity" in str(refused.value)
        check_identity("agent:scout", row, {"namespace": "agent", "id": "scout"})
        check_identity("agent:scout", row, {"namespace": "thread", "id": "other"})
