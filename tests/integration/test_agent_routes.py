"""The agents function's routes (/v1/agents/{agent}/...) on every backend: heartbeat,
spawns, active threads and the rollup; ``claude`` and ``agent:claude`` are one agent; bad
input is a 400 naming the field with nothing stored; a read key cannot write."""

from __future__ import annotations

from typing import Any

import pytest

from acmi_core import Acmi
from tests.kit import START, FakeClock, RouteClient, assert_error, fresh_tenant


@pytest.fixture
def http(acmi: Acmi, clock: FakeClock) -> RouteClient:
    return RouteClient(fresh_tenant(acmi, clock), "agents")


def _stored(acmi: Acmi) -> dict[str, Any]:
    """What the agents routes keep for agent:claude, and the indexes they touch."""
    return {
        "signals": acmi.signals.all("agent:claude"),
        "spawns": acmi.agents.spawns("claude", 100),
        "threads": acmi.agents.active("claude"),
        "rollup": acmi.agents.rollup("claude"),
        "agents": acmi.list("agent"),
        "activity": acmi.store.execute(("ZRANGE", acmi.keys.activity(), 0, -1)),
    }


def test_heartbeat(http: RouteClient, clock: FakeClock) -> None:
    beat = http.call("POST", "/v1/agents/claude/heartbeat", {"status": "IDLE", "note": "lunch"})
    assert beat.status_code == 200, beat.text
    assert beat.json() == {"agent": "agent:claude", "ts": START, "status": "IDLE", "note": "lunch"}
    clock.now += 1
    empty = http.client.post("/v1/agents/agent:claude/heartbeat", headers=http.auth["write"])
    assert empty.status_code == 200 and empty.json()["status"] == "ACTIVE"
    assert http.acmi.signals.all("agent:claude") == {
        "last_heartbeat_ts": START + 1,
        "status": "ACTIVE",
    }
    assert http.acmi.agents.silent_since(START + 2) == [("agent:claude", START + 1)]


def test_spawns_threads_and_rollup(http: RouteClient, clock: FakeClock) -> None:
    made = http.call(
        "POST", "/v1/agents/claude/spawns", {"session_id": "s-1", "model_id": "opus", "host": "ci"}
    )
    assert made.status_code == 201, made.text
    assert made.json() == {"ts": START, "session_id": "s-1", "model_id": "opus", "host": "ci"}
    clock.now += 1
    http.call("POST", "/v1/agents/agent:claude/spawns", {"session_id": "s-2", "model_id": "opus"})
    spawns = http.call("GET", "/v1/agents/claude/spawns?limit=1", scope="read")
    assert spawns.json() == {"spawns": [{"ts": START + 1, "session_id": "s-2", "model_id": "opus"}]}
    assert len(http.call("GET", "/v1/agents/claude/spawns", scope="read").json()["spawns"]) == 2

    joined = http.call("PUT", "/v1/agents/claude/threads/thread:deploy", {"role": "lead"})
    assert joined.status_code == 200
    assert joined.json() == {"thread": "thread:deploy", "role": "lead", "joined_at": START + 1}
    http.client.put("/v1/agents/claude/threads/thread:review", headers=http.auth["write"])
    threads = http.call("GET", "/v1/agents/agent:claude/threads", scope="read").json()["threads"]
    assert threads == {
        "thread:deploy": {"role": "lead", "joined_at": START + 1},
        "thread:review": {"role": "participant", "joined_at": START + 1},
    }
    left = http.call("DELETE", "/v1/agents/claude/threads/thread:deploy")
    assert left.status_code == 200 and left.json() == {"thread": "thread:deploy", "left": True}
    assert list(http.acmi.agents.active("claude")) == ["thread:review"]

    assert_error(http.call("GET", "/v1/agents/claude/rollup", scope="read"), 404, "agent")
    rolled = http.call(
        "PUT", "/v1/agents/claude/rollup", {"summary": "shipped PR 42", "events": [1, 2]}
    )
    assert rolled.status_code == 200
    doc = {"ts": START + 1, "summary": "shipped PR 42", "events": [1, 2]}
    assert rolled.json() == doc
    assert http.call("GET", "/v1/agents/agent:claude/rollup", scope="read").json() == doc
    assert http.acmi.list("agent") == ["agent:claude"]


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("POST", "/v1/agents/claude/heartbeat", {"status": "S" * 65}, "status"),
        ("POST", "/v1/agents/claude/heartbeat", {"status": "ok!"}, "status"),
        ("POST", "/v1/agents/claude/heartbeat", {"note": "n" * 501}, "note"),
        ("POST", "/v1/agents/claude/heartbeat", {"mood": "fine"}, "mood"),
        ("POST", "/v1/agents/claude/heartbeat", ["ACTIVE"], "body"),
        ("POST", "/v1/agents/user:mikey/heartbeat", {}, "agent"),
        ("POST", "/v1/agents/Claude Bot/heartbeat", {}, "agent"),
        ("POST", "/v1/agents/claude/spawns", {"model_id": "opus"}, "session_id"),
        ("POST", "/v1/agents/claude/spawns", {"session_id": "s", "model_id": ""}, "model_id"),
        ("POST", "/v1/agents/claude/spawns", {"session_id": "s", "model_id": "m", "x": 1}, "x"),
        ("PUT", "/v1/agents/claude/threads/thread:x", {"role": 5}, "role"),
        ("PUT", "/v1/agents/claude/rollup", {"events": []}, "summary"),
        ("PUT", "/v1/agents/claude/rollup", {"summary": ""}, "summary"),
        ("GET", "/v1/agents/claude/spawns?limit=0", None, "limit"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(
    http: RouteClient, method: str, path: str, body: Any, field: str
) -> None:
    before = _stored(http.acmi)
    assert_error(http.call(method, path, body), 400, field)
    assert _stored(http.acmi) == before


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("POST", "/v1/agents/claude/heartbeat", {"mood": "fine"}, "mood"),
        ("POST", "/v1/agents/claude/spawns", {"session_id": "s", "model_id": "m", "x": 1}, "x"),
        ("PUT", "/v1/agents/claude/threads/thread:x", {"rol": "lead"}, "rol"),
    ],
)
def test_an_unknown_field_is_refused_by_name_with_rule_unknown(
    http: RouteClient, method: str, path: str, body: Any, field: str
) -> None:
    before = _stored(http.acmi)
    error = assert_error(http.call(method, path, body), 400, field)
    assert error["rule"] == "unknown" and field in error["message"]
    assert _stored(http.acmi) == before


def test_a_read_key_cannot_write(http: RouteClient) -> None:
    for method, path, body in (
        ("POST", "/v1/agents/claude/heartbeat", {}),
        ("POST", "/v1/agents/claude/spawns", {"session_id": "s", "model_id": "m"}),
        ("PUT", "/v1/agents/claude/threads/thread:x", {}),
        ("DELETE", "/v1/agents/claude/threads/thread:x", None),
        ("PUT", "/v1/agents/claude/rollup", {"summary": "s"}),
    ):
        assert_error(http.call(method, path, body, scope="read"), 403)
    assert _stored(http.acmi)["agents"] == []
