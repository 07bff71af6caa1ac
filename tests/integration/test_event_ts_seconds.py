"""An event ``ts`` that can only be seconds (10^9 <= ts < 10^11: 2001-5138 as seconds,
1970-1973 as ms) is refused on every write, naming ``ts`` and the rule ``seconds``, with
nothing stored: the core (append, extend, a batch, a work item's event) on every backend,
HTTP for two tenants, ingest and the CLI on the store (MCP: tests/e2e/test_mcp_tools.py,
the CLI with --api: tests/e2e/test_cli_api.py). The bounds either side still write; an
event another tool stored with such a ts reads as legacy (tests/integration/test_legacy_reads.py,
the conformance suite's tolerance checks)."""

from __future__ import annotations

import json
import uuid
from typing import Any, Final

import pytest
import redis
from fastapi.testclient import TestClient

from acmi_core import Acmi, AcmiValidationError, EntityId, Settings
from acmi_core.api.app import create_app
from acmi_core.api.context import ApiContext
from acmi_core.auth import apikeys
from acmi_core.base.model import SECONDS_TS_END, SECONDS_TS_MIN, parse_event
from acmi_core.cli import main
from acmi_core.store.memory import MemoryStore
from acmi_core.testing.redis_server import RedisServer
from tests.kit import DB

SECONDS: Final = 1_745_947_200  # 2025-04-29T17:20:00Z as seconds
EVENT: Final[dict[str, Any]] = {
    "source": "agent:a",
    "kind": "note",
    "correlationId": "c-1",
    "summary": "s",
}
REFUSED: Final = (SECONDS, SECONDS_TS_MIN, SECONDS_TS_END - 1, float(SECONDS), 1_745_947_200.5)
KEPT: Final = (0, 1_000, SECONDS_TS_MIN - 1, SECONDS_TS_END, SECONDS * 1000)


def _entity(acmi: Acmi, label: str) -> str:
    return f"user:sec-{label}-{acmi.store.name}-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("ts", REFUSED, ids=repr)
def test_parse_event_refuses_a_seconds_ts_naming_the_rule(ts: float) -> None:
    with pytest.raises(AcmiValidationError) as caught:
        parse_event({**EVENT, "ts": ts}, now_ms=1, tenant="default")
    assert (caught.value.field, caught.value.rule) == ("event.ts", "seconds")
    assert "looks like seconds; ts is milliseconds since the epoch" in str(caught.value)


@pytest.mark.parametrize("ts", KEPT, ids=repr)
def test_the_bounds_either_side_are_milliseconds(ts: int) -> None:
    assert parse_event({**EVENT, "ts": ts}, now_ms=1, tenant="default").ts == ts


def test_every_core_write_refuses_it_and_stores_nothing(acmi: Acmi) -> None:
    entity = _entity(acmi, "core")
    bad = {**EVENT, "ts": SECONDS}
    with pytest.raises(AcmiValidationError) as caught:
        acmi.timeline.append(entity, bad)
    assert (caught.value.field, caught.value.rule) == ("events[0].ts", "seconds")
    with pytest.raises(AcmiValidationError) as caught:
        acmi.timeline.extend(entity, [{**EVENT, "ts": SECONDS * 1000}, bad])
    assert caught.value.rule == "seconds" and caught.value.field.endswith("ts")
    with pytest.raises(AcmiValidationError), acmi.batch() as batch:
        batch.signals.set(entity, "mood", "ok")
        batch.timeline.append(entity, bad)
    assert acmi.timeline.size(entity) == 0 and acmi.signals.all(entity) == {}
    work = f"w-{uuid.uuid4().hex[:8]}"
    acmi.work.create(work, {"title": "t"})
    with pytest.raises(AcmiValidationError) as caught:
        acmi.work.event(work, bad)
    assert caught.value.rule == "seconds"
    assert all(e.kind != "note" for e in acmi.work.get(work).timeline)
    # the same event in ms is stored
    assert acmi.timeline.append(entity, {**EVENT, "ts": SECONDS * 1000}).ts == SECONDS * 1000


