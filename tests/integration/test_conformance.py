"""The conformance suite (acmi_core.testing.conformance) on every backend.

Each store-dependent check is its own test per backend (``test_check[<backend>-<group>/<name>]``),
with a raw side door on every backend, so none may skip. Each store-independent check runs
once (``test_store_independent_check[<group>/<name>]``), on a client whose store refuses
every call. ``test_whole_suite`` runs ``run_conformance`` as a backend author would, twice,
on a store that already holds other data (with and without the side door), and prints
"N passed, 0 failed, K skipped" per backend. The rest tests the harness itself: outcomes
(skipped with a reason), ``groups=`` and store-independent selection, the store-access
guard, the report, the command line, and that the suite catches broken backends.

memory and redis use one client per module; upstash uses the ``upstash_store`` fixture,
which is per test (its double flushes Redis db 0 at set-up, so our redis client uses db 2).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster as ClusterClient

from acmi_core import Acmi, Settings, create_acmi
from acmi_core.base.errors import StoreCommandError
from acmi_core.base.model import EntityId
from acmi_core.base.settings import ENVIRONMENT
from acmi_core.store import open_store, scripts
from acmi_core.store.base import Arg, NoStore, Reply, Script
from acmi_core.store.cluster import ClusterStore
from acmi_core.store.memory import MemoryStore
from acmi_core.store.redis import RedisStore
from acmi_core.store.upstash import UpstashStore
from acmi_core.testing.conformance import (
    CHECKS,
    Check,
    CheckSkipped,
    ConformanceFailure,
    Context,
    RawWriter,
    execute_check,
    expect,
    expect_equal,
    expect_rejected,
    harness,
    main,
    run_check,
    run_conformance,
    select_checks,
)
from acmi_core.testing.redis_cluster import RedisCluster
from acmi_core.testing.redis_server import RedisServer
from tests.kit import DB, ROOT

BACKENDS = ("memory", "redis", "upstash", "cluster3", "cluster1", "cluster3b3")
CLUSTER_SETTINGS = Settings(key_layout="cluster")
# each cluster backend: the cluster it runs on and its tenants' buckets (ACMI_CLUSTER_BUCKETS)
CLUSTERS = {
    "cluster3": ("cluster3", "1"),
    "cluster1": ("cluster1", "1"),
    "cluster3b3": ("cluster3", "3"),
}
REQUEST_RECORD = re.compile(rb"acmi:(\{[a-z0-9_-]+(:[0-9]+)?\}:)?_req:")
STORE_DEPENDENT = [c for c in CHECKS if c.store]
STORE_INDEPENDENT = [c for c in CHECKS if not c.store]
BY_ID = {c.id: c for c in CHECKS}
RAW_BYTES = "store/non-UTF-8 bytes written through the raw side door read back identical"
NOT_UTF8_MEMBER = "tolerance/a member that is not UTF-8 is skipped and reported"


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


def _cluster_acmi(cluster: RedisCluster, buckets: str = "1") -> Iterator[Acmi]:
    """The cluster client in the cluster layout, as open_store builds it from the settings."""
    settings = CLUSTER_SETTINGS.replace(
        redis_url=cluster.url, redis_cluster=True, cluster_buckets=buckets
    )
    acmi = create_acmi(open_store(settings), settings)
    yield acmi
    acmi.close()


@pytest.fixture(scope="module")
def cluster3_acmi(redis_cluster3: RedisCluster) -> Iterator[Acmi]:
    yield from _cluster_acmi(redis_cluster3)


@pytest.fixture(scope="module")
def cluster1_acmi(redis_cluster1: RedisCluster) -> Iterator[Acmi]:
    yield from _cluster_acmi(redis_cluster1)


@pytest.fixture(scope="module")
def cluster3b3_acmi(redis_cluster3: RedisCluster) -> Iterator[Acmi]:
    """3 masters, every tenant's entities over 3 buckets (hash tags)."""
    yield from _cluster_acmi(redis_cluster3, "3")


def _cluster_side_door(cluster: RedisCluster) -> Iterator[RawWriter]:
    """Plain redis-py's cluster client on the cluster, outside ClusterStore."""
    with ClusterClient.from_url(cluster.url) as client:
        yield lambda command: client.execute_command(*command)


@pytest.fixture(scope="module")
def cluster3_side_door(redis_cluster3: RedisCluster) -> Iterator[RawWriter]:
    yield from _cluster_side_door(redis_cluster3)


@pytest.fixture(scope="module")
def cluster1_side_door(redis_cluster1: RedisCluster) -> Iterator[RawWriter]:
    yield from _cluster_side_door(redis_cluster1)


