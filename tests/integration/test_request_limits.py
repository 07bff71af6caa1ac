"""Every request within store.base.MAX_REQUEST_ARGS (ElastiCache Serverless refuses more
than 3,999 arguments) and MAX_REQUEST_BYTES, on every backend: the check refuses one over
before it is sent (so the whole suite proves no path sends one), and the writes that could
exceed it at their largest inputs split or stay under."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import pytest

from acmi_core import Acmi, create_acmi
from acmi_core.base.errors import CorruptData, StoreCommandError
from acmi_core.base.keys import COORDINATION_THREAD, MENTIONS_PER_EVENT
from acmi_core.base.model import EntityId
from acmi_core.entities.timeline_parts import event_parts
from acmi_core.store.base import (
    MAX_REQUEST_ARGS,
    MAX_REQUEST_BYTES,
    Arg,
    Command,
    Reply,
    RequestTooLarge,
    Script,
    Store,
)


class Recording:
    """A store passing every call to ``inner``, keeping each request's argument count (a
    script run: EVALSHA, its SHA, the key count, keys, ARGV). ``after_eval``: run after
    each script run (a writer landing between two of them)."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.name = inner.name
        self.sizes: list[int] = []
        self.evals: list[int] = []  # the script runs' sizes alone
        self.after_eval: Any = None

    def execute(self, command: Command) -> Reply:
        self.sizes.append(len(command))
        return self.inner.execute(command)

    def pipeline(self, commands: Sequence[Command]) -> list[Reply | StoreCommandError]:
        self.sizes.extend(len(c) for c in commands)
        return self.inner.pipeline(commands)

    def eval(self, script: Script, keys: Sequence[str], args: Sequence[Arg]) -> Reply:
        self.sizes.append(3 + len(keys) + len(args))
        self.evals.append(self.sizes[-1])
        reply = self.inner.eval(script, keys, args)
        if self.after_eval is not None:
            self.after_eval()
        return reply

    def close(self) -> None:
        self.inner.close()


@pytest.fixture
def recorded(acmi: Acmi) -> tuple[Acmi, Recording]:
    """A tenant of its own (the coordination thread is shared by every test of the
    database), on a store that records each request's size."""
    store = Recording(acmi.store)
    return create_acmi(store, acmi.settings, tenant=f"limits-{uuid.uuid4().hex[:12]}"), store


def event(i: int, summary: str = "x") -> dict[str, Any]:
    ts = 1_700_000_000_000 + i
    return {"ts": ts, "source": "t", "kind": "note", "correlationId": f"c{i}", "summary": summary}


def test_a_request_over_the_limits_is_refused_before_it_is_sent(acmi: Acmi) -> None:
    key = acmi.keys.timeline(EntityId.parse("user:limits"))
    over = ["ZADD", key, *[x for i in range(2_000) for x in (i, f"m{i}")]]  # 4,002 arguments
    with pytest.raises(RequestTooLarge) as err:
        acmi.store.execute(over)
    assert err.value.rule == "max_request_args" and err.value.code == "payload_too_large"
    with pytest.raises(RequestTooLarge):
        acmi.store.pipeline([("ZCARD", key), over])
    with pytest.raises(RequestTooLarge) as err:
        acmi.store.execute(("SET", key, "x" * (MAX_REQUEST_BYTES + 1)))
    assert err.value.rule == "max_request_bytes"
    with pytest.raises(RequestTooLarge):  # a pipeline is one request: its bytes add up
        acmi.store.pipeline([("SET", key, "x" * (MAX_REQUEST_BYTES // 2 + 1))] * 2)
    assert acmi.store.execute(("EXISTS", key)) == 0  # nothing was sent
    acmi.store.execute(over[: MAX_REQUEST_ARGS - 1])  # 3,998 arguments: taken


def test_an_extend_of_1000_events_splits_in_order(recorded: tuple[Acmi, Recording]) -> None:
    acmi, store = recorded
    stored = acmi.timeline.extend("user:big", [event(i) for i in range(1_000)])
    assert len(store.evals) == 2 and max(store.evals) <= MAX_REQUEST_ARGS  # one sent 4,019
    assert [e.ts for e in acmi.timeline.read("user:big")] == [e.ts for e in stored]


def test_a_coordination_extend_with_mentions_splits(recorded: tuple[Acmi, Recording]) -> None:
    acmi, store = recorded
    agents = [f"a{n}" for n in range(MENTIONS_PER_EVENT)]
    text = " ".join(f"@{a}" for a in agents)
    acmi.timeline.extend(COORDINATION_THREAD, [event(i, text) for i in range(100)])
    assert max(store.sizes) <= MAX_REQUEST_ARGS  # in one request: 11,635 arguments
    assert len(acmi.timeline.read(COORDINATION_THREAD)) == 100
    mentions = acmi.store.execute(("ZCARD", acmi.keys.mentions(agents[-1])))
    assert isinstance(mentions, int) and mentions > 0


def test_the_largest_edits_and_batch_stay_one_request(recorded: tuple[Acmi, Recording]) -> None:
    acmi, store = recorded
    fields = {f"f{i}": i for i in range(1_000)}  # MAX_EDIT_FIELDS: 4,020 arguments before
    acmi.profile.merge("user:wide", fields)
    acmi.signals.update("user:wide", fields)
    with acmi.batch() as batch:  # 8,441 arguments before
        batch.profile.merge("user:wider", fields)
        batch.signals.update("user:wider", fields)
        batch.timeline.extend("user:wider", [event(i) for i in range(100)])
    assert max(store.sizes) <= MAX_REQUEST_ARGS
    assert acmi.signals.all("user:wider") == fields
    assert len(acmi.timeline.read("user:wider")) == 100


def test_a_batch_over_the_limits_is_refused_whole(acmi: Acmi) -> None:
    """A batch is all or nothing in one request: one that cannot fit is refused, not split."""
    with pytest.raises(RequestTooLarge), acmi.batch() as batch:
        batch.signals.set("user:batch", "k", 1)
        batch.timeline.extend("user:batch", [event(i) for i in range(1_000)])
    assert acmi.signals.all("user:batch") == {}
    assert acmi.timeline.read("user:batch") == []


def test_an_extend_failing_part_way_says_what_was_stored(
    recorded: tuple[Acmi, Recording],
) -> None:
    acmi, store = recorded
    key = acmi.keys.timeline(EntityId.parse("user:half"))

    def another_tool_writes() -> None:  # the timeline's key becomes a STRING between parts
        store.after_eval = None
        acmi.store.execute(("DEL", key))
        acmi.store.execute(("SET", key, "not a timeline"))

    store.after_eval = another_tool_writes
    with pytest.raises(CorruptData) as err:
        acmi.timeline.extend("user:half", [event(i) for i in range(1_500)])
    stored = event_parts(["x"] * 1_500, coordination=False)[0].stop  # the first part's
    assert f"the first {stored} of 1500 events were stored" in err.value.message
    assert f"send events[{stored}:] again" in err.value.message
