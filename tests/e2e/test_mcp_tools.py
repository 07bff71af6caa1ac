"""``acmi mcp``'s tools beyond the reference's 17 (reads, leases, HITL, workflows, memory)
and the bootstrap prompt and resource, through the SDK's own client over stdio on a real
redis; what each stored is read back through the ``acmi_core`` client. One server process
for the module (``McpClient``, from test_mcp_stdio)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp.shared.exceptions import McpError
from mcp.types import TextContent, TextResourceContents

from acmi_core import Acmi, EntityId

# the same fixtures as test_mcp_stdio (module-scoped: one server process for this module)
from tests.e2e.test_mcp_stdio import McpClient, acmi, event, mcp, redis_url

__all__ = ["acmi", "mcp", "redis_url"]  # fixtures, used by name


def test_profile_get_merge_and_signal_get_set(mcp: McpClient, acmi: Acmi) -> None:
    assert mcp.ok("profile_get", {"entity": "user:pg"}) == {"entity": "user:pg", "profile": None}
    merged = mcp.ok("profile_merge", {"entity": "user:pg", "partial": {"name": "Pia"}})
    assert merged["profile"]["name"] == "Pia"
    acmi.profile.merge("user:pg", {"city": "Oslo"})
    got = mcp.ok("profile_get", {"entity": "user:pg"})["profile"]
    assert (got["name"], got["city"]) == ("Pia", "Oslo")

    assert mcp.ok("signal_get", {"entity": "user:pg", "key": "mood"})["value"] is None
    assert (
        mcp.ok("signal_set", {"entity": "user:pg", "key": "mood", "value": "ok"})["value"] == "ok"
    )
    mcp.ok("signal_set", {"entity": "user:pg", "key": "load", "value": 3})
    assert acmi.signals.all("user:pg") == {"mood": "ok", "load": 3}
    assert mcp.ok("signal_get", {"entity": "user:pg"})["signals"] == {"mood": "ok", "load": 3}
    assert mcp.ok("signal_get", {"entity": "user:pg", "key": "load"})["value"] == 3


def test_heartbeat_marks_the_agent_alive(mcp: McpClient, acmi: Acmi) -> None:
    beat = mcp.ok("heartbeat", {"agent": "hb", "status": "BUSY", "note": "compiling"})
    assert (beat["agent"], beat["status"], beat["note"]) == ("agent:hb", "BUSY", "compiling")
    signals = acmi.signals.all("agent:hb")
    assert signals["status"] == "BUSY" and signals["last_heartbeat_ts"] == beat["ts"]


def test_work_sessions_pages_an_items_sessions(mcp: McpClient, acmi: Acmi) -> None:
    acmi.work.create("wss", {"title": "Sessions"})
    for n in range(3):
        mcp.ok("work_event", {"id": "wss", "event": event(f"e{n}"), "session_id": f"s-{n}"})
    seen: list[str] = []
    cursor = None
    while True:
        page = mcp.ok("work_sessions", {"id": "wss", "limit": 2, "cursor": cursor})
        seen += page["sessions"]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert sorted(set(seen)) == ["s-0", "s-1", "s-2"] == acmi.work.sessions("wss")


def test_lock_claim_get_renew_release(mcp: McpClient, acmi: Acmi) -> None:
    claim = {"resource": "deploy", "owner": "agent:a", "ttl_ms": 60_000}
    lease = mcp.ok("lock_claim", claim)
    token = lease["owner_token"]
    state = mcp.ok("lock_get", {"resource": "deploy"})
    assert state["held"] is True and state["owner"] == "agent:a" and "owner_token" not in state
    assert acmi.locks.get("deploy").owner == "agent:a"
    held = mcp.error("lock_claim", {**claim, "owner": "agent:b"})
    assert "rule: held" in held
    renewed = mcp.ok("lock_renew", {"resource": "deploy", "owner_token": token, "ttl_ms": 120_000})
    assert renewed["expires_at"] > lease["expires_at"]
    assert "rule:" in mcp.error("lock_release", {"resource": "deploy", "owner_token": "wrong"})
    mcp.ok("lock_release", {"resource": "deploy", "owner_token": token})
    assert mcp.ok("lock_get", {"resource": "deploy"})["held"] is False
    assert acmi.locks.get("deploy").held is False


def test_hitl_create_list_pages_and_resolve(mcp: McpClient, acmi: Acmi) -> None:
    cids = []
    for n in range(3):
        ask = {"topic": f"q{n}", "request": "ship?", "asked_by": "agent:a", "addressee": "user:h"}
        created = mcp.ok("hitl_create", ask)
        assert created["created"] is True
        cids.append(created["item"]["correlationId"])
    first = mcp.ok("hitl_list", {"addressee": "user:h", "limit": 2})
    assert len(first["items"]) == 2 and first["next_cursor"]
    rest = mcp.ok("hitl_list", {"addressee": "user:h", "limit": 2, "cursor": first["next_cursor"]})
    assert rest["next_cursor"] is None
    listed = [i["correlationId"] for i in first["items"] + rest["items"]]
    assert sorted(listed) == sorted(cids)

    mcp.ok("hitl_resolve", {"correlation_id": cids[0], "resolution": "yes", "by": "user:h"})
    closed = acmi.hitl.list("user:h", "closed")
    assert [i["correlationId"] for i in closed.items] == [cids[0]]
    still = mcp.ok("hitl_list", {"addressee": "user:h"})["items"]
    assert cids[0] not in [i["correlationId"] for i in still]
    assert "rule: enum" in mcp.error("hitl_list", {"state": "pending"})


def test_assess_and_improve_feed_the_workflow(mcp: McpClient, acmi: Acmi) -> None:
    args = {"workflow": "release", "step": "build", "agent": "agent:a"}
    scored = mcp.ok("assess", {**args, "score": 80, "criteria": {"fast": "yes"}})
    assert scored["payload"]["score"] == 80
    assert acmi.workflows.assessments("release").to_dict()["steps"]["build"]["last"] == 80
    mcp.ok("improve", {**args, "lesson": "cache the wheels"})
    (lesson,) = acmi.workflows.lessons("release")
    assert "cache the wheels" in str(lesson)
    assert "rule:" in mcp.error("assess", {**args, "score": 101, "criteria": ["fast"]})


def test_memory_remember_search_status_active_and_handoff(mcp: McpClient, acmi: Acmi) -> None:
    entity = "agent:mem"
    mcp.ok("memory_remember", {"entity": entity, "text": "prefer small diffs"})
    mcp.ok("memory_remember", {"entity": entity, "text": "review the parser", "layer": "hot"})
    found = mcp.ok("memory_search", {"entity": entity, "query": "small diffs"})
    assert any("prefer small diffs" in str(hit) for hit in found["hits"])
    active = mcp.ok("memory_active", {"entity": entity})
    assert active["path"] == "ACTIVE-CONTEXT.md" and "review the parser" in active["text"]
    assert active == acmi.memory.active(entity)

    assert mcp.ok("memory_status", {"entity": entity})["handoff_pending"] is False
    left = mcp.ok("memory_handoff", {"entity": entity, "text": "next: tag the release"})
    assert left["text"] == "next: tag the release"
    assert mcp.ok("memory_status", {"entity": entity})["handoff_pending"] is True
    taken = mcp.ok("memory_handoff", {"entity": entity})
    assert taken["handoff"]["text"] == "next: tag the release"
    assert mcp.ok("memory_handoff", {"entity": entity}) == {"entity": entity, "handoff": None}
    assert acmi.memory.take_handoff(entity) is None  # taken once, by the first call
    # the seed's template, filled from its parts
    parts = {"entity": entity, "done": ["tagged it"], "gotchas": ["CI is slow"]}
    templated = mcp.ok("memory_handoff", parts)
    assert "## What Was Done\n- tagged it" in templated["text"]
    assert "## Gotchas\n- CI is slow" in templated["text"]
    assert templated["text"] == acmi.memory.take_handoff(entity)["text"]  # type: ignore[index]
    assert "rule: memory_layer" in mcp.error(
        "memory_remember", {"entity": entity, "text": "x", "layer": "lukewarm"}
    )


def test_bootstrap_prompt_and_resource(mcp: McpClient, acmi: Acmi) -> None:
    acmi.profile.merge("agent:pr", {"name": "Prompted"})
    acmi.timeline.append("agent:pr", event("compiled the docs"))
    tool_text = mcp.text("bootstrap", {"agent": "pr"})

    prompt = mcp.run(lambda s: s.get_prompt("bootstrap", {"agent": "pr"}))
    block = prompt.messages[0].content
    assert isinstance(block, TextContent) and block.text.startswith("#")
    assert "compiled the docs" in block.text and "Prompted" in block.text

    resource = mcp.run(lambda s: s.read_resource("acmi://agents/pr/bootstrap"))  # type: ignore[arg-type]
    (content,) = resource.contents
    assert isinstance(content, TextResourceContents)
    assert content.mimeType == "text/markdown" and "compiled the docs" in content.text
    # the same bundle as the tool's, but for the generation time line
    assert content.text.splitlines()[2:] == tool_text.splitlines()[2:]

    with pytest.raises(McpError, match=r"entity|agent"):
        mcp.run(lambda s: s.get_prompt("bootstrap", {"agent": "bad agent!"}))


def test_a_budget_too_small_for_anything_is_a_tool_error_naming_the_floor(
    mcp: McpClient, acmi: Acmi
) -> None:
    refused = mcp.error(
        "bootstrap",
        {"agent": "tiny", "max_tokens": 5, "spawn": {"session_id": "s", "model_id": "m"}},
    )
    assert refused.startswith("max_tokens:") and "rule: min_budget" in refused
    floor = int(refused.split("min_budget is ")[1].split()[0])
    assert acmi.agents.spawns("agent:tiny") == []  # refused before anything was written
    assert mcp.text("bootstrap", {"agent": "tiny", "max_tokens": floor}).startswith("#")


def test_stored_values_another_tool_wrote_come_back_exactly(mcp: McpClient, acmi: Acmi) -> None:
    """What the HTTP API serves with 200, the tools serve too: nested past pydantic's depth
    (255), a number beyond the double range, a lone surrogate. The text is the stored JSON;
    structured content is given only where pydantic carries the same value."""
    deep = "[" * 300 + "]" * 300
    raw = {
        "user:deep": '{"d": ' + deep + "}",
        "user:odd": '{"n": 1e400, "s": "\\ud800", "i": 123456789012345678901234567890}',
    }
    for entity, text in raw.items():
        acmi.store.execute(("SET", acmi.keys.profile(EntityId.parse(entity)), text))

    result = mcp.call("profile_get", {"entity": "user:deep"})
    assert not result.isError and result.structuredContent is None
    assert isinstance(result.content[0], TextContent)
    got = json.loads(result.content[0].text)["profile"]["d"]
    for _ in range(299):
        got = got[0]
    assert got == []

    result = mcp.call("profile_get", {"entity": "user:odd"})
    assert not result.isError and result.structuredContent is None
    block = result.content[0]
    assert isinstance(block, TextContent)
    assert '"n": 1e400' in block.text and '"s": "\\ud800"' in block.text
    assert '"i": 123456789012345678901234567890' in block.text
    whole = mcp.call("get", {"entity": "user:odd"})
    assert not whole.isError and '"n": 1e400' in str(whole.content[0])

    mcp.ok("profile_merge", {"entity": "user:plain", "partial": {"x": 1.5, "t": "é"}})
    plain = mcp.call("profile_get", {"entity": "user:plain"})  # a value pydantic can carry
    assert plain.structuredContent is not None
    assert plain.structuredContent["profile"]["t"] == "é"
    assert isinstance(plain.content[0], TextContent)
    assert plain.structuredContent == json.loads(plain.content[0].text)


FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "memory_tree"


def test_every_memory_command_is_a_tool(mcp: McpClient, acmi: Acmi) -> None:
    """The seed's tree in through memory_import and back through memory_export byte for
    byte, then the review, prune, daily summary, topic, debug and a hot-layer replace, each
    answering what the client's own call answers."""
    entity = "agent:tree"
    files = {
        p.relative_to(FIXTURE).as_posix(): p.read_text()
        for p in sorted(FIXTURE.rglob("*"))
        if p.is_file()
    }
    imported = mcp.ok("memory_import", {"entity": entity, "files": files})
    assert imported["events_added"] == 376
    assert mcp.ok("memory_import", {"entity": entity, "files": files})["writes"] == 0
    exported = mcp.ok("memory_export", {"entity": entity})["files"]
    assert exported == files

    reviewed = mcp.ok("memory_review", {"entity": entity})
    assert reviewed["entity"] == entity
    assert mcp.ok("memory_prune", {"entity": entity, "days": 7})["entity"] == entity
    day = mcp.ok("memory_daily_summary", {"entity": entity, "date": "2026-01-05"})
    assert day == acmi.memory.daily_summary(entity, "2026-01-05")
    topic = mcp.ok("memory_topic_create", {"entity": entity, "slug": "pricing", "name": "Pricing"})
    assert topic == {**topic, "entity": entity}
    assert "topic:pricing" in acmi.memory.load(entity, events=False).memory["warm.topics"]
    assert mcp.ok("memory_debug", {"entity": entity}) == acmi.memory.debug(entity)
    hot = "# ACTIVE-CONTEXT.md\n\n## Current Focus\n- ship the parser\n"
    assert mcp.ok("memory_active", {"entity": entity, "text": hot})["text"] == hot
    assert acmi.memory.active(entity)["text"] == hot

    refused = mcp.error("memory_import", {"entity": entity, "files": {"MEMORY.md": 3}})
    assert "files.MEMORY.md" in refused and "rule: type" in refused
    refused = mcp.error("memory_daily_summary", {"entity": entity, "date": "2026-02-30"})
    assert refused.startswith("date:") and "rule: date" in refused


