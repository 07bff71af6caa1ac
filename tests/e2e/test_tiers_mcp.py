"""Tier permissions through the mcp function (the official MCP SDK client over the Lambda
handler, a real redis-server) and ``acmi keys create --agent``: a key bound to an agent
is refused by its tools exactly as the HTTP API refuses it (``auth/tiers.py``)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import redis
from mcp import ClientSession

from acmi_core import Acmi, Settings
from acmi_core.auth import apikeys
from acmi_core.cli import main
from acmi_core.store.redis import RedisStore
from acmi_core.testing.redis_server import RedisServer
from functions.mcp import handler as mcp_handler
from functions.runtime import LambdaFunction
from tests.e2e.test_mcp_http import error_text, note, payload, run_session
from tests.kit import TEST_DBS, configured

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")

DB = TEST_DBS["tiers_mcp"]  # this module's own database (tests/kit.py TEST_DBS)
CLI_DB = TEST_DBS["tiers_cli"]


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


def test_a_bound_key_s_tools_are_refused_as_its_tier_says(
    handler: LambdaFunction, store: RedisStore
) -> None:
    acmi = Acmi(store, Settings())
    acmi.agents.invite("scout", "Specialist")
    acmi.for_tenant("acme").agents.invite("scout", "Admin")  # another tenant's, same id
    key, _ = apikeys.mint(
        store, tenant="default", scope="write", name="s", now_ms=0, agent="agent:scout"
    )
    unbound, _ = apikeys.mint(store, tenant="default", scope="write", name="u", now_ms=0)

    async def as_scout(s: ClientSession) -> None:
        ok = await s.call_tool(
            "event", {"entity": "thread:x", "event": note("hi", "c1", "agent:scout")}
        )
        assert payload(ok)["summary"] == "hi"
        beat = await s.call_tool("heartbeat", {"agent": "scout", "status": "ACTIVE"})
        assert not beat.isError, beat.content
        refused = await s.call_tool("event", {"entity": "tracker:y", "event": note("no", "c2")})
        text = error_text(refused)
        assert text.startswith("entity: ") and "(rule: tier_namespace)" in text, text
        refused = await s.call_tool("work_create", {"id": "w-1", "title": "t"})
        assert "(rule: tier_namespace)" in error_text(refused)
        # the reference tools: the same check on their arguments
        ref = await s.call_tool(
            "acmi_event",
            {"namespace": "tracker", "id": "y", "source": "agent:scout", "summary": "no"},
        )
        assert ref.isError and "tier_namespace" in error_text(ref)
        ref = await s.call_tool(
            "acmi_event",
            {"namespace": "thread", "id": "x", "source": "agent:scout", "summary": "ref"},
        )
        assert not ref.isError, ref.content
        # reads are not limited by tier
        assert payload(await s.call_tool("get", {"entity": "tracker:y"}))["timeline"] == []

    async def unbound_writes(s: ClientSession) -> None:
        ok = await s.call_tool("event", {"entity": "tracker:y", "event": note("free", "c3")})
        assert not ok.isError, ok.content

    run_session(handler, key, as_scout)
    assert [e.summary for e in acmi.get("thread:x").timeline] == ["hi", "ref"]
    assert acmi.get("tracker:y").timeline == []
    assert acmi.work.list().to_dict()["items"] == []
    run_session(handler, unbound, unbound_writes)  # an unbound key: as before
    assert [e.summary for e in acmi.get("tracker:y").timeline] == ["free"]


def test_a_utility_key_changes_only_its_own_threads(
    handler: LambdaFunction, store: RedisStore
) -> None:
    """``active`` add/remove is a write (a read row whose params write): scope and tier."""
    acmi = Acmi(store, Settings())
    acmi.agents.invite("helper", "Utility")
    key, _ = apikeys.mint(
        store, tenant="default", scope="write", name="h", now_ms=0, agent="helper"
    )
    reader, _ = apikeys.mint(store, tenant="default", scope="read", name="r", now_ms=0)
    own = {"agent": "helper", "action": "add", "thread": "thread:x"}
    other = {"agent": "scout", "action": "add", "thread": "thread:x"}

    async def as_helper(s: ClientSession) -> None:
        assert not (await s.call_tool("active", own)).isError
        text = error_text(await s.call_tool("active", other))
        assert text.startswith("agent: ") and "(rule: tier_read_only)" in text, text
        listed = await s.call_tool("active", {"agent": "scout"})  # a read: not limited
        assert payload(listed) == {}

    async def as_reader(s: ClientSession) -> None:
        assert "write_scope" in error_text(await s.call_tool("active", other))

    run_session(handler, key, as_helper)
    run_session(handler, reader, as_reader)
    assert list(acmi.agents.active("helper")) == ["thread:x"]
    assert acmi.agents.active("scout") == {}


@pytest.fixture
def cli_store(redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[RedisStore]:
    url = redis_server.url_for(CLI_DB)
    with redis.Redis.from_url(url) as client:
        client.flushdb()
    for name in ("UPSTASH_REDIS_REST_URL", "UPSTASH_REDIS_REST_TOKEN", "ACMI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ACMI_REDIS_URL", url)
    opened = RedisStore.from_url(url)
    yield opened
    opened.close()


def test_keys_create_binds_a_key_and_keys_list_shows_it(
    cli_store: RedisStore, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--json", "keys", "create", "--tenant", "acme", "--scope", "write"]
    assert main([*argv, "--agent", "agent:scout"]) == 0
    created = json.loads(capsys.readouterr().out)
    assert created["agent"] == "agent:scout" and list(created)[-1] == "agent"
    record = apikeys.lookup(cli_store, created["key"])
    assert record is not None and record.agent == "agent:scout"
    assert main(["--json", "keys", "list", "--tenant", "acme"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [row.get("agent") for row in listed] == ["agent:scout"]
    assert main([*argv, "--agent", "user:mikey"]) != 0  # not an agent: refused
    err = capsys.readouterr().err
    assert "agent" in err and "category" in err
    assert len(apikeys.list_keys(cli_store, "acme")) == 1
