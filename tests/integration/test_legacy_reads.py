"""Reads show what the reference shows (issue 9): every stored timeline member that is a
JSON object with a usable ``ts`` (a finite number) is returned, flagged as legacy with what
is missing or out of range (a record with no source or summary too: issue 23); only what
has no usable ts (or is not a JSON object) is skipped. Writes stay strict.

Members are planted through the raw side door (the ``raw`` fixture) as the reference CLI,
its MCP server and older tools left them, and read back on every backend through the
client, the HTTP app and the CLI."""

from __future__ import annotations

import json
import uuid
from typing import Any, Final

import pytest
import redis
from fastapi.testclient import TestClient

from acmi_core import Acmi, AcmiValidationError, EntityId
from acmi_core.api.app import create_app
from acmi_core.api.context import ApiContext
from acmi_core.auth import apikeys
from acmi_core.base.model import MAX_TS_MS
from acmi_core.cli import main
from acmi_core.testing.redis_server import RedisServer
from tests.kit import DB

T0: Final = 1_745_947_200_000
VALID: Final[dict[str, Any]] = {
    "source": "agent:a",
    "kind": "note",
    "correlationId": "c-1",
    "summary": "ok",
}

# (label, stored event, reasons it is flagged with). Scores are the stored ts.
LEGACY: Final[list[tuple[str, dict[str, Any], list[str]]]] = [
    (
        "reference CLI `event`",
        {"ts": T0 + 1, "source": "gmail", "summary": "Sent the PDF proposal."},
        ["kind: required", "correlationId: required"],
    ),
    (
        "reference `work event` / MCP server, with session_id",
        {"ts": T0 + 2, "source": "agent:bob", "summary": "picked it up", "session_id": "s-9"},
        ["kind: required", "correlationId: required"],
    ),
    (
        "speaker_type outside the enum",
        {**VALID, "ts": T0 + 3, "speaker_type": "bot"},
        ["speaker_type: enum"],
    ),
    ("numeric tenant_id", {**VALID, "ts": T0 + 4, "tenant_id": 42}, ["tenant_id: type"]),
    ("summary over 500", {**VALID, "ts": T0 + 5, "summary": "x" * 600}, ["summary: max_length"]),
    (
        "snake_case correlation_id",
        {"ts": T0 + 6, "source": "s", "kind": "k", "correlation_id": "c-old", "summary": "old"},
        ["correlationId: camel_case"],
    ),
    (
        "a stored field named legacy (kept verbatim, never taken for the flag)",
        {"ts": T0 + 7, "source": "s", "summary": "mine", "legacy": ["not", "ours"]},
        ["kind: required", "correlationId: required"],
    ),
    ("float ts", {**VALID, "ts": T0 + 8.5, "kind": ""}, ["kind: non_empty"]),
    # the reference's other writers: no summary (a message instead), or records that are
    # not events at all (the MCP server's spawns, a quota reading): the bootstrap and
    # `cat` show them, so every read serves them, flagged
    (
        "a message instead of a summary",
        {"ts": T0 + 10, "source": "acmi-mcp", "message": "deploy finished"},
        ["kind: required", "correlationId: required", "summary: required"],
    ),
    (
        "MCP spawn record",
        {"ts": T0 + 11, "sessionId": "s-1", "modelId": "claude-opus-4"},
        ["source: required", "kind: required", "correlationId: required", "summary: required"],
    ),
    (
        "quota record",
        {"ts": T0 + 12, "provider": "zai", "remaining": 12, "cap": 100},
        ["source: required", "kind: required", "correlationId: required", "summary: required"],
    ),
    (
        "no source",
        {"ts": T0 + 13, "summary": "no source"},
        ["source: required", "kind: required", "correlationId: required"],
    ),
    (
        "no summary",
        {"ts": T0 + 14, "source": "s"},
        ["kind: required", "correlationId: required", "summary: required"],
    ),
    (
        "numeric source",
        {"ts": T0 + 15, "source": 5, "summary": "numeric source"},
        ["source: type", "kind: required", "correlationId: required"],
    ),
    (
        "a list as summary",
        {"ts": T0 + 16, "source": "s", "summary": ["list"]},
        ["kind: required", "correlationId: required", "summary: type"],
    ),
]
# ts out of range: negative, and microseconds (a unit mistake) stored by other tools
NEGATIVE: Final[dict[str, Any]] = {**VALID, "ts": -5, "summary": "before 1970"}
MICROS: Final[dict[str, Any]] = {**VALID, "ts": (T0 + 9) * 1000, "summary": "microseconds"}
UNUSABLE: Final[list[dict[str, Any]]] = [
    {"ts": "T0", "source": "s", "summary": "string ts"},
    {"ts": True, "source": "s", "summary": "bool ts"},
    {"source": "s", "summary": "no ts"},
]


