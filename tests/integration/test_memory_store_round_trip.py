"""The memory fixture tree through a real store, on every backend: what
``acmi_core.memory.slots`` makes of it is accepted by the client, comes back equal, exports
byte for byte, and a second import stores nothing new."""

from __future__ import annotations

from pathlib import Path

from acmi_core import Acmi, EntityId
from acmi_core.memory import (
    SlotImage,
    read_tree,
    render_tree,
    snapshot_from_slots,
    snapshot_to_slots,
)
from acmi_core.memory.slots import topic_entity

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "memory_tree"
OWNER = "agent:atlas"


def store_image(acmi: Acmi, image: SlotImage) -> None:
    acmi.signals.update(OWNER, image.signals)
    acmi.profile.merge(OWNER, image.profile)
    for slug, profile in image.topics.items():
        acmi.profile.merge(topic_entity(slug), profile)
    for start in range(0, len(image.events), 100):
        acmi.timeline.extend(OWNER, image.events[start : start + 100])


def load_image(acmi: Acmi, archives: dict[str, dict[str, object]]) -> SlotImage:
    profile = acmi.profile.get(OWNER) or {}
    topics = {}
    for link in profile.get("warm.topics", []):
        slug = link.removeprefix("topic:")
        topics[slug] = acmi.profile.get(link) or {}
    return SlotImage(
        signals=acmi.signals.all(OWNER),
        profile=profile,
        events=list(acmi.timeline.read(OWNER)),
        topics=topics,
        archives=archives,  # the cold layer's home is the archive job's (not built yet)
    )


def test_fixture_through_the_store_exports_byte_for_byte(acmi: Acmi) -> None:
    snapshot = read_tree(FIXTURE)
    image = snapshot_to_slots(snapshot, source=OWNER)
    store_image(acmi, image)
    timeline = acmi.keys.timeline(EntityId.parse(OWNER))
    count = acmi.store.execute(("ZCARD", timeline))
    assert count == len(image.events) == 376

    back = snapshot_from_slots(load_image(acmi, image.archives))
    assert back == snapshot
    assert render_tree(back) == render_tree(snapshot)

    # import again (what `acmi memory import` re-run does): nothing new is stored
    store_image(acmi, snapshot_to_slots(back, source=OWNER))
    assert acmi.store.execute(("ZCARD", timeline)) == count
    assert render_tree(snapshot_from_slots(load_image(acmi, image.archives))) == render_tree(
        snapshot
    )
