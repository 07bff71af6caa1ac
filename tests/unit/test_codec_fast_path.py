"""The fast paths of encoding and decoding give exactly what the plain paths give.

Reads: ``stored.decode_events`` (pydantic parsing a plain event from the bytes, or
``load_stored`` + validation) against ``stored.decode_event`` (the tolerant path), and
``load_stored`` (its C scanner call) against ``json.JSONDecoder.decode``; on random and
adversarial members: NaN, numbers beyond the double range, integers past the digit
limit, lone surrogates, duplicate keys, payloads, legacy events, broken JSON, bytes.

Writes: ``encode_event``, ``json_members``, ``json_object_text`` and ``dumps`` against the
code they replaced (kept below, verbatim from before the fast path, as the oracle): the
same text, or the same error (field, rule, message) for every input.
"""

from __future__ import annotations

import json
import math
import string
import sys
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from acmi_core.base.errors import AcmiValidationError, PayloadTooLarge
from acmi_core.base.model import (
    EVENT_FIELD_ORDER,
    MAX_JSON_DEPTH,
    MAX_OBJECT_BYTES,
    MAX_TS_MS,
    SPEAKER_TYPE_BY_SOURCE_PREFIX,
    SUMMARY_TOO_LONG,
    EntityId,
    Event,
    _check_ts,
    _in_field_order,
    _js_floats,
    _validation_error,
    check_json_tree,
    dumps,
    encode_event,
    json_members,
    json_object_text,
    parse_event,
    summary_too_long,
)
from acmi_core.base.stored import (
    _DECODER,
    TOO_DEEP,
    JsonNumber,
    Unreadable,
    _too_deep,
    decode_event,
    decode_events,
    load_stored,
    stored_dict,
)

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --- views that tell apart what == does not (1 / 1.0 / True, -0.0, JsonNumber, order) ---


def typed(value: Any) -> Any:
    if isinstance(value, JsonNumber):
        return ("number", value.text)
    if isinstance(value, dict):
        return ("dict", type(value).__name__, [(k, typed(v)) for k, v in value.items()])
    if isinstance(value, list | tuple):
        return (type(value).__name__, [typed(v) for v in value])
    if isinstance(value, float):
        return ("float", float.__repr__(value))
    return (type(value).__name__, value)


def event_view(event: Event) -> Any:
    return (
        type(event).__name__,
        event.legacy,
        typed(event.__dict__),
        typed(event.model_extra or {}),
        sorted(event.model_fields_set),
    )


def decoded_view(result: tuple[Event, dict[str, Any] | bytes] | str) -> Any:
    if isinstance(result, str):
        return ("skipped", result)
    event, stored = result
    return ("event", event_view(event), typed(stored_dict(stored)))


def batch_view(members: Sequence[object], max_bytes: int | None = None) -> list[Any]:
    decoded, skipped = decode_events(members, max_bytes)
    views = {position: ("skipped", reason) for position, reason in skipped}
    rest = iter(decoded)
    return [views[i] if i in views else decoded_view(next(rest)) for i in range(len(members))]


def tolerant_view(members: Sequence[object], max_bytes: int | None = None) -> list[Any]:
    views = []
    for member in members:
        if max_bytes is not None and isinstance(member, bytes) and len(member) > max_bytes:
            views.append(
                ("skipped", f"{len(member)} bytes: larger than a page carries ({max_bytes} bytes)")
            )
        else:
            views.append(decoded_view(decode_event(member)))
    return views


# --- stored members: valid events, legacy ones, and adversarial edits of both ------------

any_text = st.text(st.characters(exclude_categories=()), max_size=12)  # lone surrogates too
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(),
    st.sampled_from([0.0, -0.0, 5e-324, 1.7976931348623157e308, 1e21, 1e-7, 0.1]),
    any_text,
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(any_text, inner, max_size=4),
    max_leaves=12,
)
short = st.text(st.characters(exclude_categories=()), min_size=0, max_size=6)
event_dicts = st.fixed_dictionaries(
    {
        "ts": st.one_of(
            st.integers(0, MAX_TS_MS),
            st.floats(0, MAX_TS_MS),
            st.sampled_from([-1, MAX_TS_MS + 1, 1e300, "1", True, None, 1_745_947_200]),
        ),
        "source": st.one_of(st.sampled_from(["agent:a", "user:b", "x"]), short, st.integers()),
        "summary": st.one_of(
            st.sampled_from(["hello", "\U0001f600" * 251, "x" * 501]), short, st.none()
        ),
    },
    optional={
        "kind": st.one_of(st.just("note"), short, st.none()),
        "correlationId": st.one_of(st.just("c-1"), short),
        "correlation_id": st.just("c-1"),
        "parentCorrelationId": st.one_of(st.none(), short, st.integers()),
        "speaker_type": st.sampled_from(["agent", "human", "system", "external", "robot", None]),
        "tenant_id": st.one_of(st.just("default"), st.integers()),
        "payload": json_values,
        "extra": json_values,
        "legacy": json_values,
    },
)


