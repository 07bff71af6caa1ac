"""Stored JSON, as any client may have written it: read tolerantly, rendered exactly.

Other writers (the reference TypeScript SDK, JavaScript's JSON.stringify, older versions
of ACMI, a person with redis-cli) store what we would not: lone UTF-16 surrogates,
integers of any length, numbers beyond the double range, deep nesting, NaN. A read must
never fail on them: ``load_stored`` returns the value or raises :class:`Unreadable` with a
reason (never the content), and ``render_json`` writes back exactly what was read.
"""

from __future__ import annotations

import json
import math
import re
import secrets
import sys
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any, Final, TypeAlias

from pydantic import ValidationError as PydanticValidationError
from typing_extensions import TypeAliasType

from acmi_core.base.errors import CorruptData
from acmi_core.base.model import (
    EVENT_FIELD_ORDER,
    MAX_SUMMARY_LEN,
    SECONDS_TS_END,
    SECONDS_TS_MIN,
    ActorType,
    Event,
    event_from_stored,
    seconds_like,
    summary_too_long,
)

# Deepest stored value a read serves; deeper is skipped and reported. Fixed rather than
# "whatever json.loads survives", which depends on the caller's stack depth; 512 levels
# decode and render with room to spare under Python's default recursion limit (1000).
MAX_READ_DEPTH: Final = 512


class JsonNumber(Decimal):
    """A stored JSON number no double can hold (beyond +-1.8e308, or a non-zero number
    below 5e-324): kept as written, so it renders back digit for digit."""

    text: str

    def __new__(cls, text: str) -> JsonNumber:
        number = super().__new__(cls, text)
        number.text = text
        return number


# A stored JSON value as any writer left it, which is the answer of the operations that
# serve a document as written (a profile, the signals, a rollup, a lesson): its shape is the
# writer's, so the type says "JSON" and no more. A TypeAliasType so pydantic can check a
# real answer against it (tests/results.py); a number no double holds is a JsonNumber (a
# Decimal).
StoredValue = TypeAliasType(
    "StoredValue",
    "bool | int | float | str | Decimal | list[StoredValue] | dict[str, StoredValue] | None",
)
StoredObject: TypeAlias = dict[str, StoredValue]


class Unreadable(Exception):
    """A stored value that cannot be served; ``reason`` never echoes its content."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# A summary this short is within MAX_SUMMARY_LEN however JavaScript counts it.
_SHORT_SUMMARY: Final = MAX_SUMMARY_LEN // 2
TOO_DEEP: Final = f"nested deeper than {MAX_READ_DEPTH} levels (the read limit)"
LONE_SURROGATE: Final = re.compile(r"[\ud800-\udfff]")


def _number(text: str) -> float | JsonNumber:
    value = float(text)
    if math.isinf(value) or (value == 0.0 and text.lower().partition("e")[0].strip("-+0.")):
        return JsonNumber(text)  # overflow, or a non-zero number that underflowed to 0
    return value


def _constant(name: str) -> Any:
    raise Unreadable(f"holds {name}, which is not JSON")


# Built once: json.loads(..., parse_float=...) builds a decoder per call (5 us each).
_DECODER: Final = json.JSONDecoder(parse_float=_number, parse_constant=_constant)
_SCAN: Final[Callable[[str, int], tuple[Any, int]]] = _DECODER.scan_once  # type: ignore[attr-defined]


def _too_deep(value: Any, text: str) -> bool:
    # cheap tests first: a level takes two characters, and an opening bracket
    if len(text) <= 2 * MAX_READ_DEPTH or text.count("{") + text.count("[") <= MAX_READ_DEPTH:
        return False
    stack: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, dict | list) else []
    while stack:  # iterative: the value may be too deep for recursion
        item, depth = stack.pop()
        if depth > MAX_READ_DEPTH:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return False


def load_stored(raw: bytes) -> Any:
    """A stored JSON value, as another client may have written it. Raises ``Unreadable``
    (with a reason) for what cannot be served: not UTF-8, not JSON, NaN/Infinity, nested
    deeper than ``MAX_READ_DEPTH``, an integer past Python's digit limit."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Unreadable("not UTF-8") from None
    try:
        # The decoder's own C scanner, without decode()'s Python wrapper (~1 us a value):
        # a value that fills the text is what decode() returns; anything else (leading or
        # trailing whitespace, extra data, no value at 0) goes through decode() itself.
        try:
            value, end = _SCAN(text, 0)
        except StopIteration:
            end = -1
        if end != len(text):
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


