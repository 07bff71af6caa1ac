"""`acmi sources list` on a real 3-master Redis Cluster in the cluster layout: the named
sources of each tenant (one at B = 1, one at B = 3) are found by each primary's SCAN in
turn (the store refuses a plain SCAN), each tenant sees only its own, and no secret is
shown."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest

from acmi_core import Acmi
from acmi_core.base.settings import Settings
from acmi_core.cli.app import main
from acmi_core.ingest import config as source_configs
from acmi_core.store import open_store
from acmi_core.store.base import Store
from acmi_core.testing.redis_cluster import RedisCluster

SECRET = "s" * 40  # an HMAC secret: listed as ***, never in clear


@pytest.fixture
def tenants() -> tuple[str, str]:
    """Two tenants of this test only (the cluster is shared): B = 1 and B = 3."""
    token = uuid.uuid4().hex[:8]
    return f"src1-{token}", f"src3-{token}"


@pytest.fixture
def settings(redis_cluster3: RedisCluster, tenants: tuple[str, str]) -> Settings:
    return Settings(
        key_layout="cluster",
        redis_cluster=True,
        redis_url=redis_cluster3.url,
        cluster_buckets=f"1,{tenants[1]}=3",
    )


@pytest.fixture
def store(settings: Settings) -> Iterator[Store]:
    opened = open_store(settings)
    yield opened
    opened.close()


def _named(listed: source_configs.SourceList) -> dict[str, source_configs.ShownSource]:
    return {s["source"]: s for s in listed if s.get("configured")}


def test_each_tenant_lists_its_own_named_sources_on_a_cluster(
    store: Store, settings: Settings, tenants: tuple[str, str]
) -> None:
    mine = {tenants[0]: ["n8n-billing", "generic"], tenants[1]: ["n8n-crm", "github-ops"]}
    for tenant, names in mine.items():
        acmi = Acmi(store, settings, tenant=tenant)
        assert acmi.keys.buckets == (3 if tenant == tenants[1] else 1)
        for name in names:
            source_configs.put_config(store, acmi.keys, name, hmac_secret=SECRET)
    for tenant, names in mine.items():
        acmi = Acmi(store, settings, tenant=tenant)
        listed = source_configs.list_configs(store, acmi.keys, configured=True)
        assert sorted(_named(listed)) == sorted(names), (tenant, listed)
        assert all(s["hmac_secret"] == "***" for s in listed)
        every = source_configs.list_configs(store, acmi.keys)  # the senders too
        assert set(names) <= {s["source"] for s in every}
        assert len(every) > len(listed)


def test_the_command_lists_a_tenants_sources_on_a_cluster(
    store: Store,
    settings: Settings,
    tenants: tuple[str, str],
    redis_cluster3: RedisCluster,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for tenant, name in zip(tenants, ("n8n-one", "n8n-three"), strict=True):
        source_configs.put_config(
            store, Acmi(store, settings, tenant=tenant).keys, name, hmac_secret=SECRET
        )
    env = {
        "ACMI_KEY_LAYOUT": "cluster",
        "ACMI_REDIS_CLUSTER": "1",
        "ACMI_REDIS_URL": redis_cluster3.url,
        "ACMI_CLUSTER_BUCKETS": settings.cluster_buckets,
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    for tenant, name in zip(tenants, ("n8n-one", "n8n-three"), strict=True):
        code = main(["--tenant", tenant, "--json", "sources", "list", "--configured"])
        out = capsys.readouterr().out
        assert code in (0, None), out
        assert [s["source"] for s in json.loads(out)] == [name]
        assert SECRET not in out
