"""A merge of timelines (``cat``) stops at the page byte cap inside Redis, not after:
one page of 20 timelines of 200 KB events makes Redis send about ``MAX_PAGE_BYTES``
(INFO stats total_net_output_bytes of the real redis-server), not every timeline's
``limit`` events, and says where it stopped with a cursor; following it returns every
event exactly once, in the merge's order, ties in ts within and across timelines
included. Each surface is held to it: the core (real Redis and the Upstash double, two
tenants), the cat tool in process and through the mcp function's HTTP handler, and the
CLI's backends (local and ``--api``)."""

from __future__ import annotations

import asyncio
import heapq
import json
import random
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import redis
from mcp.types import CallToolResult, TextContent

from acmi_core import Acmi, Settings, create_acmi
from acmi_core.api.app import create_app
from acmi_core.api.context import ApiContext
from acmi_core.auth import apikeys
from acmi_core.auth.apikeys import Scope
from acmi_core.base.errors import AcmiValidationError, StoreCommandError
from acmi_core.base.pages import MAX_PAGE_BYTES
from acmi_core.cli.backend import LocalBackend
from acmi_core.cli.remote import HttpBackend
from acmi_core.entities.api import MAX_CAT_ENTITIES
from acmi_core.mcp.server import build_server
from acmi_core.store.base import Arg, Command, Reply, Script, Store
from acmi_core.store.redis import RedisStore
from acmi_core.testing.redis_server import RedisServer
from functions.mcp import handler as mcp_handler
from tests.e2e.test_mcp_http import post, response_json, rpc
from tests.kit import DB as KIT_DB
from tests.kit import TEST_DBS, configured, serving

DB = TEST_DBS["cat_caps"]  # this module's own database (tests/kit.py TEST_DBS)
NAMES = [f"user:cat{i:02d}" for i in range(MAX_CAT_ENTITIES)]
EVENTS = 10  # per timeline: 20 x 10 x 200 KB = 40 MB, forty times a page's cap
EVENT_BYTES = 200_000
NOW_MS = int(time.time() * 1000)
BASE = NOW_MS - 3_600_000  # an hour ago: inside the cat tool's default window (24h)
# A page's stored events plus the reply's framing (RESP headers, scores, timeline numbers)
REPLY_BOUND = MAX_PAGE_BYTES + 64 * 1024
# What a page's answer may weigh once rendered (each event's JSON re-rendered, the entity
# beside it): the cap and room for the JSON around it, far under Lambda's 6 MB
ANSWER_BOUND = MAX_PAGE_BYTES + 128 * 1024
# The mcp function's answer: the tool's text (indented, escaped in JSON-RPC) and its
# structured content, each one page
MCP_BOUND = 2 * ANSWER_BOUND + 256 * 1024


def event(name: str, k: int, ts: int, size: int) -> str:
    body = {"ts": ts, "source": name, "kind": "note", "correlationId": f"{name}/{k}"}
    return json.dumps({**body, "summary": f"e{k}", "payload": {"blob": "x" * size}})


def fill(raw: redis.Redis, prefix: str, names: Sequence[str], events: int, size: int) -> None:
    """``events`` per timeline, event k of every timeline at the same ts (a tie across all
    of them at every ts), written as any tool would."""
    for name in names:
        members = {event(name, k, BASE + k, size): BASE + k for k in range(events)}
        raw.zadd(f"{prefix}{name}:timeline", members)  # type: ignore[arg-type]


def expected(raw: redis.Redis, prefix: str, names: Sequence[str]) -> list[str]:
    """The merge's order from the stored timelines: ts descending, then the order given,
    then each timeline's own order (ZRANGE REV)."""
    streams = [
        [
            (score, json.loads(member)["correlationId"])
            for member, score in raw.zrange(
                f"{prefix}{name}:timeline", 0, -1, desc=True, withscores=True
            )
        ]
        for name in names
    ]
    return [cid for _, cid in heapq.merge(*streams, key=lambda pair: -pair[0])]


def sent(raw: redis.Redis) -> int:
    return int(raw.info("stats")["total_net_output_bytes"])


