"""Object edits (OBJ, lua/objedit.lua) run by lua/lean.lua and by lua/apply.lua, on every
backend: the same plan gives the same replies, the same stored bytes and the same
errors (nothing written), for the shapes signals.set and profile.merge send (an index
SADD and one edit) and for stored text of every shape the scanner meets: nested values,
unicode, escapes, whitespace, repeated names, deletes, the largest object the limits
allow, and text that is not a JSON object."""

from __future__ import annotations

import itertools
import json

import pytest

from acmi_core import Acmi
from acmi_core.base.model import MAX_EDIT_FIELDS, MAX_OBJECT_BYTES, dumps
from acmi_core.store.writes import APPLY, LEAN, WritePlan
from tests.integration.test_lean_script import _dump, _run

_counter = itertools.count()

TEN = dumps({f"field{i}": f"value number {i}" for i in range(10)})


def field(mode: str, name: str, value: str) -> str:
    """One OBJ argument as WritePlan.edit_object builds it: mode letter, name, value."""
    return f"{mode}{json.dumps(name, ensure_ascii=False)}:{value}"


def signals_set(name: str, value: str) -> list[str]:
    """signals.set's edit: the signal, and its expiry field deleted."""
    return [field("s", name, value), field("d", f"__ttl_{name}", "null")]


def profile_merge(*members: tuple[str, str]) -> list[str]:
    """profile.merge's edit: the members, and the auto-fill that never clobbers."""
    return [field("s", n, v) for n, v in members] + [
        field("n", "actor_type", '"user"'),
        field("n", "tenant_id", '"t1"'),
    ]


