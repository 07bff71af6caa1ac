"""Real answers of every memory row, on a real redis-server, held to the result type the
row declares (``tests.results.assert_result``): the core's answer, the HTTP body and,
where the row has a tool, the MCP tool's structured result; the rare branches too (a
search's unread archive and the API's note, an import's over-budget and ignored files, a
handoff taken and none left, an archive with and without a sink, a debug that finds
everything wrong). Where a surface wraps the answer on purpose, its own type is held."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from acmi_core import Acmi, create_acmi
from acmi_core.auth.apikeys import Scope
from acmi_core.base.settings import Settings
from acmi_core.jobs import sink as archive_sink
from acmi_core.jobs.archive import archive_now
from acmi_core.mcp.server import build_server
from acmi_core.memory import read_tree, render_tree
from acmi_core.memory.results import Exported, HandoffTaken, HandoffTakenTool
from acmi_core.memory.tree import parse_texts
from acmi_core.store.redis import RedisStore
from acmi_core.testing.redis_server import RedisServer
from tests.integration.test_hygiene import DictSink
from tests.kit import DB, FakeClock, RouteClient, fresh_tenant
from tests.results import assert_closed, assert_result, portable

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "memory_tree"
NOW = int(dt.datetime(2026, 2, 3, 15, 0, tzinfo=dt.UTC).timestamp()) * 1000
DAY = 24 * 3600 * 1000
ATLAS = "agent:atlas"
BASE = f"/v1/memory/{ATLAS}"


@pytest.fixture
def tenant(redis_server: RedisServer) -> Iterator[Acmi]:
    store = RedisStore.from_url(redis_server.url_for(DB["backends"]))
    yield fresh_tenant(create_acmi(store, Settings()), FakeClock(NOW))
    store.close()


@pytest.fixture
def http(tenant: Acmi) -> RouteClient:
    return RouteClient(tenant, "memory")


def files() -> dict[str, str]:
    return {p: b.decode() for p, b in render_tree(read_tree(FIXTURE)).items()}


def body(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


def tool(acmi: Acmi, name: str, arguments: dict[str, Any]) -> Any:
    """The tool's structured result (the same dict as its JSON text)."""
    result = asyncio.run(build_server(acmi, Scope.ADMIN).call_tool(name, arguments))
    assert not result.isError, result.content
    assert result.structuredContent is not None
    return result.structuredContent


def held(kind: Any, value: Any, where: str) -> None:
    """``value`` is of ``kind`` (a surface's own body type): validated, nothing undeclared."""
    TypeAdapter(portable(kind)).validate_python(value)
    assert_closed(kind, value, where)


def test_the_tree_rows_import_export_and_status(tenant: Acmi, http: RouteClient) -> None:
    tree = {**files(), "notes/scratch.txt": "not a memory file"}
    answer = tenant.memory.import_snapshot(ATLAS, read_tree(FIXTURE))
    assert answer["over_budget"] and answer["events_added"] == 376  # a day note over budget
    assert_result("memory.import", answer)
    again = body(http.call("POST", f"{BASE}/import", {"files": tree}))
    assert again["writes"] == 0 and again["ignored"] == ["notes/scratch.txt"]
    assert_result("memory.import", again)
    assert_result("memory.import", tool(tenant, "memory_import", {"entity": ATLAS, "files": tree}))

    exported = body(http.call("GET", f"{BASE}/export", scope="read"))
    held(Exported, exported, "memory.export (HTTP)")
    held(Exported, tool(tenant, "memory_export", {"entity": ATLAS}), "memory_export")

    status = tenant.memory.status(ATLAS)
    assert status["heartbeat_state"] and status["files"]  # the tree's heartbeat-state
    assert_result("memory.status", status)
    assert_result("memory.status", body(http.call("GET", f"{BASE}/status", scope="read")))
    assert_result("memory.status", tool(tenant, "memory_status", {"entity": ATLAS}))
    empty = tenant.memory.status("agent:nobody")
    assert empty["heartbeat_state"] == {} and empty["layers"]["cold"]["budget"] is None
    assert_result("memory.status", empty)


