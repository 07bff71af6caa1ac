"""The daily-note stamps (``keys.MEMORY_STAMPS``, the bootstrap's index of where daily-note
lines are) after the hygiene job trims old events: the trimmed days' stamps go, the recent
days' stay, and the wake bundle still reads today's note."""

from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path

from acmi_core import Acmi
from acmi_core.base.keys import MEMORY_STAMPS
from acmi_core.base.model import EntityId
from acmi_core.jobs import quarterly
from acmi_core.jobs import sink as archive_sink
from acmi_core.memory import read_tree
from acmi_core.memory.service import MemoryAPI
from tests.kit import FakeClock, MemorySink

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "memory_tree"
AGENT = "agent:atlas"
NOW = int(dt.datetime(2026, 2, 3, 15, 0, tzinfo=dt.UTC).timestamp()) * 1000
DAY = 86_400_000


def _stamps(acmi: Acmi) -> list[float]:
    reply = acmi.store.execute(
        ("ZRANGE", acmi.keys.slot(EntityId.parse(AGENT), MEMORY_STAMPS), 0, -1, "WITHSCORES")
    )
    assert isinstance(reply, list)
    return [float(s) for s in reply[1::2] if isinstance(s, bytes)]


def test_a_trim_drops_the_trimmed_days_stamps_and_keeps_todays(acmi: Acmi) -> None:
    view = Acmi(
        acmi.store, acmi.settings, tenant=f"t-{uuid.uuid4().hex[:12]}", clock=FakeClock(NOW)
    )
    MemoryAPI(view.context).import_snapshot(AGENT, read_tree(FIXTURE))
    before = _stamps(view)
    cutoff = NOW - 14 * DAY
    assert min(before) < cutoff < max(before)
    out = quarterly.archive_entity(
        view,
        AGENT,
        cutoff_ms=cutoff,
        dest=archive_sink.Destination(MemorySink(), "archive", "mem://b/a"),
    )
    assert out.trimmed > 0
    left = [e.ts for e in view.timeline.read(AGENT)]
    after = _stamps(view)
    # below the oldest event left, at most the newest trimmed stamp (the bound is
    # exclusive: a trim may leave events of that ms); every event left keeps its stamp
    assert len([s for s in after if s < min(left)]) <= 1
    assert set(after) >= {float(ts) for ts in left}
    assert set(after) < set(before)
    bundle = view.bootstrap(AGENT)
    text = (FIXTURE / "memory/2026-02-03.md").read_text(encoding="utf-8")
    assert bundle.section("today").value["text"] == text
