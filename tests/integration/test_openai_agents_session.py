"""``AcmiSession`` (``acmi_core/integrations/openai_agents.py``) as the OpenAI Agents SDK
uses it: the SDK's own ``Runner`` against a fake model (no network), on a real
redis-server and the embedded store, two tenants; and the protocol's four calls held to
what the SDK's own ``SQLiteSession`` does with the same calls."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from agents import Agent, Runner, SQLiteSession, set_tracing_disabled
from agents.items import ModelResponse, TResponseInputItem
from agents.memory.session import Session
from agents.memory.session_settings import SessionSettings
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseOutputMessage, ResponseOutputText

from acmi_core import Acmi, AcmiValidationError, Settings, create_acmi
from acmi_core.integrations.openai_agents import AcmiSession
from acmi_core.store.memory import MemoryStore
from acmi_core.store.redis import RedisStore
from acmi_core.testing.redis_server import RedisServer
from tests.kit import TEST_DBS

DB = TEST_DBS["openai_agents_session"]

# the SDK's own traces would be exported to OpenAI's API: never from a test
set_tracing_disabled(True)


class EchoModel(Model):
    """A model that answers each turn with how many input items it was given and the
    last user text: what it saw is what the session gave the runner."""

    def __init__(self) -> None:
        self.inputs: list[list[TResponseInputItem]] = []

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        given = args[1] if len(args) > 1 else kwargs["input"]
        items = [{"role": "user", "content": given}] if isinstance(given, str) else list(given)
        self.inputs.append(items)
        last = next(i for i in reversed(items) if i.get("role") == "user")
        text = f"{len(items)} items, last: {last['content']}"
        message = ResponseOutputMessage(
            id=f"msg_{len(self.inputs)}",
            type="message",
            role="assistant",
            status="completed",
            content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
        )
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the tests run the runner without streaming")


@pytest.fixture(params=["redis", "memory"])
def acmi(request: pytest.FixtureRequest, redis_server: RedisServer) -> Iterator[Acmi]:
    if request.param == "memory":
        yield create_acmi(MemoryStore(), Settings())
        return
    redis_server.flush(DB)
    store = RedisStore.from_url(redis_server.url_for(DB))
    yield create_acmi(store, Settings())
    store.close()


def test_it_is_the_sdks_session_protocol(acmi: Acmi) -> None:
    assert isinstance(AcmiSession("s1", acmi), Session)


def test_the_runner_remembers_across_turns_per_tenant(acmi: Acmi) -> None:
    model = EchoModel()
    agent = Agent(name="support", instructions="be brief", model=model)
    mine = AcmiSession("support-42", acmi)
    theirs = AcmiSession("support-42", acmi.for_tenant("acme"))  # same id, other tenant

    async def turns() -> list[str]:
        first = await Runner.run(agent, "my order is late", session=mine)
        second = await Runner.run(agent, "it is order 1234", session=mine)
        other = await Runner.run(agent, "hello", session=theirs)
        return [first.final_output, second.final_output, other.final_output]

    answers = asyncio.run(turns())
    # the second turn saw the first turn's question and answer before its own
    assert answers == [
        "1 items, last: my order is late",
        "3 items, last: it is order 1234",
        "1 items, last: hello",
    ]
    items = asyncio.run(mine.get_items())
    assert [(i.get("role"), i.get("type")) for i in items] == [
        ("user", None),
        ("assistant", "message"),
        ("user", None),
        ("assistant", "message"),
    ]
    assert len(asyncio.run(theirs.get_items())) == 2
    # on the timeline: one event an item, a summary a person can read
    events = acmi.timeline.read("session:support-42")
    assert [e.summary for e in events] == [
        "user: my order is late",
        "assistant: 1 items, last: my order is late",
        "user: it is order 1234",
        "assistant: 3 items, last: it is order 1234",
    ]
    assert {e.kind for e in events} == {"session-item"}
    assert {e.correlationId for e in events} == {"support-42"}


SCRIPT: list[tuple[str, Any]] = [
    ("add", [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]),
    ("get", None),
    ("add", [{"role": "user", "content": "c"}]),
    ("get", 2),
    ("pop", None),
    ("get", None),
    ("add", [{"type": "function_call_output", "call_id": "c1", "output": "42"}] * 3),
    ("get", 1),
    ("get", 0),
    ("pop", None),
    ("clear", None),
    ("get", None),
    ("pop", None),
    ("add", [{"role": "user", "content": "fresh"}]),
    ("get", None),
]


async def _play(session: Session) -> list[Any]:
    out: list[Any] = []
    for step, arg in SCRIPT:
        if step == "add":
            await session.add_items(arg)
        elif step == "get":
            out.append(await session.get_items(arg))
        elif step == "pop":
            out.append(await session.pop_item())
        else:
            await session.clear_session()
    return out


def test_the_same_calls_answer_as_the_sdks_own_session(acmi: Acmi) -> None:
    ours = asyncio.run(_play(AcmiSession("script", acmi)))
    theirs = asyncio.run(_play(SQLiteSession("script")))
    assert ours == theirs


def test_equal_milliseconds_keep_their_order(acmi: Acmi) -> None:
    """Items added in one call (one ms, on a frozen clock too) come back in their order,
    though a timeline orders equal ts by their bytes."""
    frozen = Acmi(acmi.store, acmi.settings, clock=lambda: 1_745_947_200_000)
    session = AcmiSession("order", frozen)
    items = [{"role": "user", "content": c} for c in "zyxwvu"]
    asyncio.run(session.add_items(items[:3]))
    asyncio.run(session.add_items(items[3:]))
    assert asyncio.run(session.get_items()) == items
    assert asyncio.run(session.get_items(4)) == items[2:]


def test_settings_limit_and_other_events_on_the_timeline(acmi: Acmi) -> None:
    session = AcmiSession(
        "lim", acmi, entity="agent:bot", session_settings=SessionSettings(limit=2)
    )
    asyncio.run(session.add_items([{"role": "user", "content": str(i)} for i in range(5)]))
    # an agent's note on the same timeline is not an item
    acmi.timeline.append(
        "agent:bot", {"source": "agent:bot", "kind": "note", "correlationId": "n", "summary": "x"}
    )
    assert [i["content"] for i in asyncio.run(session.get_items())] == ["3", "4"]
    assert asyncio.run(session.pop_item()) == {"role": "user", "content": "4"}
    assert len(acmi.timeline.read("agent:bot")) >= 5  # the note kept


def test_bad_input_is_named(acmi: Acmi) -> None:
    with pytest.raises(AcmiValidationError) as bad:
        AcmiSession("has space", acmi)
    assert bad.value.field == "session_id"
    session = AcmiSession("big", acmi)
    huge = [{"role": "user", "content": "x" * 300_000}]
    with pytest.raises(AcmiValidationError):
        asyncio.run(session.add_items(huge))
    assert asyncio.run(session.get_items()) == []  # nothing stored