def test_the_search_with_its_archive_branches(tenant: Acmi, http: RouteClient) -> None:
    tenant.memory.import_snapshot(ATLAS, read_tree(FIXTURE))
    tenant.memory.remember(ATLAS, "Ask IT a week early")
    plain = tenant.memory.search(ATLAS, "ask early")
    assert plain["hits"] and "archived_unread" not in plain
    assert_result("memory.search", plain)

    # a quarter whose document names a raw object the sink cannot read: archived_unread
    old = NOW - 200 * DAY
    for n in range(3):
        tenant.timeline.append(
            ATLAS,
            {
                "source": ATLAS,
                "kind": "note",
                "correlationId": f"c-{n}",
                "summary": "ask",
                "ts": old,
            },
        )
    sink = DictSink()
    dest = archive_sink.Destination(sink, "archive", "mem://bucket/archive")
    archived = archive_now(tenant, ATLAS, dest=dest)
    assert archived["objects"] and archived["trimmed"] == 3
    assert_result("memory.archive", archived)
    unread = tenant.memory.search(ATLAS, "ask", archived=lambda entity, quarter: None)
    assert unread["archived_unread"]
    assert_result("memory.search", unread)

    searched = body(http.call("GET", f"{BASE}/search?q=ask+early", scope="read"))
    assert "notes" not in searched
    assert_result("memory.search", searched)
    assert_result("memory.search", tool(tenant, "memory_search", {"entity": ATLAS, "query": "ask"}))

    # a deployment whose archive URL has no sink here: the API notes why none was read
    noted = RouteClient(
        Acmi(
            tenant.store,
            Settings(archive_url="gs://bucket/a"),
            tenant=tenant.tenant,
            clock=tenant.clock,
        ),
        "memory",
    )
    with_note = body(noted.call("GET", f"{BASE}/search?q=ask", scope="read"))
    assert with_note["notes"]
    assert_result("memory.search", with_note)


def test_the_archive_without_a_sink(tenant: Acmi, http: RouteClient) -> None:
    nothing = body(http.call("POST", f"{BASE}/archive"))
    assert nothing["read"] == 0 and "notes" not in nothing
    assert_result("memory.archive", nothing)
    tenant.timeline.append(
        ATLAS,
        {
            "source": ATLAS,
            "kind": "note",
            "correlationId": "c",
            "summary": "old",
            "ts": NOW - 90 * DAY,
        },
    )
    noted = archive_now(tenant, ATLAS, no_sink="gs: no archive sink in this process")
    assert noted["notes"] and noted["documents"] and noted["archive"] is None
    assert_result("memory.archive", noted)


def test_the_writes_of_every_layer(tenant: Acmi, http: RouteClient) -> None:
    tenant.memory.import_snapshot(ATLAS, read_tree(FIXTURE))
    made = body(http.call("POST", f"{BASE}/topics", {"slug": "vendor-x", "name": "Vendor X"}), 201)
    assert made["created"] is True
    assert_result("memory.topics.create", made)
    assert_result(
        "memory.topics.create",
        tool(tenant, "memory_topic_create", {"entity": ATLAS, "slug": "vendor-y", "name": "Y"}),
    )
    # an existing topic not yet linked from this owner is linked, not created
    linked = tenant.memory.topic_create("agent:other", "vendor-x", "Vendor X")
    assert linked["created"] is False
    assert_result("memory.topics.create", linked)

    for layer, extra in (
        ("warm", {}),
        ("hot", {}),
        ("daily", {"section": "takeaways"}),
        ("daily", {}),
        ("topic", {"topic": "vendor-x"}),
    ):
        answer = tenant.memory.remember(ATLAS, f"a {layer} line", layer=layer, **extra)
        assert answer["layer"] == layer
        assert_result("memory.remember", answer)
    remembered = http.call("POST", f"{BASE}/remember", {"text": "via http", "layer": "hot"})
    assert_result("memory.remember", body(remembered, 201))
    assert_result(
        "memory.remember", tool(tenant, "memory_remember", {"entity": ATLAS, "text": "via mcp"})
    )

    active = tenant.memory.active(ATLAS)
    assert active["text"] is not None
    assert_result("memory.active.get", active)
    assert_result("memory.active.get", body(http.call("GET", f"{BASE}/active", scope="read")))
    assert_result("memory.active.get", tool(tenant, "memory_active", {"entity": ATLAS}))
    none = tenant.memory.active("agent:blank")
    assert none["text"] is None and none["budget"] is None
    assert_result("memory.active.get", none)

    text = files()["ACTIVE-CONTEXT.md"]
    assert_result("memory.active.put", tenant.memory.set_active(ATLAS, text))
    assert_result("memory.active.put", body(http.call("PUT", f"{BASE}/active", {"text": text})))


