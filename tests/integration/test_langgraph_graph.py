"""``AcmiStore`` inside a real compiled LangGraph graph: a ``StateGraph`` compiled with
``store=AcmiStore(...)`` and LangGraph's own checkpointer, whose nodes write memories
through ``get_store()`` and read them through the injected ``Runtime.store``. What one
thread learns, another thread (its own checkpointed state, empty at its start) recalls;
another tenant's graph recalls nothing. Run synchronously and with ``ainvoke`` (the
store's ``abatch``), on the embedded store, a real redis-server and the Upstash double."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from acmi_core.client import Acmi
from acmi_core.integrations.langgraph import AcmiStore


class State(TypedDict, total=False):
    user: str
    said: str
    recalled: list[str]
    turns: int


class Context(TypedDict):
    user: str


def remember(state: State) -> dict[str, Any]:
    """Keep what the user said, through the store LangGraph puts in the run's config."""
    store = get_store()
    said = state.get("said")
    if said:
        namespace = ("memories", state["user"])
        count = len(store.search(namespace, limit=1000))
        store.put(namespace, f"m{count:03d}", {"text": said})
    return {"turns": state.get("turns", 0) + 1}


def recall(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Read every memory of the user, through the store injected in the runtime."""
    assert runtime.store is not None
    found = runtime.store.search(("memories", runtime.context["user"]), limit=1000)
    return {"recalled": [item.value["text"] for item in found]}


async def arecall(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    assert runtime.store is not None
    found = await runtime.store.asearch(("memories", runtime.context["user"]), limit=1000)
    return {"recalled": [item.value["text"] for item in found]}


def _graph(
    store: AcmiStore, *, asynchronous: bool = False
) -> CompiledStateGraph[Any, Any, Any, Any]:
    builder = StateGraph(State, context_schema=Context)
    builder.add_node("remember", remember)
    builder.add_node("recall", arecall if asynchronous else recall)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    builder.add_edge("recall", END)
    return builder.compile(checkpointer=InMemorySaver(), store=store)


def _tenant(acmi: Acmi) -> Acmi:
    return acmi.for_tenant(f"lg-{uuid.uuid4().hex[:12]}")


def _thread() -> dict[str, Any]:
    return {"configurable": {"thread_id": uuid.uuid4().hex}}


def test_a_graph_remembers_across_threads(acmi: Acmi) -> None:
    tenant = _tenant(acmi)
    graph = _graph(AcmiStore(tenant))
    ctx: Context = {"user": "alice"}
    first, second = _thread(), _thread()
    out = graph.invoke({"user": "alice", "said": "I like green tea"}, first, context=ctx)
    assert out["recalled"] == ["I like green tea"] and out["turns"] == 1
    out = graph.invoke({"user": "alice", "said": "my cat is Tom"}, first, context=ctx)
    assert out["turns"] == 2  # the thread's own checkpointed state goes on
    # a new thread starts from an empty state, and still recalls what the first learned
    out = graph.invoke({"user": "alice"}, second, context=ctx)
    assert out["turns"] == 1
    assert out["recalled"] == ["I like green tea", "my cat is Tom"]
    # another user in the same tenant, and the same user in another tenant: nothing
    out = graph.invoke({"user": "bob"}, _thread(), context={"user": "bob"})
    assert out["recalled"] == []
    other = _graph(AcmiStore(_tenant(acmi)))
    out = other.invoke({"user": "alice"}, _thread(), context=ctx)
    assert out["recalled"] == []
    # what the graph wrote is in ACMI, readable by the client itself
    stored = tenant.items.get(("memories", "alice"), "m001")
    assert stored is not None and stored.value == {"text": "my cat is Tom"}


def test_an_async_graph_remembers_across_threads(acmi: Acmi) -> None:
    graph = _graph(AcmiStore(_tenant(acmi)), asynchronous=True)
    ctx: Context = {"user": "carol"}

    async def run() -> tuple[dict[str, Any], dict[str, Any]]:
        first = await graph.ainvoke(
            {"user": "carol", "said": "meeting at 10"}, _thread(), context=ctx
        )
        second = await graph.ainvoke({"user": "carol"}, _thread(), context=ctx)
        return first, second

    first, second = asyncio.run(run())
    assert first["recalled"] == ["meeting at 10"]
    assert second["recalled"] == ["meeting at 10"] and second["turns"] == 1
