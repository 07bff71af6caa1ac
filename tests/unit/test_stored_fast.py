"""What a read serves for a plain event, built from the event (``stored.plain_dict``), is
what the full rule serves: ``load_stored`` of the member, the tolerant decoding
(``decode_event``), and the stored dict in ``EVENT_FIELD_ORDER`` (unknown fields after).

Compared typed (1 / 1.0 / True, -0.0, JsonNumber, str / StrEnum, key order all told
apart), on generated members: unicode and lone surrogates, escapes (raw or \\u, as
ensure_ascii writes them), number texts (1E3, 1.0, -0.0, exponents), repeated keys,
extra fields, optional fields absent, null or set, and invalid members mixed in; and on
the adversarial members of tests/unit/test_codec_fast_path.py.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from acmi_core.base import stored
from acmi_core.base.model import EVENT_FIELD_ORDER, MAX_TS_MS, Event
from acmi_core.base.stored import decode_event, decode_events, plain_dict
from acmi_core.entities.api import Events, _decode_events
from tests.unit.test_codec_fast_path import SETTINGS, TAILS, members, typed


def served(members: Sequence[object]) -> list[Any]:
    """What the read path serves for ``members``: its events' dicts (typed), the
    skipped positions with their reasons, and the legacy report."""
    events = _decode_events(list(members), "acmi:user:x:timeline")
    return [
        [typed(d) for d in events.to_dicts()],
        events.skipped_report(),
        events.legacy_report(),
    ]


def full_rule(members: Sequence[object]) -> list[Any]:
    """The same, member by member through the tolerant path, with the stored dict."""
    dicts: list[Any] = []
    skipped: list[dict[str, Any]] = []
    legacy: list[dict[str, Any]] = []
    for position, member in enumerate(members):
        parsed = decode_event(member)
        if isinstance(parsed, str):
            skipped.append({"key": "acmi:user:x:timeline", "position": position, "reason": parsed})
            continue
        event, data = parsed
        ordered = {n: data[n] for n in EVENT_FIELD_ORDER if n in data}
        ordered.update(data)
        if event.legacy:
            legacy.append({"index": len(dicts), "reasons": list(event.legacy)})
        dicts.append(typed(ordered))
    return [dicts, skipped, legacy]


# --- members written key by key, so keys can repeat and numbers take any JSON form --------

any_text = st.text(st.characters(exclude_categories=()), min_size=0, max_size=10)
number_texts = st.one_of(
    st.integers(0, MAX_TS_MS).map(str),
    st.floats(0, MAX_TS_MS).map(repr),
    st.integers(0, 10**13).map(lambda n: f"{n}.0"),
    st.integers(0, 10**12).map(lambda n: f"{n}e0"),
    st.sampled_from(
        ["0", "-0", "-0.0", "0.0", "1E3", "1e+3", "1.5e12", "17640000000000e-1", "1e999"]
    ),
    st.sampled_from(["1e-999", "-1", "NaN", "Infinity", "01", "1_000", str(MAX_TS_MS + 1)]),
    st.sampled_from(["-1e-999", "0e5", "2e-324", "3e-324", "5e-324", "1e-320", "4.9e-324"]),
    # more digits than a double holds: both parsers must round them alike
    st.tuples(st.integers(0, 10**13), st.integers(0, 10**30)).map(lambda p: f"{p[0]}.{p[1]:030d}"),
    st.tuples(st.integers(1, 10**25), st.integers(-40, 0)).map(lambda p: f"{p[0]}e{p[1]}"),
)


def string_text(value: str, ascii_only: bool) -> str:
    return json.dumps(value, ensure_ascii=ascii_only)


@st.composite
def written(draw: st.DrawFn) -> bytes:
    ascii_only = draw(st.booleans())

    def text() -> str:
        value = draw(st.one_of(st.sampled_from(["a", "agent:bench", "é", "😀", "\\"]), any_text))
        return string_text(value, ascii_only)

    pairs: list[tuple[str, str]] = [("ts", draw(number_texts))]
    for name in ("source", "kind", "correlationId", "summary"):
        if draw(st.integers(0, 15)):  # now and then missing: a legacy event
            pairs.append((name, text()))
    for name in ("parentCorrelationId", "tenant_id"):
        choice = draw(st.integers(0, 2))
        if choice:
            pairs.append((name, text() if choice == 1 else "null"))
    speaker = draw(st.sampled_from([None, "agent", "human", "system", "robot", "null"]))
    if speaker is not None:
        pairs.append(("speaker_type", "null" if speaker == "null" else json.dumps(speaker)))
    if draw(st.integers(0, 4)) == 0:
        pairs.append(("payload", draw(st.sampled_from(["null", "1", '{"a":[1,2.5]}', '"x"']))))
    if draw(st.integers(0, 4)) == 0:
        pairs.append((draw(st.sampled_from(["zz", "legacy", "ts2"])), text()))
    if draw(st.integers(0, 4)) == 0:  # a key twice, either value first
        name, value = draw(st.sampled_from(pairs))
        other = draw(st.sampled_from([text(), draw(number_texts), "null"]))
        pairs.insert(draw(st.integers(0, len(pairs))), (name, other))
        if draw(st.booleans()):
            pairs.append((name, value))
    order = draw(st.permutations(range(len(pairs))))
    keys_escaped = draw(st.integers(0, 9)) == 0
    fields = []
    for index in order:
        name, value = pairs[index]
        key = (
            json.dumps(name, ensure_ascii=True)
            if not keys_escaped
            else '"\\u00' + (f"{ord(name[0]):02x}" + name[1:] + '"')
        )
        fields.append(f"{key}:{value}")
    raw = "{" + ",".join(fields) + "}"
    return raw.encode("utf-8", "surrogatepass")


mixed = st.one_of(written(), members())


@SETTINGS
@given(st.lists(mixed, max_size=8))
@example([b'{"ts":1.0,"source":"a","kind":"k","correlationId":"c","summary":"s"}'])
@example([b'{"ts":1e-999,"source":"a","kind":"k","correlationId":"c","summary":"s"}'])
@example([b'{"ts":1E3,"source":"a","kind":"k","correlationId":"c","summary":"\\u00e9"}'])
@example([b'{"ts":-0.0,"source":"a","kind":"k","correlationId":"c","summary":"s","ts":2}'])
@example([b'{"ts":1,"source":"a","kind":"k","correlationId":"c","summary":"\\ud800"}'])
@example(
    [b'{"ts":1,"source":"a","kind":"k","correlationId":"c","summary":"s","speaker_type":"agent"}']
)
@example(
    [b'{"ts":1,"source":"a","kind":"k","correlationId":"c","summary":"s","speaker_type":null}']
)
def test_a_read_serves_what_the_full_rule_serves(batch: list[object]) -> None:
    assert served(batch) == full_rule(batch)


def test_every_adversarial_tail_is_served_as_the_full_rule_serves_it() -> None:
    plain = b'{"ts":1,"source":"agent:a","kind":"k","correlationId":"c","summary":"s"}'
    for tail in TAILS:
        member = plain[:-1] + tail.encode("utf-8", "surrogatepass") + b"}"
        for batch in ([member], [plain, member, plain]):
            assert served(batch) == full_rule(batch), tail


def test_plain_events_are_served_from_the_event() -> None:
    """The plain events of a page take the fast path (their member kept, not a dict) and
    are served as fresh dicts: a caller editing one changes neither the event nor what
    the next to_dicts() gives."""
    members = [
        b'{"ts":1,"source":"agent:a","kind":"k","correlationId":"c%d","summary":"s",'
        b'"speaker_type":"agent","tenant_id":"default"}' % i
        for i in range(3)
    ]
    decoded, skipped = decode_events(members)
    assert skipped == [] and [type(stored) for _, stored in decoded] == [bytes] * 3
    events = Events([e for e, _ in decoded], (), decoded)
    first = events.to_dicts()
    assert [list(d) for d in first] == [
        ["ts", "source", "kind", "correlationId", "summary", "speaker_type", "tenant_id"]
    ] * 3
    assert type(first[0]["speaker_type"]) is str and first[0]["speaker_type"] == "agent"
    first[0]["summary"] = "edited"
    assert events[0].summary == "s" and events.to_dicts()[0]["summary"] == "s"
    assert plain_dict(events[1]) == json.loads(members[1])


def test_event_fields_are_declared_in_the_stored_order() -> None:
    """plain_dict copies the event's __dict__, which pydantic fills in declaration order."""
    assert tuple(Event.model_fields) == EVENT_FIELD_ORDER