@pytest.fixture
def upstash_acmi(upstash_store: UpstashStore) -> Acmi:
    return create_acmi(upstash_store, Settings())  # upstash_store closes itself


@pytest.fixture(scope="module")
def redis_side_door(redis_server: RedisServer) -> Iterator[RawWriter]:
    """Plain redis-py on the redis backend's database, outside RedisStore."""
    with redis.Redis.from_url(redis_server.url_for(DB["conformance"])) as client:
        yield lambda command: client.execute_command(*command)


@pytest.fixture(scope="module")
def upstash_side_door(redis_server: RedisServer) -> Iterator[RawWriter]:
    """Plain Redis under the Upstash double: writes bytes the REST API cannot carry."""
    with redis.Redis.from_url(redis_server.url_for(DB["upstash_double"])) as client:
        yield lambda command: client.execute_command(*command)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Acmi:
    acmi: Acmi = request.getfixturevalue(f"{request.param}_acmi")
    return acmi


@pytest.fixture
def side_door(backend: Acmi, request: pytest.FixtureRequest) -> RawWriter:
    """A raw writer on the backend's data: fakeredis itself for memory, plain redis-py
    for redis and for the Redis under the Upstash double."""
    store = backend.store
    if isinstance(store, MemoryStore):
        client = store._client  # the fakeredis client, below RedisStore's translation
        return lambda command: client.execute_command(*command)  # type: ignore[no-untyped-call]
    writer: RawWriter
    if isinstance(store, ClusterStore):
        cluster = CLUSTERS[request.node.callspec.params["backend"]][0]
        writer = request.getfixturevalue(f"{cluster}_side_door")
    elif isinstance(store, UpstashStore):
        writer = request.getfixturevalue("upstash_side_door")
    else:
        writer = request.getfixturevalue("redis_side_door")
    return writer


@pytest.mark.parametrize("chk", STORE_DEPENDENT, ids=[c.id for c in STORE_DEPENDENT])
def test_check(backend: Acmi, side_door: RawWriter, chk: Check) -> None:
    try:
        execute_check(chk, backend, raw=side_door)
    except CheckSkipped as exc:  # every backend here has its side door: nothing may skip
        pytest.fail(f"{chk.id} skipped on {backend.store.name}: {exc.reason}")


@pytest.mark.parametrize("chk", STORE_INDEPENDENT, ids=[c.id for c in STORE_INDEPENDENT])
def test_store_independent_check(chk: Check) -> None:
    """Once, not per backend: no backend at all is needed (the harness guards the store)."""
    execute_check(chk, Acmi(NoStore(), Settings()))


# --- the suite as a whole -------------------------------------------------------------------


def _all_keys(acmi: Acmi, request: pytest.FixtureRequest) -> set[bytes]:
    name = request.node.callspec.params["backend"]
    if name in CLUSTERS:  # a scan is per node: redis-py's scan_iter visits every master
        cluster: RedisCluster = request.getfixturevalue(f"redis_{CLUSTERS[name][0]}")
        with ClusterClient.from_url(cluster.url) as client:
            return {k for k in client.scan_iter(count=1000) if isinstance(k, bytes)}
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


def _seed(acmi: Acmi) -> dict[str, dict[str, Any]]:
    """Somebody else's data, already in the store before the suite runs: an entity in
    each of the tenant's buckets, so each bucket's indexes and marks exist before."""
    seeded: dict[str, dict[str, Any]] = {}
    while len(seeded) < acmi.keys.buckets:
        entity = f"user:existing-{uuid.uuid4().hex[:8]}"
        if any(acmi.keys.bucket_of(entity) == acmi.keys.bucket_of(e) for e in seeded):
            continue
        acmi.profile.set(entity, {"name": "Existing", "tags": []})
        acmi.signals.set(entity, "task", {"n": 12345678901234567})
        acmi.timeline.append(
            entity,
            {"ts": 1, "source": "user:x", "kind": "note", "correlationId": "c", "summary": "s"},
        )
        seeded[entity] = acmi.get(entity).to_dict()
    return seeded