class Measured:
    """A real store, recording the bytes of each round trip's reply (what Redis sent)."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.name = inner.name
        self.replies: list[int] = []

    def execute(self, command: Command) -> Reply:
        return self._seen(self.inner.execute(command))

    def pipeline(self, commands: Sequence[Command]) -> list[Reply | StoreCommandError]:
        replies = self.inner.pipeline(commands)
        self.replies.append(sum(size(r) for r in replies if not isinstance(r, Exception)))
        return replies

    def eval(self, script: Script, keys: Sequence[str], args: Sequence[Arg]) -> Reply:
        return self._seen(self.inner.eval(script, keys, args))

    def close(self) -> None:
        self.inner.close()

    def _seen(self, reply: Reply) -> Reply:
        self.replies.append(size(reply))
        return reply


def size(reply: object) -> int:
    if isinstance(reply, list):
        return sum(size(r) for r in reply)
    return len(reply) if isinstance(reply, bytes) else 8


@dataclass
class Big:
    acmi: Acmi  # tenant "default": 20 timelines of 10 large events
    other: Acmi  # tenant "other": the same entity names, two small events each
    raw: redis.Redis
    store: RedisStore


@pytest.fixture(scope="module")
def big(redis_server: RedisServer) -> Iterator[Big]:
    redis_server.flush(DB)
    store = RedisStore.from_url(redis_server.url_for(DB))
    acmi = create_acmi(store, Settings(auth_cache_s=0))
    other = acmi.for_tenant("other")
    with redis.Redis.from_url(redis_server.url_for(DB)) as raw:
        fill(raw, "acmi:", NAMES, EVENTS, EVENT_BYTES)
        fill(raw, "acmi:tenant:other:", NAMES, 2, 10)
        acmi.timeline.cat_page(NAMES[:1], limit=1)  # the merge script loaded (EVALSHA cache)
        yield Big(acmi, other, raw, store)
    store.close()


def walk(page: Callable[[str | None], tuple[list[str], str | None, int]]) -> list[str]:
    """Every page from the first, following next_cursor; each page's size held."""
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        cids, cursor, weight = page(cursor)
        assert cids, pages  # every page moves on
        assert weight <= ANSWER_BOUND, (pages, weight)
        seen += cids
        pages += 1
        if cursor is None:
            break
    assert pages >= EVENTS * len(NAMES) * EVENT_BYTES // MAX_PAGE_BYTES
    return seen


def test_a_merge_page_reads_its_cap_not_every_timeline(big: Big) -> None:
    """Before: cat(20 entities, limit=1000) was one ZRANGE pipeline that made Redis send
    all 40 MB (1,000 of 256 KB a timeline: 5 GB) and answered all of it."""
    every = expected(big.raw, "acmi:", NAMES)
    assert len(every) == len(NAMES) * EVENTS

    def page(cursor: str | None) -> tuple[list[str], str | None, int]:
        before = sent(big.raw)
        got = big.acmi.timeline.cat_page(NAMES, cursor=cursor, limit=1000)
        assert sent(big.raw) - before < REPLY_BOUND
        weight = sum(len(json.dumps({"entity": n, **e.to_dict()})) for n, e in got.events)
        assert {n for n, e in got.events} <= set(NAMES)
        assert all(e.correlationId.startswith(n + "/") for n, e in got.events)
        return [e.correlationId for _, e in got.events], got.next_cursor, weight

    assert walk(page) == every  # each once, in the merge's order (20-way ties at every ts)


def test_cat_walks_the_pages_each_read_bounded(big: Big) -> None:
    """``cat`` (what ``acmi cat`` runs locally) answers what it always did, ``limit`` events
    of the merge, in one bounded round trip per page."""
    measured = Measured(big.store)
    acmi = create_acmi(measured, Settings())
    merged = acmi.timeline.cat(NAMES, limit=1000)
    assert [e.correlationId for _, e in merged] == expected(big.raw, "acmi:", NAMES)
    assert len(measured.replies) >= 40 and max(measured.replies) < REPLY_BOUND
    measured.replies.clear()
    assert len(acmi.timeline.cat(NAMES, limit=3)) == 3 and len(measured.replies) == 1


def test_the_other_tenant_merges_its_own_timelines(big: Big) -> None:
    got = big.other.timeline.cat_page(NAMES, limit=1000)
    assert got.next_cursor is None  # under the cap: no cursor, as before
    assert [e.correlationId for _, e in got.events] == expected(
        big.raw, "acmi:tenant:other:", NAMES
    )
    assert all(len(e.to_json()) < 1000 for _, e in got.events)
    first = big.acmi.timeline.cat_page(NAMES, limit=1000)
    assert first.next_cursor is not None
    # a cursor names a place in a merge, not a tenant's data: the other tenant's same
    # entities continue from that place in its own timelines
    rest = big.other.timeline.cat_page(NAMES, cursor=first.next_cursor, limit=1000)
    assert all(len(e.to_json()) < 1000 for _, e in rest.events)


