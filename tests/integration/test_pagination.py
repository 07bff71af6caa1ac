"""Cursor pagination of the two unbounded reads: a category's entities (SSCAN steps) and a
timeline (score cursors with a position among equal scores). On every backend: every item
exactly once, in order, one round trip per page; through the API: default and maximum page
sizes, ``next_cursor`` null at the end, a malformed cursor a 400 naming ``cursor``."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from acmi_core import Acmi, EntityId
from acmi_core.api.app import create_app
from acmi_core.api.context import ApiContext
from acmi_core.auth import apikeys
from acmi_core.base.model import Event
from acmi_core.base.pages import DEFAULT_PAGE_SIZE, MAX_PAGE_BYTES, MAX_PAGE_SIZE
from acmi_core.testing.upstash_double import UpstashDouble

BASE = 1_700_000_000_000
ENTITIES = 2_500
EVENTS = 2_500


class Api:
    """An app on the fixture's store with one read key (copied from test_api.py's helper)."""

    def __init__(self, acmi: Acmi) -> None:
        self.client = TestClient(create_app(ApiContext(acmi)), raise_server_exceptions=False)
        key, _ = apikeys.mint(acmi.store, tenant="default", scope="read", name="r", now_ms=1)
        self.headers = {"authorization": f"Bearer {key}"}

    def get(self, path: str, **params: Any) -> Any:
        return self.client.get(path, params=params, headers=self.headers)


@pytest.fixture
def api(acmi: Acmi) -> Api:
    return Api(acmi)


@pytest.fixture
def requests(acmi: Acmi, request: pytest.FixtureRequest) -> Iterator[UpstashDouble | None]:
    """The Upstash double behind the upstash backend (it counts HTTP round trips)."""
    if acmi.store.name == "upstash":
        yield request.getfixturevalue("upstash_double")
    else:
        yield None


def unique(label: str, acmi: Acmi) -> str:
    # The redis backend's database outlives a test: every test gets its own names.
    return f"{label}-{acmi.store.name}-{uuid.uuid4().hex[:8]}"


def event(n: int, ts: int, **extra: Any) -> dict[str, Any]:
    return {
        "ts": ts,
        "source": "agent:pager",
        "kind": "note",
        "correlationId": f"c-{n:05d}",
        "summary": f"event {n}",
        **extra,
    }


def equal_ts_timeline(acmi: Acmi, entity: str) -> list[dict[str, Any]]:
    """2,500 events: runs of 7 equal timestamps, one run of 300 (longer than a page) and a
    run of 1,100 (longer than the largest page); returned in read order."""
    stamps = [BASE + n // 7 for n in range(1_100)]
    stamps += [BASE + 5_000] * 300
    stamps += [BASE + 9_000] * 1_100
    assert len(stamps) == EVENTS
    events = [event(n, ts) for n, ts in enumerate(stamps)]
    for start in range(0, EVENTS, 500):
        acmi.timeline.extend(entity, events[start : start + 500])
    return acmi.timeline.read(entity).to_dicts()


def ids(events: list[dict[str, Any]]) -> list[str]:
    return [e["correlationId"] for e in events]


# --- entities -------------------------------------------------------------------------------


def test_2500_entities_page_through_exactly_once(
    acmi: Acmi, raw: redis.Redis, requests: UpstashDouble | None
) -> None:
    category = unique("pg", acmi)
    expected = {f"{category}:e{n:04d}" for n in range(ENTITIES)}
    raw.sadd(acmi.keys.index(category), *(e.split(":", 1)[1] for e in expected))

    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        if requests is not None:
            requests.reset_counts()
        page = acmi.list_page(category, cursor=cursor, limit=100)
        if requests is not None:
            assert requests.requests == 1, "one round trip per page"
        pages += 1
        assert len(page.entities) <= 100
        assert page.entities == sorted(page.entities)  # sorted within a page
        seen += page.entities
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert len(seen) == ENTITIES and set(seen) == expected  # every id exactly once
    assert pages >= ENTITIES // 100

    streamed = acmi.iter_list(category, limit=333)
    if requests is not None:
        requests.reset_counts()
    first = next(streamed)  # a generator: it reads a page as it is consumed
    if requests is not None:
        assert requests.requests == 1
    rest = list(streamed)
    assert len(rest) + 1 == ENTITIES and {first, *rest} == expected
    assert acmi.list(category) == sorted(expected)


def test_a_small_index_comes_back_whole_but_never_over_the_limit(acmi: Acmi) -> None:
    """Redis returns a small (listpack or intset) set whole from one SSCAN whatever COUNT
    says; the page still holds at most ``limit`` ids and the cursor resumes inside it."""
    category = unique("small", acmi)
    written = [f"{category}:{n}" for n in range(37)]  # integer ids: an intset
    for entity in written:
        acmi.signals.set(entity, "k", 1)
    seen: list[str] = []
    cursor = None
    while True:
        page = acmi.list_page(category, cursor=cursor, limit=10)
        assert 0 < len(page.entities) <= 10
        seen += page.entities
        cursor = page.next_cursor
        if cursor is None:
            break
    assert sorted(seen) == sorted(written) and len(seen) == len(written)
    assert acmi.list_page(unique("none", acmi)).entities == []
    assert acmi.list_page(unique("none", acmi)).next_cursor is None


def test_entities_route_pages_with_default_and_max_sizes(
    acmi: Acmi, raw: redis.Redis, api: Api
) -> None:
    category = unique("route", acmi)
    expected = {f"{category}:e{n:04d}" for n in range(ENTITIES)}
    raw.sadd(acmi.keys.index(category), *(e.split(":", 1)[1] for e in expected))
    path = f"/v1/namespaces/{category}/entities"

    first = api.get(path).json()  # no limit: the default page size
    assert first["category"] == category
    assert 0 < len(first["entities"]) <= DEFAULT_PAGE_SIZE
    assert first["next_cursor"]

    seen: list[str] = []
    params: dict[str, Any] = {"limit": MAX_PAGE_SIZE}
    while True:
        response = api.get(path, **params)
        assert response.status_code == 200, response.text
        body = response.json()
        assert len(body["entities"]) <= MAX_PAGE_SIZE
        seen += body["entities"]
        if body["next_cursor"] is None:
            break
        params["cursor"] = body["next_cursor"]
    assert len(seen) == ENTITIES and set(seen) == expected


# --- timeline -------------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [1, 7, 100, 1000])
def test_2500_events_with_equal_timestamps_page_through_in_order(
    acmi: Acmi, requests: UpstashDouble | None, limit: int
) -> None:
    entity = f"user:{unique('tl', acmi)}"
    expected = equal_ts_timeline(acmi, entity)
    for reverse in (False, True):
        got: list[dict[str, Any]] = []
        cursor = None
        while True:
            if requests is not None:
                requests.reset_counts()
            page = acmi.timeline.page(entity, cursor=cursor, limit=limit, reverse=reverse)
            if requests is not None:
                assert requests.requests == 1, "one round trip per page"
            assert len(page.events) <= limit and not page.events.skipped
            got += page.events.to_dicts()
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        want = expected[::-1] if reverse else expected
        assert ids(got) == ids(want), f"reverse={reverse}"  # each once, in read order


def test_pages_within_bounds_match_the_bounded_read(acmi: Acmi) -> None:
    entity = f"user:{unique('bounds', acmi)}"
    equal_ts_timeline(acmi, entity)
    for since, until in [(BASE + 3, BASE + 150), (BASE + 5_000, BASE + 5_000), (None, BASE + 9)]:
        for reverse in (False, True):
            want = acmi.timeline.read(entity, reverse=reverse, since_ms=since, until_ms=until)
            got = [
                e
                for page in acmi.timeline.pages(
                    entity, limit=11, reverse=reverse, since_ms=since, until_ms=until
                )
                for e in page.events.to_dicts()
            ]
            assert ids(got) == ids(want.to_dicts()), (since, until, reverse)


def test_timeline_route_pages_with_default_and_max_sizes(acmi: Acmi, api: Api) -> None:
    entity = f"user:{unique('route', acmi)}"
    expected = equal_ts_timeline(acmi, entity)
    path = f"/v1/entities/{entity}/timeline"

    first = api.get(path).json()  # no limit: the default page, not 2,500 events
    assert ids(first["events"]) == ids(expected[:DEFAULT_PAGE_SIZE])
    assert first["next_cursor"] and first["skipped"] == []

    for reverse in ("false", "true"):
        got: list[dict[str, Any]] = []
        params: dict[str, Any] = {"limit": MAX_PAGE_SIZE, "reverse": reverse}
        while True:
            response = api.get(path, **params)
            assert response.status_code == 200, response.text
            body = response.json()
            got += body["events"]
            if body["next_cursor"] is None:
                break
            params["cursor"] = body["next_cursor"]
        want = expected[::-1] if reverse == "true" else expected
        assert got == want

    bounded = api.get(path, since_ms=BASE + 5_000, until_ms=BASE + 5_000, limit=200).json()
    assert ids(bounded["events"]) == ids(expected[1_100:1_300])
    rest = api.get(
        path, since_ms=BASE + 5_000, until_ms=BASE + 5_000, cursor=bounded["next_cursor"]
    ).json()
    assert ids(rest["events"]) == ids(expected[1_300:1_400]) and rest["next_cursor"] is None


def test_events_added_at_the_cursor_timestamp_are_not_repeated(acmi: Acmi) -> None:
    """An event added behind the cursor at its very ts (its member sorts first) shifts
    the members of that ts: the next page still starts right after the last one read."""
    entity = f"user:{unique('insert', acmi)}"
    acmi.timeline.extend(entity, [event(n, BASE) for n in range(1, 11)])
    first = acmi.timeline.page(entity, limit=5)
    assert ids(first.events.to_dicts()) == [f"c-{n:05d}" for n in range(1, 6)]
    acmi.timeline.append(entity, event(0, BASE))  # "c-00000" sorts before all of them
    second = acmi.timeline.page(entity, cursor=first.next_cursor, limit=5)
    assert ids(second.events.to_dicts()) == [f"c-{n:05d}" for n in range(6, 11)]
    # The shift used the read's look-ahead member, so whether more follow is unknown
    # until asked: the next page is empty and the last.
    rest = [] if second.next_cursor is None else [second.next_cursor]
    for cursor in rest:
        last = acmi.timeline.page(entity, cursor=cursor, limit=5)
        assert (last.events, last.next_cursor) == ([], None)


def test_a_page_stops_at_its_byte_budget(acmi: Acmi) -> None:
    """A page carries at most MAX_PAGE_BYTES of stored events, whatever ``limit`` says,
    so a page of big events stays under Lambda's 6 MB response limit."""
    entity = f"user:{unique('bytes', acmi)}"
    blob = "x" * (60 * 1024)
    for start in range(0, 40, 10):
        acmi.timeline.extend(
            entity, [event(n, BASE + n, blob=blob) for n in range(start, start + 10)]
        )
    pages = list(acmi.timeline.pages(entity, limit=MAX_PAGE_SIZE))
    assert len(pages) >= 3
    for page in pages:
        size = sum(len(Event.model_validate(e).to_json()) for e in page.events.to_dicts())
        assert size <= MAX_PAGE_BYTES
    assert ids([e for p in pages for e in p.events.to_dicts()]) == [f"c-{n:05d}" for n in range(40)]


