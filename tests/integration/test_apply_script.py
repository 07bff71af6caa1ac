"""The Lua write path (lua/apply.lua) on every backend, against stored JSON written by
other tools: whitespace, escapes, tricky strings, duplicates, corruption, wrong types."""

from __future__ import annotations

import json

import pytest

from acmi_core import Acmi, CorruptData, EntityId


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


def test_key_order_is_kept_and_new_keys_append(acmi: Acmi) -> None:
    entity = acmi_entity(acmi)
    acmi.profile.set(entity, {"z": 1, "a": 2})
    acmi.profile.merge(entity, {"a": 3, "m": 4})
    text = raw_get(acmi, acmi.keys.profile(EntityId.parse(entity))).decode()
    assert list(json.loads(text)) == ["z", "a", "actor_type", "tenant_id", "m"]


@pytest.mark.parametrize("stored", ["not json", "[1,2]", '{"a":}', '{"a":1', '"text"', '{"a":1}x'])
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
    assert acmi.profile.get(entity) == {"c": 3, "actor_type": "human", "tenant_id": acmi.tenant}
    assert acmi.signals.all(entity) == {"y": 2}


def test_large_object_edit(acmi: Acmi) -> None:
    entity = acmi_entity(acmi)
    values = {f"k{i}": {"i": i, "s": "x" * 50, "l": [i, [], {}]} for i in range(1000)}
    acmi.signals.update(entity, values)
    acmi.signals.set(entity, "k500", "changed")
    stored = acmi.signals.all(entity)
    assert len(stored) == 1000
    assert stored["k500"] == "changed"
    assert stored["k999"] == values["k999"]


_counter = iter(range(10**9))


def acmi_entity(acmi: Acmi) -> str:
    return f"user:apply-{acmi.store.name}-{next(_counter)}"
