"""An entity read and a timeline page serve, byte for byte, what the full rule serves
(each member through ``load_stored`` and the tolerant decoding, its stored dict in field
order): plain events (served from the event, not parsed twice) mixed with escapes,
float and exponent ts, a key twice, payloads, unknown fields, legacy events and
unreadable members, written raw as another tool would; per tenant (two tenants, the
same entity id, neither sees the other's), on the real redis-server and the Upstash
REST double."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from acmi_core import Acmi, Settings
from acmi_core.base.model import EVENT_FIELD_ORDER, EntityId
from acmi_core.base.stored import decode_event, render_json
from acmi_core.store.base import Store
from acmi_core.store.redis import RedisStore
from acmi_core.store.upstash import UpstashStore
from acmi_core.testing.redis_server import RedisServer
from tests.kit import TEST_DBS

DB = TEST_DBS["read_served"]
ENTITY = "user:served"


def members(tag: str) -> list[bytes]:
    """One tenant's stored members, oldest first (ts 2000 + i: the score)."""
    base = '"source":"agent:%s","kind":"note","correlationId":"c-%d","summary":"%s"'
    texts = [
        '{"ts":%d,' + base + ',"speaker_type":"agent","tenant_id":"default"}',
        '{"ts":%d,' + base + "}",
        '{"ts":%d.0,' + base + ',"parentCorrelationId":"p","speaker_type":null}',
        '{"ts":%de0,' + base + ',"tenant_id":null,"payload":null}',
        '{"ts":%d,' + base + ',"speaker_type":"human","ts":1}',  # a key twice
        '{"ts":%d,' + base + ',"payload":{"n":1.5,"big":1e999}}',
        '{"ts":%d,' + base + ',"zz":"unknown","legacy":[1]}',
        '{"ts":%d,"source":"agent:%s","correlationId":"c-%d","summary":"%s"}',  # legacy
        '{"ts":%d,' + base + ',"speaker_type":"agent","tenant_id":"default"}',
    ]
    summaries = ["plain", "caf\u00e9 \U0001f600", 'tab\\tquote\\"', "\\u00e9\\ud83d\\ude00"]
    out = []
    for i, text in enumerate(texts * 3):
        summary = summaries[i % len(summaries)]
        out.append((text % (2000 + i, tag, i, summary)).encode())
    out.insert(5, b'{"ts":2004.5,"source":"a","kind":"k","correlationId":"c","summary":"\\ud800"}')
    out.insert(9, b"not json")
    out.insert(12, b'{"ts":NaN,"source":"a","kind":"k","correlationId":"c","summary":"s"}')
    return out


def full_rule(stored: list[bytes]) -> list[dict[str, Any]]:
    served = []
    for member in stored:
        parsed = decode_event(member)
        if isinstance(parsed, str):
            continue
        data = parsed[1]
        ordered = {n: data[n] for n in EVENT_FIELD_ORDER if n in data}
        ordered.update(data)
        served.append(ordered)
    return served


@pytest.fixture(params=["redis", "upstash"])
def store(request: pytest.FixtureRequest, redis_server: RedisServer) -> Iterator[Store]:
    if request.param == "redis":
        redis_server.flush(DB)
        redis_store = RedisStore.from_url(redis_server.url_for(DB))
        yield redis_store
        redis_store.close()
    else:
        upstash: UpstashStore = request.getfixturevalue("upstash_store")
        yield upstash


def test_reads_serve_the_full_rule_per_tenant(store: Store) -> None:
    written: dict[str, list[bytes]] = {}
    clients = {tenant: Acmi(store, Settings(), tenant=tenant) for tenant in ("t-one", "t-two")}
    for tenant, acmi in clients.items():
        stored = members(tenant)
        written[tenant] = stored
        args: list[str | bytes] = []
        for index, member in enumerate(stored):
            args += [str(2000 + index), member]
        timeline = acmi.keys.timeline(EntityId.parse(ENTITY))
        store.execute(("ZADD", timeline, *args))
    for tenant, acmi in clients.items():
        expected = full_rule(written[tenant])
        assert len(expected) == len(written[tenant]) - 2  # "not json" and NaN are skipped
        body = acmi.get(ENTITY, events=50).to_dict()
        page = acmi.timeline.page(ENTITY, limit=200).to_dict()
        assert render_json(body["timeline"]) == render_json(expected), tenant
        assert render_json(page["events"]) == render_json(expected), tenant
        assert [s["position"] for s in page["skipped"]] == [9, 12]
        sources = {e["source"] for e in page["events"]}
        assert f"agent:{tenant}" in sources
        assert not any(
            other.encode() in render_json(page["events"]) for other in clients if other != tenant
        )
