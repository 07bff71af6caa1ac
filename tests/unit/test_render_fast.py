"""The markdown renderer's fast paths write what the general code they skip writes.

Each reference below is the code as it was before its fast path (the rule): a one-line
value through the JSON encoder, the span loop, ``ago`` through ``event_ms``, an event's
text by the first non-empty string of summary and message, the fence's backtick scan,
and the lone-surrogate pass over the whole text; generated inputs, compared typed."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from acmi_core.base.stored import BACKTICKS, LONE_SURROGATE, fence, render_json
from acmi_core.bootstrap import render
from acmi_core.bootstrap.render import View

SETTINGS = settings(max_examples=400, deadline=None)
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def one_line_rule(value: object, limit: int = 400) -> str:
    if isinstance(value, str):
        text = value
    else:
        try:
            text = _ENCODER.encode(value)
        except (TypeError, ValueError):
            text = render_json(value).decode("utf-8")
    text = " ".join(text.split())
    return text if len(text) <= limit else f"{text[:limit]}… (+{len(text) - limit} chars)"


def span_rule(ms: float) -> str:
    seconds = abs(ms) / 1000
    for unit, size in (("d", 86_400), ("h", 3_600), ("min", 60)):
        if seconds >= size:
            return f"{round(seconds / size)} {unit}"
    return f"{int(seconds)} s"


def ago_rule(ms: object, now: int) -> str:
    when = render.event_ms(ms)
    if when is None:
        return "?"
    delta = now - when
    if abs(delta) < 1000:
        return "now"
    return f"{span_rule(delta)} ago" if delta > 0 else f"in {span_rule(delta)}"


def fence_rule(body: str, info: str = "text") -> str:
    longest = max(map(len, BACKTICKS.findall(body)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{info}\n{body}\n{ticks}"


def outcome(call: Any, *args: Any) -> tuple[str, Any]:
    """What a call gives: its text, typed, or the kind of error it raises."""
    try:
        result = call(*args)
    except Exception as exc:  # the error kind is part of what must be equal
        return ("raises", type(exc).__name__)
    return (type(result).__name__, result)


numbers = st.one_of(
    st.integers(),
    st.integers(-(10**15), 10**15),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -0.0, 0.0, 1e16, 1e-7, 2**53, 9_999_999_999_999, 10**13, True, False]),
)
values = st.one_of(
    numbers,
    st.none(),
    st.text(),
    st.lists(st.one_of(st.integers(), st.text()), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=3),
)


@SETTINGS
@given(values, st.sampled_from([5, 300, 400]))
@example(10**400, 400)  # past the int digit limit: both raise
@example(float("inf"), 400)
@example(float("nan"), 400)
@example(-0.0, 400)
@example(123456789, 5)
def test_one_line_writes_what_the_encoder_path_writes(value: object, limit: int) -> None:
    assert outcome(render._one_line, value, limit) == outcome(one_line_rule, value, limit)


@SETTINGS
@given(st.one_of(st.integers(-(10**12), 10**12), st.floats(-1e12, 1e12)))
@example(59_999)
@example(3_600_000)
@example(86_400_000)
@example(-86_399_999)
def test_span_is_the_loop_unrolled(ms: float) -> None:
    assert render.span(ms) == span_rule(ms)


@SETTINGS
@given(st.one_of(numbers, st.none(), st.text(max_size=3)), st.integers(0, 2 * 10**13))
@example(10**13, 10**13)
@example(9_999_999_999_999, 10**13)
@example(-5, 0)
@example(True, 5000)
@example(12_345_678_901_234_567, 1_800_000_000_000)
def test_ago_reads_a_ts_as_event_ms_does(ms: object, now: int) -> None:
    assert outcome(render.ago, ms, now) == outcome(ago_rule, ms, now)


@SETTINGS
@given(st.text(alphabet=st.sampled_from("a`` \n")), st.sampled_from(["", "text"]))
def test_fence_without_backticks_is_the_scan(body: str, info: str) -> None:
    assert fence(body, info) == fence_rule(body, info)


def event_line_rule(event: Any, view: View) -> str:
    """``render.event_line`` as it was (its helpers are the module's)."""
    if not isinstance(event, Mapping):
        return render._one_line(event)
    if event.get("kind") == "hitl-required" and isinstance(event.get("payload"), Mapping):
        return render.hitl_line(event, view)
    parts = [render.ago(event.get("ts"), view.now)]
    source = event.get("source")
    if source and source != view.agent:
        parts.append(str(source))
    if event.get("kind"):
        parts.append(f"[{event['kind']}]")
    text = next(
        (v for v in (event.get("summary"), event.get("message")) if isinstance(v, str) and v),
        None,
    )
    known = {"ts", "source", "kind", "summary", "message", "correlationId", "correlation_id"}
    if text is not None:
        parts.append(render._one_line(text))
    else:
        parts.append(render.pairs(event, view, lambda k, _: k in known))
    correlation = event.get("correlationId") or event.get("correlation_id")
    if correlation:
        parts.append(f"({correlation})")
    payload = event.get("payload")
    said = text or ""
    if isinstance(payload, Mapping):
        shown = render.pairs(payload, view, lambda k, v: render._known(v, said, view))
        if shown:
            parts.append(shown)
    elif payload is not None and "payload" in event:
        parts.append(f"payload={render._one_line(payload, 300)}")
    return " ".join(p for p in parts if p)


texts = st.one_of(st.none(), st.integers(), st.sampled_from(["", "s", "a  b\n c"]), st.text())
fields = st.dictionaries(
    st.sampled_from(["ts", "source", "kind", "summary", "message", "correlation_id", "x_at"]),
    st.one_of(texts, st.integers(0, 2 * 10**12)),
)
payloads = st.one_of(
    st.none(),
    st.dictionaries(
        st.sampled_from(["a", "ts", "deadline", "n_ms", "urgency", "topic"]),
        # the agent, text the summary says (or part of it), one character of it
        st.one_of(values, st.sampled_from(["agent:a", "s", "a  b", "b", "a", "note", ""])),
    ),
    values,
)


@SETTINGS
@given(fields, st.one_of(st.just("absent"), payloads), st.sampled_from(["note", "hitl-required"]))
def test_an_event_line_is_written_as_before(
    event: dict[str, Any], payload: object, kind: str
) -> None:
    if payload != "absent":
        event["payload"] = payload
    if "kind" in event:
        event["kind"] = kind
    view = View(now=10**12, agent="agent:a")
    assert outcome(render.event_line, event, view) == outcome(event_line_rule, event, view)
    assert outcome(render.event_line, [event], view) == outcome(event_line_rule, [event], view)


class Record(Mapping[str, Any]):
    """A mapping that is not a dict: takes the ABC's check, with the same lines."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Any:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


@pytest.mark.parametrize(
    "event",
    [
        {"ts": 1_000, "kind": "note", "summary": "hi", "payload": {"n": 1, "ok": True}},
        {
            "ts": 1_000,
            "kind": "hitl-required",
            "summary": "s",
            "payload": {"urgency": "P0", "topic": "t", "deadline": 10**12 + 5},
        },
        {"ts": 1_000, "kind": "note", "payload": [1, "x"]},
    ],
)
def test_a_mapping_that_is_no_dict_renders_as_a_dict(event: dict[str, Any]) -> None:
    view = View(now=10**12 + 90_000, agent="agent:a")
    wrapped = Record({**event, "payload": Record(event["payload"])})
    if not isinstance(event["payload"], dict):
        wrapped = Record(event)
    assert render.event_line(wrapped, view) == render.event_line(event, view)
    assert render.item_line("work", wrapped, view) == render.item_line("work", event, view)


def test_markdown_still_shows_a_lone_surrogate_as_the_replacement_character() -> None:
    text = "a \ud800 b · c"
    assert LONE_SURROGATE.sub("\ufffd", text) == "a \ufffd b · c"
    from acmi_core.bootstrap.bundle import Bundle, Section

    bundle = Bundle(
        "agent:a",
        "default",
        "main",
        "markdown",
        90_000,
        [Section("timeline", [{"ts": 1_000, "kind": "k", "summary": text}])],
    )
    out = render.markdown(bundle)
    assert "a \ufffd b · c" in out and "\ud800" not in out
    out.encode("utf-8")