def test_whole_suite(
    backend: Acmi,
    side_door: RawWriter,
    capsys: pytest.CaptureFixture[str],
    request: pytest.FixtureRequest,
) -> None:
    seeded = _seed(backend)
    keys_before = _all_keys(backend, request)
    first = run_conformance(backend, raw=side_door, store_independent=False)
    second = run_conformance(backend, store_independent=False)  # re-runnable; no side door
    with capsys.disabled():
        print(f"\nconformance on {backend.store.name}: {first}")
        print(f"conformance on {backend.store.name} without a side door: {second}")
    assert not first.failed, str(first)
    assert not second.failed, str(second)
    assert not first.skipped, str(first)
    assert first.total == second.total == len(STORE_DEPENDENT)
    assert first.not_selected == second.not_selected == STORE_INDEPENDENT
    # Without the side door, what needs it is skipped with its reason, never passed.
    expected_skips = {RAW_BYTES}
    if isinstance(backend.store, UpstashStore):  # REST is text only: it refuses the bytes
        expected_skips.add(NOT_UTF8_MEMBER)
    assert {c.id for c, _ in second.skipped} == expected_skips, str(second)
    assert all("raw side door" in reason for _, reason in second.skipped), str(second)
    after = _all_keys(backend, request)
    # what stays behind: only the recorded replies of its requests, each expiring in 60 s
    records = {k for k in after - keys_before if REQUEST_RECORD.match(k)}
    assert records, "the lock, HITL and work checks record their replies"
    for key in records:
        ttl = backend.store.execute(("PTTL", key))
        assert isinstance(ttl, int) and 0 < ttl <= scripts.REPLAY_TTL_MS, key
    # records of earlier requests (other tests on this store) may expire meanwhile: a run
    # longer than REPLAY_TTL_MS on a loaded machine
    older = {k for k in keys_before if REQUEST_RECORD.match(k)}
    assert after - records - older == keys_before - older, "the suite left or removed keys"
    for entity, before in seeded.items():
        assert backend.get(entity).to_dict() == before, "the suite touched data it did not write"
        backend.delete(entity)


# --- the harness itself (memory only: it does not depend on the backend) --------------------


def test_checks_are_many_unique_and_grouped() -> None:
    ids = [c.id for c in CHECKS]
    assert len(ids) == len(set(ids))
    assert len(CHECKS) >= 100
    groups = {c.group for c in CHECKS}
    for group in (
        "store",
        "profile",
        "signals",
        "timeline",
        "batch",
        "validation",
        "isolation",
        "tenant",
        "json",
    ):
        assert group in groups
    assert len([c for c in CHECKS if c.group == "store"]) >= 5
    assert 0 < len(STORE_INDEPENDENT) < len(STORE_DEPENDENT)
    assert all(c.group == "store" for c in CHECKS[:5]), "the store tier runs first"


def test_context_entities_and_keys_are_fresh_valid_and_cleaned_up(memory_acmi: Acmi) -> None:
    ctx = Context(memory_acmi)
    ids = [ctx.entity(), ctx.entity(), ctx.entity("agent", "a.b_c-D")]
    assert len(set(ids)) == 3
    for entity in ids:
        EntityId.parse(entity)
        assert ctx.token in entity
        memory_acmi.signals.set(entity, "k", 1)
        ctx.tenant().signals.set(entity, "k", 1)
    keys = [ctx.key(), ctx.key(), ctx.key("other")]
    assert len(set(keys)) == 3
    for key in keys:
        assert key.startswith(f"acmi:_conformance:{{{ctx.token}}}:")
        memory_acmi.store.execute(("SET", key, "v"))
    ctx.cleanup()
    for entity in ids:
        assert memory_acmi.signals.all(entity) == {}
        assert ctx.tenant().signals.all(entity) == {}
    for key in keys:
        assert memory_acmi.store.execute(("EXISTS", key)) == 0
    assert Context(memory_acmi).token != ctx.token


def test_helpers_fail_loudly() -> None:
    with pytest.raises(ConformanceFailure):
        expect(False, "no")
    with pytest.raises(ConformanceFailure):
        expect_equal(12345678901234567, 1.2345678901235e16, "int vs lossy float")
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

    def skips(ctx: Context) -> None:
        ctx.skip("not in this setup")

    bad = [
        Check("meta", "fails", fails),
        Check("meta", "crashes", crashes),
        Check("meta", "skips", skips),
    ]
    report = run_conformance(memory_acmi, [*CHECKS[:3], *bad])
    counts = (len(report.passed), len(report.failed), len(report.skipped), report.total)
    assert counts == (3, 2, 1, 6)
    assert not report.ok
    assert str(report).startswith("3 passed, 2 failed, 1 skipped")
    assert "FAILED meta/fails: one: expected 2, got 1" in str(report)
    assert "RuntimeError: boom" in str(report)
    assert "SKIPPED meta/skips: not in this setup" in str(report)
    assert run_check(CHECKS[0], memory_acmi).passed
    skipped_only = run_conformance(memory_acmi, [CHECKS[0], bad[2]])
    assert skipped_only.ok, "a skip is not a failure"


