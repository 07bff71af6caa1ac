"""A signal with a time to live (issue 24 item 3): ``signals.set(..., ttl="1h")`` on every
backend, through HTTP, the MCP tool (the SDK's client) and the CLI (``acmi signal-set
--ttl``, on the store and with ``--api``), with two tenants: every read ACMI serves
(signals, the entity read, the wake bundle) stops showing it once it expired, without a
scan; a set without a ttl drops the earlier one; bad ttls are a 400 naming ttl, with
nothing stored."""

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
from acmi_core.base.errors import AcmiValidationError
from acmi_core.cli import main
from acmi_core.cli.state import CliState
from acmi_core.entities.expiry import TTL_PREFIX
from acmi_core.mcp.server import build_server
from tests.integration.test_memory_get import stored
from tests.kit import FakeClock, RouteClient, serving

__all__ = ["stored"]  # a fixture, used by name

NOW = 1_790_000_000_000
HOUR = 3_600_000
USER = "user:mikey"
AGENT = "agent:ttl"


def two_tenants(acmi: Acmi) -> tuple[Acmi, Acmi]:
    run = uuid.uuid4().hex[:10]
    return (
        Acmi(acmi.store, acmi.settings, tenant=f"ta-{run}", clock=FakeClock(NOW)),
        Acmi(acmi.store, acmi.settings, tenant=f"tb-{run}", clock=FakeClock(NOW)),
    )


def _later(acmi: Acmi, ms: int) -> None:
    clock = acmi.clock
    assert isinstance(clock, FakeClock)
    clock.now += ms


def test_a_signal_with_a_ttl_is_gone_from_every_read_once_expired(acmi: Acmi) -> None:
    a, b = two_tenants(acmi)
    for entity in (USER, AGENT):
        a.signals.set(entity, "mood", "busy", ttl="1h")
        a.signals.set(entity, "load", 3)
        b.signals.set(entity, "mood", "calm")  # B's has no ttl
    assert a.signals.all(USER) == {"mood": "busy", "load": 3}  # no expiry field shown
    _later(a, HOUR - 1)
    assert a.signals.get(USER, "mood") == "busy"
    _later(a, 1)
    assert a.signals.all(USER) == {"load": 3}
    assert a.signals.get(USER, "mood") is None
    assert a.get(USER).to_dict()["signals"] == {"load": 3}
    bundle = a.bootstrap(AGENT, format="json")
    shown = bundle.to_dict() if hasattr(bundle, "to_dict") else bundle
    assert "busy" not in str(shown) and TTL_PREFIX not in str(shown)
    _later(b, 10 * HOUR)
    assert b.signals.all(USER) == {"mood": "calm"}  # the other tenant's stays
    # set again without a ttl: lives on, its expiry field dropped in the same edit
    a.signals.set(USER, "mood", "back")
    _later(a, 100 * HOUR)
    assert a.signals.all(USER) == {"mood": "back", "load": 3}
    raw = a.store.execute(("GET", a.keys.signals(EntityId.parse(USER))))
    assert isinstance(raw, bytes) and TTL_PREFIX.encode() not in raw
    # a replace drops every ttl with the signals
    a.signals.set(USER, "x", 1, ttl="1m")
    a.signals.replace(USER, {"x": 2})
    _later(a, 2 * HOUR)
    assert a.signals.all(USER) == {"x": 2}


def test_a_bad_ttl_is_refused_naming_it_with_nothing_stored(acmi: Acmi) -> None:
    a, _ = two_tenants(acmi)
    cases: list[tuple[Any, str]] = [("soon", "duration"), ("0s", "range"), ("367d", "range")]
    cases += [(5, "duration"), ("", "duration")]
    for ttl, rule in cases:
        with pytest.raises(AcmiValidationError) as refused:
            a.signals.set(USER, "mood", "x", ttl=ttl)
        assert (refused.value.field, refused.value.rule) == ("ttl", rule), ttl
    with pytest.raises(AcmiValidationError) as reserved:
        a.signals.update(USER, {f"{TTL_PREFIX}mood": 1})
    assert reserved.value.rule == "reserved"
    assert a.signals.all(USER) == {}


