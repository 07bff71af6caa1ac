"""Issue 21 item 1: agent memory lives in slots of its own (``memory:hot``,
``memory:warm``, ``memory:heartbeat``), so an ordinary whole-object replace of the
entity's profile or signals (ours, or the reference CLI's raw SET of the key) leaves it
alone; and the profile and signals keep the reference's format (no memory fields in
them)."""

from __future__ import annotations

import json
from typing import Any

from acmi_core import Acmi
from acmi_core.base.keys import MEMORY_HEARTBEAT, MEMORY_HOT, MEMORY_WARM
from acmi_core.base.model import EntityId
from acmi_core.memory.service import MemoryAPI
from tests.kit import FakeClock, fresh_tenant

AGENT = "agent:w"


def _texts(found: dict[str, Any]) -> list[str]:
    return [hit["text"] for hit in found["hits"]]


def _remember_both(acmi: Acmi) -> MemoryAPI:
    memory = MemoryAPI(acmi.context)
    memory.remember(AGENT, "ship the zebra release", layer="hot")
    memory.remember(AGENT, "zebra customers want weekly notes", layer="warm")
    return memory


def test_a_replace_of_profile_and_signals_leaves_memory(acmi: Acmi) -> None:
    """The issue's repro: on main, ``memory.search`` found nothing after these two writes
    (hot.* lived in the signals, warm.* in the profile)."""
    acmi = fresh_tenant(acmi, FakeClock())
    memory = _remember_both(acmi)
    acmi.profile.set(AGENT, {"name": "W"})
    acmi.signals.replace(AGENT, {"status": "idle"})
    found = _texts(memory.search(AGENT, "zebra"))
    assert any("ship the zebra release" in t for t in found), found
    assert any("zebra customers want weekly notes" in t for t in found), found
    # the replaced objects hold exactly what was written: the reference's format
    assert acmi.signals.all(AGENT) == {"status": "idle"}
    assert {k: v for k, v in (acmi.profile.get(AGENT) or {}).items() if k == "name"} == {
        "name": "W"
    }
    assert not any(
        k.startswith(("hot.", "warm.", "heartbeat.")) for k in acmi.profile.get(AGENT) or {}
    )
    # still read in the bootstrap's one round trip
    sections = acmi.bootstrap(AGENT).to_dict()["sections"]
    assert "ship the zebra release" in sections["hot"]["text"]
    assert "zebra customers want weekly notes" in sections["warm"]["text"]


def test_a_raw_set_of_the_keys_as_the_reference_cli_writes_leaves_memory(
    acmi: Acmi, raw: Any
) -> None:
    """The reference CLI's ``signal``/``profile``/``invite-agent`` SET the whole key."""
    acmi = fresh_tenant(acmi, FakeClock())
    memory = _remember_both(acmi)
    eid = EntityId.parse(AGENT)
    raw.set(acmi.keys.profile(eid), json.dumps({"name": "W", "role": "agent"}))
    raw.set(acmi.keys.signals(eid), json.dumps({"current_task": "invited"}))
    found = _texts(memory.search(AGENT, "zebra"))
    assert len([t for t in found if "zebra" in t]) == 2, found
    exported = memory.export_snapshot(AGENT)
    assert exported.active_context is not None and exported.memory is not None


def test_each_layer_is_its_own_slot_and_delete_removes_them(acmi: Acmi) -> None:
    acmi = fresh_tenant(acmi, FakeClock())
    _remember_both(acmi)
    eid = EntityId.parse(AGENT)

    def slot(name: str) -> dict[str, Any]:
        reply = acmi.store.execute(("GET", acmi.keys.slot(eid, name)))
        return json.loads(reply) if isinstance(reply, bytes) else {}

    assert set(slot(MEMORY_HOT)) == {"hot.in_progress", "hot.updated"}
    assert set(slot(MEMORY_WARM)) == {"warm.lessons"}
    assert slot(MEMORY_HEARTBEAT) == {}
    # the memory index names the entity: what the hygiene job visits
    assert acmi.store.execute(("ZSCORE", acmi.keys.memory_index(), AGENT)) is not None
    acmi.delete(AGENT)
    assert slot(MEMORY_HOT) == slot(MEMORY_WARM) == {}