def render_json(value: Any, *, indent: int | None = None) -> bytes:
    """UTF-8 JSON of what a read returned, exactly (compact unless ``indent``):
    ``JsonNumber``s as written and lone surrogates as \\u escapes (as ensure_ascii writes
    them; UTF-8 cannot carry them). The stdlib encoder, not pydantic's, which stops at
    depth 255."""
    numbers: list[str] = []
    marker = f"\x00acmi-number-{secrets.token_hex(8)}-"

    def number(obj: object) -> str:
        if isinstance(obj, JsonNumber):
            numbers.append(obj.text)
            return f"{marker}{len(numbers) - 1}"
        raise TypeError(f"{type(obj).__name__} is not JSON")

    text = json.dumps(
        value,
        ensure_ascii=False,
        allow_nan=False,
        indent=indent,
        separators=(",", ": ") if indent is not None else (",", ":"),
        default=number,
    )
    if numbers:
        placeholder = re.compile(re.escape(json.dumps(marker)[:-1]) + r'(\d+)"')
        text = placeholder.sub(lambda m: numbers[int(m[1])], text)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return LONE_SURROGATE.sub(lambda m: f"\\u{ord(m[0]):04x}", text).encode("utf-8")


def _well_formed(data: dict[str, Any]) -> dict[str, Any] | None:
    """``data`` with lone surrogates in its top-level keys and strings replaced by U+FFFD
    (pydantic refuses them in str fields; payload and extra values are not checked), or
    None when there are none."""
    clean: dict[str, Any] = {}
    changed = False
    for name, value in data.items():
        fixed_name = LONE_SURROGATE.sub("\ufffd", name)
        fixed = LONE_SURROGATE.sub("\ufffd", value) if isinstance(value, str) else value
        changed = changed or fixed_name != name or fixed is not value
        clean[fixed_name] = fixed
    return clean if changed else None


def decode_event(member: object) -> tuple[Event, dict[str, Any]] | str:
    """One stored timeline member: the event (perhaps legacy) and its stored dict, or
    why it is skipped (never its content)."""
    if not isinstance(member, bytes):
        return "not a string"
    try:
        data = load_stored(member)
    except Unreadable as exc:
        return exc.reason
    if not isinstance(data, dict):
        return "not a JSON object"
    event = event_from_stored(data)
    if isinstance(event, str) or event.legacy:
        # pydantic refuses lone surrogates in str fields: read them as U+FFFD (the stored
        # dict keeps them); only here, so a valid event costs no second look
        clean = _well_formed(data)
        if clean is not None:
            event = event_from_stored(clean)
    return event if isinstance(event, str) else (event, data)


# The plain rule (decode_events' first fast path): an event pydantic read from a member,
# with no payload and no unknown field, is what ``load_stored`` + validation read when no
# key appears twice. pydantic's parser (jiter) reads what it accepts as ``load_stored``
# does except NaN/Infinity (it accepts them; ``load_stored`` refuses the member), integers
# past Python's digit limit (ditto) and numbers beyond the double range (inf/0.0 where
# ``load_stored`` keeps them); it refuses lone surrogates. In a plain event such a value
# could only hide under a key given twice (the event shows the last), so: no key twice;
# or be its ts, the one number it holds: inf is refused (allow_inf_nan), and a float ts
# of 0.0 (perhaps 1e-999, which ``load_stored`` keeps as written) takes the second path.
#
# Counted by quotes, in one pass: every '"' in JSON text opens or closes a string, or is
# escaped inside one. The member's strings are its K keys and at least the S string
# fields the event holds, so it has at least 2K + 2S quotes; it has at least F distinct
# keys (the fields set), so K >= F, equal only when no key repeats. Exactly 2F + 2S
# quotes leaves no room for a second copy of any key.