class Api:
    """An app on the fixture's store with one read key (the test_api.py helper pattern)."""

    def __init__(self, acmi: Acmi) -> None:
        self.client = TestClient(create_app(ApiContext(acmi)), raise_server_exceptions=False)
        key, _ = apikeys.mint(acmi.store, tenant="default", scope="read", name="r", now_ms=1)
        self.headers = {"authorization": f"Bearer {key}"}

    def get(self, path: str) -> Any:
        response = self.client.get(path, headers=self.headers)
        assert response.status_code == 200, response.text
        return response.json()


def plant(
    raw: redis.Redis, key: str, events: list[dict[str, Any]], score: float | None = None
) -> None:
    """Each event at its own ts (or at ``score``), compact as JSON.stringify writes it."""
    raw.zadd(
        key,
        {json.dumps(e, separators=(",", ":")): e["ts"] if score is None else score for e in events},
    )


def expected_order() -> list[tuple[dict[str, Any], list[str]]]:
    """Oldest first: the negative ts, the valid event, the legacy shapes, microseconds."""
    rows = [(NEGATIVE, ["ts: range"]), ({**VALID, "ts": T0}, [])]
    rows += [(event, reasons) for _, event, reasons in LEGACY]
    return [*rows, (MICROS, ["ts: range"])]


@pytest.fixture
def entity(acmi: Acmi, raw: redis.Redis) -> str:
    name = f"user:legacy-{acmi.store.name}-{uuid.uuid4().hex[:10]}"
    key = acmi.keys.timeline(EntityId.parse(name))
    plant(raw, key, [NEGATIVE, {**VALID, "ts": T0}, *(e for _, e, _ in LEGACY), MICROS])
    plant(raw, key, UNUSABLE, score=-1000)  # oldest of all: out of the way of limits
    return name


def test_every_legacy_shape_is_read_flagged_by_the_client(acmi: Acmi, entity: str) -> None:
    events = acmi.timeline.read(entity)
    rows = expected_order()
    assert events.to_dicts() == [stored for stored, _ in rows]  # verbatim, in ts order
    assert [list(e.legacy) for e in events] == [reasons for _, reasons in rows]
    assert [e.to_dict() for e in events] == [stored for stored, _ in rows]
    assert events.legacy_report() == [
        {"index": i, "reasons": reasons} for i, (_, reasons) in enumerate(rows) if reasons
    ]
    assert sorted(s.reason for s in events.skipped) == ["ts: required", "ts: type", "ts: type"]
    assert MICROS["ts"] > MAX_TS_MS

    cli_event, mcp_event = events[2], events[3]
    # absent required strings read as "" (never a valid value: writes need non-empty)
    assert (cli_event.kind, cli_event.correlationId) == ("", "")
    assert (cli_event.source, cli_event.summary, cli_event.ts) == (
        "gmail",
        LEGACY[0][1]["summary"],
        T0 + 1,
    )
    assert mcp_event.model_extra == {"session_id": "s-9"}
    flagged_field = events[8]
    assert flagged_field.legacy == ("kind: required", "correlationId: required")
    assert flagged_field.to_dict()["legacy"] == ["not", "ours"]
    tenant = events[5]
    assert tenant.tenant_id is None and tenant.to_dict()["tenant_id"] == 42


