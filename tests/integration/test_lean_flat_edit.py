"""lean.lua's flat edit (an object edit without the scanner, for flat objects of plain
values) against apply.lua's full edit (lua/objedit.lua), on a real Redis: after any
sequence of sets, set-if-absents and deletes, on stored text of any shape (flat or not,
escapes, unicode, control bytes, spaces, repeated names, text that is not JSON), both
give the same replies, the same errors and the same stored bytes."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acmi_core import Acmi, create_acmi
from acmi_core.base.model import dumps
from acmi_core.base.settings import Settings
from acmi_core.store.redis import RedisStore
from acmi_core.store.writes import APPLY, LEAN
from acmi_core.testing.redis_server import RedisServer
from tests.integration.test_lean_script import _dump, _run
from tests.kit import TEST_DBS

DB = TEST_DBS["lean_flat_edit"]


@pytest.fixture
def acmi(redis_server: RedisServer) -> Iterator[Acmi]:
    store = RedisStore.from_url(redis_server.url_for(DB))
    store.execute(("FLUSHDB",))
    yield create_acmi(store, Settings())
    store.execute(("FLUSHDB",))
    store.close()


# few names, so edits meet stored members and each other; some need escapes
_names = st.sampled_from(
    ["a", "b", "field3", "__ttl_field3", "é", "日本", 'q"t', "b\\s", "c\x01", "", " sp ", "a\x7f"]
)
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**20), 10**20)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6)
    | st.sampled_from(["", "x y", "{[,:]}", '"', "\\", "\x00", "\x7f", "\u2028", "😀"])
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_names, inner, max_size=3),
    max_leaves=6,
)
# what the flat edit takes: plain names, plain values
_plain_names = st.sampled_from(["a", "b", "field3", "__ttl_field3", "é", "日本", "", " sp "])
_plain = (
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.sampled_from([0.5, -0.25, 12.125])
    | st.text(
        st.characters(codec="utf-8", exclude_characters='"\\\x7f', min_codepoint=32), max_size=6
    )
)
# stored text: what we and JSON.stringify write, json.dumps' spaced form, or text the
# scanner must refuse or read with care
_stored = (
    st.none()
    | st.dictionaries(_plain_names, _plain, max_size=8).map(dumps)
    | st.dictionaries(_names, _values, max_size=6).map(dumps)
    | st.dictionaries(_names, _scalars, max_size=6).map(dumps)
    | st.dictionaries(_names, _scalars, max_size=4).map(json.dumps)
    | st.sampled_from(
        [
            "{}",
            "null",
            "[]",
            '{"a":1,"a":2}',
            '{"a":1,"b":2,"a":3}',
            '{"a":01}',
            '{"a":1.}',
            '{"a":-}',
            '{"a":1e5}',
            '{"a":-0.5,"b":0}',
            '{"a":"x\x01"}',
            '{"a":"x\x00","b":1}',
            '{"a\x1f":1}',
            '{"a":"\x7f","b":2}',
            '{"a":"x\x7f"}',
            '{"a":tru}',
            '{"a":1}x',
            '{"a":"b"',
            '{"a":1,}',
            '{"a" :1}',
            ' {"a":1}',
            '{"a":"\\"","b":1}',
        ]
    )
)
_field = st.tuples(st.sampled_from("snd"), _names, _values.map(dumps)) | st.tuples(
    st.sampled_from("snd"), _plain_names, _plain.map(dumps)
)


def _arg(mode: str, name: str, value: str) -> str:
    """One OBJ argument as WritePlan.edit_object builds it (a del's value is null)."""
    return f"{mode}{json.dumps(name, ensure_ascii=False)}:{'null' if mode == 'd' else value}"


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(_stored, st.lists(st.lists(_field, min_size=1, max_size=5), min_size=1, max_size=5))
def test_flat_edits_store_what_the_full_edit_stores(
    acmi: Acmi, stored: str | None, edits: list[list[tuple[str, str, str]]]
) -> None:
    lean_keys = ["acmi:user:flat-lean:0", "acmi:user:flat-lean:1"]
    apply_keys = ["acmi:user:flat-full:0", "acmi:user:flat-full:1"]
    for keys in (lean_keys, apply_keys):
        acmi.store.execute(("DEL", *keys))
        if stored is not None:
            acmi.store.execute(("SET", keys[1], stored))
    for edit in edits:
        args = [_arg(*f) for f in edit]
        ops = [("SADD", 0, ("member",)), ("OBJ", 1, (str(len(args)), *args))]
        lean = _run(acmi, LEAN, lean_keys, ops)
        full = _run(acmi, APPLY, apply_keys, ops)
        assert lean == full, (stored, args)
        assert _dump(acmi, lean_keys) == _dump(acmi, apply_keys), (stored, args)


# the usual writes' shapes, the flat edit's own cases: it must take them (a fast path
# that always fell back would pass the property above)
FLAT = [
    ('{"field0":"value number 0","field3":"v0"}', ['s"field3":"v1"', 'd"__ttl_field3":null']),
    ('{"n":2,"stage":"a"}', ['s"n":-0.25', 's"stage":"x"', 'n"actor_type":"human"']),
    ("{}", ['s"a":true', 'n"b":false', 's"c":null']),
]


@pytest.mark.parametrize(("stored", "args"), FLAT)
def test_the_usual_edits_take_the_flat_edit(acmi: Acmi, stored: str, args: list[str]) -> None:
    """With the full edit made to fail, the usual edits still apply, as the full one would."""
    source = LEAN.source.replace(
        "local function editor()\n", "local function editor()\n  error('FULL EDIT')\n", 1
    )
    assert source != LEAN.source
    keys = ["acmi:user:flat-probe:0", "acmi:user:flat-probe:1"]
    acmi.store.execute(("SET", keys[1], stored))
    n = str(len(args))
    reply = acmi.store.execute(("EVAL", source, 2, *keys, 2, "SADD", 1, "m", "OBJ", 2, n, *args))
    full_keys = ["acmi:user:flat-full:0", "acmi:user:flat-full:1"]
    acmi.store.execute(("SET", full_keys[1], stored))
    full = _run(acmi, APPLY, full_keys, [("SADD", 0, ("m",)), ("OBJ", 1, (n, *args))])
    assert isinstance(reply, list) and isinstance(full, list)
    assert reply[1] == full[1]
    assert acmi.store.execute(("GET", keys[1])) == acmi.store.execute(("GET", full_keys[1]))
