"""Same event, same bytes: ``dumps`` writes numbers exactly as JavaScript's JSON.stringify
(ECMAScript Number::toString), so an event appended by the reference SDK and by us is one
ZSET member (ZADD NX dedupes exact bytes), and summary lengths count UTF-16 code units as
the reference does.

The property test asks node itself (batched: one ``node`` call per example batch); without
node on PATH it is skipped, saying so."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acmi_core import AcmiValidationError
from acmi_core.base.model import MAX_SUMMARY_LEN, dumps, js_number, parse_event, utf16_len

EVENT = {"source": "s", "kind": "k", "correlationId": "c", "summary": "s"}

# What node prints for JSON.stringify of each value (checked by hand against node 18+).
KNOWN = [
    (1e-7, "1e-7"),
    (1.5e-7, "1.5e-7"),
    (1e-6, "0.000001"),
    (1.234e-6, "0.000001234"),
    (1e-5, "0.00001"),
    (0.0001, "0.0001"),
    (3.0, "3"),
    (-3.0, "-3"),
    (0.0, "0"),
    (-0.0, "0"),
    (0.1, "0.1"),
    (1.5, "1.5"),
    (1e16, "10000000000000000"),
    (1.2345e20, "123450000000000000000"),
    (1e21, "1e+21"),
    (1.5e21, "1.5e+21"),
    (123456789012345680000.0, "123456789012345680000"),
    (5e-324, "5e-324"),
    (1.7976931348623157e308, "1.7976931348623157e+308"),
    (-2.5e-10, "-2.5e-10"),
    (1745947200000.0, "1745947200000"),
    (1745947200000.5, "1745947200000.5"),
]


@pytest.mark.parametrize(("value", "text"), KNOWN)
def test_floats_are_written_as_json_stringify_writes_them(value: float, text: str) -> None:
    assert js_number(value) == text
    assert dumps(value) == text
    assert dumps({"a": [value, "1e-07", 3.0]}) == f'{{"a":[{text},"1e-07",3]}}'


@pytest.mark.parametrize(
    ("value", "text"),
    [
        # one float's text inside another's, or inside a key: every token is scanned
        ([13.0, 3.0, 0.0, 1e-05], "[13,3,0,0.00001]"),
        ({"3.0": 3.0, "x": [-3.0]}, '{"3.0":3,"x":[-3]}'),
        # a replacement holding another float's text ("0.00001" holds "0.0"): one pass
        ([1e-05, 0.0, 1e-05], "[0.00001,0,0.00001]"),
        ({"a": 1e21, "b": [2.5, 1e-7], "c": 7}, '{"a":1e+21,"b":[2.5,1e-7],"c":7}'),
    ],
)
def test_floats_among_other_tokens(value: object, text: str) -> None:
    assert dumps(value) == text


def test_integers_stay_exact_digits() -> None:
    big = 2**64 + 1
    assert dumps({"n": big, "m": -(10**30), "z": 0}) == f'{{"n":{big},"m":-{10**30},"z":0}}'
    assert dumps([True, False, None, 1]) == "[true,false,null,1]"


def test_strings_that_look_like_floats_are_left_alone() -> None:
    text = dumps({"1e-07": "3.0", "k": 'say "1e-07" \\ 2.50', "x": 1e-7})
    assert text == '{"1e-07":"3.0","k":"say \\"1e-07\\" \\\\ 2.50","x":1e-7}'
    assert json.loads(text) == {"1e-07": "3.0", "k": 'say "1e-07" \\ 2.50', "x": 1e-7}


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_nan_and_infinity_are_refused(value: float) -> None:
    with pytest.raises(AcmiValidationError) as err:
        dumps({"x": [value]})
    assert err.value.rule == "finite"


def test_an_event_with_float_fields_is_stored_as_the_reference_stores_it() -> None:
    event = parse_event(
        {**EVENT, "ts": 1745947200000.0, "payload": {"p": 1e-7, "q": 2.0}},
        now_ms=1,
        tenant="t",
    )
    assert event.to_json() == (
        '{"ts":1745947200000,"source":"s","kind":"k","correlationId":"c","summary":"s",'
        '"payload":{"p":1e-7,"q":2},"tenant_id":"t"}'
    )


# --- the property test, against node ----------------------------------------------------------


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node not on PATH: cannot compare with JavaScript's JSON.stringify")
    return node


def _stringify_in_node(node: str, texts: list[str]) -> list[str]:
    """JSON.stringify of each value, parsed by node from its exact repr (Python's repr of
    a float is its shortest round-trip text: node parses it to the same double)."""
    script = (
        "const fs=require('fs');"
        "const xs=JSON.parse(fs.readFileSync(0,'utf8'));"
        "process.stdout.write(JSON.stringify(xs.map(x=>JSON.stringify(Number(x)))));"
    )
    done = subprocess.run(
        [node, "-e", script],
        input=json.dumps(texts),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    result: list[str] = json.loads(done.stdout)
    return result


finite_floats = st.floats(allow_nan=False, allow_infinity=False)
# decimal exponents around every switch point: 1e-7, 1e-6, 1e16, 1e21
edge_floats = st.builds(
    lambda m, e: float(f"{m}e{e}"),
    st.integers(min_value=1, max_value=10**17),
    st.integers(min_value=-30, max_value=25),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(finite_floats, edge_floats), min_size=100, max_size=300))
def test_dumps_matches_node_json_stringify(values: list[float]) -> None:
    node = _node()
    expected = _stringify_in_node(node, [repr(v) for v in values])
    assert [dumps(v) for v in values] == expected
    # and inside a document: the same bytes as JSON.stringify of the whole array
    assert dumps(values) == "[" + ",".join(expected) + "]"


def _stringify_documents_in_node(node: str, documents: list[object]) -> list[str]:
    """JSON.stringify of each document, as node parses it from ASCII-only JSON."""
    script = (
        "const fs=require('fs');"
        "const xs=JSON.parse(fs.readFileSync(0,'utf8'));"
        "process.stdout.write(JSON.stringify(xs.map(x=>JSON.stringify(x))));"
    )
    done = subprocess.run(
        [node, "-e", script],
        input=json.dumps(documents),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    result: list[str] = json.loads(done.stdout)
    return result


well_formed_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
# Keys that are array indices ("0", "17") are left out: a JavaScript object lists them
# first, in numeric order, whatever the order they were written in (so the reference
# writes {"b":1,"0":2} as {"0":2,"b":1}); dumps keeps the order it is given.
object_keys = well_formed_text.filter(lambda k: not re.fullmatch(r"0|[1-9][0-9]*", k))
documents = st.recursive(
    st.none() | st.booleans() | st.integers() | finite_floats | well_formed_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(object_keys, inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(documents, min_size=30, max_size=80))
def test_whole_documents_match_node_json_stringify(values: list[object]) -> None:
    """Strings (escapes, U+2028, emoji), keys and nesting too: the same bytes. Integers
    stay within 2^53 here: beyond it JavaScript's own parse of the input rounds them."""
    node = _node()
    values = [v for v in values if not _has_big_int(v)]
    assert [dumps(v) for v in values] == _stringify_documents_in_node(node, values)