def as_json(data: dict[str, Any], ascii_only: bool, spaced: bool) -> bytes:
    text = json.dumps(data, ensure_ascii=ascii_only, separators=None if spaced else (",", ":"))
    return text.encode("utf-8", "surrogatepass")  # a raw surrogate: bytes that are not UTF-8


# Edits another writer (or an attacker) could leave in a member: text inserted before
# the final "}" (a repeated key among them), around it, or the member cut short.
TAILS = [
    ',"payload":NaN',
    ',"payload":{"a":Infinity},"payload":null',
    ',"zz":-Infinity',
    ',"zz":NaN,"zz":1',
    ',"payload":1e999',
    ',"payload":-1e400',
    ',"payload":1e-999',
    ',"payload":1e-999,"payload":null',
    ',"zz":1e999,"zz":2',
    ',"payload":0.' + "0" * 400 + "1",
    ',"payload":' + "9" * 400,
    ',"payload":' + "9" * 5000 + ',"payload":null',
    ',"zz":' + "[" * 300 + "]" * 300,
    ',"zz":' + "[" * 600 + "]" * 600,
    ',"zz":"\\ud800"',
    ',"zz":"\\udc00\\ud800"',
    ',"zz":"\\ud83d\\ude00"',
    ',"zz":"\\u0000\\u001f\\/"',
    ',"summary":"\\ud800"',
    ',"summary":"again"',
    ',"ts":1e999',
    ',"ts":1e-999',
    ',"ts":-0.0',
    ',"ts":1E3',
    ',"source":null',
    ',"zz":"a\x01b"',
    ",",
    ',"zz":01',
]


@st.composite
def members(draw: st.DrawFn) -> object:
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(st.binary(max_size=80))
    if kind == 1:
        alphabet = '{}[]",:0123456789eE+-. tsNaInfiy\\u\t\x0c'
        return draw(st.text(alphabet, max_size=60)).encode()
    if kind == 2:
        return draw(st.one_of(st.none(), st.integers(), st.text(max_size=5)))
    data = draw(st.one_of(event_dicts, st.just(PLAIN)))  # often valid: the fast path
    raw = as_json(data, draw(st.booleans()), draw(st.booleans()))
    edit = draw(st.integers(0, 3))
    if edit == 1 and raw.endswith(b"}"):
        raw = raw[:-1] + draw(st.sampled_from(TAILS)).encode("utf-8", "surrogatepass") + b"}"
    elif edit == 2:
        raw = draw(st.sampled_from([b" ", b"\t", b"\x0c", b"\xef\xbb\xbf", b""])) + raw
        raw += draw(st.sampled_from([b" ", b"\r\n", b"x", b" {}", b""]))
    elif edit == 3 and raw:
        raw = raw[: draw(st.integers(0, len(raw) - 1))]
    return raw


PLAIN: dict[str, Any] = {
    "ts": 1,
    "source": "agent:a",
    "kind": "k",
    "correlationId": "c",
    "summary": "s",
    "speaker_type": "agent",
    "tenant_id": "default",
}


@pytest.mark.parametrize("tail", TAILS)
def test_every_adversarial_tail_on_a_plain_event(tail: str) -> None:
    """Each edit on a valid plain event (the first fast path's case), alone and before
    plain events in a batch."""
    member = as_json(PLAIN, False, False)[:-1] + tail.encode("utf-8", "surrogatepass") + b"}"
    plain = as_json(PLAIN, False, False)
    for batch in ([member], [member, plain], [plain, member, plain]):
        assert batch_view(batch) == tolerant_view(batch)


BASE = b'"source":"a","kind":"k","correlationId":"c"'
QUOTED = [
    b'{"ts":1,' + BASE + b',"summary":"say \\"hi\\""}',  # escaped quotes: more quotes
    b'{"ts":1,' + BASE + b',"summary":"say \\u0022hi\\u0022"}',  # quotes without '"'
    b'{"\\u0074s":1,' + BASE + b',"summary":"s"}',  # an escaped key
    b'{"ts":1,' + BASE + b',"summary":"s","ts":2}',  # a key twice, both usable
    b'{"ts":1,' + BASE + b',"summary":"s","\\u0074s":NaN,"ts":2}',
    b'{"ts":1,' + BASE + b',"summary":"s","speaker_type":null,"tenant_id":null}',
    b'{"ts":1,' + BASE + b',"summary":"s","parentCorrelationId":"p","payload":null}',
    b'{"ts":1,' + BASE + b',"summary":"NaN Infinity","tenant_id":"t"}',
    b'{"ts" : 1 , ' + BASE + b' , "summary" : "s" }',
]