def test_every_id_list_answers_get_reads_with_reference_shaped_records(
    mcp: McpClient, acmi: Acmi
) -> None:
    """The reference SDK's ids outside our rule (``deal:ann@example.com``) and its MCP
    server's records without a summary (a message, a spawn record) read back, flagged."""
    entity = EntityId("deal", "ann@example.com")  # as stored: parse refuses it for a write
    acmi.store.execute(("SADD", acmi.keys.index("deal"), entity.local_id))
    acmi.store.execute(("SET", acmi.keys.profile(entity), '{"name":"Ann"}'))
    records = [
        {"ts": 1_790_000_000_001, "source": "acmi-mcp", "message": "deploy finished"},
        {"ts": 1_790_000_000_002, "sessionId": "s-1", "modelId": "m-1"},
    ]
    for record in records:
        member = json.dumps(record, separators=(",", ":"))
        acmi.store.execute(("ZADD", acmi.keys.timeline(entity), record["ts"], member))
    listed = mcp.ok("list", {"category": "deal"})["entities"]
    assert "deal:ann@example.com" in listed
    got = mcp.ok("get", {"entity": "deal:ann@example.com"})
    assert got["profile"] == {"name": "Ann"} and got["timeline"] == records
    assert [flag["index"] for flag in got["legacy"]] == [0, 1] and got["skipped"] == []
    assert "id_format" in mcp.error(
        "profile_merge", {"entity": "deal:bo@example.com", "partial": {}}
    )
