"""``memory_get`` (issue 24 item 2): one memory file's lines by path and range, numbered
as ``memory_search`` numbers its hits, on every backend (core, its round trips) and every
surface (HTTP, the MCP tool through the SDK's client, the CLI on the store and with
``--api`` on a live server), each with two tenants: one tenant's lines are never the
other's, and a path only the other tenant has is a 404."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.memory import create_connected_server_and_client_session

from acmi_core import Acmi, EntityId, create_acmi
from acmi_core.api.app import create_app
from acmi_core.api.context import ApiContext
from acmi_core.auth import apikeys
from acmi_core.auth.apikeys import Scope
from acmi_core.base.errors import AcmiValidationError, NotFound
from acmi_core.base.settings import Settings
from acmi_core.cli import main
from acmi_core.cli.state import CliState
from acmi_core.mcp.server import build_server
from acmi_core.memory import render_tree
from acmi_core.memory.reads import MAX_GET_LINES
from acmi_core.store.counting import CountingStore
from acmi_core.store.redis import RedisStore
from acmi_core.testing.redis_server import RedisServer
from tests.kit import DB, FakeClock, RouteClient, serving
from tests.results import assert_result

NOW = int(dt.datetime(2026, 3, 4, 12, 0, tzinfo=dt.UTC).timestamp()) * 1000
AGENT = "agent:atlas"
TODAY = "memory/2026-03-04.md"


def two_tenants(acmi: Acmi) -> tuple[Acmi, Acmi]:
    """Two fresh tenants on ``acmi``'s store, each with its own memory: A a warm line, a
    topic and a daily line; B a warm line only."""
    run = uuid.uuid4().hex[:10]
    a = Acmi(acmi.store, acmi.settings, tenant=f"ta-{run}", clock=FakeClock(NOW))
    b = Acmi(acmi.store, acmi.settings, tenant=f"tb-{run}", clock=FakeClock(NOW))
    a.memory.remember(AGENT, "Priya owns the billing migration", section="people")
    a.memory.topic_create(AGENT, "billing", "Billing")
    a.memory.remember(AGENT, "cut over on the 9th", layer="topic", topic="billing")
    a.memory.remember(AGENT, "paired with Priya on the cutover", layer="daily")
    b.memory.remember(AGENT, "Omar owns the data platform", section="people")
    return a, b


def test_get_reads_what_search_found_per_tenant(acmi: Acmi) -> None:
    a, b = two_tenants(acmi)
    for tenant, text in ((a, "Priya owns the billing migration"), (b, "Omar owns the data")):
        hits = tenant.memory.search(AGENT, "owns")["hits"]
        (hit,) = [h for h in hits if h["path"] == "MEMORY.md"]
        got = tenant.memory.get(AGENT, "MEMORY.md", hit["line"], hit["line"])
        assert got["lines"] == [{"line": hit["line"], "text": hit["text"]}]
        assert text in got["text"] and got["layer"] == "warm" and got["more"]
        assert_result("memory.get", got)
    whole = a.memory.get(AGENT, "MEMORY.md")
    assert whole["from_line"] == 1 and whole["to_line"] == whole["total_lines"]
    assert not whole["more"] and "Omar" not in whole["text"]
    assert [x["line"] for x in whole["lines"]] == list(range(1, whole["total_lines"] + 1))

    for path, line in ((TODAY, "paired with Priya"), ("memory/topics/billing.md", "cut over")):
        (hit,) = [h for h in a.memory.search(AGENT, line)["hits"] if h["path"] == path]
        got = a.memory.get(AGENT, path, hit["line"], hit["line"])
        assert got["lines"][0]["text"] == hit["text"]
        # B has neither file: its own tenant, not A's
        with pytest.raises(NotFound) as missing:
            b.memory.get(AGENT, path)
        assert missing.value.field == "path"

    past = a.memory.get(AGENT, "MEMORY.md", 900, 910)
    assert past["lines"] == [] and past["to_line"] == 899 and not past["more"]


def test_get_refuses_bad_ranges_and_paths_naming_the_field(acmi: Acmi) -> None:
    a, _ = two_tenants(acmi)
    cases: list[tuple[dict[str, Any], str, str]] = [
        ({"from_line": 0}, "from_line", "range"),
        ({"from_line": True}, "from_line", "range"),
        ({"to_line": 0}, "to_line", "range"),
        ({"from_line": 5, "to_line": 4}, "to_line", "range"),
        ({"from_line": 1, "to_line": MAX_GET_LINES + 1}, "to_line", "max_range"),
    ]
    for kwargs, field, rule in cases:
        with pytest.raises(AcmiValidationError) as refused:
            a.memory.get(AGENT, "MEMORY.md", **kwargs)
        assert (refused.value.field, refused.value.rule) == (field, rule), kwargs
    for path in ("notes.txt", "../MEMORY.md", "memory/2026-02-30.md", "memory/topics/a b.md", 7):
        with pytest.raises(AcmiValidationError) as refused:
            a.memory.get(AGENT, path)
        assert refused.value.field == "path", path
    # the widest range allowed is answered
    assert a.memory.get(AGENT, "MEMORY.md", 1, MAX_GET_LINES)["from_line"] == 1


def test_get_round_trips(acmi: Acmi) -> None:
    a, _ = two_tenants(acmi)
    store = CountingStore(acmi.store)
    view = Acmi(store, acmi.settings, tenant=a.tenant, clock=FakeClock(NOW))
    for path, trips in (
        ("MEMORY.md", 1),
        ("ACTIVE-CONTEXT.md", 1),
        (TODAY, 1),
        ("memory/topics/billing.md", 2),  # the memory slots, then the topic's profile
    ):
        store.reset()
        try:
            view.memory.get(AGENT, path)
        except NotFound:
            assert path == "ACTIVE-CONTEXT.md"  # none written: still one round trip
        assert store.requests == trips, path


@pytest.fixture
def stored(redis_server: RedisServer) -> Iterator[Acmi]:
    store = RedisStore.from_url(redis_server.url_for(DB["backends"]))
    yield create_acmi(store, Settings())
    store.close()


def test_get_over_http_and_mcp_per_tenant(stored: Acmi) -> None:
    a, b = two_tenants(stored)
    for tenant in (a, b):
        http = RouteClient(tenant, "memory")
        url = f"/v1/memory/{AGENT}/lines?path=MEMORY.md&from_line=1&to_line=40"
        answer = http.call("GET", url, scope="read")
        assert answer.status_code == 200, answer.text
        assert answer.json() == tenant.memory.get(AGENT, "MEMORY.md", 1, 40)
        too_wide = http.call("GET", url.replace("to_line=40", "to_line=600"), scope="read")
        assert too_wide.status_code == 400 and too_wide.json()["field"] == "to_line"
        bad_path = http.call("GET", f"/v1/memory/{AGENT}/lines?path=x.md", scope="read")
        assert bad_path.status_code == 400 and bad_path.json()["field"] == "path"
    topic = f"/v1/memory/{AGENT}/lines?path=memory/topics/billing.md"
    assert RouteClient(a, "memory").call("GET", topic, scope="read").status_code == 200
    assert RouteClient(b, "memory").call("GET", topic, scope="read").status_code == 404

    async def through_the_sdk(tenant: Acmi, args: dict[str, Any]) -> Any:
        async with create_connected_server_and_client_session(
            build_server(tenant, Scope.READ)
        ) as client:
            return await client.call_tool("memory_get", args)

    for tenant in (a, b):
        args = {"entity": AGENT, "path": "MEMORY.md", "from_line": 2, "to_line": 6}
        result = asyncio.run(through_the_sdk(tenant, args))
        assert not result.isError, result.content
        assert result.structuredContent == tenant.memory.get(AGENT, "MEMORY.md", 2, 6)
    refused = asyncio.run(
        through_the_sdk(a, {"entity": AGENT, "path": "MEMORY.md", "from_line": 0})
    )
    assert refused.isError and "from_line" in refused.content[0].text  # type: ignore[union-attr]
    missing = asyncio.run(through_the_sdk(b, {"entity": AGENT, "path": TODAY}))
    assert missing.isError and "no memory/2026-03-04.md" in missing.content[0].text  # type: ignore[union-attr]


def test_get_through_the_cli_on_the_store_and_the_api(
    stored: Acmi,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    for name in ("ACMI_API_URL", "ACMI_PROFILE", "ACMI_REDIS_URL", "ACMI_DEFAULT_TENANT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ACMI_CONFIG", str(tmp_path / "absent.toml"))
    a, b = two_tenants(stored)
    argv = ["memory", "get", AGENT, "MEMORY.md", "--from", "1", "--to", "5"]
    printed: dict[str, Any] = {}
    for tenant in (a, b):
        code = main(argv, state=CliState(preset=tenant))
        out, err = capsys.readouterr()
        assert code == 0, err
        printed[tenant.tenant] = json.loads(out)
        assert printed[tenant.tenant] == tenant.memory.get(AGENT, "MEMORY.md", 1, 5)
    assert printed[a.tenant] != printed[b.tenant]
    code = main([*argv[:4], "--from", "3", "--to", "2"], state=CliState(preset=a))
    _, err = capsys.readouterr()
    assert code == 2 and "to_line" in err

    with serving(create_app(ApiContext(a, offload=True))) as url:
        for tenant in (a, b):
            key, _ = apikeys.mint(
                stored.store, tenant=tenant.tenant, scope="read", name="cli", now_ms=NOW
            )
            monkeypatch.setenv("ACMI_API_KEY", key)
            code = main(["--api", url, *argv])
            out, err = capsys.readouterr()
            assert code == 0, err
            assert json.loads(out) == printed[tenant.tenant]
        code = main(["--api", url, "memory", "get", AGENT, TODAY])  # B has no daily note
        _, err = capsys.readouterr()
        assert code == 3 and "path" in err


# Every (layer, section) remember takes, with the line it is given twice.
REMEMBERED: list[tuple[str, str | None]] = [
    *(("warm", s) for s in ("about_human", "about_agent", "projects", "people", "lessons")),
    *(("warm", s) for s in ("preferences", "dates")),
    *(("hot", s) for s in ("current_priority", "in_progress", "waiting_on", "decisions_today")),
    ("hot", "next_session"),
    *(("daily", s) for s in (None, "morning", "afternoon", "takeaways", "tomorrow")),
    *(("topic", s) for s in ("summary", "key_facts", "decision_log", "open_questions")),
    ("topic", "related"),
]


def _keys(acmi: Acmi) -> dict[str, Any]:
    """The agent's memory tree and its timeline's size: what a stored line changes."""
    size = acmi.store.execute(("ZCARD", acmi.context.keys.timeline(EntityId.parse(AGENT))))
    return {"tree": render_tree(acmi.memory.export_snapshot(AGENT)), "timeline": size}


def test_remember_does_not_store_a_line_the_layer_holds(acmi: Acmi) -> None:
    a, b = two_tenants(acmi)
    for layer, section in REMEMBERED:
        line = f"keep {layer} {section} in mind"
        topic = "billing" if layer == "topic" else None
        first = a.memory.remember(AGENT, line, layer=layer, section=section, topic=topic)
        assert first["already_held"] is False and first["stored"] is True
        before = _keys(a)
        again = a.memory.remember(AGENT, f"  {line} ", layer=layer, section=section, topic=topic)
        assert again["already_held"] is True, (layer, section)
        assert again["stored"] is True and again["path"] == first["path"]
        assert_result("memory.remember", again)
        assert _keys(a) == before, (layer, section)  # nothing written
    # held in the layer, whichever section it was given for
    assert a.memory.remember(AGENT, "Priya owns the billing migration")["already_held"]
    # the other tenant holds none of A's lines: stored there
    b.memory.topic_create(AGENT, "billing", "Billing")
    for layer, section in (("warm", "people"), ("daily", None), ("topic", "key_facts")):
        topic = "billing" if layer == "topic" else None
        line = f"keep {layer} {section} in mind"
        held = b.memory.remember(AGENT, line, layer=layer, section=section, topic=topic)
        assert held["already_held"] is False
        assert line in b.memory.get(AGENT, held["path"] or "MEMORY.md")["text"]
    # a line that only contains a held one is new
    assert not a.memory.remember(AGENT, "Priya owns the billing migration now")["already_held"]


def test_a_held_line_is_said_so_on_every_surface(
    stored: Acmi, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = two_tenants(stored)
    line = "Priya owns the billing migration"  # A's, not B's
    for tenant, held in ((a, True), (b, False)):
        http = RouteClient(tenant, "memory")
        answer = http.call("POST", f"/v1/memory/{AGENT}/remember", {"text": line})
        assert answer.status_code == 201 and answer.json()["already_held"] is held
    # B holds it now: the second time, on each surface, it is held
    again = RouteClient(b, "memory").call("POST", f"/v1/memory/{AGENT}/remember", {"text": line})
    assert again.json()["already_held"] is True

    async def remember(tenant: Acmi, text: str) -> Any:
        async with create_connected_server_and_client_session(
            build_server(tenant, Scope.WRITE)
        ) as client:
            return await client.call_tool("memory_remember", {"entity": AGENT, "text": text})

    for tenant in (a, b):
        assert asyncio.run(remember(tenant, line)).structuredContent["already_held"] is True
    assert asyncio.run(remember(a, "only A's")).structuredContent["already_held"] is False
    monkeypatch.delenv("ACMI_API_URL", raising=False)
    for tenant, held in ((a, True), (b, False), (b, True)):
        code = main(["memory", "remember", AGENT, "only A's"], state=CliState(preset=tenant))
        out, err = capsys.readouterr()
        assert code == 0, err
        assert json.loads(out)["already_held"] is held
    assert b.memory.get(AGENT, "MEMORY.md")["text"].count("only A's") == 1
