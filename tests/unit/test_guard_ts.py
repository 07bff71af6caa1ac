"""An event's ``ts`` is a time, never scanned as a secret: 30569309025904 (a Diners test
card number, and 2938-08-13 in ms) is stored under every policy and on every write path
that takes a ts, while the same digits in the payload are still refused (a generated
drill case found the ts refused as a card number)."""

from __future__ import annotations

import pytest

from acmi_core import Settings, create_acmi
from acmi_core.base.errors import SecretDetected
from acmi_core.ingest.service import store_deliveries
from acmi_core.ingest.webhook import Delivery
from acmi_core.store.memory import MemoryStore

CARD_TS = 30569309025904
EVENT = {"source": "agent:a", "kind": "note", "correlationId": "c", "summary": "s"}


@pytest.mark.parametrize("policy", ["reject", "redact"])
def test_a_card_shaped_ts_is_stored_as_given(policy: str) -> None:
    acmi = create_acmi(MemoryStore(), Settings(ACMI_SECRET_POLICY=policy))  # type: ignore[call-arg]
    acmi.timeline.append("user:a", {**EVENT, "ts": CARD_TS})
    store_deliveries(acmi, [Delivery("user:b", {**EVENT, "ts": CARD_TS})], None)
    store_deliveries(acmi, [Delivery("user:c", {**EVENT, "ts": CARD_TS})], None, webhook=True)
    for entity in ("user:a", "user:b", "user:c"):
        (event,) = acmi.timeline.read(entity)
        assert event.ts == CARD_TS and "acmi_redacted" not in event.to_dict()


def test_the_same_digits_in_the_payload_are_still_a_secret() -> None:
    acmi = create_acmi(MemoryStore(), Settings(ACMI_SECRET_POLICY="reject"))  # type: ignore[call-arg]
    with pytest.raises(SecretDetected) as refused:
        acmi.timeline.append("user:a", {**EVENT, "ts": CARD_TS, "payload": {"card": CARD_TS}})
    assert refused.value.field == "events[0].payload.card"
    assert acmi.timeline.size("user:a") == 0
