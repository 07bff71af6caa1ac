"""Generated from the operation table: every row with an ``acmi`` command is reachable
through both CLI backends' one ``call`` (on the store, and with ``--api`` against the
API served in this process by uvicorn on a real redis-server), with the same outcome on
each, or its command is ``store_only`` and the CLI refuses ``--api`` for it.

Each row is called with its params model's required fields (values by field name,
below), from the same starting state on both sides: the same answer's shape or the same
AcmiError (class, field, rule), and the remote side made its row's request."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

import httpx
import pytest
import redis

from acmi_core import Acmi
from acmi_core.api.app import create_app
from acmi_core.api.context import ApiContext
from acmi_core.auth import apikeys
from acmi_core.base.errors import AcmiError
from acmi_core.base.settings import Settings
from acmi_core.cli import main
from acmi_core.cli.backend import ANSWERS, Backend, LocalBackend
from acmi_core.cli.remote import REQUESTS, HttpBackend
from acmi_core.cli.state import CliState
from acmi_core.operations import OPERATIONS, Operation, bind
from acmi_core.store.redis import RedisStore
from acmi_core.testing.redis_server import RedisServer
from tests.kit import DB, FakeClock, serving

EVENT: Final = {"source": "agent:claude", "kind": "note", "correlationId": "c-1", "summary": "x"}
# A value for each required field, by its name.
VALUES: Final[dict[str, Any]] = {
    "entity": "user:rows",
    "category": "user",
    "agent": "agent:rows",
    "id": "rows-item",
    "resource": "deploy:rows",
    "owner": "agent:rows",
    "owner_token": "not-a-token",
    "ttl_ms": 60_000,
    "event": EVENT,
    "profile": {"name": "Rows"},
    "signals": {"n": 1},
    "session_id": "s-1",
    "model_id": "m-1",
    "summary": "a rollup",
    "text": "a line to keep",
    "query": "line",
    "key": "mood",
    "value": "busy",
    "path": "MEMORY.md",
    "slug": "pricing",
    "name": "Pricing",
    "files": {"MEMORY.md": "# Memory\n\n- a line\n"},
    "topic": "deploy",
    "request": "approve?",
    "asked_by": "agent:rows",
    "correlation_id": "h-rows",
    "resolution": "yes",
    "by": "user:mikey",
    "workflow": "deploy-rows",
    "step": "build",
    "score": 80,
    "criteria": ["green"],
    "lesson": "warm the cache",
}
# The fields a row's command always gives where the model's default is not the command's.
GIVEN: Final[dict[str, dict[str, Any]]] = {
    "entities.delete": {"dry_run": False},
    "memory.handoff": {"text": "next: verify"},  # without text the MCP tool takes it
    "workflows.lessons": {"workflow": "deploy-rows"},  # the command's argument (or agent=)
}
# The command row that is not a ``call``: the Backend's own method (see its docstring).
NOT_CALLS: Final = {"entities.cat": "cat"}

COMMAND_ROWS: Final = [row for row in OPERATIONS if row.cli is not None]


class Counting(httpx.BaseTransport):
    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport(retries=0)
        self.sent: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request.method)
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


@dataclass
class Sides:
    acmi: Acmi
    clock: FakeClock
    raw: redis.Redis
    local: LocalBackend
    remote: HttpBackend
    counter: Counting

    def wipe(self) -> None:
        keys = list(self.raw.scan_iter(match=f"*{self.acmi.tenant}*", count=1000))
        if keys:
            self.raw.delete(*keys)


@pytest.fixture(scope="module")
def sides(redis_server: RedisServer) -> Iterator[Sides]:
    store = RedisStore.from_url(redis_server.url_for(DB["backends"]))
    clock = FakeClock()
    acmi = Acmi(store, Settings(), tenant=f"t-{uuid.uuid4().hex[:12]}", clock=clock)
    key = apikeys.mint(store, tenant=acmi.tenant, scope="admin", name="rows", now_ms=clock())[0]
    counter = Counting()
    with (
        serving(create_app(ApiContext(acmi, offload=True))) as url,
        redis.Redis.from_url(redis_server.url_for(DB["backends"]), protocol=2) as raw,
    ):
        remote = HttpBackend(url, key, transport=counter)
        yield Sides(acmi, clock, raw, LocalBackend(acmi, "store"), remote, counter)
        remote.close()
        for found in raw.scan_iter(match=f"*{acmi.tenant}*", count=1000):
            raw.delete(found)
    store.close()


def _fields(row: Operation) -> dict[str, Any]:
    model = bind.params_model(row)
    required = {n: VALUES[n] for n, f in model.model_fields.items() if f.is_required()}
    return {**required, **GIVEN.get(row.name, {})}


def _outcome(backend: Backend, row: Operation) -> tuple[str, Any]:
    """What the call gave: the answer's shape (its keys, or its type), or the error."""
    try:
        if row.name in NOT_CALLS:
            answer: Any = backend.cat(["user:rows"], limit=5, since_ms=None, until_ms=None)
        else:
            answer = backend.call(row.name, **_fields(row))
    except AcmiError as exc:
        return "error", (type(exc).__name__, exc.field, exc.rule)
    return "answer", sorted(answer) if isinstance(answer, dict) else type(answer).__name__


