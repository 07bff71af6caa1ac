"""Buckets of the cluster layout (ACMI_CLUSTER_BUCKETS): how an entity's bucket is chosen,
the key names at B = 1 (unchanged) and B > 1, what stays in bucket 0, and the setting's
checks. No store: key names and settings only (the cluster tests run them on a cluster)."""

from __future__ import annotations

import zlib

import pytest

from acmi_core import Settings
from acmi_core.base import settings as settings_module
from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.keys import (
    CHANGED,
    MAX_BUCKETS,
    PINNED_CATEGORIES,
    Keys,
    Layout,
    bucket_of,
    key_tag,
    marked_tenant,
)
from acmi_core.base.model import EntityId
from acmi_core.store import open_store

USER = EntityId.parse("user:alice")


def test_bucket_is_crc32_of_the_entity_id_mod_b() -> None:
    # fixed values: the bucket must never change across processes or versions
    assert zlib.crc32(b"user:alice") == 2641746422
    assert bucket_of("user:alice", 3) == 2641746422 % 3 == 2
    assert bucket_of(USER, 12) == 2641746422 % 12 == 2
    assert bucket_of("user:alice", 1) == 0
    counts = [0, 0, 0]
    for n in range(3000):
        counts[bucket_of(f"user:u{n}", 3)] += 1
    assert all(900 < c < 1100 for c in counts), counts  # spread evenly


def test_pinned_categories_stay_in_bucket_zero() -> None:
    assert {"agent", "work", "thread", "topic", "workflow", "ns"} == PINNED_CATEGORIES
    for category in PINNED_CATEGORIES:
        assert all(bucket_of(f"{category}:n{n}", 12) == 0 for n in range(50))


def test_b1_keeps_the_names_of_one_slot_per_tenant() -> None:
    one = Keys("acme", "default", Layout.CLUSTER)
    also = Keys("acme", "default", Layout.CLUSTER, 1)
    assert one.profile(USER) == also.profile(USER) == "acmi:{acme}:user:alice:profile"
    assert one.changed() == "acmi:{acme}:_changed"
    assert one.index("user") == "acmi:{acme}:user:list"
    assert one.of(USER) is one
    assert [k.tag for k in one.every_bucket()] == ["{acme}"]


def test_b3_tags_entities_by_bucket_and_pins_coordination() -> None:
    keys = Keys("acme", "default", Layout.CLUSTER, 3)
    view = keys.of(USER)
    assert view.bucket == 2 and view.tag == "{acme:2}"
    assert keys.profile(USER) == "acmi:{acme:2}:user:alice:profile"
    assert view.changed() == "acmi:{acme:2}:_changed"
    assert view.tenants_with(CHANGED) == "acmi:{acme:2}:_tenants:changed"
    assert view.index("user") == "acmi:{acme:2}:user:list"
    assert view.memory_index() == "acmi:{acme:2}:_memory"
    assert view.request("r") == "acmi:{acme:2}:_req:r"
    # bucket 0 is the tenant's own tag: coordination keys are those of B = 1
    assert keys.changed() == "acmi:{acme}:_changed"
    for key in (
        view.lock("db"),
        view.leases(),
        view.mentions("bot"),
        view.activity(),
        view.wake_due(),
        view.hitl_items(),
        view.hitl_queue(USER, "open"),
        view.work_owners(),
        view.lessons(),
        view.coordination_timeline(),
        view.profile(EntityId.parse("agent:bot")),
    ):
        assert key_tag(key) == "{acme}", key
    assert [k.tag for k in keys.every_bucket()] == ["{acme}", "{acme:1}", "{acme:2}"]
    assert keys.at(2) is keys.of(USER).at(2)  # one view per bucket
    assert marked_tenant(view.tenants_with(CHANGED)) == "acme"


def test_reference_layout_has_one_bucket() -> None:
    keys = Keys("acme", "default", Layout.REFERENCE, 3)
    assert keys.buckets == 1
    assert keys.profile(USER) == "acmi:tenant:acme:user:alice:profile"


def test_buckets_are_bounded() -> None:
    assert settings_module._BUCKETS_MAX == MAX_BUCKETS
    with pytest.raises(ValueError):
        Keys("acme", "default", Layout.CLUSTER, MAX_BUCKETS + 1)


def test_setting_per_tenant_overrides() -> None:
    settings = Settings(key_layout="cluster", cluster_buckets="default=1,acme=12")
    assert settings.buckets_for("acme") == 12
    assert settings.buckets_for("default") == 1
    assert settings.buckets_for("other") == 1
    assert Settings(key_layout="cluster", cluster_buckets="8").buckets_for("x") == 8
    assert Settings(key_layout="cluster", cluster_buckets="2,beta=5").buckets_for("beta") == 5
    assert Settings(cluster_buckets="1").buckets_for("acme") == 1  # reference: no buckets


@pytest.mark.parametrize("value", ["0", "257", "x", "3,3", "acme=2,acme=3", "Bad=2", "2.5", ""])
def test_setting_refusals_name_the_variable(value: str) -> None:
    if value == "":  # unset or empty keeps the default
        assert Settings.from_env({"ACMI_CLUSTER_BUCKETS": value}).cluster_buckets == "1"
        return
    with pytest.raises(AcmiValidationError) as caught:
        Settings.from_env({"ACMI_CLUSTER_BUCKETS": value})
    assert caught.value.field == "ACMI_CLUSTER_BUCKETS"
    assert "ACMI_CLUSTER_BUCKETS" in str(caught.value)


def test_buckets_need_the_cluster_layout() -> None:
    with pytest.raises(AcmiValidationError) as caught:
        open_store(Settings(cluster_buckets="3"))
    assert caught.value.field == "ACMI_CLUSTER_BUCKETS"
    assert "ACMI_KEY_LAYOUT=cluster" in str(caught.value)


def test_a_key_finds_its_bucket() -> None:
    keys = Keys("acme", "default", Layout.CLUSTER, 3)
    assert keys.beside(keys.timeline(USER)) is keys.of(USER)
    assert keys.beside(keys.leases()) is keys
    assert keys.at(2).moved(keys.internal("idem", "k")) == "acmi:{acme:2}:_idem:k"
    assert keys.at(0).moved(keys.internal("idem", "k")) == "acmi:{acme}:_idem:k"
    assert keys.at(2).moved("acmi:{acme:1}:_idem:k") == "acmi:{acme:1}:_idem:k"


def test_a_view_built_directly_keeps_coordination_in_bucket_zero() -> None:
    view = Keys("acme", "default", Layout.CLUSTER, 3, bucket=2)
    assert view.changed() == "acmi:{acme:2}:_changed"
    assert view.leases() == "acmi:{acme}:_leases"
    assert view.at(0).at(2) is view and view.at(0).bucket == 0
