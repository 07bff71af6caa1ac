"""The conformance suite (acmi_core.testing.conformance) on every backend.

Each check is its own test (``test_check[<backend>-<group>/<name>]``); ``test_whole_suite``
runs ``run_conformance`` as a backend author would, twice, on a store that already
holds other data, and prints "N passed, 0 failed" per backend.

memory and redis use one client per module; upstash uses the ``upstash_store`` fixture,
which is per test (its double flushes Redis db 0 at set-up, so our redis client uses db 2).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from acmi_core import Acmi, Settings, create_acmi
from acmi_core.model import EntityId
from acmi_core.store.memory import MemoryStore
from acmi_core.store.redis import RedisStore
from acmi_core.store.upstash import UpstashStore
from acmi_core.testing.conformance import (
    CHECKS,
    Check,
    ConformanceFailure,
    Context,
    RawWriter,
    expect,
    expect_equal,
    expect_rejected,
    run_check,
    run_conformance,
)
from acmi_core.testing.redis_server import RedisServer
from tests.kit import DB

BACKENDS = ("memory", "redis", "upstash")


@pytest.fixture(scope="module")
def memory_acmi() -> Iterator[Acmi]:
    acmi = create_acmi(MemoryStore(), Settings())
    yield acmi
    acmi.close()


@pytest.fixture(scope="module")
def redis_acmi(redis_server: RedisServer) -> Iterator[Acmi]:
    acmi = create_acmi(RedisStore.from_url(redis_server.url_for(DB["conformance"])), Settings())
    yield acmi
    acmi.close()


@pytest.fixture
def upstash_acmi(upstash_store: UpstashStore) -> Acmi:
    return create_acmi(upstash_store, Settings())  # upstash_store closes itself


@pytest.fixture(scope="module")
def upstash_side_door(redis_server: RedisServer) -> Iterator[RawWriter]:
    """Plain Redis under the Upstash double: writes bytes the REST API cannot carry."""
    with redis.Redis.from_url(redis_server.url) as client:
        yield lambda command: client.execute_command(*command)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Acmi:
    acmi: Acmi = request.getfixturevalue(f"{request.param}_acmi")
    return acmi


@pytest.fixture
def side_door(backend: Acmi, request: pytest.FixtureRequest) -> RawWriter | None:
    if isinstance(backend.store, UpstashStore):
        writer: RawWriter = request.getfixturevalue("upstash_side_door")
        return writer
    return None  # memory and redis carry any bytes themselves


@pytest.mark.parametrize("chk", CHECKS, ids=[c.id for c in CHECKS])
def test_check(backend: Acmi, side_door: RawWriter | None, chk: Check) -> None:
    with Context(backend, raw=side_door) as ctx:
        chk.run(ctx)


# --- the suite as a whole -------------------------------------------------------------------


def _all_keys(acmi: Acmi) -> set[bytes]:
    keys: set[bytes] = set()
    cursor: Any = b"0"
    while True:
        reply = acmi.store.execute(("SCAN", cursor, "COUNT", 1000))
        assert isinstance(reply, list)
        cursor, batch = reply
        assert isinstance(batch, list)
        keys.update(k for k in batch if isinstance(k, bytes))
        if cursor in (b"0", 0):
            return keys


def _seed(acmi: Acmi) -> tuple[str, dict[str, Any]]:
    """Somebody else's data, already in the store before the suite runs."""
    entity = f"user:existing-{uuid.uuid4().hex[:8]}"
    acmi.profile.set(entity, {"name": "Existing", "tags": []})
    acmi.signals.set(entity, "task", {"n": 12345678901234567})
    acmi.timeline.append(
        entity,
        {"ts": 1, "source": "user:x", "kind": "note", "correlationId": "c", "summary": "s"},
    )
    return entity, acmi.get(entity).to_dict()