def test_the_upkeep_and_the_handoff(tenant: Acmi, http: RouteClient) -> None:
    tenant.memory.import_snapshot(ATLAS, read_tree(FIXTURE))
    pruned = tenant.memory.prune(ATLAS, 7)
    assert pruned["moved"] and pruned["written"]
    assert_result("memory.prune", pruned)
    assert_result("memory.prune", body(http.call("POST", f"{BASE}/prune", {"days": 7})))
    assert_result("memory.prune", tool(tenant, "memory_prune", {"entity": ATLAS}))

    reviewed = tenant.memory.review(ATLAS)
    assert reviewed["promoted"] and reviewed["written"]
    assert_result("memory.review", reviewed)
    assert_result("memory.review", body(http.call("POST", f"{BASE}/review")))
    assert_result("memory.review", tool(tenant, "memory_review", {"entity": ATLAS}))

    day = tenant.memory.daily_summary(ATLAS, "2026-02-03")
    assert day["entries"] and day["tomorrow"]
    assert_result("memory.daily_summary", day)
    summary = http.call("GET", f"{BASE}/daily-summary?date=2026-02-02", scope="read")
    assert_result("memory.daily_summary", body(summary))
    assert_result("memory.daily_summary", tool(tenant, "memory_daily_summary", {"entity": ATLAS}))

    assert_result("memory.handoff", tenant.memory.handoff(ATLAS, "next: ship"))
    taken = tenant.memory.take_handoff(ATLAS)
    assert taken is not None and taken["text"] == "next: ship"
    assert_result("memory.handoff.take", taken)
    assert tenant.memory.take_handoff(ATLAS) is None  # the declared type's None

    assert_result("memory.handoff", body(http.call("PUT", f"{BASE}/handoff", {"text": "again"})))
    wrapped = body(http.call("POST", f"{BASE}/handoff/take"))
    assert wrapped["handoff"]["text"] == "again"
    held(HandoffTaken, wrapped, "memory.handoff.take (HTTP)")
    held(HandoffTaken, body(http.call("POST", f"{BASE}/handoff/take")), "take, none left")

    written = tool(tenant, "memory_handoff", {"entity": ATLAS, "text": "by tool"})
    assert_result("memory.handoff", written)
    took = tool(tenant, "memory_handoff", {"entity": ATLAS})
    assert took["handoff"]["text"] == "by tool"
    held(HandoffTakenTool, took, "memory_handoff (take)")


def test_debug_finds_each_kind_of_problem(tenant: Acmi, http: RouteClient) -> None:
    fine = tenant.memory.debug("agent:blank")
    assert fine["missing"] and not fine["ok"]
    assert_result("memory.debug", fine)

    tree = files()
    # MEMORY.md calls a project closed that ACTIVE-CONTEXT.md still has an open task for
    closed = tree["MEMORY.md"].replace(
        "### Analyst hire\n- Status:", "### Analyst hire\n- Status: closed;"
    )
    tenant.memory.import_snapshot(ATLAS, parse_texts(tree | {"MEMORY.md": closed}))
    found = tenant.memory.debug(ATLAS)
    assert found["conflicts"] and found["stale"] and found["over_budget"]
    assert_result("memory.debug", found)
    assert_result("memory.debug", body(http.call("GET", f"{BASE}/debug", scope="read")))
    assert_result("memory.debug", tool(tenant, "memory_debug", {"entity": ATLAS}))
