"""One event is at most ``MAX_EVENT_BYTES`` as stored, on every write (``encode_event``):
before, the client and the MCP tools could store an event a page then skipped."""

from __future__ import annotations

import pytest

from acmi_core import Settings, create_acmi
from acmi_core.base.errors import PayloadTooLarge
from acmi_core.base.model import MAX_EVENT_BYTES, encode_event
from acmi_core.store.memory import MemoryStore

BASE = {"source": "agent:a", "kind": "note", "correlationId": "c", "summary": "s"}


def _sized(total: int) -> dict[str, object]:
    _, text = encode_event({**BASE, "ts": 1, "payload": ""}, now_ms=1, tenant="default")
    return {**BASE, "ts": 1, "payload": "x" * (total - len(text.encode()))}


def test_the_largest_event_is_stored_and_one_byte_more_is_refused() -> None:
    acmi = create_acmi(MemoryStore(), Settings())
    largest = _sized(MAX_EVENT_BYTES)
    _, text = encode_event(largest, now_ms=1, tenant="default")
    assert len(text.encode()) == MAX_EVENT_BYTES
    acmi.timeline.append("user:a", largest)
    assert acmi.timeline.read("user:a")[0].payload == largest["payload"]
    with pytest.raises(PayloadTooLarge) as refused:
        acmi.timeline.append("user:b", _sized(MAX_EVENT_BYTES + 1))
    assert (refused.value.field, refused.value.rule) == ("events[0]", "max_event_bytes")
    assert acmi.timeline.size("user:b") == 0


def test_a_multibyte_event_counts_utf8_bytes() -> None:
    event = {**BASE, "ts": 1, "payload": "é" * (MAX_EVENT_BYTES // 2)}  # 2 bytes each
    with pytest.raises(PayloadTooLarge):
        encode_event(event, now_ms=1, tenant="default")