def test_whole_suite(
    backend: Acmi, side_door: RawWriter | None, capsys: pytest.CaptureFixture[str]
) -> None:
    entity, before = _seed(backend)
    keys_before = _all_keys(backend)
    first = run_conformance(backend, raw=side_door)
    second = run_conformance(backend)  # re-runnable; and without the side door
    with capsys.disabled():
        print(f"\nconformance on {backend.store.name}: {first}")
    assert not first.failed, str(first)
    assert not second.failed, str(second)
    assert first.total == second.total == len(CHECKS)
    assert _all_keys(backend) == keys_before, "the suite left keys behind or removed some"
    assert backend.get(entity).to_dict() == before, "the suite touched data it did not write"
    backend.delete(entity)


# --- the harness itself (memory only: it does not depend on the backend) --------------------


def test_checks_are_many_unique_and_grouped() -> None:
    ids = [c.id for c in CHECKS]
    assert len(ids) == len(set(ids))
    assert len(CHECKS) >= 70
    groups = {c.group for c in CHECKS}
    for group in ("profile", "signals", "timeline", "batch", "validation", "isolation"):
        assert group in groups


def test_context_entities_are_fresh_valid_and_cleaned_up(memory_acmi: Acmi) -> None:
    ctx = Context(memory_acmi)
    ids = [ctx.entity(), ctx.entity(), ctx.entity("agent", "a.b_c-D")]
    assert len(set(ids)) == 3
    for entity in ids:
        EntityId.parse(entity)
        assert ctx.token in entity
        memory_acmi.signals.set(entity, "k", 1)
        ctx.tenant().signals.set(entity, "k", 1)
    ctx.cleanup()
    for entity in ids:
        assert memory_acmi.signals.all(entity) == {}
        assert ctx.tenant().signals.all(entity) == {}
    assert Context(memory_acmi).token != ctx.token


def test_helpers_fail_loudly() -> None:
    with pytest.raises(ConformanceFailure):
        expect(False, "no")
    with pytest.raises(ConformanceFailure):
        expect_equal(1, 1.0, "int vs float")
    with pytest.raises(ConformanceFailure):
        expect_equal([], {}, "array vs object")
    with pytest.raises(ConformanceFailure):
        expect_equal({"a": True}, {"a": 1}, "bool vs int")
    with pytest.raises(ConformanceFailure):
        expect_rejected(lambda: None, "accepted")
    with pytest.raises(ConformanceFailure):
        expect_rejected(lambda: 1 / 0, "wrong error")
    expect_equal({"a": [1, 2.5, None]}, {"a": [1, 2.5, None]}, "equal")


def test_report_counts_failures(memory_acmi: Acmi) -> None:
    def fails(ctx: Context) -> None:
        ctx.acmi.signals.set(ctx.entity(), "k", 1)
        expect_equal(1, 2, "one")

    def crashes(ctx: Context) -> None:
        raise RuntimeError("boom")

    bad = [Check("meta", "fails", fails), Check("meta", "crashes", crashes)]
    report = run_conformance(memory_acmi, [*CHECKS[:3], *bad])
    assert (len(report.passed), len(report.failed), report.total) == (3, 2, 5)
    assert str(report).startswith("3 passed, 2 failed")
    assert "meta/fails: one: expected 2, got 1" in str(report)
    assert "RuntimeError: boom" in str(report)
    assert run_check(CHECKS[0], memory_acmi) is None


class _LossyStore(MemoryStore):
    """A broken backend: stored JSON comes back the way Redis cjson would re-encode it."""

    def execute(self, command: Any) -> Any:
        reply = super().execute(command)
        if command[0] == "GET" and isinstance(reply, bytes):
            try:
                value = json.loads(reply)
            except ValueError:
                return reply
            return json.dumps(value).replace("[]", "{}").encode()
        return reply


def test_suite_catches_a_lossy_backend() -> None:
    report = run_conformance(create_acmi(_LossyStore(), Settings()))
    failed = {chk.group for chk, _ in report.failed}
    assert "json" in failed, str(report)
