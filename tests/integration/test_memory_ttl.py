"""A memory line with a time to live (issue 24 item 3): ``remember(..., ttl=...)`` on every
backend and through HTTP, the MCP tool (the SDK's client) and the CLI, with two tenants:
once expired the line is in no read (get, search, export, the wake bundle), the next
write of its section drops it, the daily layer takes no ttl, and a bad ttl is a 400 naming
ttl with nothing stored."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.memory import create_connected_server_and_client_session

from acmi_core import Acmi, EntityId
from acmi_core.auth.apikeys import Scope
from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.keys import MEMORY_WARM
from acmi_core.cli import main
from acmi_core.cli.state import CliState
from acmi_core.mcp.server import build_server
from acmi_core.memory import render_tree
from tests.integration.test_memory_get import AGENT, stored, two_tenants
from tests.kit import FakeClock, RouteClient

__all__ = ["stored"]  # a fixture, used by name

HOUR = 3_600_000
LINE = "the staging password rotates on Fridays"


def _later(acmi: Acmi, ms: int) -> None:
    clock = acmi.clock
    assert isinstance(clock, FakeClock)
    clock.now += ms


def _everywhere(acmi: Acmi) -> str:
    """Every read that shows memory, as one text."""
    tree = render_tree(acmi.memory.export_snapshot(AGENT))
    found = acmi.memory.search(AGENT, "staging password")
    bundle = acmi.bootstrap(AGENT, format="json", include="topics")
    shown = bundle.to_dict() if hasattr(bundle, "to_dict") else bundle
    texts = [acmi.memory.get(AGENT, p)["text"] for p in ("MEMORY.md", "memory/topics/billing.md")]
    return json.dumps([{k: v.decode() for k, v in tree.items()}, found, str(shown), texts])


def test_a_line_with_a_ttl_leaves_every_read_once_expired(acmi: Acmi) -> None:
    a, b = two_tenants(acmi)
    for layer, topic in (("warm", None), ("hot", None), ("topic", "billing")):
        a.memory.remember(AGENT, LINE, layer=layer, topic=topic, ttl="2h")
    b.memory.remember(AGENT, LINE)  # B's has no ttl
    assert _everywhere(a).count(LINE) >= 3
    _later(a, 2 * HOUR - 1)
    assert LINE in a.memory.get(AGENT, "MEMORY.md")["text"]
    _later(a, 1)
    assert LINE not in _everywhere(a)
    assert "ttl" not in a.memory.get(AGENT, "MEMORY.md")["text"]
    assert a.memory.status(AGENT)["entity"] == AGENT  # reads still read
    _later(b, 100 * HOUR)
    assert LINE in b.memory.get(AGENT, "MEMORY.md")["text"]  # the other tenant's stays
    # the next write of the section drops the expired line from storage too
    raw = a.store.execute(("GET", a.keys.slot(EntityId.parse(AGENT), MEMORY_WARM)))
    assert isinstance(raw, bytes) and LINE.encode() in raw
    a.memory.remember(AGENT, "a fresh lesson")
    raw = a.store.execute(("GET", a.keys.slot(EntityId.parse(AGENT), MEMORY_WARM)))
    assert isinstance(raw, bytes) and LINE.encode() not in raw
    # remembered again after it expired: a new line
    assert a.memory.remember(AGENT, LINE)["already_held"] is False


def test_a_bad_ttl_is_refused_naming_it(acmi: Acmi) -> None:
    a, _ = two_tenants(acmi)
    before = a.memory.get(AGENT, "MEMORY.md")["text"]
    cases: list[tuple[dict[str, Any], str]] = [
        ({"ttl": "soon"}, "duration"),
        ({"ttl": "400d"}, "range"),
        ({"ttl": "1h", "layer": "daily"}, "layer"),
    ]
    for kwargs, rule in cases:
        with pytest.raises(AcmiValidationError) as refused:
            a.memory.remember(AGENT, "never stored", **kwargs)
        assert (refused.value.field, refused.value.rule) == ("ttl", rule), kwargs
    assert a.memory.get(AGENT, "MEMORY.md")["text"] == before


def test_a_ttl_over_http_mcp_and_the_cli(
    stored: Acmi,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    a, b = two_tenants(stored)
    url = f"/v1/memory/{AGENT}/remember"
    done = RouteClient(a, "memory").call("POST", url, {"text": "http line", "ttl": "1h"})
    assert done.status_code == 201, done.text
    bad = RouteClient(a, "memory").call("POST", url, {"text": "x", "ttl": 5})
    assert bad.status_code == 400 and bad.json()["field"] == "ttl"

    async def remember(tenant: Acmi, args: dict[str, Any]) -> Any:
        async with create_connected_server_and_client_session(
            build_server(tenant, Scope.WRITE)
        ) as client:
            return await client.call_tool("memory_remember", {"entity": AGENT, **args})

    result = asyncio.run(remember(b, {"text": "mcp line", "ttl": "1h"}))
    assert not result.isError, result.content
    for name in ("ACMI_API_URL", "ACMI_PROFILE", "ACMI_REDIS_URL", "ACMI_DEFAULT_TENANT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ACMI_CONFIG", str(tmp_path / "absent.toml"))
    code = main(["memory", "remember", AGENT, "cli line", "--ttl", "1h"], state=CliState(preset=a))
    _, err = capsys.readouterr()
    assert code == 0, err
    assert "http line" in a.memory.get(AGENT, "MEMORY.md")["text"]
    assert "mcp line" not in a.memory.get(AGENT, "MEMORY.md")["text"]  # B's
    _later(a, HOUR)
    _later(b, HOUR)
    for tenant in (a, b):
        text = tenant.memory.get(AGENT, "MEMORY.md")["text"]
        assert not any(x in text for x in ("http line", "mcp line", "cli line"))
        assert "Omar" in text or "Priya" in text  # the rest stays