@pytest.mark.parametrize("member", QUOTED)
def test_quotes_keys_and_nulls_on_plain_events(member: bytes) -> None:
    assert batch_view([member, member]) == tolerant_view([member, member])


@SETTINGS
@given(members())
@example(b'{"ts":1,"source":"a","kind":"k","correlationId":"c","summary":"s"}')
@example(b'{"ts":1,"source":"a","summary":"s"}')  # legacy
def test_each_member_reads_as_the_tolerant_path_reads_it(member: object) -> None:
    assert batch_view([member]) == tolerant_view([member])


@SETTINGS
@given(st.lists(members(), max_size=8), st.one_of(st.none(), st.integers(0, 400)))
def test_a_batch_reads_as_its_members_read_one_by_one(
    batch: list[object], max_bytes: int | None
) -> None:
    # a payload part-way switches the rest of the batch to the second path
    assert batch_view(batch, max_bytes) == tolerant_view(batch, max_bytes)


def test_the_fast_paths_are_taken() -> None:
    """Plain events come back with their member (read lazily), others with their dict."""
    plain = b'{"ts":1,"source":"a","kind":"k","correlationId":"c","summary":"s"}'
    rich = plain[:-1] + b',"payload":{"n":1.5}}'
    decoded, skipped = decode_events([plain, rich, plain])
    assert skipped == []
    assert [type(stored) for _, stored in decoded] == [bytes, dict, dict]
    assert stored_dict(decoded[0][1]) == json.loads(plain)


def test_digit_limit_is_read_at_call_time() -> None:
    """A member longer than the integer digit limit takes the second path, so an integer
    past the limit is refused (not read by jiter) whatever the limit is set to."""
    member = b'{"ts":1,"source":"a","kind":"k","correlationId":"c","summary":"s","payload":'
    member += b"7" * 700 + b',"payload":null}'  # under a repeated key: the event hides it
    before = sys.get_int_max_str_digits()
    try:
        sys.set_int_max_str_digits(640)
        assert batch_view([member]) == tolerant_view([member])
        assert batch_view([member])[0] == ("skipped", "holds an integer longer than 640 digits")
    finally:
        sys.set_int_max_str_digits(before)


