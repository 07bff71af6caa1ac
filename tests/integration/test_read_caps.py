"""Reads stop at their byte cap inside Redis, not after: a page of large events and an
entity read with many of them read about ``MAX_PAGE_BYTES`` from Redis (INFO stats
total_net_output_bytes of the real redis-server), not the whole range, and each answer
carries a cursor to the rest; following it returns every event exactly once. The HTTP
answers stay under the documented size (README, limits)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import redis
from fastapi.testclient import TestClient

from acmi_core import Acmi, Settings, create_acmi
from acmi_core.api.app import ROUTER_MODULES, create_app
from acmi_core.api.context import ApiContext
from acmi_core.auth import apikeys
from acmi_core.base.model import MAX_OBJECT_BYTES
from acmi_core.base.pages import MAX_PAGE_BYTES
from acmi_core.store.redis import RedisStore
from acmi_core.testing.redis_server import RedisServer
from tests.kit import TEST_DBS

DB = TEST_DBS["read_caps"]  # this module's own database (tests/kit.py TEST_DBS)
ENTITY = "user:big"
EVENTS = 40
EVENT_BYTES = 200_000  # 40 of them: 8 MB, eight times a page's cap
# A page's stored events, plus the one member a resumed page may re-read past the cap
READ_BOUND = MAX_PAGE_BYTES + EVENT_BYTES + 64 * 1024
# The documented bound of GET /v1/entities/{e} (README, limits): 1 MiB of events and
# the two objects, with room for the JSON around them
GET_BOUND = MAX_PAGE_BYTES + EVENT_BYTES + 2 * MAX_OBJECT_BYTES + 64 * 1024


def member(n: int) -> str:
    event = {"ts": 1_000 + n, "source": "user:x", "kind": "note", "correlationId": f"c-{n}"}
    return json.dumps({**event, "summary": f"e{n}", "payload": {"blob": "x" * EVENT_BYTES}})


@pytest.fixture
def setup(redis_server: RedisServer) -> Iterator[tuple[Acmi, redis.Redis]]:
    redis_server.flush(DB)
    store = RedisStore.from_url(redis_server.url_for(DB))
    acmi = create_acmi(store, Settings(auth_cache_s=0))
    with redis.Redis.from_url(redis_server.url_for(DB)) as raw:
        # as large events arrive (each under the body cap), written as any tool would
        raw.zadd(f"acmi:{ENTITY}:timeline", {member(n): 1_000 + n for n in range(EVENTS)})
        acmi.profile.set(ENTITY, {"name": "big"})
        acmi.timeline.page(ENTITY, limit=1)  # the page script loaded (EVALSHA cache)
        yield acmi, raw
    store.close()


def sent(raw: redis.Redis) -> int:
    return int(raw.info("stats")["total_net_output_bytes"])


def test_a_page_of_large_events_reads_its_cap_not_the_range(
    setup: tuple[Acmi, redis.Redis],
) -> None:
    """Before: one page of limit=40 read all 8 MB to return 1 MiB."""
    acmi, raw = setup
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        before = sent(raw)
        page = acmi.timeline.page(ENTITY, limit=EVENTS, cursor=cursor)
        read = sent(raw) - before
        assert read < READ_BOUND, (pages, read)
        assert sum(len(e.to_json()) for e in page.events) <= MAX_PAGE_BYTES + EVENT_BYTES
        seen += [e.correlationId for e in page.events]
        pages += 1
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == [f"c-{n}" for n in range(EVENTS)]  # each once, in order
    assert pages >= EVENTS * EVENT_BYTES // MAX_PAGE_BYTES


def test_an_entity_read_stops_at_the_cap_with_a_cursor_to_the_rest(
    setup: tuple[Acmi, redis.Redis],
) -> None:
    """Before: get(events=40) read and returned all 8 MB (1,000 of 256 KB: 256 MB)."""
    acmi, raw = setup
    before = sent(raw)
    context = acmi.get(ENTITY, events=EVENTS)
    assert sent(raw) - before < READ_BOUND
    newest = [e.correlationId for e in context.timeline]
    assert 0 < len(newest) < EVENTS and newest[-1] == f"c-{EVENTS - 1}"  # oldest first
    assert context.profile is not None and context.profile["name"] == "big"
    assert context.next_cursor is not None
    older: list[str] = []
    cursor: str | None = context.next_cursor
    while cursor is not None:
        page = acmi.timeline.page(ENTITY, reverse=True, cursor=cursor, limit=EVENTS)
        older += [e.correlationId for e in page.events]
        cursor = page.next_cursor
    assert older[::-1] + newest == [f"c-{n}" for n in range(EVENTS)]
    small = acmi.get(ENTITY, events=3)  # under the cap: no cursor, as before
    assert len(small.timeline) == 3 and "next_cursor" not in small.to_dict()


def test_http_answers_stay_under_the_documented_size(setup: tuple[Acmi, redis.Redis]) -> None:
    acmi, _ = setup
    key, _ = apikeys.mint(acmi.store, tenant="default", scope="read", name="t", now_ms=0)
    client = TestClient(create_app(ApiContext(acmi), tuple(ROUTER_MODULES)))
    auth = {"authorization": f"Bearer {key}"}
    whole = client.get(f"/v1/entities/{ENTITY}", params={"events": 1000}, headers=auth)
    assert whole.status_code == 200 and len(whole.content) < GET_BOUND
    assert whole.json()["next_cursor"]
    page = client.get(f"/v1/entities/{ENTITY}/timeline", params={"limit": 1000}, headers=auth)
    assert page.status_code == 200 and len(page.content) < GET_BOUND
    assert page.json()["next_cursor"]


WORK = "work:big"


def test_a_work_item_read_stops_at_the_cap_with_a_cursor_to_the_rest(
    setup: tuple[Acmi, redis.Redis],
) -> None:
    """Before: ``work.get(events=1000)`` read and answered all 8 MB of its events (the
    ZRANGE of the whole window); ``GET /v1/work/{id}`` the same."""
    acmi, raw = setup
    raw.zadd(f"acmi:{WORK}:timeline", {member(n): 1_000 + n for n in range(EVENTS)})
    acmi.work.create("big", {"title": "big"})
    before = sent(raw)
    item = acmi.work.get("big", events=1000)
    assert sent(raw) - before < GET_BOUND
    newest = [e["correlationId"] for e in item.timeline]
    assert newest and newest == [f"c-{n}" for n in range(EVENTS - len(newest), EVENTS)]
    assert item.next_cursor is not None and item.to_dict()["next_cursor"] == item.next_cursor
    older = acmi.timeline.page(WORK, reverse=True, cursor=item.next_cursor, limit=EVENTS)
    assert older.events[0].correlationId == f"c-{EVENTS - len(newest) - 1}"  # where it stopped
    key, _ = apikeys.mint(acmi.store, tenant="default", scope="read", name="w", now_ms=0)
    client = TestClient(create_app(ApiContext(acmi), tuple(ROUTER_MODULES)))
    answer = client.get(
        "/v1/work/big", params={"events": 1000}, headers={"authorization": f"Bearer {key}"}
    )
    assert answer.status_code == 200, answer.text
    assert len(answer.content) < GET_BOUND
    assert answer.json()["next_cursor"] == item.next_cursor


def test_a_small_work_item_has_no_cursor(setup: tuple[Acmi, redis.Redis]) -> None:
    acmi, _ = setup
    acmi.work.create("small", {"title": "small"})
    item = acmi.work.get("small")
    assert item.next_cursor is None and "next_cursor" not in item.to_dict()