# --- the memo of plain events: a second read of the same members serves the same ---------


@SETTINGS
@given(st.lists(mixed, max_size=8))
def test_a_read_served_from_the_memo_is_the_full_rule(batch: list[object]) -> None:
    """Read twice (the second read meets the plain members in ``_PLAIN_MEMO``), then with
    the memo emptied: every read serves what the full rule serves, and the same events."""
    first = served(batch)
    again = served(batch)
    stored._PLAIN_MEMO.clear()
    fresh = served(batch)
    assert first == again == fresh == full_rule(batch)
    before, _ = decode_events(batch)
    after, _ = decode_events(batch)
    assert [e for e, _ in before] == [e for e, _ in after]
    assert [type(s) for _, s in before] == [type(s) for _, s in after]


def test_the_memo_holds_plain_events_only_and_stays_bounded() -> None:
    stored._PLAIN_MEMO.clear()
    plain = b'{"ts":1,"source":"agent:a","kind":"k","correlationId":"c","summary":"s"}'
    with_payload = plain[:-1] + b',"payload":{"a":1}}'
    extra = plain[:-1] + b',"zz":"x"}'
    big = plain[:-1].replace(b'"s"', b'"' + b"x" * stored._MEMO_MEMBER_BYTES + b'"') + b"}"
    decode_events([plain, with_payload, extra, big])
    assert list(stored._PLAIN_MEMO) == [plain]
    # a payload ends the plain path for the rest of the read: the memo is not consulted
    decoded, _ = decode_events([with_payload, plain])
    assert type(decoded[1][1]) is dict and decoded[1][0] == stored._PLAIN_MEMO[plain]
    hit, _ = decode_events([plain])
    assert hit[0][0] is stored._PLAIN_MEMO[plain] and hit[0][1] == plain
    many = [plain.replace(b'"c"', b'"c%d"' % i) for i in range(stored._MEMO_MAX + 10)]
    decoded, skipped = decode_events(many)
    assert skipped == [] and len(decoded) == len(many)
    assert 0 < len(stored._PLAIN_MEMO) <= stored._MEMO_MAX
    assert [e.correlationId for e, _ in decoded] == [f"c{i}" for i in range(len(many))]
    decoded_again, _ = decode_events(many)
    assert [e for e, _ in decoded_again] == [e for e, _ in decoded]


def test_events_served_as_dicts_after_the_list_changed() -> None:
    """The id map of ``Events`` is built on the first to_dicts(): events the caller added
    or took out after the read are served as before (an added one by its own to_dict)."""
    members = [
        b'{"ts":%d,"source":"agent:a","kind":"k","correlationId":"c","summary":"s"}' % i
        for i in (1, 2, 3)
    ]
    events = _decode_events(members, "acmi:user:x:timeline")
    added = Event(ts=9, source="agent:b", kind="k", correlationId="d", summary="t")
    events.pop(0)
    events.append(added)
    assert events.to_dicts() == [json.loads(members[1]), json.loads(members[2]), added.to_dict()]