# --- skipped: a check that cannot run here says so ------------------------------------------


def test_a_check_needing_the_side_door_is_skipped_with_its_reason(memory_acmi: Acmi) -> None:
    chk = BY_ID[RAW_BYTES]
    outcome = run_check(chk, memory_acmi)
    assert outcome.skipped and not outcome.passed and not outcome.failed
    assert "raw side door" in outcome.message and "none given" in outcome.message
    report = run_conformance(memory_acmi, [chk])
    assert (len(report.passed), len(report.failed), len(report.skipped)) == (0, 0, 1)
    assert f"SKIPPED {RAW_BYTES}: needs a raw side door" in str(report)
    client = memory_acmi.store._client  # type: ignore[attr-defined]
    with_door = run_check(chk, memory_acmi, raw=lambda command: client.execute_command(*command))
    assert with_door.passed, with_door.message


def test_upstash_without_a_side_door_skips_the_non_utf8_member(
    upstash_acmi: Acmi, upstash_side_door: RawWriter
) -> None:
    """The REST transport refuses the bytes (checked: cleanly, nothing written); reading such
    a member is then skipped, with the reason, instead of passing unchecked."""
    chk = BY_ID[NOT_UTF8_MEMBER]
    outcome = run_check(chk, upstash_acmi)
    assert outcome.skipped, outcome
    assert "refused a non-UTF-8 member" in outcome.message
    assert run_check(chk, upstash_acmi, raw=upstash_side_door).passed


def test_a_skipped_check_still_cleans_up_and_a_failure_is_not_hidden(memory_acmi: Acmi) -> None:
    written: list[str] = []

    def writes_then_skips(ctx: Context) -> None:
        written.append(ctx.entity())
        ctx.acmi.signals.set(written[-1], "k", 1)
        ctx.skip("half way")

    outcome = run_check(Check("meta", "writes then skips", writes_then_skips), memory_acmi)
    assert (outcome.status, outcome.message) == ("skipped", "half way")
    assert memory_acmi.signals.all(written[-1]) == {}
    with pytest.raises(CheckSkipped, match="half way"):
        execute_check(Check("meta", "writes then skips", writes_then_skips), memory_acmi)


# --- selection: groups and store-independent checks -----------------------------------------


def test_groups_select_checks(memory_acmi: Acmi) -> None:
    report = run_conformance(memory_acmi, groups={"profile", "store"})
    ran = [c for c in report.passed] + [c for c, _ in report.skipped]
    expected = [c for c in CHECKS if c.group in ("profile", "store")]
    assert sorted(c.id for c in ran) == sorted(c.id for c in expected), str(report)
    assert not report.failed, str(report)
    assert len(report.not_selected) == len(CHECKS) - len(expected)
    assert f"({len(CHECKS) - len(expected)} not selected)" in str(report).splitlines()[0]
    single = run_conformance(memory_acmi, groups="profile")  # one name, not its letters
    assert {c.group for c in single.passed} == {"profile"}


def test_unknown_groups_are_refused_naming_the_known_ones(memory_acmi: Acmi) -> None:
    with pytest.raises(ValueError, match=r"unknown conformance group\(s\) nope") as info:
        run_conformance(memory_acmi, groups={"profile", "nope"})
    for group in ("profile", "store", "validation", "json"):
        assert group in str(info.value)


def test_store_independent_checks_can_be_left_out(memory_acmi: Acmi) -> None:
    selected, left_out = select_checks(groups={"validation"}, store_independent=False)
    assert selected == [c for c in CHECKS if c.group == "validation" and c.store]
    assert left_out == [c for c in CHECKS if c.group != "validation" or not c.store]
    report = run_conformance(memory_acmi, groups={"validation"}, store_independent=False)
    assert report.not_selected == [c for c in CHECKS if c.group != "validation" or not c.store]
    assert not report.skipped, "left out is not skipped"
    assert report.total == len(selected)
    everything = run_conformance(memory_acmi, groups={"validation"})  # default: included
    validation_only = {c.id for c in STORE_INDEPENDENT if c.group == "validation"}
    assert validation_only and validation_only <= {c.id for c in everything.passed}
    only, _ = select_checks(store_dependent=False)
    assert only == STORE_INDEPENDENT