# Plain events already read, by their member: a reader re-reads the same newest events
# (an agent's get, page after page of a thread), and validation is most of a read's CPU.
# Only plain events (no payload, no unknown field): frozen models of strings, numbers and
# an enum, nothing a caller can edit, so one instance serves every read of the same bytes,
# which pydantic reads the same way each time. Bounded: members up to _MEMO_MEMBER_BYTES,
# at most _MEMO_MAX of them (cleared when full: dict.clear is atomic, so threads may share
# it), about 4.5 MiB at most (2,048 events of 506 bytes: 1 MiB of members, 3.4 MiB of events).
_MEMO_MAX: Final = 2048
_MEMO_MEMBER_BYTES: Final = 512
_PLAIN_MEMO: Final[dict[bytes, Event]] = {}


def _remember(member: bytes, event: Event) -> None:
    if len(member) <= _MEMO_MEMBER_BYTES:
        if len(_PLAIN_MEMO) >= _MEMO_MAX:
            _PLAIN_MEMO.clear()
        _PLAIN_MEMO[member] = event


def decode_events(
    members: Sequence[object], max_bytes: int | None = None
) -> tuple[list[tuple[Event, dict[str, Any] | bytes]], list[tuple[int, str]]]:
    """``decode_event`` of each member, faster: the events, each with its stored dict or
    the member itself (a plain event: ``plain_dict`` serves it; ``stored_dict`` parses
    it when asked), and the skipped members as (position, reason); a member over
    ``max_bytes`` is skipped.

    Two fast paths give exactly what ``decode_event`` gives, else it runs:
    - a plain event (no payload, no unknown field, no key twice): parsed and validated
      from the bytes by pydantic in one step (the plain rule, above), or, read before,
      the same event again (``_PLAIN_MEMO``);
    - any valid event: ``load_stored``, then pydantic's validation.
    A member that is not a valid event goes on to the tolerant path."""
    decoded: list[tuple[Event, dict[str, Any] | bytes]] = []
    skipped: list[tuple[int, str]] = []
    validator = Event.__pydantic_validator__
    from_json, from_dict = validator.validate_json, validator.validate_python
    plain = True  # until a member has a payload: then this read takes the second path
    event: Event | None
    for position, member in enumerate(members):
        if type(member) is bytes:
            if max_bytes is not None and len(member) > max_bytes:
                reason = f"{len(member)} bytes: larger than a page carries ({max_bytes} bytes)"
                skipped.append((position, reason))
                continue
            if plain:
                event = _PLAIN_MEMO.get(member)
                if event is not None:
                    decoded.append((event, member))
                    continue
                try:
                    event = from_json(member)
                except PydanticValidationError:
                    event = None
                if event is None:
                    pass
                elif event.payload is not None or event.__pydantic_extra__:
                    plain = False
                else:
                    # the plain rule and seconds_like, inline: this runs for every event a
                    # read serves (a call each costs ~0.2 us)
                    held = event.__dict__
                    strings = 4 + (held["parentCorrelationId"] is not None)
                    strings += (held["tenant_id"] is not None) + (held["speaker_type"] is not None)
                    ts = held["ts"]
                    summary = held["summary"]
                    if (
                        member.count(b'"') == 2 * (len(event.__pydantic_fields_set__) + strings)
                        and (len(summary) <= _SHORT_SUMMARY or not summary_too_long(summary))
                        and not SECONDS_TS_MIN <= ts < SECONDS_TS_END
                        and (ts or type(ts) is int)  # 0.0 may be 1e-999: load_stored keeps it
                    ):
                        decoded.append((event, member))
                        _remember(member, event)
                        continue
            try:
                data = load_stored(member)
            except Unreadable as exc:
                skipped.append((position, exc.reason))
                continue
            if type(data) is dict:
                event = _valid(from_dict, data)
                if (
                    event is not None
                    and not summary_too_long(event.summary)
                    and not seconds_like(event.ts)
                ):
                    decoded.append((event, data))
                    continue
        parsed = decode_event(member)  # the tolerant path: legacy events, odd members
        if isinstance(parsed, str):
            skipped.append((position, parsed))
        else:
            decoded.append(parsed)
    return decoded, skipped


