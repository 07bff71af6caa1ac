"""Validation rules: each rejection names the field and the rule (DESIGN §3)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from acmi_core import AcmiValidationError, EntityId
from acmi_core.base.model import (
    Event,
    check_profile,
    check_signal_key,
    event_from_member,
    parse_event,
)

EVENT = {"source": "s", "kind": "k", "correlationId": "c", "summary": "s"}


@pytest.mark.parametrize(
    ("raw", "rule"),
    [
        ("", "format"),
        ("no-colon", "format"),
        (":missing-cat", "category_format"),
        ("cat:", "id_format"),
        ("Cat:Bad", "category_format"),
        ("1cat:x", "category_format"),
        ("cat:a:b", "id_format"),
        ("cat:sp ace", "id_format"),
        ("tenant:x", "category_reserved"),
        ("user:" + "x" * 252, "max_length"),
        (42, "type"),
    ],
)
def test_entity_id_rules(raw: object, rule: str) -> None:
    with pytest.raises(AcmiValidationError) as err:
        EntityId.parse(raw)
    assert (err.value.field, err.value.rule) == ("entity", rule)


def test_entity_id_limits() -> None:
    assert str(EntityId.parse("user:" + "x" * 251)) == "user:" + "x" * 251
    assert EntityId.parse("a_b-1:A.b_c-9") == EntityId("a_b-1", "A.b_c-9")


@pytest.mark.parametrize(("key", "ok"), [("", False), ("k" * 128, True), ("k" * 129, False)])
def test_signal_key_length(key: str, ok: bool) -> None:
    if ok:
        assert check_signal_key(key) == key
    else:
        with pytest.raises(AcmiValidationError, match="1-128"):
            check_signal_key(key)


@pytest.mark.parametrize(
    ("doc", "field", "rule"),
    [
        (None, "profile", "object"),
        ([], "profile", "object"),
        ("text", "profile", "object"),
        ({"actor_type": "robot"}, "profile.actor_type", "enum"),
        ({"tenant_id": 5}, "profile.tenant_id", "type"),
        ({"x": math.nan}, "profile", "finite"),
        ({"x": {1, 2}}, "profile", "json"),
    ],
)
def test_profile_rules(doc: object, field: str, rule: str) -> None:
    with pytest.raises(AcmiValidationError) as err:
        check_profile(doc)
    assert (err.value.field, err.value.rule) == (field, rule)


@pytest.mark.parametrize(
    ("patch", "field", "rule"),
    [
        ({"source": None}, "event.source", "type"),
        ({"kind": ""}, "event.kind", "non_empty"),
        ({"summary": "x" * 501}, "event.summary", "max_length"),
        ({"summary": 5}, "event.summary", "type"),
        ({"ts": "now"}, "event.ts", "type"),
        ({"ts": True}, "event.ts", "type"),
        ({"ts": math.inf}, "event.ts", "range"),
        ({"ts": -1}, "event.ts", "range"),
        ({"ts": 10**16}, "event.ts", "range"),
        ({"speaker_type": "robot"}, "event.speaker_type", "enum"),
        ({"payload": {"x": math.nan}}, "event", "finite"),
    ],
)
def test_event_rules(patch: dict[str, Any], field: str, rule: str) -> None:
    with pytest.raises(AcmiValidationError) as err:
        parse_event({**EVENT, **patch}, now_ms=1, tenant="t")
    assert (err.value.field, err.value.rule) == (field, rule)


@pytest.mark.parametrize("missing", ["source", "kind", "correlationId", "summary"])
def test_event_required_fields(missing: str) -> None:
    event = {k: v for k, v in EVENT.items() if k != missing}
    with pytest.raises(AcmiValidationError) as err:
        parse_event(event, now_ms=1, tenant="t")
    assert (err.value.field, err.value.rule) == (f"event.{missing}", "required")


def test_snake_case_correlation_id_is_named() -> None:
    event = {"source": "s", "kind": "k", "correlation_id": "c", "summary": "s"}
    with pytest.raises(AcmiValidationError, match="camelCase") as err:
        parse_event(event, now_ms=1, tenant="t")
    assert err.value.rule == "camel_case"


def test_auto_fill_and_explicit_values() -> None:
    filled = parse_event({**EVENT, "source": "agent:bob"}, now_ms=7, tenant="t").to_dict()
    assert filled == {
        **EVENT,
        "ts": 7,
        "source": "agent:bob",
        "speaker_type": "agent",
        "tenant_id": "t",
    }
    explicit = parse_event(
        {**EVENT, "source": "user:x", "speaker_type": "external", "tenant_id": "o", "ts": 3},
        now_ms=7,
        tenant="t",
    )
    assert (explicit.speaker_type, explicit.tenant_id, explicit.ts) == ("external", "o", 3)
    assert "speaker_type" not in parse_event(EVENT, now_ms=1, tenant="t").to_dict()


def test_stored_member_parsing_is_tolerant() -> None:
    assert event_from_member(b"\xff") == "not UTF-8"
    assert event_from_member(b"{") == "not JSON"
    assert event_from_member(b"3") == "not a JSON object"
    ok = event_from_member(json.dumps({**EVENT, "ts": 1, "extra": {"a": []}}).encode())
    assert not isinstance(ok, str)
    assert ok.to_dict()["extra"] == {"a": []}
    assert ok.legacy == ()


def test_a_stored_event_breaking_a_rule_is_read_as_legacy() -> None:
    stored = {"ts": -1, "source": "cli", "summary": "x" * 501, "tenant_id": 3, "n": [{"a": 1}]}
    event = event_from_member(json.dumps(stored).encode())
    assert not isinstance(event, str)
    assert event.legacy == (
        "ts: range",
        "kind: required",
        "correlationId: required",
        "summary: max_length",
        "tenant_id: type",
    )
    assert (event.ts, event.kind, event.correlationId, event.tenant_id) == (-1, "", "", None)
    copy = event.to_dict()
    assert copy == stored  # verbatim, and a copy: changing it changes nothing stored
    copy["n"][0]["a"] = 2
    assert event.to_dict()["n"] == [{"a": 1}]
    with pytest.raises(AcmiValidationError):  # appending it again meets the write rules
        parse_event(event, now_ms=1, tenant="t")
    for unusable, reason in [
        ({"source": "s", "summary": "s"}, "ts: required"),
        ({"ts": "1", "source": "s", "summary": "s"}, "ts: type"),
    ]:
        assert event_from_member(json.dumps(unusable).encode()) == reason
    # no source, no summary: the reference's other writers' records, served flagged
    for record, flags, summary in [
        ({"ts": 1, "summary": "s"}, ("source: required",), "s"),
        ({"ts": 1, "source": "s", "summary": None}, ("summary: type",), ""),
        ({"ts": 1, "sessionId": "s-1"}, ("source: required", "summary: required"), ""),
    ]:
        read = event_from_member(json.dumps(record).encode())
        assert isinstance(read, Event) and set(flags) <= set(read.legacy), read
        assert (read.to_dict(), read.summary) == (record, summary)


@pytest.mark.parametrize("payload", [{1: "a"}, {"x": [{2: "b"}]}, {None: 1}])
def test_non_string_keys_are_refused_not_coerced(payload: Any) -> None:
    with pytest.raises(AcmiValidationError) as err:
        parse_event({**EVENT, "payload": payload}, now_ms=1, tenant="t")
    assert err.value.rule == "object_keys"
    with pytest.raises(AcmiValidationError):
        check_profile({"p": payload})