def test_a_cursor_belongs_to_its_entities(big: Big) -> None:
    cursor = big.acmi.timeline.cat_page(NAMES, limit=1000).next_cursor
    assert cursor is not None
    for names in (NAMES[::-1], NAMES[:5]):
        with pytest.raises(AcmiValidationError, match="other entities") as info:
            big.acmi.timeline.cat_page(names, cursor=cursor)
        assert info.value.field == "cursor"
    page = big.acmi.timeline.page(NAMES[0], limit=1, reverse=True).next_cursor
    for bad in ("x", "eyJ4Ijox", page):
        with pytest.raises(AcmiValidationError) as info:
            big.acmi.timeline.cat_page(NAMES, cursor=bad)
        assert info.value.field == "cursor"


# --- ties and concurrent writes, on real Redis and the Upstash double ------------------------


@pytest.fixture(params=["redis", "upstash"])
def small(
    request: pytest.FixtureRequest, redis_server: RedisServer
) -> Iterator[tuple[Acmi, redis.Redis, str]]:
    """A tenant of its own seen through each store (direct, or the REST double in front),
    a raw client on the same database and the tenant's key prefix."""
    tenant = f"ties-{uuid.uuid4().hex[:8]}"
    prefix = f"acmi:tenant:{tenant}:"
    if request.param == "redis":
        store: Store = RedisStore.from_url(redis_server.url_for(DB))
        url = redis_server.url_for(DB)
    else:
        store = request.getfixturevalue("upstash_store")
        url = redis_server.url_for(KIT_DB["upstash_double"])
    with redis.Redis.from_url(url) as raw:
        yield create_acmi(store, Settings(), tenant=tenant), raw, prefix
        left = list(raw.scan_iter(match=f"{prefix}*"))
        if left:
            raw.delete(*left)
    if request.param == "redis":
        store.close()


def test_ties_across_timelines_are_neither_lost_nor_repeated(
    small: tuple[Acmi, redis.Redis, str],
) -> None:
    """Five timelines of events of 3 ts only, 100-400 KB each (a page holds 2-10): every
    cursor lands inside a run of equal ts, in one timeline or across several."""
    acmi, raw, prefix = small
    names = NAMES[:5]
    rnd = random.Random(21)
    for name in names:
        members = {}
        for k in range(12):
            ts = BASE + rnd.randint(0, 2)
            members[event(name, k, ts, rnd.randint(100_000, 400_000))] = ts
        raw.zadd(f"{prefix}{name}:timeline", members)  # type: ignore[arg-type]
    every = expected(raw, prefix, names)
    seen: list[str] = []
    cursor: str | None = None
    while True:
        page = acmi.timeline.cat_page(names, cursor=cursor, limit=1000)
        assert sum(len(e.to_json()) for _, e in page.events) <= MAX_PAGE_BYTES or (
            len(page.events) == 1
        )
        seen += [e.correlationId for _, e in page.events]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == every
    assert [e.correlationId for _, e in acmi.timeline.cat(names, limit=1000)] == every
    # a window: the same merge, cut at both ends
    window = acmi.timeline.cat(names, limit=1000, since_ms=BASE + 1, until_ms=BASE + 1)
    assert [e.correlationId for _, e in window] == [
        cid for cid in every if ts_of(raw, prefix, cid) == BASE + 1
    ]


def ts_of(raw: redis.Redis, prefix: str, cid: str) -> float:
    name = cid.split("/", maxsplit=1)[0]
    for member, score in raw.zrange(f"{prefix}{name}:timeline", 0, -1, withscores=True):
        if json.loads(member)["correlationId"] == cid:
            return float(score)
    raise AssertionError(cid)


def test_an_event_added_at_the_cursors_ts_does_not_make_the_next_page_repeat_one(
    small: tuple[Acmi, redis.Redis, str],
) -> None:
    """An event another writer adds meanwhile at the very ts of the cursor's event, in its
    timeline and sorting before it, lands behind the cursor (as for a timeline page)."""
    acmi, raw, prefix = small
    names = NAMES[:2]
    for name in names:
        members = {event(name, k, BASE, 300_000 + k): BASE for k in range(8)}
        raw.zadd(f"{prefix}{name}:timeline", members)  # type: ignore[arg-type]
    every = expected(raw, prefix, names)
    first = acmi.timeline.cat_page(names, limit=1000)
    assert first.next_cursor is not None
    seen = [e.correlationId for _, e in first.events]
    last_name, _ = first.events[-1]
    # "{" sorts after every member's '{"ts"': this one comes first in REV order at BASE
    raw.zadd(f"{prefix}{last_name}:timeline", {"{~ added meanwhile": BASE})
    cursor: str | None = first.next_cursor
    while cursor is not None:
        page = acmi.timeline.cat_page(names, cursor=cursor, limit=1000)
        seen += [e.correlationId for _, e in page.events]
        cursor = page.next_cursor
    assert seen == every


