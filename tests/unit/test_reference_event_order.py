"""The text of an event as the reference SDK writes it (src/client.ts timeline.append at
madezmedia/acmi 886dfc0: the given fields in order, then speaker_type if it fills one,
then tenant_id "madez" if it fills that), so the same event from both is one ZSET member.
tests/e2e/test_reference_node.py runs the SDK itself; this holds the rule without node."""

from __future__ import annotations

import json

import pytest

from acmi_core.base.model import encode_event, tenant_id_fill

BASE = {"ts": 7, "source": "agent:x", "kind": "k", "correlationId": "c", "summary": "s"}
HEAD = '{"ts":7,"source":"agent:x","kind":"k","correlationId":"c","summary":"s"'


@pytest.mark.parametrize(
    ("given", "tail"),
    [
        ({"tenant_id": "acme"}, ',"tenant_id":"acme","speaker_type":"agent"}'),
        ({}, ',"speaker_type":"agent","tenant_id":"madez"}'),
        ({"speaker_type": "human"}, ',"speaker_type":"human","tenant_id":"madez"}'),
        (
            {"tenant_id": "t", "speaker_type": "human"},
            ',"speaker_type":"human","tenant_id":"t"}',
        ),
        (
            {"tenant_id": "acme", "payload": {"b": 1}},
            ',"payload":{"b":1},"tenant_id":"acme","speaker_type":"agent"}',
        ),
    ],
)
def test_the_sdks_key_order(given: dict[str, object], tail: str) -> None:
    event, text = encode_event({**BASE, **given}, now_ms=1, tenant="default")
    assert text == HEAD + tail
    assert event.to_json() == text and json.dumps(event.to_dict(), separators=(",", ":")) == text


def test_no_speaker_to_fill_keeps_tenant_last() -> None:
    _, text = encode_event({**BASE, "source": "gmail", "tenant_id": "a"}, now_ms=1, tenant="x")
    assert text.endswith('"summary":"s","tenant_id":"a"}')


def test_the_default_tenant_fills_the_references_value() -> None:
    assert tenant_id_fill("default") == "madez"  # what the reference deployment writes
    assert tenant_id_fill("acme") == "acme"  # any other tenant: its own name
