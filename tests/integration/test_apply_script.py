"""The Lua write path (lua/apply.lua) on every backend, against stored JSON written by
other tools: whitespace, escapes, tricky strings, duplicates, corruption, wrong types."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest
import redis

from acmi_core import Acmi, CorruptData, EntityId
from acmi_core.base.errors import Pending, PlanError, StoreCommandError
from acmi_core.base.model import tenant_id_fill
from acmi_core.store.base import Arg, Reply, Script
from acmi_core.store.writes import APPLY, FieldMode, WritePlan, script_error


def raw_set(acmi: Acmi, key: str, value: str | bytes) -> None:
    acmi.store.execute(("SET", key, value))


def raw_get(acmi: Acmi, key: str) -> bytes:
    value = acmi.store.execute(("GET", key))
    assert isinstance(value, bytes)
    return value


@pytest.mark.parametrize(
    ("stored", "expected"),
    [
        ('{ "a" : 1 ,\n "b" : [ 1, {"x": "}"} ] }', {"a": 1, "b": [1, {"x": "}"}]}),
        ('{"s":"a\\\\","t":"}{][","u":"say \\"hi\\""}', {"s": "a\\", "t": "}{][", "u": 'say "hi"'}),
        ('{"n":-1.5e-7,"t":true,"f":false,"z":null,"e":{},"l":[]}', None),
        ("{}", {}),
        ("{ }", {}),
        ("null", {}),
        ('{"big":12345678901234567890123}', {"big": 12345678901234567890123}),
    ],
)
def test_set_splices_into_json_written_by_others(acmi: Acmi, stored: str, expected: object) -> None:
    entity = acmi_entity(acmi)
    key = acmi.keys.signals(EntityId.parse(entity))
    raw_set(acmi, key, stored)
    acmi.signals.set(entity, "added", [])
    before = json.loads(stored) or {}
    assert acmi.signals.all(entity) == {
        **(expected if expected is not None else before),
        "added": [],
    }
    # the stored text is still JSON, parsed by a strict parser
    assert json.loads(raw_get(acmi, key))["added"] == []


def test_escaped_key_names_match_their_decoded_form(acmi: Acmi) -> None:
    entity = acmi_entity(acmi)
    key = acmi.keys.signals(EntityId.parse(entity))
    raw_set(acmi, key, '{"\\u00e9t\\u00e9":1,"q\\"k":2,"\\ud83d\\ude00":3}')
    acmi.signals.update(entity, {"été": 10, 'q"k': 20, "😀": 30})
    stored = raw_get(acmi, key).decode()
    assert json.loads(stored) == {"été": 10, 'q"k': 20, "😀": 30}
    assert stored.count(":") == 3  # replaced in place, not appended as duplicates


def test_duplicate_stored_keys_collapse_on_set(acmi: Acmi) -> None:
    entity = acmi_entity(acmi)
    key = acmi.keys.signals(EntityId.parse(entity))
    raw_set(acmi, key, '{"a":1,"b":2,"a":3}')
    acmi.signals.set(entity, "a", 9)
    assert raw_get(acmi, key) == b'{"a":9,"b":2}'
    acmi.signals.delete(entity, "b")
    acmi.signals.delete(entity, "a")
    assert raw_get(acmi, key) == b"{}"
    assert acmi.signals.all(entity) == {}


# JSON other clients legitimately write: lone surrogates (JavaScript's JSON.stringify),
# integers no double holds, exponents, whitespace; an edit keeps their bytes exactly
FOREIGN_JSON = [
    '{"s":"\\ud800","t":"x\\udc00y","u":"\\ud83d\\ude00","v":"\\uDBFF"}',
    '{"\\ud800":1,"k":0,"\\udfff\\ud800":2}',
    '{"big":' + "9" * 120 + ',"neg":-' + "1" * 100 + ',"e":1E+400,"f":-0.5e-300,"g":0}',
    '{ "a" : [ 1 , { "b" : null } ] ,\n\t"k" : true }',
]


@pytest.mark.parametrize("text", FOREIGN_JSON)
def test_an_edit_keeps_foreign_json_byte_for_byte(acmi: Acmi, raw: redis.Redis, text: str) -> None:
    entity = acmi_entity(acmi)
    eid = EntityId.parse(entity)
    raw.set(acmi.keys.signals(eid), text)
    raw.set(acmi.keys.profile(eid), text)
    members = "{" + text[1:-1].strip()  # the members as written, from the first to the last
    acmi.signals.set(entity, "added", 1)
    assert raw.get(acmi.keys.signals(eid)) == members.encode() + b',"added":1}'
    acmi.profile.merge(entity, {"added": [1]})
    merged = raw.get(acmi.keys.profile(eid))
    assert isinstance(merged, bytes) and merged.startswith(members.encode() + b',"added":[1],')


def test_an_edit_finds_a_name_stored_with_escapes(acmi: Acmi, raw: redis.Redis) -> None:
    entity = acmi_entity(acmi)
    key = acmi.keys.signals(EntityId.parse(entity))
    raw.set(key, '{"\\ud800":1,"\\u006b\\u0001":2,"\\/\\b":3}')
    acmi.signals.update(entity, {"k\x01": 20, "/\b": 30})
    assert raw.get(key) == b'{"\\ud800":1,"\\u006b\\u0001":20,"\\/\\b":30}'


def test_key_order_is_kept_and_new_keys_append(acmi: Acmi) -> None:
    entity = acmi_entity(acmi)
    acmi.profile.set(entity, {"z": 1, "a": 2})
    acmi.profile.merge(entity, {"a": 3, "m": 4})
    text = raw_get(acmi, acmi.keys.profile(EntityId.parse(entity))).decode()
    assert list(json.loads(text)) == ["z", "a", "actor_type", "tenant_id", "m"]


CORRUPT_STORED = [
    *("not json", "[1,2]", '{"a":}', '{"a":1', '"text"', '{"a":1}x', "{}x", "{ } {}"),
    '{"a\\x":1}',
    # scalars and nested values are checked by the grammar too, not only skipped over
    '{"a":tru}',
    '{"a":1.2.3}',
    '{"a":01}',
    '{"a":-}',
    '{"a":1.}',
    '{"a":.5}',
    '{"a":+1}',
    '{"a":1e}',
    '{"a":NaN}',
    '{"a":Infinity}',
    '{"a":nulll}',
    '{"a":"\\x"}',
    '{"a":"\\u12G4"}',
    '{"a":"tab\there"}',
    '{"a":1,}',
    '{"a":[tru]}',
    '{"a":[1,]}',
    '{"a":[1 2]}',
    '{"a":{"b"}}',
    '{"a":{"b":1,}}',
    '{"a":[{"b":nul}]}',
    '{"a":[1}',
    '{"a":{"b":1]}',
    '{"a":[]]}',
]


@pytest.mark.parametrize("stored", CORRUPT_STORED)
def test_corrupt_stored_object_raises_and_writes_nothing(acmi: Acmi, stored: str) -> None:
    entity, other = acmi_entity(acmi), acmi_entity(acmi)
    key = acmi.keys.signals(EntityId.parse(entity))
    raw_set(acmi, key, stored)
    with pytest.raises(CorruptData) as err, acmi.batch() as batch:
        batch.profile.set(other, {"written": True})
        batch.signals.set(entity, "x", 1)
    assert err.value.field == key
    assert acmi.profile.get(other) is None  # all or nothing
    assert raw_get(acmi, key) == stored.encode()


def test_wrong_redis_type_raises_before_any_write(acmi: Acmi) -> None:
    entity, other = acmi_entity(acmi), acmi_entity(acmi)
    key = acmi.keys.signals(EntityId.parse(entity))
    acmi.store.execute(("HSET", key, "f", "v"))
    with pytest.raises(CorruptData, match="holds a hash"), acmi.batch() as batch:
        batch.timeline.append(
            other, {"source": "s", "kind": "k", "correlationId": "c", "summary": "s"}
        )
        batch.signals.set(entity, "x", 1)
    assert acmi.timeline.size(other) == 0
    assert acmi.list("user").count(other) == 0


def test_ops_in_one_batch_compose_in_order(acmi: Acmi) -> None:
    entity = acmi_entity(acmi)
    with acmi.batch() as batch:
        batch.profile.set(entity, {"a": 1})
        batch.profile.merge(entity, {"b": 2})
        batch.profile.delete(entity)
        batch.profile.merge(entity, {"c": 3})
        batch.signals.set(entity, "x", 1)
        batch.signals.delete(entity, "x")
        batch.signals.set(entity, "y", 2)
    assert acmi.profile.get(entity) == {
        "c": 3,
        "actor_type": "human",
        "tenant_id": tenant_id_fill(acmi.tenant),
    }
    assert acmi.signals.all(entity) == {"y": 2}


def test_large_object_edit(acmi: Acmi) -> None:
    entity = acmi_entity(acmi)
    values = {f"k{i}": {"i": i, "s": "x" * 20, "l": [i, [], {}]} for i in range(1000)}  # < 64 KiB
    acmi.signals.update(entity, values)
    acmi.signals.set(entity, "k500", "changed")
    stored = acmi.signals.all(entity)
    assert len(stored) == 1000
    assert stored["k500"] == "changed"
    assert stored["k999"] == values["k999"]


def test_duplicate_names_keep_first_position_per_mode(acmi: Acmi) -> None:
    key = acmi.keys.signals(EntityId.parse(acmi_entity(acmi)))

    def edit(*fields: tuple[FieldMode, str, str]) -> bytes:
        plan = WritePlan()
        plan.edit_object(key, list(fields))
        (doc,) = plan.apply(acmi.store)
        assert isinstance(doc, bytes)
        assert raw_get(acmi, key) == doc
        return doc

    raw_set(acmi, key, '{"a":1,"b":2,"\\u0061":3,"a":4}')
    assert (
        edit(("setnx", "a", "5"), ("setnx", "c", "6")) == b'{"a":1,"b":2,"\\u0061":3,"a":4,"c":6}'
    )
    assert edit(("set", "a", "7"), ("set", "a", "8")) == b'{"a":8,"b":2,"c":6}'
    assert edit(("del", "a", "null"), ("setnx", "a", "9"), ("del", "x", "null")) == (
        b'{"b":2,"c":6,"a":9}'
    )
    raw_set(acmi, key, '{"a":1,"a":2,"b":3,"a":4}')
    assert edit(("del", "a", "null"), ("set", "b", "5")) == b'{"b":5}'


# -- a malformed plan is a bug: PlanError, and nothing is written ----------------------------


def apply_raw(acmi: Acmi, keys: Sequence[str], args: Sequence[Arg]) -> Reply:
    """Run apply.lua on hand-made arguments, mapping its errors as WritePlan.apply does."""
    try:
        return acmi.store.eval(APPLY, keys, args)
    except StoreCommandError as exc:
        raise script_error(exc) from None


def three_keys(acmi: Acmi) -> list[str]:
    eid = EntityId.parse(acmi_entity(acmi))
    return [acmi.keys.profile(eid), acmi.keys.timeline(eid), acmi.keys.signals(eid)]


def assert_nothing_written(acmi: Acmi, keys: Sequence[str]) -> None:
    assert [acmi.store.execute(("EXISTS", key)) for key in keys] == [0] * len(keys)


GOOD_OPS: list[Arg] = ["SET", 1, '{"a":1}', "ZADD", 2, 5, "m"]  # two ops, both fine, then op 3


@pytest.mark.parametrize(
    ("op", "complaint"),
    [
        (["NOPE", 3, "x"], "op 3: unknown op code 'NOPE'"),
        (["set", 3, "x"], "op 3: unknown op code 'set'"),
        (["SET", 0, "x"], "op 3 SET: key index is not in 1..3 '0'"),
        (["SET", 4, "x"], "op 3 SET: key index is not in 1..3 '4'"),
        (["SADD", -1, "x"], "op 3 SADD: key index"),
        (["SADD", "1.0", "x"], "op 3 SADD: key index"),
        (["DEL", "k"], "op 3 DEL: key index"),
        (["ZADD", 3, "abc", "m"], "op 3 ZADD: score is not a number 'abc'"),
        (["ZADD", 3, "nan", "m"], "op 3 ZADD: score"),
        (["ZADD", 3, "", "m"], "op 3 ZADD: score"),
        (["ZADD", 3, " 1", "m"], "op 3 ZADD: score"),
        (["ZADD", 3, "0x10", "m"], "op 3 ZADD: score"),
        (["ZADD", 3, "1e999", "m"], "op 3 ZADD: score"),
        (["ZADD", 3, "1e-999", "m"], "op 3 ZADD: score"),
        (["ONCE", 3, 0, "v"], "op 3 ONCE: ttl_ms is not a positive integer '0'"),
        (["ONCE", 3, "abc", "v"], "op 3 ONCE: ttl_ms"),
        (["ONCE", 3, -5, "v"], "op 3 ONCE: ttl_ms"),
        (["ONCE", 3, "1.5", "v"], "op 3 ONCE: ttl_ms"),
        (["ONCE", 3, "1e3", "v"], "op 3 ONCE: ttl_ms"),
        (["ONCE", 3, 10**20, "v"], "op 3 ONCE: ttl_ms"),
        # OBJ: one argument a field, its mode's letter, its name as JSON text, ':', its value
        (["OBJ", 3, 1, 'p"a":1'], "op 3 OBJ: field 1 mode is unknown 'p'"),
        (["OBJ", 3, "one"], "op 3 OBJ: field count is not a count 'one'"),
        (["OBJ", 3, 2, 's"a":1'], "op 3 OBJ: arguments missing"),
        (["OBJ", 3, 1, "sa:1"], "op 3 OBJ: field 1 does not start with its name as a JSON"),
        (["OBJ", 3, 1, 's"a" :1'], "op 3 OBJ: field 1 does not start with its name as a JSON"),
        (["OBJ", 3, 1, 's"a'], "op 3 OBJ: field 1 does not start with its name as a JSON"),
        (["OBJ", 3, 1, 's"a":tru'], "op 3 OBJ: field 1 value is not one JSON value"),
        (["OBJ", 3, 1, 's"a":1 2'], "op 3 OBJ: field 1 value is not one JSON value"),
        (["OBJ", 3, 1, 's"a":'], "op 3 OBJ: field 1 value is not one JSON value"),
        (["OBJ", 3, 1, 's"a":[1'], "op 3 OBJ: field 1 value is not one JSON value"),
        (["HSET", 3, "f"], "op 3 HSET: arguments missing"),
    ],
)
def test_a_malformed_op_raises_plan_error_and_writes_nothing(
    acmi: Acmi, op: list[Arg], complaint: str
) -> None:
    keys = three_keys(acmi)
    with pytest.raises(PlanError) as err:
        apply_raw(acmi, keys, [3, *GOOD_OPS, *op])
    assert err.value.message.startswith(complaint), err.value.message
    assert err.value.message.endswith("; nothing was written")
    assert_nothing_written(acmi, keys)


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["two", *GOOD_OPS], "plan: op count is not a count 'two'"),
        ([3, *GOOD_OPS], "op 3: unknown op code"),  # one op short: ARGV ran out
        ([1, *GOOD_OPS], "plan: 4 arguments after its last op 'ZADD'"),
    ],
)
def test_a_miscounted_plan_raises_plan_error_and_writes_nothing(
    acmi: Acmi, args: list[Arg], complaint: str
) -> None:
    keys = three_keys(acmi)
    with pytest.raises(PlanError, match="^" + complaint):
        apply_raw(acmi, keys, args)
    assert_nothing_written(acmi, keys)


def test_bad_write_plan_arguments_raise_plan_error_through_apply(acmi: Acmi) -> None:
    keys = three_keys(acmi)
    for bad in (
        lambda plan: plan.zadd(keys[1], float("nan"), "m"),  # Redis would refuse it in phase 2
        lambda plan: plan.once(keys[1], 0, "{}"),
        lambda plan: plan._op("NOPE", keys[1]),
    ):
        plan = WritePlan()
        plan.set(keys[0], "{}")
        bad(plan)
        plan.sadd(keys[2], "after")
        with pytest.raises(PlanError, match=r"^op 2\b"):
            plan.apply(acmi.store)
        assert_nothing_written(acmi, keys)


@pytest.mark.parametrize(
    "score", [0, -0.0, 1.5, -3, 1e-05, 1.5e16, 12345678901234567, float("inf")]
)
def test_every_score_python_writes_is_accepted(acmi: Acmi, score: float) -> None:
    key = three_keys(acmi)[1]
    plan = WritePlan()
    plan.zadd(key, score, "m")
    plan.zadd(key, float("-inf"), "n")
    assert plan.apply(acmi.store) == [1, 1]
    assert acmi.store.execute(("ZSCORE", key, "m")) is not None


@pytest.mark.parametrize("source", ["error('boom')", "return redis.error_reply('ERR boom')"])
def test_a_script_error_without_a_marker_stays_a_store_error(
    acmi: Acmi, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    monkeypatch.setattr("acmi_core.store.writes.APPLY", Script(source))
    plan = WritePlan()
    plan.set(three_keys(acmi)[0], "{}")
    with pytest.raises(StoreCommandError, match="boom") as err:
        plan.apply(acmi.store)
    assert script_error(err.value) is err.value


_counter = iter(range(10**9))


def acmi_entity(acmi: Acmi) -> str:
    return f"user:apply-{acmi.store.name}-{next(_counter)}"


def test_only_applies_a_plan_when_its_zset_holds_nothing_else(acmi: Acmi) -> None:
    """ONLY k member score: the plan applies when k is empty or holds just member at
    score (a retry of the plan that added it); another member, or the same one at
    another score, fails ACMI_PENDING naming the oldest, with nothing written."""
    written, pending = three_keys(acmi)[:2]  # a STRING, a ZSET

    def plan(member: str, score: int) -> WritePlan:
        p = WritePlan()
        p.only(pending, member, score)
        p.zmin(pending, score, member)
        p.set(written, json.dumps(member))
        return p

    plan("run-1", 10).apply(acmi.store)
    plan("run-1", 10).apply(acmi.store)  # the retry: its own member at its own score
    assert acmi.store.execute(("ZRANGE", pending, 0, -1, "WITHSCORES")) == [b"run-1", b"10"]
    for member, score in (("run-2", 11), ("run-1", 12)):
        with pytest.raises(Pending) as caught:
            plan(member, score).apply(acmi.store)
        assert (caught.value.key, caught.value.member, caught.value.score) == (
            pending,
            "run-1",
            "10",
        )
        assert raw_get(acmi, written) == b'"run-1"'
    acmi.store.execute(("ZREM", pending, "run-1"))
    plan("run 2, with spaces", 13).apply(acmi.store)
    with pytest.raises(Pending) as caught:
        plan("run-3", 14).apply(acmi.store)
    assert caught.value.member == "run 2, with spaces"


def test_only_after_an_op_on_its_key_is_a_plan_error(acmi: Acmi) -> None:
    pending = three_keys(acmi)[1]
    plan = WritePlan()
    plan.zadd(pending, 1, "a")
    plan.only(pending, "a", 1)
    with pytest.raises(PlanError, match="an earlier op of the plan names its key"):
        plan.apply(acmi.store)
    assert acmi.store.execute(("EXISTS", pending)) == 0
