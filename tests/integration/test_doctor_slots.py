"""`acmi doctor` and `acmi migrate` know every slot the key builder can make: each has its
Redis type in ``ops/keyspace.SLOT_TYPES`` (a slot added to ``base/keys.py`` without one
fails here), and a store where the standup brief and daily memory ran (``last_brief``,
``memory:stamps``, ``memory:handoff``, ``memory:archive``) is walked and repaired without
a crash or a wrong-type finding. On a real redis-server (database 10)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from acmi_core import Acmi, Settings, create_acmi
from acmi_core.base import keys
from acmi_core.base.keys import ALL_SLOTS
from acmi_core.base.model import EntityId
from acmi_core.jobs import standup as standup_job
from acmi_core.jobs.runner import JobRun, run_job
from acmi_core.memory.tree import parse_texts
from acmi_core.ops.doctor import Doctor, Kind
from acmi_core.ops.keyspace import SLOT_TYPES
from acmi_core.ops.migrate import Migrate
from acmi_core.store.redis import RedisStore
from acmi_core.testing.redis_server import RedisServer
from tests.kit import TEST_DBS

DB = TEST_DBS["doctor_slots"]  # this module's own database (tests/kit.py TEST_DBS)
AGENT = "agent:w"


def test_every_slot_the_key_builder_makes_has_an_expected_type() -> None:
    missing = sorted(set(ALL_SLOTS) - set(SLOT_TYPES))
    assert not missing, f"add the Redis type of {missing} to acmi_core/ops/keyspace.SLOT_TYPES"
    assert sorted(SLOT_TYPES) == sorted(ALL_SLOTS)  # and none it cannot make


@pytest.fixture
def acmi(redis_server: RedisServer) -> Iterator[Acmi]:
    redis_server.flush(DB)
    store = RedisStore.from_url(redis_server.url_for(DB))
    yield create_acmi(store, Settings())
    store.close()


def test_doctor_and_migrate_walk_a_store_where_the_brief_and_daily_memory_ran(
    acmi: Acmi,
) -> None:
    """Before: KeyError 'last_brief' (and 'memory:stamps', 'memory:handoff')."""
    now = int(time.time() * 1000)
    run = JobRun("standup-brief", "day-1", now, {})
    run_job(acmi, run, standup_job.run, clock=time.perf_counter)
    acmi.memory.remember(AGENT, "shipped the fix", layer="daily")
    acmi.memory.handoff(AGENT, "pick up the review")
    archive = "# 2026-Q1 — Archive\n\n## Lessons\n- keep slots typed\n"
    acmi.memory.import_snapshot(AGENT, parse_texts({"memory/archive/2026-Q1.md": archive}))
    operator, agent = EntityId.parse(acmi.settings.operator), EntityId.parse(AGENT)
    made = {
        keys.LAST_BRIEF: acmi.keys.slot(operator, keys.LAST_BRIEF),
        keys.MEMORY_STAMPS: acmi.keys.slot(agent, keys.MEMORY_STAMPS),
        keys.MEMORY_HANDOFF: acmi.keys.slot(agent, keys.MEMORY_HANDOFF),
        keys.MEMORY_ARCHIVE: acmi.keys.slot(agent, keys.MEMORY_ARCHIVE),
    }
    for slot, key in made.items():  # the operations made them, with the type expected
        assert acmi.store.execute(("TYPE", key)) == SLOT_TYPES[slot].encode(), slot

    findings = list(Doctor(acmi).findings())
    assert [f for f in findings if f.kind is Kind.WRONG_TYPE] == []
    steps = list(Migrate(acmi).run())
    assert all(json.dumps(step.to_dict()) for step in steps)  # each step renders
    for slot, key in made.items():  # migrate left them alone
        assert acmi.store.execute(("TYPE", key)) == SLOT_TYPES[slot].encode(), slot