def test_a_member_bigger_than_a_page_is_skipped_and_reported(acmi: Acmi, raw: redis.Redis) -> None:
    entity = f"user:{unique('huge', acmi)}"
    acmi.timeline.extend(entity, [event(1, BASE + 1), event(3, BASE + 3)])
    huge = json.dumps(event(2, BASE + 2, blob="x" * MAX_PAGE_BYTES))
    raw.zadd(acmi.keys.timeline(EntityId.parse(entity)), {huge: BASE + 2})
    pages = list(acmi.timeline.pages(entity, limit=10))
    events = [e for p in pages for e in p.events.to_dicts()]
    skipped = [s for p in pages for s in p.events.skipped]
    assert ids(events) == ["c-00001", "c-00003"]
    (reason,) = [s.reason for s in skipped]
    assert str(MAX_PAGE_BYTES) in reason


# --- bad cursors and limits -----------------------------------------------------------------


def forged(*fields: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(fields).encode()).decode().rstrip("=")


BAD_CURSORS = [
    "not a cursor!",
    "%%%",
    forged("t", 0, "1.0", 1),  # a field short
    forged("t", 0, "nan", 1, "0" * 16),
    forged("t", 0, "1.0", 0, "0" * 16),  # positions start at 1
    forged("t", 2, "1.0", 1, "0" * 16),
    forged("t", 0, "1.0", 1, "zz"),
    forged("e", 0, 10, None),  # an entity cursor on a timeline
    forged("t", 1, "1.0", 1, "0" * 16),  # issued for reverse=true, used forward
    base64.urlsafe_b64encode(b"[" * 700).decode(),
    "x" * 1025,
]