def _largest() -> tuple[str, list[str]]:
    """A stored object at the cap made of as many members as fit (the slowest to scan),
    and an edit of MAX_EDIT_FIELDS of its members spread over it."""
    members, used, i = [], 2, 0
    while used + len(f'"{i:x}":0,') <= MAX_OBJECT_BYTES - 6 * MAX_EDIT_FIELDS:
        members.append(f'"{i:x}":0')
        used += len(members[-1]) + 1
        i += 1
    step = max(1, len(members) // MAX_EDIT_FIELDS)
    edit = [field("s", f"{k * step:x}", "1") for k in range(MAX_EDIT_FIELDS)]
    return "{" + ",".join(members) + "}", edit


LARGEST, LARGEST_EDIT = _largest()

# (stored text or None for absent, the edit's arguments)
CASES: dict[str, tuple[str | None, list[str]]] = {
    "signals.set, absent": (None, signals_set("mood", '"focused"')),
    "signals.set, ten fields": (TEN, signals_set("field3", '"v1"')),
    "signals.set, a ttl kept": (
        '{"mood":"x","__ttl_mood":1700000000000}',
        [field("s", "mood", '"y"'), field("s", "__ttl_mood", "1800000000000")],
    ),
    "profile.merge, new": (None, profile_merge(("stage", '"x"'), ("n", "2"))),
    "profile.merge, filled": (
        '{"actor_type":"agent","tenant_id":"t0","stage":"a"}',
        profile_merge(("stage", '"b"'), ("count", "3")),
    ),
    "nested values": (
        '{"a":{"b":[1,{"c":null}],"d":[]},"e":[[],{}],"f":true}',
        [field("s", "a", '{"x":[1,2,{"y":[false,null]}]}'), field("s", "g", '[{"h":{}}]')],
    ),
    "unicode": (
        '{"ключ":"значение","emoji 😀":"🎉","z":"\u00e9"}',
        [field("s", "ключ", '"новое"'), field("s", "日本", '"語"'), field("d", "emoji 😀", "null")],
    ),
    "escapes in stored names": (
        '{"a\\"b":1,"c\\\\d":2,"\\u00e9t\\u00e9":3,"\\ud83d\\ude00":4,"lone\\ud800":5}',
        [
            field("s", 'a"b', "10"),
            field("s", "c\\d", "20"),
            field("s", "été", "30"),
            field("d", "😀", "null"),
            field("s", "tab\there", '"\\t\\n\\u0000"'),
        ],
    ),
    "escapes in stored values": (
        '{"a":"line\\nnext \\"q\\" \\\\ \\/ \\b\\f\\r\\t \\u20ac","b":1}',
        [field("s", "b", '"\\u00e9\\ud800"')],
    ),
    "whitespace": (
        ' {\n "a" : 1 ,\t"b":\r\n"x" , "c" : [ 1 , { "d" : null } ] }\n',
        [field("s", "b", '"y"'), field("d", "a", "null")],
    ),
    "spaced, as json.dumps writes": (
        json.dumps({"ts": 1, "ratio": 0.05, "headline": "~5% remaining", "r": {"x": None}}),
        signals_set("severity", '"red"'),
    ),
    "spaced around one token each": ('{"a" :1,"b": 2, "c":3 ,"d":[1, 2] }', signals_set("e", "5")),
    "repeated names": ('{"a":1,"b":2,"a":3,"a":4}', [field("s", "a", "5")]),
    "repeated names deleted": ('{"a":1,"b":2,"a":3}', [field("d", "a", "null")]),
    "deletes only": (TEN, [field("d", "field0", "null"), field("d", "missing", "null")]),
    "delete of absent object": (None, [field("d", "a", "null")]),
    "numbers": (
        '{"n":-0.5e+10,"big":123456789012345678901234567890,"z":0,"f":1.25E-3}',
        [field("s", "m", "-12.5e3"), field("s", "big", "98765432109876543210987654321")],
    ),
    "setnx on present and absent": (
        '{"a":1}',
        [field("n", "a", "2"), field("n", "b", "3"), field("s", "a", "4"), field("n", "a", "5")],
    ),
    "compact, quick path": (
        '{"":"","a":"\x7f","a":"c","n":[1,{"m":"x"}],"t":true,"z":-0.5}',
        [field("s", "a", '"d"'), field("d", "", "null"), field("s", "new", "{}")],
    ),
    "stored JSON null": ("null", [field("s", "a", "1")]),
    "stored empty object": (" { } ", [field("s", "a", "1")]),
    "an empty edit": (TEN, []),
    "largest allowed": (LARGEST, LARGEST_EDIT),
    "result over the cap": (
        dumps({"pad": "x" * (MAX_OBJECT_BYTES - 20)}),
        [field("s", "more", '"' + "y" * 40 + '"')],
    ),
    "stored over the cap": (dumps({"pad": "x" * MAX_OBJECT_BYTES}), [field("s", "a", "1")]),
    "edit over the cap": (None, [field("s", "a", '"' + "x" * MAX_OBJECT_BYTES + '"')]),
}
CORRUPT = [
    "[1]",
    '"text"',
    "12",
    "nul",
    "null x",
    "{",
    '{"a":}',
    '{"a":1',
    '{"a":1,}',
    '{"a" 1}',
    '{"a":1}x',
    '{"a":01}',
    '{"a":1.}',
    '{"a":-}',
    '{"a":1e}',
    '{"a":"\x01"}',
    '{"a":"\\x"}',
    '{"a":"\\u12"}',
    '{"a":"open}',
    '{"a":tru}',
    '{"a":[1,]}',
    '{"a":{"b"}}',
    '{"a":[}',
    "{a:1}",
    "",
    # compact text with no escape or control byte (the scanner's quick path)
    '{"a":1}}',
    '{"a"1}',
    '{"a":"b"',
    '{"a":"b"x}',
    '{"a":{"b":1}',
    '{"a":1,"b"}',
    '{"a":1}{',
    '{""}',
    '{"a":"b",',
    '{"a":',
    '{"a"',
    '{"a',
]
BAD_EDITS = [
    ["x" + '"a":1'],  # an unknown mode
    ['s"a":01'],
    ['s"a":'],
    ['s"a":1 2'],
    ["sa:1"],
    ['s"a"1'],
    ['s"a\\x":1'],
]


def _keys(acmi: Acmi) -> list[str]:
    n = next(_counter)
    return [f"acmi:user:objedit-{acmi.store.name}-{n}:{slot}" for slot in range(6)]


def _both(acmi: Acmi, stored: str | None, edit: list[str]) -> tuple[object, object]:
    """The plan [SADD index, OBJ object] through lean.lua and apply.lua, each on keys of
    its own holding ``stored``: both outcomes, and both stored keys equal."""
    ops = [("SADD", 0, ("member",)), ("OBJ", 1, (str(len(edit)), *edit))]
    outcomes = []
    for script in (LEAN, APPLY):
        keys = _keys(acmi)
        if stored is not None:
            acmi.store.execute(("SET", keys[1], stored))
        outcomes.append((_run(acmi, script, keys, ops), _dump(acmi, keys[:2])))
    (lean, lean_stored), (apply, apply_stored) = outcomes
    assert lean_stored == apply_stored
    return lean, apply


@pytest.mark.parametrize(("stored", "edit"), CASES.values(), ids=list(CASES))
def test_an_edit_gives_what_apply_gives(acmi: Acmi, stored: str | None, edit: list[str]) -> None:
    lean, apply = _both(acmi, stored, edit)
    assert lean == apply
    if isinstance(lean, list):  # applied: the reply is the stored text, valid JSON
        text = lean[1].decode() if isinstance(lean[1], bytes) else lean[1]
        assert isinstance(text, str) and isinstance(json.loads(text), dict)


# stored text a reference client or a pipeline SETs (json.dumps' ", " and ": "; spaces
# inside strings), and what an edit must make of it: judged by Python's json, not by the
# scanner both scripts share
SPACED: list[tuple[str, dict[str, object]]] = [
    (json.dumps({"a": 1}), {"a": 1, "k": 1}),
    (json.dumps({"a": 1, "b": "x y"}), {"a": 1, "b": "x y", "k": 1}),
    ('{"a":1 }', {"a": 1, "k": 1}),
    ('{"a" :1}', {"a": 1, "k": 1}),
    ('{"a":1, "k":0}', {"a": 1, "k": 1}),
    ('{"a":"x y","b": [1, {"c": "d e"}]}', {"a": "x y", "b": [1, {"c": "d e"}], "k": 1}),
]


@pytest.mark.parametrize(("stored", "expected"), SPACED)
def test_spaced_stored_text_is_edited_as_json_reads_it(
    acmi: Acmi, stored: str, expected: dict[str, object]
) -> None:
    lean, apply = _both(acmi, stored, [field("s", "k", "1")])
    assert lean == apply
    assert isinstance(lean, list), lean
    text = lean[1].decode() if isinstance(lean[1], bytes) else lean[1]
    assert json.loads(text) == expected


def test_the_caps_are_met(acmi: Acmi) -> None:
    """The cases reach the limits: the largest edit applies, the ones over the cap fail."""
    largest = _both(acmi, LARGEST, LARGEST_EDIT)[0]
    assert isinstance(largest, list) and len(LARGEST) > MAX_OBJECT_BYTES - 6 * MAX_EDIT_FIELDS - 8
    assert len(LARGEST_EDIT) == MAX_EDIT_FIELDS
    for name in ("result over the cap", "stored over the cap", "edit over the cap"):
        outcome = _both(acmi, *CASES[name])[0]
        assert isinstance(outcome, tuple) and outcome[0] == "PayloadTooLarge", (name, outcome)


@pytest.mark.parametrize("stored", CORRUPT)
def test_text_that_is_not_an_object_is_refused_alike(acmi: Acmi, stored: str) -> None:
    lean, apply = _both(acmi, stored, signals_set("a", "1"))
    assert lean == apply
    assert isinstance(lean, tuple) and lean[0] == "CorruptData", lean
    assert "does not hold a JSON object" in lean[1]


@pytest.mark.parametrize("edit", BAD_EDITS)
def test_a_malformed_edit_is_the_same_plan_error(acmi: Acmi, edit: list[str]) -> None:
    lean, apply = _both(acmi, TEN, edit)
    assert lean == apply
    assert isinstance(lean, tuple) and lean[0] == "PlanError" and "nothing was written" in lean[1]


def test_a_key_of_another_type_is_refused_alike(acmi: Acmi) -> None:
    ops = [("SADD", 0, ("member",)), ("OBJ", 1, ("1", field("s", "a", "1")))]
    outcomes = []
    for script in (LEAN, APPLY):
        keys = _keys(acmi)
        acmi.store.execute(("RPUSH", keys[1], "x"))
        outcomes.append(_run(acmi, script, keys, ops))
        assert acmi.store.execute(("EXISTS", keys[0])) == 0  # the SADD was not written
    assert outcomes[0] == outcomes[1]
    assert isinstance(outcomes[0], tuple) and outcomes[0][0] == "CorruptData"


def test_signals_set_and_profile_merge_are_lean_for_two_tenants(acmi: Acmi) -> None:
    """The API's edits go to lean.lua and stay per tenant: the same entity under two
    tenants, each its own object."""
    keys = _keys(acmi)
    plan = WritePlan()
    plan.sadd(keys[0], "m")
    plan.edit_object(keys[1], [("set", "a", "1"), ("del", "__ttl_a", "null")])
    assert plan._lean is not None
    one, two = acmi.for_tenant("lean-one"), acmi.for_tenant("lean-two")
    one.signals.set("user:u", "mood", "calm")
    two.signals.set("user:u", "mood", "busy")
    one.profile.merge("user:u", {"stage": "a"})
    two.profile.merge("user:u", {"stage": "b"})
    assert one.signals.get("user:u", "mood") == "calm"
    assert two.signals.get("user:u", "mood") == "busy"
    profile_one, profile_two = one.profile.get("user:u"), two.profile.get("user:u")
    assert profile_one is not None and profile_two is not None
    assert (profile_one["stage"], profile_two["stage"]) == ("a", "b")
    assert (profile_one["tenant_id"], profile_two["tenant_id"]) == ("lean-one", "lean-two")
