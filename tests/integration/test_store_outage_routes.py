"""A store outage is a 503 (field ``store``, rule ``available``, with Retry-After) on every
route of the coordination functions, with a request that is otherwise valid: the key is
looked up, then the store goes down for everything else."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from acmi_core import Acmi, Settings
from acmi_core.api.app import create_app
from acmi_core.api.context import ApiContext
from acmi_core.base.errors import StoreCommandError, StoreUnavailable
from acmi_core.store.base import Arg, Command, Reply, Script
from acmi_core.store.memory import MemoryStore
from tests.kit import Api, assert_error


class OutageStore(MemoryStore):
    """Down for every command but the API key lookups, once ``down`` is set."""

    down = False

    def _check(self, parts: Sequence[object]) -> None:
        if self.down and not any(
            isinstance(p, str | bytes) and str(p).find("_apikey") >= 0 for p in parts
        ):
            raise StoreUnavailable("the store is down")

    def execute(self, command: Command) -> Reply:
        self._check(command)
        return super().execute(command)

    def pipeline(self, commands: Sequence[Command]) -> list[Reply | StoreCommandError]:
        for command in commands:
            self._check(command)
        return super().pipeline(commands)

    def eval(self, script: Script, keys: Sequence[str], args: Sequence[Arg]) -> Reply:
        self._check([*keys, *args])
        return super().eval(script, keys, args)


EVENT = {"source": "agent:claude", "kind": "note", "correlationId": "c-1", "summary": "hi"}
# (method, path, body): one valid request per route of the coordination functions
REQUESTS: list[tuple[str, str, Any]] = [
    ("GET", "/v1/agents/claude/bootstrap", None),
    ("POST", "/v1/agents/claude/bootstrap", {"spawn": {"session_id": "s", "model_id": "m"}}),
    ("POST", "/v1/agents/claude/heartbeat", {"status": "ACTIVE"}),
    ("POST", "/v1/agents/claude/spawns", {"session_id": "s", "model_id": "m"}),
    ("GET", "/v1/agents/claude/spawns", None),
    ("PUT", "/v1/agents/claude/threads/thread:x", {"role": "lead"}),
    ("DELETE", "/v1/agents/claude/threads/thread:x", None),
    ("GET", "/v1/agents/claude/threads", None),
    ("PUT", "/v1/agents/claude/rollup", {"summary": "quiet"}),
    ("GET", "/v1/agents/claude/rollup", None),
    ("POST", "/v1/locks/deploy:web/claim", {"owner": "agent:claude", "ttl_ms": 60_000}),
    ("POST", "/v1/locks/deploy:web/renew", {"owner_token": "t", "ttl_ms": 60_000}),
    ("POST", "/v1/locks/deploy:web/release", {"owner_token": "t"}),
    ("GET", "/v1/locks/deploy:web", None),
    ("POST", "/v1/work", {"id": "w-1", "profile": {"title": "t"}, "owner": "claude"}),
    ("GET", "/v1/work", None),
    ("GET", "/v1/work/w-1", None),
    ("POST", "/v1/work/w-1/events", {**EVENT, "session_id": "s-1"}),
    ("PATCH", "/v1/work/w-1/signals", {"status": "done"}),
    ("PUT", "/v1/work/w-1/owner", {"owner": "gemini-cli"}),
    ("GET", "/v1/work/w-1/sessions", None),
    (
        "POST",
        "/v1/hitl",
        {"topic": "t", "request": "r", "asked_by": "agent:claude", "correlationId": "h-1"},
    ),
    ("GET", "/v1/hitl", None),
    ("POST", "/v1/hitl/h-1/resolve", {"resolution": "ok", "by": "user:mikey"}),
    ("POST", "/v1/workflows/deploy/executions", {"step": "build", "agent": "agent:claude"}),
    (
        "POST",
        "/v1/workflows/deploy/assessments",
        {"step": "build", "score": 80, "criteria": ["green"], "agent": "agent:claude"},
    ),
    (
        "POST",
        "/v1/workflows/deploy/improvements",
        {"step": "build", "lesson": "pin it", "agent": "agent:claude"},
    ),
    ("GET", "/v1/workflows/deploy/lessons", None),
    ("GET", "/v1/workflows/deploy/unassessed", None),
    ("GET", "/v1/workflows/deploy/assessments", None),
    ("GET", "/v1/lessons?agent=claude", None),
]


@pytest.fixture(scope="module")
def api() -> Api:
    return Api(Acmi(OutageStore(), Settings()))


PREFIXES = ("/v1/agents", "/v1/locks", "/v1/work", "/v1/hitl", "/v1/lessons")


def test_every_coordination_route_has_a_request_here(api: Api) -> None:
    """One request per route: a new route of these functions must join REQUESTS."""
    paths = create_app(ApiContext(api.acmi)).openapi()["paths"]
    routes = {
        (method, path) for path, ops in paths.items() if path.startswith(PREFIXES) for method in ops
    }
    assert len(routes) == len(REQUESTS), sorted(routes)


@pytest.mark.parametrize(
    ("method", "path", "body"), REQUESTS, ids=[f"{m} {p}" for m, p, _ in REQUESTS]
)
def test_a_store_outage_is_a_503_naming_the_store(
    api: Api, method: str, path: str, body: Any
) -> None:
    store = api.acmi.store
    assert isinstance(store, OutageStore)
    store.down = True
    try:
        response = api.client.request(method, path, json=body, headers=api.auth("default:admin"))
    finally:
        store.down = False
    body_ = assert_error(response, 503, "store")
    assert body_["rule"] == "available"
    assert response.headers["Retry-After"]
