"""`acmi doctor` reports memory where an older ACMI kept it (``hot.*``/``heartbeat.*`` in
the signals, ``warm.*`` in the profile) and `acmi migrate` moves it into the memory
slots: idempotently, and as a check-and-set, so a write that lands between migrate's
read and its script is not lost. On a real redis-server and the Upstash double."""

from __future__ import annotations

import json
from typing import Any

import redis

from acmi_core import Acmi
from acmi_core.base.keys import MEMORY_HEARTBEAT, MEMORY_HOT, MEMORY_WARM
from acmi_core.base.model import EntityId
from acmi_core.memory.service import MemoryAPI
from acmi_core.ops.doctor import Doctor, Kind
from acmi_core.ops.migrate import Action, Migrate
from acmi_core.store.base import Store
from tests.integration.test_doctor import env  # noqa: F401  (the fixture)

AGENT = EntityId.parse("agent:w")
INBOX = EntityId.parse("inbox:sales")
OLD_SIGNALS = {
    "status": "ok",
    "hot.current_priority": "Ship the zebra release",
    "hot.updated": "2026-01-15 14:30 UTC",
    "heartbeat.timezone": "Europe/Berlin",
    "heartbeat.last_audit": "2026-01-01",
}
OLD_PROFILE = {"name": "W", "warm.lessons": ["zebras like weekly notes"]}
# what the old hygiene job wrote into every entity it visited, webhook entities included
OLD_INBOX = {"unread": 3, "heartbeat.last_audit": "2026-01-01", "heartbeat.next_scheduled": {}}


def _seed(acmi: Acmi, raw: redis.Redis) -> None:
    raw.set(acmi.keys.signals(AGENT), json.dumps(OLD_SIGNALS))
    raw.set(acmi.keys.profile(AGENT), json.dumps(OLD_PROFILE))
    raw.sadd(acmi.keys.index("agent"), "w")
    raw.set(acmi.keys.signals(INBOX), json.dumps(OLD_INBOX))
    raw.sadd(acmi.keys.index("inbox"), "sales")


def _get(raw: redis.Redis, key: str) -> Any:
    value = raw.get(key)
    return None if value is None else json.loads(value)


def _old_places(acmi: Acmi) -> set[str]:
    return {f.key for f in Doctor(acmi).findings() if f.kind is Kind.MEMORY_OLD_PLACE}


def test_doctor_reports_and_migrate_moves_memory_once(env: tuple[Acmi, redis.Redis]) -> None:  # noqa: F811
    acmi, raw = env
    _seed(acmi, raw)
    keys = acmi.keys
    assert _old_places(acmi) == {keys.signals(AGENT), keys.profile(AGENT), keys.signals(INBOX)}
    # before: the layers read as empty (they are looked for in their own slots)
    assert MemoryAPI(acmi.context).search(str(AGENT), "zebra")["hits"] == []

    steps = list(Migrate(acmi).run())
    assert {(s.action, s.key) for s in steps} == {
        (Action.MEMORY_MOVE, keys.signals(AGENT)),
        (Action.MEMORY_MOVE, keys.profile(AGENT)),
        (Action.MEMORY_MOVE, keys.signals(INBOX)),
    }
    # the objects keep what is not memory, in the reference's format
    assert _get(raw, keys.signals(AGENT)) == {"status": "ok"}
    assert _get(raw, keys.profile(AGENT)) == {"name": "W"}
    assert _get(raw, keys.signals(INBOX)) == {"unread": 3}
    assert _get(raw, keys.slot(AGENT, MEMORY_HOT)) == {
        k: v for k, v in OLD_SIGNALS.items() if k.startswith("hot.")
    }
    assert _get(raw, keys.slot(AGENT, MEMORY_HEARTBEAT)) == {
        "heartbeat.timezone": "Europe/Berlin",
        "heartbeat.last_audit": "2026-01-01",
    }
    assert _get(raw, keys.slot(AGENT, MEMORY_WARM)) == {
        "warm.lessons": ["zebras like weekly notes"]
    }
    hits = [h["text"] for h in MemoryAPI(acmi.context).search(str(AGENT), "zebra")["hits"]]
    assert len(hits) == 2, hits
    # the agent joins the hygiene job's index; the inbox, which only had the old job's
    # bookkeeping, does not
    assert raw.zscore(keys.memory_index(), str(AGENT)) is not None
    assert raw.zscore(keys.memory_index(), str(INBOX)) is None

    # idempotent: a second run finds nothing, changes nothing; doctor is clean of it
    before = {k: raw.dump(k) for k in raw.scan_iter("*")}
    assert list(Migrate(acmi).run()) == []
    assert {k: raw.dump(k) for k in raw.scan_iter("*")} == before
    assert _old_places(acmi) == set()
    assert not [f for f in Doctor(acmi).findings() if f.kind is Kind.WRONG_TYPE]


class _Racing:
    """The store, with another client's write landing just before migrate's script."""

    def __init__(self, inner: Store, race: Any) -> None:
        self._inner, self._race = inner, race

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def eval(self, *args: Any) -> Any:
        if self._race is not None:
            race, self._race = self._race, None
            race()
        return self._inner.eval(*args)


def test_a_write_between_read_and_move_is_not_lost(env: tuple[Acmi, redis.Redis]) -> None:  # noqa: F811
    acmi, raw = env
    _seed(acmi, raw)
    newer = {**OLD_SIGNALS, "status": "busy", "hot.current_priority": "Newer priority"}
    migrate = Migrate(acmi)
    migrate.store = _Racing(
        acmi.store, lambda: raw.set(acmi.keys.signals(AGENT), json.dumps(newer))
    )
    list(migrate.run())
    assert _get(raw, acmi.keys.signals(AGENT)) == {"status": "busy"}
    hot = _get(raw, acmi.keys.slot(AGENT, MEMORY_HOT))
    assert hot["hot.current_priority"] == "Newer priority"
