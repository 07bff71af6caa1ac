"""`acmi migrate --layout cluster`: a reference-layout deployment on one redis-server
(two tenants, every kind of key the writes leave, API keys, TTLs, a timeline too large for
one RESTORE, a problem doctor reports) copied into the cluster layout on a real 3-master
cluster: stopped after N keys and resumed, nothing lost or doubled, verified by doctor on
the target, the source untouched."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster as ClusterClient

from acmi_core import Acmi, create_acmi
from acmi_core.auth import apikeys
from acmi_core.base.errors import AcmiValidationError, StoreCommandError, StoreUnavailable
from acmi_core.base.keys import RELAYOUT_CHECKPOINT, TENANT_REGISTRY
from acmi_core.base.settings import Settings
from acmi_core.cli.app import main
from acmi_core.ops.doctor import Doctor
from acmi_core.ops.relayout import DUMP_MAX_BYTES, Relayout, relayout, target_settings
from acmi_core.store.base import Command, Reply
from acmi_core.store.cluster import ClusterStore
from acmi_core.store.redis import RedisStore
from acmi_core.testing.redis_cluster import RedisCluster
from acmi_core.testing.redis_server import RedisServer
from tests.kit import TEST_DBS

DB = TEST_DBS["relayout.source"]  # this module's own database (tests/kit.py TEST_DBS)
TENANTS = ("default", "beta")
ENTITIES = 140
STEP = 50  # keys per step: many steps, so a stop lands inside one
BIG = "user:big"


def _event(n: int, text: str = "") -> dict[str, Any]:
    return {
        "source": "agent:a",
        "kind": "note",
        "correlationId": f"c-{n}",
        "summary": text or f"e{n}",
    }


def seed(source: Acmi, raw: redis.Redis) -> None:
    for tenant in TENANTS:
        acmi = Acmi(source.store, source.settings, tenant=tenant)
        for n in range(ENTITIES):
            acmi.profile.set(f"user:u{n}", {"name": f"{tenant} {n}"})
            acmi.signals.set(f"user:u{n}", "k", n)
            acmi.timeline.append(f"user:u{n}", _event(n))
        acmi.agents.heartbeat("agent:a", "ACTIVE", note="here")
        acmi.hitl.create("key", "paste it", asked_by="agent:a")
        acmi.locks.claim("deploy", "agent:a", 600_000)
        acmi.work.create("w1", {"title": "t"}, owner="agent:a")
        apikeys.mint(source.store, tenant=tenant, scope="write", name=tenant, now_ms=1)
    big = source.keys.timeline(_entity(BIG))
    pad = "x" * 400
    raw.zadd(big, {json.dumps({**_event(n, pad), "ts": n}): n for n in range(3000)})
    raw.sadd(source.keys.index("user"), "big")
    raw.set("acmi:user:sdk1:profile", '{"name":"no index entry"}')  # doctor reports it
    raw.set("acmi:registry:agent-model-policy", '{"p":1}', px=3_600_000)  # a TTL to keep
    raw.set("other-app:key", "not ours")


def _entity(text: str) -> Any:
    from acmi_core.base.model import EntityId

    return EntityId.parse(text)


def content(client: Any, key: bytes | str) -> tuple[str, Any, bool]:
    """A key's type, value (order-free where Redis's is) and whether it has a TTL."""
    kind = client.type(key).decode()
    value: Any = {
        "string": lambda: client.get(key),
        "zset": lambda: client.zrange(key, 0, -1, withscores=True),
        "hash": lambda: sorted(client.hgetall(key).items()),
        "set": lambda: sorted(client.smembers(key)),
    }[kind]()
    return kind, value, client.pttl(key) > 0


def snapshot(raw: redis.Redis) -> dict[bytes, tuple[str, Any, bool]]:
    return {key: content(raw, key) for key in raw.scan_iter(count=1000)}


class StoppedAfter(ClusterStore):
    """The target of a run killed after ``limit`` RESTOREs: the pipeline that passes it
    sends only its first part, then the run dies (no checkpoint for that step)."""

    def __init__(self, url: str, settings: Settings, limit: int) -> None:
        super().__init__(url, settings)
        self.left = limit

    def pipeline(self, commands: Sequence[Command]) -> list[Reply | StoreCommandError]:
        restores = [c for c in commands if c[0] == "RESTORE"]
        if restores and len(restores) > self.left:
            sent = list(commands)[: self.left]
            super().pipeline(sent)
            self.left = 0
            raise StoreUnavailable("the process was killed")
        self.left -= len(restores)
        return super().pipeline(commands)


@pytest.fixture
def env(redis_server: RedisServer, redis_cluster3: RedisCluster) -> Iterator[tuple[Acmi, str]]:
    redis_server.flush(DB)
    redis_cluster3.flush()
    url = redis_server.url_for(DB)
    source = create_acmi(RedisStore.from_url(url), Settings(redis_url=url))
    with redis.Redis.from_url(url) as raw:
        seed(source, raw)
    yield source, url
    source.close()


def test_a_stopped_copy_resumes_with_nothing_lost_or_doubled(
    env: tuple[Acmi, str], redis_cluster3: RedisCluster
) -> None:
    source, url = env
    settings = target_settings(source.settings, redis_cluster3.url)
    with redis.Redis.from_url(url) as raw:
        before = snapshot(raw)
    stopped = StoppedAfter(redis_cluster3.url, settings, limit=400)
    with pytest.raises(StoreUnavailable):
        Relayout(source, stopped, url, count=STEP).copy()
    stopped.close()
    with ClusterClient.from_url(redis_cluster3.url) as cluster:
        partial = json.loads(cluster.get(RELAYOUT_CHECKPOINT))
    assert not partial["done"] and 0 < partial["counts"]["copied"] <= 400

    target = ClusterStore(redis_cluster3.url, settings)
    try:
        run = Relayout(source, target, url, count=STEP)
        checkpoint, resumed = run.copy()
        verified, n_source, n_target = run.verify(settings)
    finally:
        target.close()
    print(
        f"# stopped at {partial['counts']['copied']} keys (step {partial['steps']}), resumed:"
        f" {checkpoint['counts']} in {checkpoint['steps']} steps"
    )
    assert resumed and checkpoint["done"]
    assert verified and n_source == n_target == 1  # the unindexed SDK entity, both sides

    with redis.Redis.from_url(url) as raw:
        assert snapshot(raw) == before  # the source untouched
    ours = {k: v for k, v in before.items() if k.startswith(b"acmi:")}
    expected: dict[str, tuple[str, Any, bool]] = {}
    marks = 0
    for key, value in ours.items():
        mapped = run.map_key(key)
        assert mapped is not None and mapped.skip is None
        if mapped.split is not None:
            marks += len(value[1])
            continue
        assert mapped.name is not None
        expected[mapped.name] = value
    counts = checkpoint["counts"]
    assert counts["copied"] == len(expected)  # each key once, the resumed step's included
    assert counts["marks"] == marks and counts["vanished"] == counts["uncopyable"] == 0
    with ClusterClient.from_url(redis_cluster3.url) as cluster:
        copied = {k.decode(): content(cluster, k) for k in cluster.scan_iter(count=1000)}
        registry = sorted(cluster.smembers(TENANT_REGISTRY))
    assert registry == [b"beta", b"default"]
    bookkeeping = {RELAYOUT_CHECKPOINT, TENANT_REGISTRY}
    data = {k: v for k, v in copied.items() if k not in bookkeeping and ":_tenants:" not in k}
    assert data == expected  # every value byte for byte (read back by type), TTLs kept
    assert len(expected) > 800
    big = [v for k, v in expected.items() if k.endswith("user:big:timeline")]
    assert len(big) == 1 and len(big[0][1]) == 3000  # typed copy: over DUMP_MAX_BYTES
    assert DUMP_MAX_BYTES < 3000 * 400

    # the copy serves: a key minted on the source authenticates, a tenant reads its data
    beta = Acmi(ClusterStore(redis_cluster3.url, settings), settings, tenant="beta")
    try:
        assert beta.profile.get("user:u7")["name"] == "beta 7"
        assert [e.summary for e in beta.timeline.read("user:u7")] == ["e7"]
        assert {r.tenant for r in apikeys.list_keys(beta.store)} == set(TENANTS)
        assert [f for f in Doctor(beta).findings() if f.entity != "user:sdk1"] == []
    finally:
        beta.close()


def test_a_finished_copy_is_answered_and_a_foreign_target_refused(
    env: tuple[Acmi, str], redis_cluster3: RedisCluster
) -> None:
    source, url = env
    settings = target_settings(source.settings, redis_cluster3.url)
    target = ClusterStore(redis_cluster3.url, settings)
    try:
        first = relayout(source, target, url, settings)
        assert first["done"] and first["verified"] and not first["resumed"]
        again = relayout(source, target, url, settings)
        assert again["steps"] == first["steps"] and again["counts"] == first["counts"]
        with pytest.raises(AcmiValidationError, match="another source"):
            Relayout(source, target, url + "?other").copy()
        target.execute(("DEL", RELAYOUT_CHECKPOINT))
        with pytest.raises(AcmiValidationError, match="empty"):
            Relayout(source, target, url).copy()  # holds keys, no checkpoint
    finally:
        target.close()


def test_a_key_that_cannot_be_copied_is_counted_and_fails_the_verification(
    env: tuple[Acmi, str], redis_cluster3: RedisCluster
) -> None:
    source, url = env
    with redis.Redis.from_url(url) as raw:
        raw.set(b"acmi:user:\xff:profile", "{}")  # a name no builder takes (not UTF-8)
    settings = target_settings(source.settings, redis_cluster3.url)
    target = ClusterStore(redis_cluster3.url, settings)
    try:
        result = relayout(source, target, url, settings)
    finally:
        target.close()
    assert result["done"] and result["counts"]["uncopyable"] == 1
    # doctor sees it on the source (an id outside the grammar), not on the target: the
    # copy says so rather than passing
    assert not result["verified"]
    assert (result["source_findings"], result["target_findings"]) == (2, 1)


def test_the_command_copies_and_exits_0(
    env: tuple[Acmi, str],
    redis_cluster3: RedisCluster,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, url = env
    monkeypatch.setenv("ACMI_REDIS_URL", url)
    code = main(["migrate", "--layout", "cluster", "--target", redis_cluster3.url])
    out = capsys.readouterr().out
    assert code in (0, None), out
    result = json.loads(out.strip().splitlines()[-1])
    assert result["done"] and result["verified"] and result["counts"]["copied"] > 800
    assert main(["migrate", "--layout", "reference", "--target", redis_cluster3.url]) == 2
    assert "--layout" in capsys.readouterr().err