def test_a_ttl_over_http_and_mcp_per_tenant(stored: Acmi) -> None:
    a, b = two_tenants(stored)
    http_a, http_b = RouteClient(a, "entities"), RouteClient(b, "entities")
    put = http_a.call("PUT", f"/v1/entities/{USER}/signals/mood?ttl=1h", "busy")
    assert put.status_code == 200, put.text
    assert put.json() == {"key": "mood", "value": "busy"}
    bad = http_a.call("PUT", f"/v1/entities/{USER}/signals/mood?ttl=forever", "x")
    assert bad.status_code == 400 and bad.json()["field"] == "ttl"
    assert http_b.call("PUT", f"/v1/entities/{USER}/signals/mood", "calm").status_code == 200
    read = http_a.call("GET", f"/v1/entities/{USER}/signals", scope="read")
    assert read.json() == {"mood": "busy"}
    _later(a, HOUR)
    assert http_a.call("GET", f"/v1/entities/{USER}/signals", scope="read").json() == {}
    assert http_b.call("GET", f"/v1/entities/{USER}/signals", scope="read").json() == {
        "mood": "calm"
    }

    async def call(tenant: Acmi, name: str, args: dict[str, Any]) -> Any:
        async with create_connected_server_and_client_session(
            build_server(tenant, Scope.WRITE)
        ) as client:
            return await client.call_tool(name, args)

    done = asyncio.run(call(b, "signal_set", {"entity": USER, "key": "k", "value": 1, "ttl": "2h"}))
    assert not done.isError, done.content
    assert (
        asyncio.run(call(b, "signal_get", {"entity": USER, "key": "k"})).structuredContent["value"]
        == 1
    )
    _later(b, 2 * HOUR)
    gone = asyncio.run(call(b, "signal_get", {"entity": USER, "key": "k"}))
    assert gone.structuredContent["value"] is None
    refused = asyncio.run(
        call(b, "signal_set", {"entity": USER, "key": "k", "value": 1, "ttl": "x"})
    )
    assert refused.isError and "ttl" in refused.content[0].text  # type: ignore[union-attr]


def test_a_ttl_through_the_cli_on_the_store_and_the_api(
    stored: Acmi,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    a, b = two_tenants(stored)
    for name in ("ACMI_API_URL", "ACMI_PROFILE", "ACMI_REDIS_URL", "ACMI_DEFAULT_TENANT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ACMI_CONFIG", str(tmp_path / "absent.toml"))
    argv = ["signal-set", USER, "mood", '"busy"', "--ttl", "1h"]
    code = main(argv, state=CliState(preset=a))
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out) == {"entity": USER, "key": "mood", "value": "busy"}
    code = main([*argv[:4], "--ttl", "soon"], state=CliState(preset=a))
    _, err = capsys.readouterr()
    assert code == 2 and "ttl" in err
    with serving(create_app(ApiContext(a, offload=True))) as served:
        key, _ = apikeys.mint(stored.store, tenant=b.tenant, scope="write", name="c", now_ms=NOW)
        monkeypatch.setenv("ACMI_API_KEY", key)
        code = main(["--api", served, "signal-set", USER, "mood", '"calm"', "--ttl", "2h"])
        out, err = capsys.readouterr()
        assert code == 0, err
        assert json.loads(out)["value"] == "calm"
    assert a.signals.all(USER) == {"mood": "busy"} and b.signals.all(USER) == {"mood": "calm"}
    _later(a, HOUR)
    _later(b, HOUR)
    assert a.signals.all(USER) == {} and b.signals.all(USER) == {"mood": "calm"}
    _later(b, HOUR)
    assert b.signals.all(USER) == {}