def test_a_store_independent_check_that_touches_the_store_fails(memory_acmi: Acmi) -> None:
    seen: list[str] = []

    def touches(ctx: Context) -> None:
        entity = ctx.entity()
        seen.append(entity)
        with contextlib.suppress(Exception):  # even when the check swallows the refusal
            ctx.acmi.signals.set(entity, "k", 1)

    outcome = run_check(Check("meta", "touches", touches, store=False), memory_acmi)
    assert outcome.failed
    assert "store-independent check used the store" in outcome.message
    assert "tag it store=True" in outcome.message
    assert memory_acmi.signals.all(seen[0]) == {}, "the guard let a write through"

    def reads_tenant(ctx: Context) -> None:
        expect_equal(ctx.acmi.tenant, "other", "tenant of the guarded client")
        expect_rejected(lambda: ctx.acmi.profile.get("Not:Valid"), "a malformed id")

    other = memory_acmi.for_tenant("other")
    assert run_check(Check("meta", "tenant", reads_tenant, store=False), other).passed


# --- the command line -------------------------------------------------------------------------


@pytest.fixture
def embedded_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No store in the environment: the embedded store."""
    for var in ENVIRONMENT:
        monkeypatch.delenv(var.name, raising=False)


@pytest.mark.usefixtures("embedded_env")
def test_main_runs_the_selected_groups(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-g", "store", "-g", "profile", "--no-store-independent"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("conformance on embedded: ")  # the shared data, per call
    assert " passed, 0 failed, 1 skipped (" in out
    assert f"SKIPPED {RAW_BYTES}" in out
    with pytest.raises(SystemExit) as info:
        main(["-g", "nope"])
    assert info.value.code == 2
    assert "known groups" in capsys.readouterr().err


@pytest.mark.usefixtures("embedded_env")
def test_main_exits_1_on_a_failure(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(harness, "create_acmi", lambda: create_acmi(_LossyStore(), Settings()))
    assert main(["-g", "json"]) == 1
    assert "FAILED json/" in capsys.readouterr().out


def test_python_dash_m_runs_the_suite() -> None:
    env = {k: v for k, v in os.environ.items() if k not in {v.name for v in ENVIRONMENT}}
    result = subprocess.run(
        [sys.executable, "-m", "acmi_core.testing.conformance", "-g", "store", "-g", "signals"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("conformance on embedded: ")
    assert ", 0 failed, " in result.stdout.splitlines()[0]


# --- the suite catches broken backends --------------------------------------------------------


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


class _TextRepliesStore(MemoryStore):
    """Decodes bulk strings to str (as a careless REST client would)."""

    def execute(self, command: Any) -> Any:
        reply = super().execute(command)
        return reply.decode("utf-8", "replace") if isinstance(reply, bytes) else reply


class _RaisingPipelineStore(MemoryStore):
    """Raises the first failed command and drops the other results (upstash-redis 1.8.0)."""

    def pipeline(self, commands: Sequence[Any]) -> list[Reply | StoreCommandError]:
        results = super().pipeline(commands)
        for result in results:
            if isinstance(result, StoreCommandError):
                raise result
        return results


class _LeakyErrorsStore(MemoryStore):
    """Lets the client library's exception through instead of StoreCommandError."""

    def execute(self, command: Any) -> Any:
        return self._client.execute_command(*command)  # type: ignore[no-untyped-call]


class _NoFallbackStore(MemoryStore):
    """EVALSHA only: no EVAL when the server's script cache misses the script."""

    def eval(self, script: Script, keys: Sequence[str], args: Sequence[Arg]) -> Reply:
        return self.execute(("EVALSHA", script.sha, len(keys), *keys, *args))


BROKEN_STORES: dict[str, tuple[Callable[[], MemoryStore], str]] = {
    "str replies": (_TextRepliesStore, "store/replies are bytes, int, None, list and b'OK'"),
    "raising pipeline": (
        _RaisingPipelineStore,
        "store/a pipeline keeps every result; a failed command's slot holds its error",
    ),
    "leaky errors": (
        _LeakyErrorsStore,
        "store/a Redis error reply raises StoreCommandError, not the client library's",
    ),
    "no NOSCRIPT fallback": (
        _NoFallbackStore,
        "store/eval runs a script after SCRIPT FLUSH (NOSCRIPT falls back to EVAL)",
    ),
}


@pytest.mark.parametrize("broken", BROKEN_STORES, ids=list(BROKEN_STORES))
def test_store_tier_catches_a_broken_store(broken: str) -> None:
    make, check_id = BROKEN_STORES[broken]
    report = run_conformance(create_acmi(make(), Settings()), groups={"store"})
    assert check_id in {chk.id for chk, _ in report.failed}, str(report)
