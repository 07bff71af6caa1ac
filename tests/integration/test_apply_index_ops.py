"""The index ops of lua/apply.lua (ZSET, ZREM, ZKEEP) on every backend: what keeps the
activity index, the open-work indexes and the lessons feed in the same step as the write."""

from __future__ import annotations

import uuid

import pytest

from acmi_core import Acmi
from acmi_core.base.errors import CorruptData, PlanError
from acmi_core.store.writes import WritePlan


def _key(name: str) -> str:
    return f"acmi:_test:{uuid.uuid4().hex[:8]}:{name}"


def _members(acmi: Acmi, key: str) -> list[tuple[bytes, float]]:
    reply = acmi.store.execute(("ZRANGE", key, 0, -1, "WITHSCORES"))
    assert isinstance(reply, list)
    return [(m, float(s)) for m, s in zip(reply[::2], reply[1::2], strict=True)]


def test_zset_moves_a_member_where_zadd_keeps_the_first_score(acmi: Acmi) -> None:
    key = _key("activity")
    plan = WritePlan()
    plan.zadd(key, 1, "a")
    plan.zset(key, 5, "b")
    plan.apply(acmi.store)
    plan = WritePlan()
    plan.zadd(key, 9, "a")  # NX: a keeps 1
    plan.zset(key, 7, "b")  # moves b to 7
    plan.apply(acmi.store)
    assert _members(acmi, key) == [(b"a", 1.0), (b"b", 7.0)]


def test_zrem_and_zkeep(acmi: Acmi) -> None:
    key = _key("feed")
    plan = WritePlan()
    for n in range(10):
        plan.zadd(key, n, f"m{n}")
    plan.zrem(key, "m9")
    plan.zkeep(key, 4)  # the 4 highest scores left after the removal
    plan.apply(acmi.store)
    assert [m for m, _ in _members(acmi, key)] == [b"m5", b"m6", b"m7", b"m8"]
    plan = WritePlan()
    plan.zkeep(key, 100)  # fewer members than n: nothing goes
    plan.zrem(key, "absent")
    plan.apply(acmi.store)
    assert len(_members(acmi, key)) == 4


def test_index_ops_refuse_a_wrong_typed_key_and_write_nothing(acmi: Acmi) -> None:
    key, other = _key("string"), _key("zset")
    acmi.store.execute(("SET", key, "text"))
    plan = WritePlan()
    plan.zset(other, 1, "x")
    plan.zset(key, 1, "x")
    with pytest.raises(CorruptData):
        plan.apply(acmi.store)
    assert acmi.store.execute(("EXISTS", other)) == 0


@pytest.mark.parametrize("n", [0, -1, "x"])
def test_zkeep_needs_a_positive_count(acmi: Acmi, n: object) -> None:
    plan = WritePlan()
    plan._op("ZKEEP", _key("feed"), n)  # type: ignore[arg-type]
    with pytest.raises(PlanError, match="n is not a positive count"):
        plan.apply(acmi.store)


def test_zhas_keeps_a_member_while_its_hash_has_a_field(acmi: Acmi) -> None:
    """The store's namespace index: ZHAS reads the hash as the ops before left it."""
    index, items = _key("storens"), _key("items")
    plan = WritePlan()
    plan.hset(items, "k1", "{}")
    plan.zhas(index, "ns", items)
    plan.apply(acmi.store)
    assert _members(acmi, index) == [(b"ns", 0.0)]
    plan = WritePlan()
    plan.hdel(items, "k1")
    plan.zhas(index, "ns", items)
    plan.apply(acmi.store)
    assert _members(acmi, index) == []
    plan = WritePlan()
    plan.hset(items, "k2", "{}")
    plan.hdel(items, "k2")  # put and deleted in one run: still empty
    plan.zhas(index, "ns", items)
    plan.apply(acmi.store)
    assert _members(acmi, index) == []
    acmi.store.execute(("SET", items, "text"))
    plan = WritePlan()
    plan.zhas(index, "ns", items)
    with pytest.raises(CorruptData):
        plan.apply(acmi.store)


def test_hput_keeps_the_created_at_it_finds(acmi: Acmi) -> None:
    items = _key("items")
    for text in ('{"created_at":100,"v":1}', '{"created_at":200,"v":2}'):
        plan = WritePlan()
        plan.hput(items, "k", text)
        plan.apply(acmi.store)
    assert acmi.store.execute(("HGET", items, "k")) == b'{"created_at":100,"v":2}'
    plan = WritePlan()
    plan.hput(items, "k", '{"v":3}')  # not an item's text: refused, nothing written
    with pytest.raises(PlanError):
        plan.apply(acmi.store)
    assert acmi.store.execute(("HGET", items, "k")) == b'{"created_at":100,"v":2}'


def test_zbump_only_moves_an_existing_member_later(acmi: Acmi) -> None:
    key = _key("expiry")
    plan = WritePlan()
    plan.zset(key, 50, "a")
    plan.zbump(key, 40, "a")  # earlier: kept at 50
    plan.zbump(key, 10, "gone")  # absent: not added (a delete landed first)
    plan.apply(acmi.store)
    plan = WritePlan()
    plan.zbump(key, 60, "a")
    plan.apply(acmi.store)
    assert _members(acmi, key) == [(b"a", 60.0)]


def test_hdue_deletes_only_what_is_still_due_in_its_run(acmi: Acmi) -> None:
    items, expiry = _key("items"), _key("expiry")
    plan = WritePlan()
    for field, due in (("old", 10), ("renewed", 500)):
        plan.hset(items, field, "{}")
        plan.zset(expiry, due, field)
    plan.apply(acmi.store)
    plan = WritePlan()
    plan.hdue(items, "old", expiry, "old", 100)
    plan.hdue(items, "renewed", expiry, "renewed", 100)  # its expiry moved past now
    plan.hdue(items, "gone", expiry, "gone", 100)  # neither there: nothing
    assert plan.apply(acmi.store) == [1, 0, 0]
    assert acmi.store.execute(("HKEYS", items)) == [b"renewed"]
    assert _members(acmi, expiry) == [(b"renewed", 500.0)]
