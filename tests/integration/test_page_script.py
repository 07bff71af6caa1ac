"""page.lua against a model of what a page is, on a real redis-server: for any timeline
(ties, members of mixed sizes) and any position, count, far bound, direction, byte cap and
lead, the script returns exactly the members and scores the model picks, and `more`
exactly when the cap stopped it. How the script steps through the range (its ZRANGE
chunks, the ZCOUNT a first page skips) is its own business: the page is the same."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import closing

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acmi_core.base.settings import Settings
from acmi_core.store import scripts
from acmi_core.store.redis import RedisStore, RespStore
from acmi_core.testing.redis_server import RedisServer
from tests.kit import TEST_DBS

DB = TEST_DBS["client_cpu_equivalence"]
KEY = "acmi:user:page-model:timeline"


@pytest.fixture(scope="module")
def store(redis_server: RedisServer) -> Iterator[RespStore]:
    opened = RedisStore.from_url(redis_server.url_for(DB), Settings(store_timeout_s=30.0))
    assert isinstance(opened, RespStore)
    with closing(opened):
        yield opened


def model(
    zset: dict[bytes, int],
    score: str,
    offset: int,
    count: int,
    bound: int | None,
    reverse: bool,
    max_bytes: int,
    lead: int,
) -> list[object]:
    """What a page holds: from the position's rank, members in order until count, the
    far bound, the range's end or the byte cap (`lead` members not counted; the first
    after them is taken whatever its size)."""
    order = sorted(zset.items(), key=lambda kv: (kv[1], kv[0]), reverse=reverse)
    at = math.inf if score == "+inf" else -math.inf if score == "-inf" else float(score)
    before = [m for m, s in order if (s > at if reverse else s < at)]
    out: list[object] = [0]
    total = 0
    for taken, (member, s) in enumerate(order[len(before) + offset :][:count]):
        if bound is not None and (s < bound if reverse else s > bound):
            break
        if taken >= lead:
            if taken > lead and total + len(member) > max_bytes:
                out[0] = 1
                break
            total += len(member)
        out += [member, str(s).encode()]
    return out


# short members and small caps, so a cap often falls exactly on a member's end
_members = st.dictionaries(
    st.binary(min_size=1, max_size=8),
    st.integers(1, 12),  # few scores: long runs of ties
    max_size=160,
)


@settings(
    max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    _members,
    st.sampled_from(["+inf", "-inf"]) | st.integers(0, 13).map(str),
    st.integers(0, 3),
    st.integers(1, 200),
    st.one_of(st.none(), st.integers(0, 13)),
    st.booleans(),
    st.integers(0, 3),
    st.data(),
)
def test_a_page_is_what_the_model_picks(
    store: RespStore,
    zset: dict[bytes, int],
    score: str,
    offset: int,
    count: int,
    bound: int | None,
    reverse: bool,
    lead: int,
    data: st.DataObject,
) -> None:
    # a cap anywhere, or exactly at the end of one of the members in page order (where
    # `more` turns on or not by one byte)
    order = sorted(zset.items(), key=lambda kv: (kv[1], kv[0]), reverse=reverse)
    ends = [sum(len(m) for m, _ in order[lead : lead + k]) for k in range(2, len(order) + 1)]
    exact = st.sampled_from(ends).flatmap(lambda e: st.sampled_from([e - 1, e, e + 1]))
    max_bytes = data.draw(st.integers(1, 300) | exact if ends else st.integers(1, 300))
    max_bytes = max(1, max_bytes)
    store.execute(("DEL", KEY))
    if zset:
        store.execute(("ZADD", KEY, *[x for m, s in zset.items() for x in (s, m)]))
    args = {
        "score": score,
        "offset": offset,
        "count": count,
        "bound": "" if bound is None else str(bound),
        "reverse": "1" if reverse else "0",
        "max_bytes": max_bytes,
        "lead": lead,
    }
    page = scripts.PAGE.eval(store, {"timeline": KEY}, args)
    got = [page["more"], *page["window"]]  # type: ignore[misc]
    assert got == model(zset, score, offset, count, bound, reverse, max_bytes, lead)