def test_legacy_events_in_reverse_limit_page_and_get(acmi: Acmi, entity: str) -> None:
    rows = expected_order()
    newest_three = acmi.timeline.read(entity, reverse=True, limit=3)
    assert newest_three.to_dicts() == [stored for stored, _ in reversed(rows[-3:])]
    assert [list(e.legacy) for e in newest_three] == [r for _, r in reversed(rows[-3:])]

    pages = [p.to_dict() for p in acmi.timeline.pages(entity, limit=4)]
    assert [d for p in pages for d in p["events"]] == [stored for stored, _ in rows]
    assert sum(len(p["skipped"]) for p in pages) == len(UNUSABLE)
    flagged = [(p["events"][f["index"]], f["reasons"]) for p in pages for f in p["legacy"]]
    assert flagged == [(stored, r) for stored, r in rows if r]

    bundle = acmi.get(entity, events=len(rows) + len(UNUSABLE))
    assert bundle.timeline.to_dicts() == [stored for stored, _ in rows]
    assert len(bundle.timeline.skipped) == len(UNUSABLE)
    body = bundle.to_dict()
    assert body["legacy"] == [{"index": i, "reasons": r} for i, (_, r) in enumerate(rows) if r]


def test_legacy_events_are_served_flagged_over_http(acmi: Acmi, entity: str) -> None:
    api = Api(acmi)
    rows = expected_order()
    flags = [{"index": i, "reasons": r} for i, (_, r) in enumerate(rows) if r]

    page = api.get(f"/v1/entities/{entity}/timeline?limit=100")
    assert page["events"] == [stored for stored, _ in rows]
    assert page["legacy"] == flags
    assert len(page["skipped"]) == len(UNUSABLE)

    bundle = api.get(f"/v1/entities/{entity}?events=100")
    assert bundle["timeline"] == [stored for stored, _ in rows]
    assert bundle["legacy"] == flags
    # the stored field named "legacy" is the event's own, untouched
    assert bundle["timeline"][8]["legacy"] == ["not", "ours"]


def test_a_timeline_without_legacy_events_reports_none(acmi: Acmi) -> None:
    entity = f"user:legacy-none-{acmi.store.name}-{uuid.uuid4().hex[:10]}"
    acmi.timeline.append(entity, VALID)
    events = acmi.timeline.read(entity)
    assert events[0].legacy == () and events.legacy_report() == []
    assert Api(acmi).get(f"/v1/entities/{entity}")["legacy"] == []


@pytest.mark.parametrize(("_label", "event", "_reasons"), LEGACY)
def test_writes_stay_strict(
    acmi: Acmi, _label: str, event: dict[str, Any], _reasons: list[str]
) -> None:
    entity = f"user:legacy-write-{acmi.store.name}-{uuid.uuid4().hex[:10]}"
    with pytest.raises(AcmiValidationError):
        acmi.timeline.append(entity, event)
    assert acmi.timeline.size(entity) == 0


def test_cli_get_shows_legacy_events_flagged(
    redis_server: RedisServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = redis_server.url_for(DB["backends"])
    for name in ("UPSTASH_REDIS_REST_URL", "UPSTASH_REDIS_REST_TOKEN", "ACMI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ACMI_REDIS_URL", url)
    local = f"legacy-cli-{uuid.uuid4().hex[:10]}"
    stored = {"ts": T0, "source": "gmail", "summary": "Sent the PDF proposal."}
    message = {"ts": T0 + 1, "source": "acmi-mcp", "message": "deploy finished"}
    spawn = {"ts": T0 + 2, "sessionId": "s-1", "modelId": "claude-opus-4"}
    with redis.Redis.from_url(url) as client:
        plant(client, f"acmi:sales:{local}:timeline", [stored, message, spawn])
    assert main(["get", "sales", local]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["timeline"] == [stored, message, spawn] and out["skipped"] == []
    assert out["timeline_recent"] == [spawn, message, stored]  # the reference's, newest first
    no_id = ["kind: required", "correlationId: required"]
    assert out["legacy"] == [
        {"index": 0, "reasons": no_id},
        {"index": 1, "reasons": [*no_id, "summary: required"]},
        {"index": 2, "reasons": ["source: required", *no_id, "summary: required"]},
    ]
    # `cat` shows them as the reference's does: the message, the record itself
    assert main(["cat", f"sales:{local}", "--since", "100000d", "-o", "table"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.endswith("deploy finished") for line in lines), lines
    assert any('"sessionId":"s-1"' in line for line in lines), lines