@pytest.mark.parametrize("row", COMMAND_ROWS, ids=lambda row: row.name)
def test_every_command_row_is_reachable_through_both_backends(sides: Sides, row: Operation) -> None:
    if row.store_only:  # refused with --api: test_a_store_only_command_refuses_the_api
        return
    # a call needs the row's params and its route (cat reads the timelines' routes)
    assert row.params is not None and (row.http or row.name in NOT_CALLS), row.name
    outcomes = []
    for backend in (sides.local, sides.remote):
        sides.wipe()
        sides.clock.now = 1_790_000_000_000
        sides.counter.sent.clear()
        outcomes.append(_outcome(backend, row))
    assert outcomes[0] == outcomes[1], row.name
    assert sides.counter.sent, f"{row.name}: no request made with --api"


# The arguments each store-only command needs to run (the refusal comes once it runs).
STORE_ONLY_ARGS: Final[dict[str, list[str]]] = {
    "doctor": [],
    "migrate": [],
    "keys create": ["--tenant", "t", "--scope", "read"],
    "keys list": [],
    "keys revoke": ["k-1"],
    "sources set": ["generic"],
    "sources list": [],
    "sources get": ["generic"],
    "jobs run": ["sweep"],
    "jobs status": [],
    "quota-monitor": [],
    "quota report": ["anthropic", "tokens", "--remaining", "1", "--limit", "2"],
    "invite-agent": ["scout"],
    "agents wake": ["claude", "--clear"],
    "memory archive": ["user:rows"],
}


@pytest.mark.parametrize("row", [r for r in COMMAND_ROWS if r.store_only], ids=lambda r: r.name)
def test_a_store_only_command_refuses_the_api(
    row: Operation, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert row.cli is not None and row.params is not None, row.name
    monkeypatch.setenv("ACMI_API_KEY", "acmi_" + "x" * 43)
    argv = ["--api", "https://api.example.com", *row.cli.split(), *STORE_ONLY_ARGS[row.cli]]
    code = main(argv, state=CliState())
    err = capsys.readouterr().err
    assert code == 2, (argv, err)
    assert "error: --api: this command works on the store directly" in err, err
    assert "(rule: store_only)" in err, err


def test_the_answers_and_requests_of_their_own_name_rows() -> None:
    """The rows whose command answers other than the plain core call (``ANSWERS``) or
    whose request is not their route with the fields (``REQUESTS``) are rows."""
    names = {row.name for row in OPERATIONS}
    assert set(ANSWERS) <= names and set(REQUESTS) <= names