def _api(tenants: tuple[str, ...]) -> tuple[TestClient, dict[str, dict[str, str]], Acmi]:
    acmi = Acmi(MemoryStore(), Settings(auth_cache_s=0))
    client = TestClient(create_app(ApiContext(acmi)), raise_server_exceptions=False)
    headers = {
        t: {
            "authorization": "Bearer "
            + apikeys.mint(acmi.store, tenant=t, scope="write", name="w", now_ms=0)[0]
        }
        for t in tenants
    }
    return client, headers, acmi


def test_http_and_ingest_answer_400_naming_ts_and_seconds_for_each_tenant() -> None:
    client, headers, acmi = _api(("t-one", "t-two"))
    for tenant, auth in headers.items():
        posted = client.post(
            "/v1/entities/user:h/events", json={**EVENT, "ts": SECONDS}, headers=auth
        )
        assert posted.status_code == 400, posted.text
        body = posted.json()
        assert (body["field"], body["rule"]) == ("events[0].ts", "seconds"), body
        assert "milliseconds" in body["message"]
        ingested = client.post(
            "/v1/ingest/make?entity=deal:h", json={"message": "m", "ts": SECONDS}, headers=auth
        )
        assert ingested.status_code == 400, ingested.text
        assert (ingested.json()["field"], ingested.json()["rule"]) == ("events[0].ts", "seconds")
        view = acmi.for_tenant(tenant)
        assert view.timeline.size("user:h") == 0 and view.timeline.size("deal:h") == 0
    # a write in ms of one tenant is not the other's
    one = client.post(
        "/v1/entities/user:h/events", json={**EVENT, "ts": SECONDS * 1000}, headers=headers["t-one"]
    )
    assert one.status_code == 201, one.text
    assert acmi.for_tenant("t-one").timeline.size("user:h") == 1
    assert acmi.for_tenant("t-two").timeline.size("user:h") == 0


def test_the_cli_event_refuses_a_seconds_ts_and_writes_nothing(
    redis_server: RedisServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = redis_server.url_for(DB["backends"])
    for name in ("UPSTASH_REDIS_REST_URL", "UPSTASH_REDIS_REST_TOKEN", "ACMI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ACMI_REDIS_URL", url)
    local = f"sec-cli-{uuid.uuid4().hex[:10]}"
    assert main(["event", "sales", local, "gmail", "sent", "--ts", str(SECONDS)]) == 2
    err = capsys.readouterr().err
    assert "ts" in err and "seconds" in err, err
    with redis.Redis.from_url(url) as client:
        assert client.zcard(f"acmi:sales:{local}:timeline") == 0
    assert main(["event", "sales", local, "gmail", "sent", "--ts", str(SECONDS * 1000)]) == 0
    assert json.loads(capsys.readouterr().out)["ts"] == SECONDS * 1000


def test_a_stored_seconds_ts_reads_flagged_never_dropped_over_http() -> None:
    """What another tool stored with a seconds ts is served verbatim, flagged
    ``ts: seconds``, beside valid events (the client's reads: conformance, tolerance)."""
    client, headers, acmi = _api(("t-one",))
    view = acmi.for_tenant("t-one")
    view.timeline.append("user:old", {**EVENT, "ts": SECONDS * 1000})
    stored = {**EVENT, "ts": SECONDS, "summary": "stored in seconds"}
    key = view.keys.timeline(EntityId.parse("user:old"))
    view.store.execute(("ZADD", key, SECONDS, json.dumps(stored, separators=(",", ":"))))
    page = client.get("/v1/entities/user:old/timeline", headers=headers["t-one"]).json()
    assert page["events"][0] == stored and page["skipped"] == []
    assert page["legacy"] == [{"index": 0, "reasons": ["ts: seconds"]}]
    assert page["events"][1]["ts"] == SECONDS * 1000
    assert [list(e.legacy) for e in view.timeline.read("user:old")] == [["ts: seconds"], []]
