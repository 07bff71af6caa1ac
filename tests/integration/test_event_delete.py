"""Deleting one timeline event (issue 24 item 3), on every backend and every surface, with
two tenants: by ts and id, or by member; one script run; the audit event on the same
timeline, naming the event and not its text; the coordination thread's mentions copies
removed in the same run (its REKEY when the client did not know the event); the change
index moved; a refusal or a miss writes nothing; a lost reply is answered with the first
run's result (the Upstash double)."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.memory import create_connected_server_and_client_session

from acmi_core import Acmi, EntityId
from acmi_core.api.app import create_app
from acmi_core.api.context import ApiContext
from acmi_core.auth import apikeys
from acmi_core.auth.apikeys import Scope
from acmi_core.base.errors import AcmiValidationError, NotFound
from acmi_core.base.keys import COORDINATION_THREAD
from acmi_core.base.settings import Settings
from acmi_core.cli import main
from acmi_core.cli.state import CliState
from acmi_core.entities.unlog import DELETE_KIND
from acmi_core.mcp.server import build_server
from acmi_core.store.counting import CountingStore
from acmi_core.store.upstash import UpstashStore
from acmi_core.testing.upstash_double import UpstashDouble
from tests.integration.test_memory_get import stored
from tests.kit import FakeClock, RouteClient, serving
from tests.results import assert_result

__all__ = ["stored"]  # a fixture, used by name

NOW = 1_790_000_000_000
USER = "user:mikey"
SECRETISH = "the vault password is hunter2-correct-horse"


def _event(cid: str, summary: str = "hello", ts: int = NOW - 1000) -> dict[str, Any]:
    return {
        "source": "agent:bob",
        "kind": "note",
        "correlationId": cid,
        "summary": summary,
        "ts": ts,
    }


def two_tenants(acmi: Acmi) -> tuple[Acmi, Acmi]:
    """Two tenants holding the same event id at the same ts."""
    run = uuid.uuid4().hex[:10]
    out = []
    for name in ("a", "b"):
        tenant = Acmi(acmi.store, acmi.settings, tenant=f"t{name}-{run}", clock=FakeClock(NOW))
        tenant.timeline.append(USER, _event("c-1", SECRETISH))
        tenant.timeline.append(USER, _event("c-2", "kept"))
        out.append(tenant)
    return out[0], out[1]


def _ids(acmi: Acmi, entity: str = USER) -> list[str]:
    return [e.correlationId for e in acmi.timeline.read(entity)]


def test_delete_by_ts_and_id_and_by_member_per_tenant(acmi: Acmi) -> None:
    a, b = two_tenants(acmi)
    gone = a.timeline.delete_event(USER, ts=NOW - 1000, id="c-1")
    assert_result("entities.timeline.delete", gone)
    assert (gone["deleted"], gone["ts"], gone["correlationId"]) == (True, NOW - 1000, "c-1")
    events = a.timeline.read(USER)
    assert [e.correlationId for e in events][:1] == ["c-2"]
    (audit,) = [e.to_dict() for e in events if e.kind == DELETE_KIND]
    assert audit["correlationId"] == gone["audit"]["correlationId"] and audit["ts"] == NOW
    assert audit["payload"] == {
        "audit": "timeline.delete_event",
        "ts": NOW - 1000,
        "correlationId": "c-1",
    }
    assert SECRETISH not in json.dumps(audit)  # the audit never holds the event's text
    assert _ids(b) == ["c-1", "c-2"]  # the other tenant's same event stays
    changed = a.store.execute(("ZSCORE", a.keys.changed(), USER))
    assert changed is not None and float(changed) == NOW  # the change index moved

    member = a.store.execute(("ZRANGE", a.keys.timeline(EntityId.parse(USER)), 0, 0))
    assert isinstance(member, list) and json.loads(member[0])["correlationId"] == "c-2"
    by_member = a.timeline.delete_event(USER, member=member[0].decode())
    assert by_member["correlationId"] == "c-2" and by_member["bytes"] == len(member[0])
    assert [e.kind for e in a.timeline.read(USER)] == [DELETE_KIND, DELETE_KIND]
    assert _ids(b) == ["c-1", "c-2"]
    with pytest.raises(NotFound) as missing:  # a second request: gone already
        a.timeline.delete_event(USER, ts=NOW - 1000, id="c-1")
    assert missing.value.field == "id"


def test_the_coordination_threads_mentions_go_with_the_event(acmi: Acmi) -> None:
    a, b = two_tenants(acmi)
    for tenant in (a, b):
        tenant.timeline.append(COORDINATION_THREAD, _event("c-m", "ping @ann and agent:cy"))
    ann = a.keys.mentions("ann")
    assert a.store.execute(("ZCARD", ann)) == 1
    # by ts and id: the client did not know the event names ann, cy and bob (REKEY)
    store = CountingStore(acmi.store)
    view = Acmi(store, acmi.settings, tenant=a.tenant, clock=FakeClock(NOW))
    store.reset()
    view.timeline.delete_event(COORDINATION_THREAD, ts=NOW - 1000, id="c-m")
    assert store.requests == 2  # the run answered REKEY, then the run with the keys
    for agent in ("ann", "cy", "bob"):
        assert a.store.execute(("ZCARD", a.keys.mentions(agent))) == 0, agent
        assert b.store.execute(("ZCARD", b.keys.mentions(agent))) == 1, agent
    # by member the client knows the mentions: one run
    kept = b.timeline.read(COORDINATION_THREAD)[0]
    store = CountingStore(acmi.store)
    view = Acmi(store, acmi.settings, tenant=b.tenant, clock=FakeClock(NOW))
    store.reset()
    view.timeline.delete_event(COORDINATION_THREAD, member=kept.to_json())
    assert store.requests == 1
    assert b.store.execute(("ZCARD", b.keys.mentions("ann"))) == 0


def test_a_refused_delete_writes_nothing(acmi: Acmi) -> None:
    a, _ = two_tenants(acmi)
    before = a.store.execute(("ZRANGE", a.keys.timeline(EntityId.parse(USER)), 0, -1))
    cases: list[tuple[dict[str, Any], str, str]] = [
        ({}, "ts", "required"),
        ({"ts": NOW - 1000}, "id", "required"),
        ({"ts": "soon", "id": "c-1"}, "ts", "number"),
        ({"ts": True, "id": "c-1"}, "ts", "number"),
        ({"ts": NOW - 1000, "id": "x" * 257}, "id", "max_length"),
        ({"member": "{not json"}, "member", "event"),
        ({"member": "x", "ts": 1}, "member", "exclusive"),
    ]
    for kwargs, field, rule in cases:
        with pytest.raises(AcmiValidationError) as refused:
            a.timeline.delete_event(USER, **kwargs)
        assert (refused.value.field, refused.value.rule) == (field, rule), kwargs
    with pytest.raises(NotFound):
        a.timeline.delete_event(USER, ts=NOW - 999, id="c-1")  # another ts
    with pytest.raises(NotFound):
        a.timeline.delete_event(USER, member=json.dumps(_event("c-9")))
    after = a.store.execute(("ZRANGE", a.keys.timeline(EntityId.parse(USER)), 0, -1))
    assert after == before


def test_many_events_at_one_ts_ask_for_the_member(acmi: Acmi) -> None:
    a, _ = two_tenants(acmi)
    a.timeline.extend(USER, [_event(f"m-{i}", ts=NOW - 5) for i in range(65)])
    with pytest.raises(AcmiValidationError) as crowded:
        a.timeline.delete_event(USER, ts=NOW - 5, id="m-3")
    assert crowded.value.field == "member"
    assert len(_ids(a)) == 67
    one = next(e for e in a.timeline.read(USER) if e.correlationId == "m-3")
    assert a.timeline.delete_event(USER, member=one.to_json())["deleted"]


def test_a_delete_whose_reply_is_lost_answers_its_first_run(
    upstash_store: UpstashStore, upstash_double: UpstashDouble
) -> None:
    """Without the request's record, the retry found its own deletion done and answered
    NONE (a 404 for a delete that ran)."""
    a = Acmi(upstash_store, Settings(), tenant=f"t-{uuid.uuid4().hex[:10]}", clock=FakeClock(NOW))
    a.timeline.append(USER, _event("c-1"))
    upstash_double.lose_reply_matching(DELETE_KIND)
    gone = a.timeline.delete_event(USER, ts=NOW - 1000, id="c-1")
    assert upstash_double.lose_reply_pending() == 0  # the fault met its request
    assert gone["deleted"] and gone["correlationId"] == "c-1"
    assert [e.kind for e in a.timeline.read(USER)] == [DELETE_KIND]  # one audit event


def test_delete_over_http_mcp_and_the_cli_per_tenant(
    stored: Acmi,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    a, b = two_tenants(stored)
    url = f"/v1/entities/{USER}/timeline/delete"
    http_a = RouteClient(a, "entities")
    assert (
        http_a.call("POST", url, {"ts": NOW - 1000, "id": "c-1"}, scope="read").status_code == 403
    )
    done = http_a.call("POST", url, {"ts": NOW - 1000, "id": "c-1"})
    assert done.status_code == 200, done.text
    assert done.json()["correlationId"] == "c-1" and _ids(b)[:2] == ["c-1", "c-2"]
    again = http_a.call("POST", url, {"ts": NOW - 1000, "id": "c-1"})
    assert again.status_code == 404 and again.json()["field"] == "id"
    stripe = "sk_" + "live_" + "4eC39HqLyjWDarjtT1zdp7dc"  # built: no literal credential
    leaked = http_a.call("POST", url, {"ts": NOW - 1000, "id": stripe})
    assert leaked.status_code == 422 and leaked.json()["field"] == "id"
    assert stripe not in leaked.text and len(_ids(a)) == 2  # nothing written
    bad = http_a.call("POST", url, {"ts": "x", "id": "c-1"})
    assert bad.status_code in (400, 422) and bad.json()["field"] == "ts"

    async def delete(tenant: Acmi, args: dict[str, Any], scope: Scope = Scope.WRITE) -> Any:
        async with create_connected_server_and_client_session(
            build_server(tenant, scope)
        ) as client:
            return await client.call_tool("event_delete", {"entity": USER, **args})

    args = {"ts": NOW - 1000, "id": "c-2"}
    assert asyncio.run(delete(b, args, Scope.READ)).isError
    result = asyncio.run(delete(b, args))
    assert not result.isError, result.content
    assert result.structuredContent["correlationId"] == "c-2"
    assert "c-2" in _ids(a) and "c-2" not in _ids(b)

    for name in ("ACMI_API_URL", "ACMI_PROFILE", "ACMI_REDIS_URL", "ACMI_DEFAULT_TENANT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ACMI_CONFIG", str(tmp_path / "absent.toml"))
    argv = ["event-delete", USER, "--ts", str(NOW - 1000), "--id", "c-2"]
    code = main(argv, state=CliState(preset=a))
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["correlationId"] == "c-2" and "c-2" not in _ids(a)
    with serving(create_app(ApiContext(a, offload=True))) as served:
        key, _ = apikeys.mint(stored.store, tenant=b.tenant, scope="write", name="c", now_ms=NOW)
        monkeypatch.setenv("ACMI_API_KEY", key)
        code = main(["--api", served, "event-delete", USER, "--ts", str(NOW - 1000), "--id", "c-1"])
        out, err = capsys.readouterr()
        assert code == 0, err
        assert json.loads(out)["correlationId"] == "c-1"
        code = main(["--api", served, "event-delete", USER, "--ts", str(NOW - 1000), "--id", "c-1"])
        _, err = capsys.readouterr()
        assert code == 3 and "id" in err
    assert [e.kind for e in b.timeline.read(USER)] == [DELETE_KIND, DELETE_KIND]
