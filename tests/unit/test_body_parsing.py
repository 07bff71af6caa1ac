"""acmi_core.api.body.parse_json directly: every refusal is an AcmiValidationError naming
``body`` and a rule (never a RecursionError or a bare ValueError), lenient mode accepts
exactly raw newlines, carriage returns and tabs inside strings, and the depth bound is
linear in the body."""

from __future__ import annotations

import json
import random
import time
from typing import Any

import pytest

from acmi_core.api.body import MAX_JSON_DEPTH, parse_json
from acmi_core.base.errors import AcmiValidationError


def refused(raw: bytes, *, lenient: bool = False) -> AcmiValidationError:
    with pytest.raises(AcmiValidationError) as caught:
        parse_json(raw, lenient_strings=lenient)
    assert caught.value.field == "body"
    assert caught.value.message.startswith("body: ")
    return caught.value


def arrays(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def test_depth_up_to_the_limit_parses() -> None:
    value: Any = parse_json(arrays(MAX_JSON_DEPTH))
    for _ in range(MAX_JSON_DEPTH - 1):
        value = value[0]
    assert value == []
    assert parse_json(b'{"a":' * MAX_JSON_DEPTH + b"1" + b"}" * MAX_JSON_DEPTH)
    wide = [[{"a": [i, "]]"]}] for i in range(2000)]  # 8,000 brackets, 4 deep
    assert parse_json(json.dumps(wide).encode()) == wide


@pytest.mark.parametrize(
    "raw",
    [
        arrays(MAX_JSON_DEPTH + 1),
        b'{"a":' * (MAX_JSON_DEPTH + 1) + b"1" + b"}" * (MAX_JSON_DEPTH + 1),
        b"[" * 100_000,  # unbalanced: the recursion limit, not a syntax error, came first
        arrays(100_000),
        b'[{"a":[{"b":' * 17 + b"1" + b"}]}]" * 17,  # 68 levels, mixed
    ],
    ids=["65 arrays", "65 objects", "100k open", "100k balanced", "68 mixed"],
)
def test_deeper_than_the_limit_is_max_depth(raw: bytes) -> None:
    error = refused(raw)
    assert error.rule == "max_depth"
    assert str(MAX_JSON_DEPTH) in error.message


def depth_of(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(depth_of, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(depth_of, value), default=0)
    return 0


# Strings and keys full of what a scanner could trip on: quotes, backslashes, brackets.
LEAVES: list[Any] = ["", '"', "\\", '\\"', "[", "]]", "{[", '"]"', "\n[", "é[", 7, None, 1.5]
KEYS = ["k", "[", '"', "\\", "]{"]


def random_container(rng: random.Random, items: list[Any]) -> Any:
    if rng.random() < 0.5:
        return items
    return {rng.choice(KEYS) + str(i): item for i, item in enumerate(items)}


def random_json(rng: random.Random, depth: int) -> Any:
    """A value nested ``depth`` levels (2 more when the innermost get siblings): a spine
    with shallow siblings at every level."""
    value = rng.choice(LEAVES)
    for _ in range(depth):
        siblings = [
            random_container(rng, [rng.choice(LEAVES), random_container(rng, [])])
            for _ in range(rng.randint(0, 2))
        ]
        items = [*siblings, value]
        rng.shuffle(items)
        value = random_container(rng, items)
    return value


@pytest.mark.parametrize("seed", range(40))
def test_the_depth_scan_agrees_with_the_parsed_depth(seed: int) -> None:
    rng = random.Random(seed)
    value = random_json(rng, rng.randint(MAX_JSON_DEPTH - 4, MAX_JSON_DEPTH + 2))
    depth = depth_of(value)
    raw = json.dumps(value, ensure_ascii=rng.random() < 0.5).encode()
    if depth > MAX_JSON_DEPTH:
        assert refused(raw).rule == "max_depth"
    else:
        assert parse_json(raw) == value


def test_brackets_inside_strings_do_not_count() -> None:
    text = '"' + "[{" * 5000 + '\\"' + "[" * 100 + '"'
    assert parse_json(f'{{"note":{text}}}'.encode()) == {"note": text[1:-1].replace('\\"', '"')}
    assert parse_json(b'["\\\\", [[["x\\\\"]]]]') == ["\\", [[["x\\"]]]]


@pytest.mark.parametrize(
    "raw",
    [
        b'{"n":' + b"1" * 5000 + b"}",
        b"-" + b"9" * 4301,
        b"[" + b"1" * 4301 + b"]",
    ],
    ids=["5000 digits", "4301 digits negative", "4301 digits in a list"],
)
def test_integers_beyond_python_s_digit_limit_are_number(raw: bytes) -> None:
    error = refused(raw)
    assert error.rule == "number"
    assert "4300" in error.message


def test_long_numbers_python_can_read_still_parse() -> None:
    assert parse_json(b"9" * 4300) == int("9" * 4300)
    assert parse_json(b"1." + b"0" * 5000) == 1.0
    assert parse_json(b"1e" + b"0" * 5000 + b"1") == 10.0


@pytest.mark.parametrize("char", ["\n", "\r", "\t"])
def test_lenient_accepts_raw_newlines_returns_and_tabs_in_strings(char: str) -> None:
    raw = f'{{"text":"a{char}b"}}'.encode()
    assert parse_json(raw, lenient_strings=True) == {"text": f"a{char}b"}
    assert refused(raw).rule == "json"  # strict sources refuse them


@pytest.mark.parametrize(
    "code", [c for c in range(0x20) if chr(c) not in "\n\r\t"], ids=lambda c: f"U+{c:04X}"
)
def test_lenient_refuses_every_other_control_character(code: int) -> None:
    raw = b'{"text":\n"a' + bytes([code]) + b'b"}'
    error = refused(raw, lenient=True)
    assert error.rule == "json"
    assert f"U+{code:04X}" in error.message and "line 2" in error.message
    assert refused(raw).rule == "json"


def test_the_other_rules_still_name_body() -> None:
    assert refused(b"").rule == "required"
    assert refused(b"\xff{}").rule == "utf8"
    assert refused(b"{not json").rule == "json"
    assert refused(b'{"a": NaN}').rule == "json"


def test_the_depth_scan_is_linear_even_for_unterminated_strings() -> None:
    """A string scan that restarts at every escaped quote is quadratic: 128k restarts over
    a 256 KiB body would take minutes. Every input here is the size of the body cap."""
    cap = 256 * 1024
    adversarial = [
        b'"' + b'\\"' * (cap // 2),  # one unterminated string full of escaped quotes
        b"[" + b'"\\"' * (cap // 3),
        b'["' + b"[" * (cap - 2),
        b"[" * cap,
        b"[" * (cap // 2) + b"]" * (cap // 2),
    ]
    for raw in adversarial:
        start = time.perf_counter()
        error = refused(raw, lenient=True)
        assert error.rule in {"json", "max_depth"}
        assert time.perf_counter() - start < 1.0, raw[:20]
