"""Forgetting one memory line (issue 24 item 3), on every backend and every surface, with
two tenants: the line goes from the layer where it is stored (slot fields, or the
daily-note event), an audit event holding no text lands on the entity's timeline in the
same write, a refusal writes nothing, and a lost reply is answered with the first run's
result (the Upstash double)."""

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
from acmi_core.base.errors import AcmiError, AcmiValidationError, Conflict, NotFound
from acmi_core.base.settings import Settings
from acmi_core.cli import main
from acmi_core.cli.state import CliState
from acmi_core.mcp.server import build_server
from acmi_core.memory import render_tree
from acmi_core.memory.forget import FORGET_KIND
from acmi_core.store.counting import CountingStore
from acmi_core.store.upstash import UpstashStore
from acmi_core.testing.upstash_double import UpstashDouble
from tests.integration.test_memory_get import AGENT, NOW, TODAY, stored, two_tenants
from tests.kit import FakeClock, RouteClient, serving
from tests.results import assert_result

__all__ = ["stored"]  # a fixture, used by name

SECRETISH = "the vault password is hunter2-correct-horse"


def _audits(acmi: Acmi) -> list[dict[str, Any]]:
    return [e.to_dict() for e in acmi.timeline.read(AGENT) if e.kind == FORGET_KIND]


def _state(acmi: Acmi) -> Any:
    size = acmi.store.execute(("ZCARD", acmi.context.keys.timeline(EntityId.parse(AGENT))))
    return render_tree(acmi.memory.export_snapshot(AGENT)), size


def test_forget_one_line_of_every_layer_per_tenant(acmi: Acmi) -> None:
    a, b = two_tenants(acmi)
    a.memory.remember(AGENT, SECRETISH, layer="hot")
    b.memory.remember(AGENT, "Priya owns the billing migration", section="people")
    b_before = _state(b)
    cases = [
        ("ACTIVE-CONTEXT.md", SECRETISH),
        ("MEMORY.md", "Priya owns the billing migration"),
        ("memory/topics/billing.md", "cut over on the 9th"),
        (TODAY, "paired with Priya on the cutover"),
    ]
    for n, (path, text) in enumerate(cases, 1):
        before = a.memory.get(AGENT, path)
        (number,) = [x["line"] for x in before["lines"] if x["text"].endswith(text)]
        gone = a.memory.forget(AGENT, path, text=text)
        assert_result("memory.forget", gone)
        assert (gone["line"], gone["path"], gone["forgotten"]) == (number, path, True)
        assert gone["text"].endswith(text)
        after = a.memory.get(AGENT, path)["text"]
        assert text not in after
        audits = _audits(a)
        assert len(audits) == n
        audit = next(x for x in audits if x["correlationId"] == gone["audit"]["correlationId"])
        assert audit["payload"] == {
            "audit": "memory.forget",
            "path": path,
            "layer": gone["layer"],
            "line": number,
            "chars": len(gone["text"]),
        }
        assert text not in json.dumps(audit)  # the audit never holds the line
    # the other tenant, holding one of the same lines, kept everything
    assert _state(b) == b_before and _audits(b) == []
    assert "Priya owns" in b.memory.get(AGENT, "MEMORY.md")["text"]
    # by number: line and text together must agree
    line = a.memory.remember(AGENT, "keep this one")["path"]
    assert line == "MEMORY.md"
    got = a.memory.get(AGENT, "MEMORY.md")
    (n,) = [x["line"] for x in got["lines"] if x["text"] == "- keep this one"]
    with pytest.raises(Conflict):
        a.memory.forget(AGENT, "MEMORY.md", line=n, text="another line")
    assert a.memory.forget(AGENT, "MEMORY.md", line=n, text="keep this one")["line"] == n


def test_a_refused_forget_writes_nothing(acmi: Acmi) -> None:
    a, b = two_tenants(acmi)
    bad = AcmiValidationError
    cases: list[tuple[dict[str, Any], type[AcmiError], str, str]] = [
        ({"path": "MEMORY.md"}, AcmiValidationError, "line", "required"),
        ({"path": "MEMORY.md", "line": 0}, AcmiValidationError, "line", "range"),
        ({"path": "MEMORY.md", "line": 999}, AcmiValidationError, "line", "range"),
        ({"path": "MEMORY.md", "line": 1}, AcmiValidationError, "line", "memory_line"),
        ({"path": "MEMORY.md", "line": 2}, AcmiValidationError, "line", "memory_line"),
        ({"path": "MEMORY.md", "text": "never written"}, NotFound, "text", "exists"),
        ({"path": "MEMORY.md", "text": ""}, AcmiValidationError, "text", "required"),
        ({"path": "memory/heartbeat-state.json", "line": 1}, bad, "path", "forgettable"),
        ({"path": "memory/archive/2026-Q1.md", "line": 1}, bad, "path", "forgettable"),
        ({"path": "notes.txt", "line": 1}, AcmiValidationError, "path", "memory_path"),
        ({"path": "ACTIVE-CONTEXT.md", "line": 1}, NotFound, "path", "exists"),
        ({"path": TODAY, "line": 1}, AcmiValidationError, "line", "memory_line"),  # the header
    ]  # fmt: skip
    for tenant in (a, b):
        before = _state(tenant)
        for kwargs, *given in cases:
            # B has no daily note
            expected = (
                [NotFound, "path", "exists"] if tenant is b and kwargs["path"] == TODAY else given
            )
            with pytest.raises(expected[0]) as refused:
                tenant.memory.forget(AGENT, **kwargs)
            assert [refused.value.field, refused.value.rule] == expected[1:], kwargs
        assert _state(tenant) == before