def _old_load_stored(raw: bytes) -> Any:
    """load_stored before the fast path: JSONDecoder.decode."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Unreadable("not UTF-8") from None
    try:
        value = _DECODER.decode(text)
    except RecursionError:
        raise Unreadable(TOO_DEEP) from None
    except ValueError as exc:
        if "integer string conversion" in str(exc):
            limit = sys.get_int_max_str_digits()
            raise Unreadable(f"holds an integer longer than {limit} digits") from None
        raise Unreadable("not JSON") from None
    if _too_deep(value, text):
        raise Unreadable(TOO_DEEP)
    return value


def _outcome(call: Callable[[], Any]) -> Any:
    try:
        return ("value", typed(call()))
    except Unreadable as exc:
        return ("unreadable", exc.reason)
    except AcmiValidationError as exc:
        return ("error", type(exc).__name__, exc.field, exc.rule, str(exc))


@SETTINGS
@given(members())
@example(b' {"a":1}')
@example(b'{"a":1} ')
@example(b"[1,")
@example(b"NaN")
@example(b"")
def test_load_stored_reads_as_the_decoder_does(member: object) -> None:
    if isinstance(member, bytes):
        assert _outcome(lambda: load_stored(member)) == _outcome(lambda: _old_load_stored(member))


# --- writes: the code before the fast path, as the oracle ---------------------------------


def _old_check_tree(value: Any, field: str) -> dict[str, int] | None:
    floats: dict[str, int] | None = None
    stack: list[tuple[Any, int, str]] = [(value, 0, field)]
    while stack:
        item, depth, where = stack.pop()
        if not isinstance(item, dict | list | tuple):
            if isinstance(item, float):
                text = float.__repr__(item)
                if "e" in text or text.endswith(".0"):
                    floats = floats or {}
                    floats[text] = floats.get(text, 0) + 1
            continue
        if depth == MAX_JSON_DEPTH:
            raise AcmiValidationError(
                where,
                "max_depth",
                f"nests arrays and objects more than {MAX_JSON_DEPTH} levels deep",
            )
        top = depth == 0
        if isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str):
                    raise AcmiValidationError(
                        where, "object_keys", f"object keys must be strings, got {key!r}"
                    )
                stack.append((child, depth + 1, f"{where}.{key}" if top else where))
        else:
            for index, child in enumerate(item):
                stack.append((child, depth + 1, f"{where}[{index}]" if top else where))
    return floats


def _old_dumps(value: Any, field: str = "value") -> str:
    floats = _old_check_tree(value, field)
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:
        raise AcmiValidationError(field, "finite", "NaN and Infinity are not JSON") from None
    except TypeError as exc:
        raise AcmiValidationError(field, "json", f"is not JSON-serialisable ({exc})") from None
    if floats:
        text = _js_floats(text, floats)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise AcmiValidationError(
            field, "utf8", "contains a lone UTF-16 surrogate: not valid Unicode text"
        ) from None
    return text


def _old_check_json_object(doc: object, field: str) -> dict[str, Any]:
    if not isinstance(doc, dict):
        got = "null" if doc is None else type(doc).__name__
        raise AcmiValidationError(field, "object", f"must be a JSON object, got {got}")
    text = _old_dumps(doc, field)
    size = len(text.encode("utf-8"))
    if size > MAX_OBJECT_BYTES:
        raise PayloadTooLarge(
            field,
            "max_object_bytes",
            f"is {size} bytes as JSON; an object holds at most {MAX_OBJECT_BYTES} bytes",
        )
    return doc


def _old_parse_event(raw: object, *, now_ms: int, tenant: str, field: str = "event") -> str:
    """parse_event and to_json before the fast path: the stored text."""
    if isinstance(raw, Event):
        data: dict[str, Any] = raw.to_dict()
    elif isinstance(raw, dict):
        data = dict(raw)
    else:
        raise AcmiValidationError(field, "object", "event must be a JSON object")
    if "correlationId" not in data and "correlation_id" in data:
        raise AcmiValidationError(
            f"{field}.correlationId",
            "camel_case",
            "is required; Comms v1.1 uses camelCase correlationId, not correlation_id",
        )
    if "ts" not in data or data["ts"] is None:
        data["ts"] = now_ms
    else:
        _check_ts(data["ts"], f"{field}.ts")
    # the reference SDK's order: an explicit tenant_id comes before a filled speaker_type
    tenant_first = False
    if "speaker_type" not in data:
        source = data.get("source")
        for prefix, speaker in SPEAKER_TYPE_BY_SOURCE_PREFIX.items():
            if isinstance(source, str) and source.startswith(prefix):
                data["speaker_type"] = speaker.value
                tenant_first = "tenant_id" in data
                break
    data.setdefault("tenant_id", tenant)
    summary = data.get("summary")
    if isinstance(summary, str) and summary_too_long(summary):
        raise AcmiValidationError(f"{field}.summary", "max_length", SUMMARY_TOO_LONG)
    _old_check_tree(data, field)
    from pydantic import ValidationError

    try:
        event = Event.model_validate(data)
    except ValidationError as exc:
        raise _validation_error(exc, field) from None
    _old_dumps(data, field)
    dumped = event.model_dump(mode="json", exclude_unset=True)
    return _old_dumps(_in_field_order(dumped, tenant_first=tenant_first), "event")


class Odd:
    """Not JSON."""


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


write_scalars = st.one_of(
    scalars,
    st.sampled_from(
        [math.nan, math.inf, -math.inf, 1e16, 1.5e300, 123456789.0, 1e-5, 2.0, "\udc00"]
    ),
    st.builds(Odd),
    st.just({1, 2}),
)
write_values = st.recursive(
    write_scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.one_of(any_text, st.integers(0, 3)), inner, max_size=4)
    ),
    max_leaves=12,
)
names = st.one_of(
    st.sampled_from(["a", "b", "name", 'q"uote', "back\\slash", "é", "\x01"]), any_text
)
objects = st.one_of(
    st.dictionaries(names, write_values, max_size=6),
    st.dictionaries(names, st.sampled_from([nested(63), nested(64), "x" * 40_000]), max_size=3),
    st.sampled_from([None, [], "text", 1]),
)


@SETTINGS
@given(write_values)
@example(nested(64))
@example(nested(65))
@example({"a": nested(64), "b": {1: 2}})
@example([[1, {2: 3}], nested(70)])
def test_dumps_matches_the_old_encoder(value: Any) -> None:
    assert _outcome(lambda: dumps(value, "v")) == _outcome(lambda: _old_dumps(value, "v"))
    assert _outcome(lambda: check_json_tree(value, "v")) == _outcome(
        lambda: _old_check_tree(value, "v") and None
    )


@SETTINGS
@given(objects)
@example({"a": "x" * MAX_OBJECT_BYTES})
@example({"a": "x" * (MAX_OBJECT_BYTES - 8)})  # {"a":"..."} is 8 bytes more: at the limit
@example({"a": "x" * (MAX_OBJECT_BYTES - 7)})
@example({"a": "é" * (MAX_OBJECT_BYTES // 2 - 4)})
@example({'q"': "x" * (MAX_OBJECT_BYTES - 11)})
@example({"a": math.nan, "b": Odd()})
@example({"b": Odd(), "a": math.nan})
def test_object_members_match_the_old_checks(doc: Any) -> None:
    def old_members() -> list[tuple[str, str]]:
        _old_check_json_object(doc, "signals")
        return [(k, _old_dumps(v, f"signals.{k}")) for k, v in doc.items()]

    def old_text() -> str:
        _old_check_json_object(doc, "signals")
        return _old_dumps(doc, "signals")

    assert _outcome(lambda: json_members(doc, "signals")) == _outcome(old_members)
    assert _outcome(lambda: json_object_text(doc, "signals")) == _outcome(old_text)


raw_events: st.SearchStrategy[Any] = st.one_of(
    st.fixed_dictionaries(
        {
            "source": st.one_of(st.sampled_from(["agent:a", "user:b", "system:c", "x"]), short),
            "summary": st.one_of(st.sampled_from(["hi", "\U0001f600" * 251]), short),
        },
        optional={
            "ts": st.one_of(
                st.integers(-1, MAX_TS_MS + 1),
                st.floats(),
                st.none(),
                st.just("1"),
                st.integers(10**9 - 1, 10**11),  # around the seconds rule
            ),
            "kind": st.one_of(st.just("note"), short),
            "correlationId": st.one_of(st.just("c-1"), short),
            "correlation_id": st.just("c"),
            "speaker_type": st.sampled_from(["agent", "robot", None]),
            "tenant_id": st.one_of(st.just("t"), st.integers()),
            "payload": write_values,
            "zz": write_values,
            "aa": write_values,
        },
    ),
    st.sampled_from([None, [], "x"]),
)


@SETTINGS
@given(raw_events)
@example({"source": "a", "summary": "s", "kind": "k", "correlationId": "c", "zz": {1, 2}})
@example(
    {
        "source": "a",
        "summary": "s",
        "kind": "k",
        "correlationId": "c",
        "zz": Odd(),
        "payload": 1e999,
    }
)
def test_encode_event_matches_parse_then_to_json(raw: Any) -> None:
    def new() -> str:
        event, text = encode_event(raw, now_ms=5, tenant="t")
        assert text == event.to_json()
        assert event == parse_event(raw, now_ms=5, tenant="t")
        return text

    assert _outcome(new) == _outcome(lambda: _old_parse_event(raw, now_ms=5, tenant="t"))


def test_stored_text_is_in_field_order() -> None:
    _, text = encode_event(
        {"zz": 1, "summary": "s", "source": "agent:a", "kind": "k", "correlationId": "c"},
        now_ms=7,
        tenant="t",
    )
    assert list(json.loads(text)) == [
        *[n for n in EVENT_FIELD_ORDER if n not in {"parentCorrelationId", "payload"}],
        "zz",
    ]


def test_entity_ids_parsed_once_still_name_the_field_on_error() -> None:
    assert EntityId.parse("user:mikey") is EntityId.parse("user:mikey")
    for bad in ("user", "User:x", "user:", "tenant:x"):
        for _ in range(2):  # a failure is never kept
            try:
                EntityId.parse(bad, field="events[3].entity")
            except AcmiValidationError as exc:
                assert exc.field == "events[3].entity"
            else:
                raise AssertionError(f"{bad!r} parsed")


def test_name_alphabet_covers_escapes() -> None:
    """The object-size sum counts a name as the encoder writes it (escapes included)."""
    for name in ['q"', "a\\b", "\x01", "tab\t", string.printable]:
        doc = {name: "x" * (MAX_OBJECT_BYTES - len(json.dumps(name)) - 5)}  # {name:"x..."}
        assert len(json.dumps(doc, separators=(",", ":"))) == MAX_OBJECT_BYTES
        assert json_members(doc, "signals") == [(name, json.dumps(doc[name]))]
        doc[name] += "x"
        try:
            json_members(doc, "signals")
        except PayloadTooLarge as exc:
            assert (exc.field, exc.rule) == ("signals", "max_object_bytes")
        else:
            raise AssertionError("one byte over the limit was accepted")
