"""API keys on a real 3-master Redis Cluster, through HTTP, for two tenants: minted, used,
listed and revoked, each write a step of one key (the record, the index and the revoked
set hash to different slots), and every gap a stop between the steps can leave is one a
retry closes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from acmi_core import Acmi, create_acmi
from acmi_core.api.app import create_app
from acmi_core.api.context import ApiContext
from acmi_core.auth import apikeys
from acmi_core.base.settings import Settings
from acmi_core.store import open_store
from acmi_core.testing.redis_cluster import RedisCluster

TENANTS = ("default", "beta")


def _slot(key: str) -> int:
    from redis.crc import key_slot

    return int(key_slot(key.encode()))


@pytest.fixture
def acmi(redis_cluster3: RedisCluster) -> Iterator[Acmi]:
    redis_cluster3.flush()
    settings = Settings(
        key_layout="cluster",
        redis_cluster=True,
        redis_url=redis_cluster3.url,
        auth_cache_s=0,  # a revoked key refused at once
    )
    acmi = create_acmi(open_store(settings), settings)
    yield acmi
    acmi.close()


def test_the_three_keys_live_in_different_slots() -> None:
    """Why no plan can hold them: a cluster refuses it as CROSSSLOT."""
    record = apikeys._record_key(apikeys.key_hash("acmi_" + "x" * 40))
    slots = {_slot(record), _slot(apikeys.INDEX_KEY), _slot(apikeys.REVOKED_KEY)}
    assert len(slots) == 3


def test_keys_of_two_tenants_are_minted_used_and_revoked_over_http(acmi: Acmi) -> None:
    client = TestClient(create_app(ApiContext(acmi)))
    minted = {
        tenant: apikeys.mint(acmi.store, tenant=tenant, scope="write", name=tenant, now_ms=1)
        for tenant in TENANTS
    }
    for tenant, (key, _) in minted.items():
        headers = {"authorization": f"Bearer {key}"}
        put = client.put("/v1/entities/user:alice/profile", json={"name": tenant}, headers=headers)
        assert put.status_code in (200, 201), put.text
    for tenant, (key, _) in minted.items():
        got = client.get(
            "/v1/entities/user:alice/profile", headers={"authorization": f"Bearer {key}"}
        )
        assert got.status_code == 200, got.text
        assert got.json()["name"] == tenant  # each key sees its own tenant only
    listed = {r.tenant: r.id for r in apikeys.list_keys(acmi.store)}
    assert listed == {t: record.id for t, (_, record) in minted.items()}
    assert [r.tenant for r in apikeys.list_keys(acmi.store, "beta")] == ["beta"]

    revoked = apikeys.revoke(acmi.store, minted["beta"][1].id)
    assert revoked.tenant == "beta"
    beta_key, default_key = minted["beta"][0], minted["default"][0]
    refused = client.get(
        "/v1/entities/user:alice/profile", headers={"authorization": f"Bearer {beta_key}"}
    )
    assert refused.status_code == 401
    kept = client.get(
        "/v1/entities/user:alice/profile", headers={"authorization": f"Bearer {default_key}"}
    )
    assert kept.status_code == 200 and kept.json()["name"] == "default"
    assert [r.tenant for r in apikeys.list_keys(acmi.store)] == ["default"]
    with pytest.raises(apikeys.KeyRevoked):
        apikeys.register(acmi.store, beta_key, tenant="beta", scope="write", name="b", now_ms=2)


def test_a_register_stopped_after_the_record_is_indexed_by_the_next(acmi: Acmi) -> None:
    plaintext = "acmi_configured_value_for_beta_0001"
    digest = apikeys.key_hash(plaintext)
    first = apikeys.register(
        acmi.store, plaintext, tenant="beta", scope="admin", name="cfg", now_ms=1
    )
    acmi.store.execute(("HDEL", apikeys.INDEX_KEY, first.id))  # the stop: no index entry
    assert apikeys.list_keys(acmi.store) == []
    assert apikeys.lookup(acmi.store, plaintext) == first  # the key works in the gap
    again = apikeys.register(
        acmi.store, plaintext, tenant="beta", scope="read", name="other", now_ms=2
    )
    assert again == first  # the record as minted, its scope kept
    assert apikeys.list_keys(acmi.store) == [first]
    entry = acmi.store.execute(("HGET", apikeys.INDEX_KEY, first.id))
    assert isinstance(entry, bytes) and digest.encode() in entry


def test_a_revoke_stopped_after_its_first_step_is_finished_by_its_retry(acmi: Acmi) -> None:
    plaintext, record = apikeys.mint(acmi.store, tenant="beta", scope="read", name="r", now_ms=1)
    digest = apikeys.key_hash(plaintext)
    acmi.store.execute(("SADD", apikeys.REVOKED_KEY, digest))  # the stop after step one
    assert apikeys.lookup(acmi.store, plaintext) is None  # refused from the first step on
    with pytest.raises(apikeys.KeyRevoked):  # never registered again, even in the gap
        apikeys.register(acmi.store, plaintext, tenant="beta", scope="read", name="r", now_ms=2)
    assert apikeys.list_keys(acmi.store) == [record]  # still listed: the retry finds it
    assert apikeys.revoke(acmi.store, record.id) == record
    assert apikeys.lookup(acmi.store, plaintext) is None
    assert apikeys.list_keys(acmi.store) == []