# --- the cat tool: in process, and the mcp function's HTTP answer ----------------------------


def test_the_cat_tool_answers_one_capped_page_with_a_cursor(big: Big) -> None:
    server = build_server(big.acmi, Scope.READ)
    every = expected(big.raw, "acmi:", NAMES)

    def page(cursor: str | None) -> tuple[list[str], str | None, int]:
        args: dict[str, Any] = {"entities": NAMES, "since": "7d", "limit": 1000}
        if cursor is not None:
            args["cursor"] = cursor
        text = tool_text(asyncio.run(server.call_tool("cat", args)))
        body = json.loads(text)
        assert list(body)[:3] == ["since", "until", "events"]  # the keys as before, then one
        cids = [e["correlationId"] for e in body["events"]]
        assert all(
            e["entity"] == cid.split("/")[0] for e, cid in zip(body["events"], cids, strict=True)
        )
        return cids, body.get("next_cursor"), len(text)

    assert walk(page) == every
    under = tool_text(
        asyncio.run(server.call_tool("cat", {"entities": NAMES, "since": "7d", "limit": 3}))
    )
    assert "next_cursor" not in json.loads(under)  # under the cap: the body as before


def tool_text(result: Any) -> str:
    assert isinstance(result, CallToolResult) and not result.isError, result
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


def test_the_mcp_functions_answer_stays_under_the_cap(big: Big) -> None:
    """Through the Lambda handler, as API Gateway invokes it: before, the answer of this
    call was 40 MB (Lambda refuses a response over 6 MB)."""
    key, _ = apikeys.mint(big.store, tenant="default", scope="read", name="mcp", now_ms=0)
    call = rpc("tools/call", {"name": "cat", "arguments": {"entities": NAMES, "limit": 1000}})
    for handler in configured(mcp_handler, big.store):
        response = post(handler, call, key=key)
        assert response["statusCode"] == 200, response
        # the result carries the page twice, as text and as structured content
        assert len(response["body"]) < MCP_BOUND < 6_000_000
        result = response_json(response)["result"]
        assert result["isError"] is False
        body = json.loads(result["content"][0]["text"])
        assert body["next_cursor"] and body["events"]
        follow = rpc(
            "tools/call",
            {
                "name": "cat",
                "arguments": {"entities": NAMES, "limit": 1000, "cursor": body["next_cursor"]},
            },
        )
        then = json.loads(
            response_json(post(handler, follow, key=key))["result"]["content"][0]["text"]
        )
        every = expected(big.raw, "acmi:", NAMES)
        got = [e["correlationId"] for e in body["events"] + then["events"]]
        assert got == every[: len(got)]


# --- the CLI's backends: local, and --api over the real API ------------------------------------


class Counting(httpx.BaseTransport):
    """The real transport, adding up the bytes of each answer."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport(retries=0)
        self.answers: list[int] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        body = response.read()
        self.answers.append(len(body))
        return httpx.Response(response.status_code, headers=response.headers, content=body)

    def close(self) -> None:
        self.inner.close()


def test_the_cli_backends_answer_alike_each_read_bounded(big: Big) -> None:
    """``acmi cat`` prints ``limit`` events as it always did, locally and with ``--api``;
    locally each round trip is one capped page, and with ``--api`` a timeline's next page
    is asked for only when the merge reaches it. Before, ``--api`` fetched every
    timeline's ``limit`` events (here all 40 MB) to print 10 of them."""
    every = expected(big.raw, "acmi:", NAMES)
    local = LocalBackend(big.acmi, "store").cat(NAMES, limit=10, since_ms=None, until_ms=None)
    assert [e["correlationId"] for e in local] == every[:10]
    key, _ = apikeys.mint(big.store, tenant="default", scope="read", name="cli", now_ms=0)
    counter = Counting()
    with (
        serving(create_app(ApiContext(big.acmi, offload=True))) as url,
        closing(HttpBackend(url, key, transport=counter)) as remote,
    ):
        answer = remote.cat(NAMES, limit=10, since_ms=None, until_ms=None)
        assert answer == local
        # one page per timeline (each under the API's page cap): before, two each
        assert len(counter.answers) == len(NAMES)
        assert max(counter.answers) < ANSWER_BOUND
        whole = remote.cat(NAMES, limit=1000, since_ms=None, until_ms=None)
    assert [e["correlationId"] for e in whole] == every
    assert whole == LocalBackend(big.acmi, "store").cat(
        NAMES, limit=1000, since_ms=None, until_ms=None
    )