def _has_big_int(value: object) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return abs(value) > 2**53
    if isinstance(value, dict):
        return any(_has_big_int(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_big_int(v) for v in value)
    return False


def test_known_values_match_node() -> None:
    node = _node()
    values = [v for v, _ in KNOWN]
    assert _stringify_in_node(node, [repr(v) for v in values]) == [t for _, t in KNOWN]


# --- summary length in UTF-16 code units ------------------------------------------------------


def test_summary_length_counts_utf16_code_units() -> None:
    emoji = "\U0001f600"  # one code point, two UTF-16 units (JavaScript's length is 2)
    assert utf16_len(emoji) == 2 and utf16_len("abc") == 3 and utf16_len("é") == 1
    fits = emoji * (MAX_SUMMARY_LEN // 2)
    assert parse_event({**EVENT, "summary": fits}, now_ms=1, tenant="t").summary == fits
    for too_long in (fits + "x", "x" * 499 + emoji, emoji * 251):
        assert len(too_long) <= MAX_SUMMARY_LEN  # what code points would have let through
        with pytest.raises(AcmiValidationError) as err:
            parse_event({**EVENT, "summary": too_long}, now_ms=1, tenant="t")
        assert (err.value.field, err.value.rule) == ("event.summary", "max_length")
        assert "UTF-16" in err.value.message


def test_utf16_len_counts_a_lone_surrogate_as_one_unit() -> None:
    assert utf16_len("a\ud800") == 2