def _valid(validate: Callable[[Any], Any], value: object) -> Event | None:
    try:
        event: Event = validate(value)
    except PydanticValidationError:
        return None
    return event


def stored_dict(stored: dict[str, Any] | bytes) -> dict[str, Any]:
    """The stored dict of an event ``decode_events`` returned with its member."""
    if isinstance(stored, dict):
        return stored
    value = load_stored(stored)  # cannot fail: the member passed the first fast path
    assert isinstance(value, dict)
    return value


def plain_dict(event: Event) -> dict[str, Any]:
    """What ``stored_dict`` gives, in ``EVENT_FIELD_ORDER``, for an event the first fast
    path of ``decode_events`` read from its member: built from the event rather than
    parsed again (a quarter of the cost). Such a member holds the event's fields and no
    other, each once, and pydantic's parser read each value as ``load_stored`` does (the
    plain rule: it refuses lone surrogates and the numbers ``load_stored`` keeps as
    written; a float ts of 0.0 is not plain); tests/unit/test_stored_fast.py holds the
    two to it. A speaker_type is served as its string, as the parse gives it."""
    served = event.__dict__.copy()  # every field, in field order (EVENT_FIELD_ORDER)
    fields = event.__pydantic_fields_set__
    if len(fields) != len(EVENT_FIELD_ORDER):
        for name in EVENT_FIELD_ORDER:
            if name not in fields:
                del served[name]
    speaker = served.get("speaker_type")
    if speaker is not None:
        served["speaker_type"] = _SPEAKER_TEXT[speaker]
    return served


# an enum's .value is a property lookup (~0.4 us); a dict lookup is a tenth of that
_SPEAKER_TEXT: Final = {actor: actor.value for actor in ActorType}


BACKTICKS: Final = re.compile("`+")


def fence(body: str, info: str = "text") -> str:
    """``body`` in a code fence no backtick run inside it can close (CommonMark: a fence
    closes only with a run at least as long as the opening one): stored text shown to a
    reader (a wake bundle, an LLM prompt) stays data and cannot pose as instructions."""
    longest = max(map(len, BACKTICKS.findall(body)), default=0) if "`" in body else 0
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{info}\n{body}\n{ticks}"


def decode_object(raw: object, key: str) -> dict[str, Any] | None:
    """A stored JSON object that must be one (a profile, signals): None when the key is
    absent (or holds the null the reference could store); CorruptData naming ``key`` when
    it holds another type, unreadable JSON, or JSON that is not an object."""
    if raw is None:
        return None
    if not isinstance(raw, bytes):
        raise CorruptData(f"{key} does not hold a string", field=key)
    try:
        value = load_stored(raw)
    except Unreadable as exc:
        raise CorruptData(f"{key}: {exc.reason}", field=key) from None
    if value is None:
        return None
    if not isinstance(value, dict):
        raise CorruptData(f"{key} holds JSON that is not an object", field=key)
    return value


def load_object(raw: object) -> dict[str, Any] | None:
    """A stored JSON object (a profile, a rollup, a record), or None for anything else:
    absent, unreadable, or JSON that is not an object."""
    if not isinstance(raw, bytes):
        return None
    try:
        value = load_stored(raw)
    except Unreadable:
        return None
    return value if isinstance(value, dict) else None


def scored(reply: object, *, keep_unreadable: bool = False) -> list[tuple[str, int]]:
    """``(member, score)`` pairs of a ZRANGE ... WITHSCORES reply (members as text, scores
    as integer ms). A pair another tool wrote with a member that is not UTF-8 or an
    unusable score (inf, nan) is left out, or with ``keep_unreadable`` kept as ``("", 0)``
    so the list counts every member (for a cursor that pages by position)."""
    items = reply if isinstance(reply, list) else []
    pairs: list[tuple[str, int]] = []
    for member, score in zip(items[::2], items[1::2], strict=False):
        if isinstance(member, bytes) and isinstance(score, bytes):
            try:
                pairs.append((member.decode("utf-8"), int(float(score))))
            except (ValueError, OverflowError):  # UnicodeDecodeError is a ValueError
                if keep_unreadable:
                    pairs.append(("", 0))
    return pairs