def test_forget_round_trips(acmi: Acmi) -> None:
    a, _ = two_tenants(acmi)
    store = CountingStore(acmi.store)
    view = Acmi(store, acmi.settings, tenant=a.tenant, clock=FakeClock(NOW))
    for path, text in (
        ("MEMORY.md", "Priya owns the billing migration"),
        ("memory/topics/billing.md", "cut over on the 9th"),
        (TODAY, "paired with Priya on the cutover"),
    ):
        store.reset()
        view.memory.forget(AGENT, path, text=text)
        assert store.requests == 2, path  # one read pipeline, one write


def test_a_forget_whose_reply_is_lost_answers_its_first_run(
    upstash_store: UpstashStore, upstash_double: UpstashDouble
) -> None:
    """Without the request's record, the retry met its own write: the check-and-set on the
    slot failed (409) for a forget that ran."""
    a = Acmi(upstash_store, Settings(), tenant=f"t-{uuid.uuid4().hex[:10]}", clock=FakeClock(NOW))
    a.memory.remember(AGENT, "first line")
    a.memory.remember(AGENT, "second line")
    upstash_double.lose_reply_matching(FORGET_KIND)
    gone = a.memory.forget(AGENT, "MEMORY.md", text="first line")
    assert upstash_double.lose_reply_pending() == 0  # the fault met its request
    assert gone["text"] == "- first line"
    text = a.memory.get(AGENT, "MEMORY.md")["text"]
    assert "first line" not in text and "second line" in text
    assert len(_audits(a)) == 1


def test_forget_over_http_mcp_and_the_cli_per_tenant(
    stored: Acmi,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    a, b = two_tenants(stored)
    line = "Omar owns the data platform"  # B's line: A has none
    http_a, http_b = RouteClient(a, "memory"), RouteClient(b, "memory")
    url = f"/v1/memory/{AGENT}/forget"
    missing = http_a.call("POST", url, {"path": "MEMORY.md", "text": line})
    assert missing.status_code == 404 and missing.json()["field"] == "text"
    assert (
        http_b.call("POST", url, {"path": "MEMORY.md", "text": line}, scope="read").status_code
        == 403
    )
    done = http_b.call("POST", url, {"path": "MEMORY.md", "text": line})
    assert done.status_code == 200, done.text
    assert (
        done.json()["text"] == f"- {line}" and line not in b.memory.get(AGENT, "MEMORY.md")["text"]
    )
    bad = http_a.call("POST", url, {"path": "MEMORY.md", "line": "two"})
    assert bad.status_code == 400 and bad.json()["field"] == "line"

    async def forget(tenant: Acmi, args: dict[str, Any], scope: Scope = Scope.WRITE) -> Any:
        async with create_connected_server_and_client_session(
            build_server(tenant, scope)
        ) as client:
            return await client.call_tool("memory_forget", {"entity": AGENT, **args})

    args = {"path": "memory/topics/billing.md", "text": "cut over on the 9th"}
    assert asyncio.run(forget(b, args)).isError  # B has no such topic
    assert asyncio.run(forget(a, args, Scope.READ)).isError  # a read key writes nothing
    result = asyncio.run(forget(a, args))
    assert not result.isError, result.content
    assert result.structuredContent["line"] > 0 and len(_audits(a)) == 1

    for name in ("ACMI_API_URL", "ACMI_PROFILE", "ACMI_REDIS_URL", "ACMI_DEFAULT_TENANT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ACMI_CONFIG", str(tmp_path / "absent.toml"))
    for tenant in (a, b):
        tenant.memory.remember(AGENT, "forget me by the CLI")
    argv = ["memory", "forget", AGENT, "MEMORY.md", "--text", "forget me by the CLI"]
    code = main(argv, state=CliState(preset=a))
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["text"] == "- forget me by the CLI"
    assert "forget me by the CLI" in b.memory.get(AGENT, "MEMORY.md")["text"]  # B's kept
    with serving(create_app(ApiContext(a, offload=True))) as served:
        key, _ = apikeys.mint(stored.store, tenant=b.tenant, scope="write", name="c", now_ms=NOW)
        monkeypatch.setenv("ACMI_API_KEY", key)
        code = main(["--api", served, *argv])
        out, err = capsys.readouterr()
        assert code == 0, err
        assert json.loads(out)["layer"] == "warm"
        code = main(["--api", served, *argv])  # gone now: nothing holds it
        _, err = capsys.readouterr()
        assert code == 3 and "text" in err
    assert "forget me by the CLI" not in b.memory.get(AGENT, "MEMORY.md")["text"]