@pytest.mark.parametrize("cursor", BAD_CURSORS, ids=range(len(BAD_CURSORS)))
def test_a_malformed_timeline_cursor_is_a_400_naming_cursor(
    acmi: Acmi, api: Api, cursor: str
) -> None:
    entity = f"user:{unique('bad', acmi)}"
    acmi.timeline.append(entity, event(1, BASE))
    response = api.get(f"/v1/entities/{entity}/timeline", cursor=cursor)
    assert response.status_code == 400, response.text
    assert response.json()["field"] == "cursor"


BAD_ENTITY_CURSORS = [
    "not a cursor!",
    forged("e", -1, 10, None),
    forged("e", 2**64, 10, None),
    forged("e", 0, 0, None),
    forged("e", 0, 10, 5),
    forged("e", 0, 10, "x" * 600),
    forged("e", 0, 10, "not base64!"),
    forged("e", 0, 10, ""),
    forged("e", "0", 10, None),
    forged("t", 0, "1.0", 1, "0" * 16),
]


@pytest.mark.parametrize("cursor", BAD_ENTITY_CURSORS, ids=range(len(BAD_ENTITY_CURSORS)))
def test_a_malformed_entities_cursor_is_a_400_naming_cursor(
    acmi: Acmi, api: Api, cursor: str
) -> None:
    response = api.get(f"/v1/namespaces/{unique('bad', acmi)}/entities", cursor=cursor)
    assert response.status_code == 400, response.text
    assert response.json()["field"] == "cursor"


@pytest.mark.parametrize("limit", [0, MAX_PAGE_SIZE + 1])
def test_page_size_beyond_the_maximum_is_a_400_naming_limit(
    acmi: Acmi, api: Api, limit: int
) -> None:
    for path in ("/v1/entities/user:x/timeline", "/v1/namespaces/user/entities"):
        response = api.get(path, limit=limit)
        assert response.status_code == 400, response.text
        assert response.json()["field"] == "limit"
        assert str(MAX_PAGE_SIZE) in response.json()["message"] or limit == 0
    with pytest.raises(ValueError, match="limit"):
        acmi.timeline.page("user:x", limit=limit)
    with pytest.raises(ValueError, match="limit"):
        acmi.list_page("user", limit=limit)
