"""``AcmiStore`` against LangGraph's own ``InMemoryStore``: one script of operations run
on both, every answer compared (values, keys, namespaces, and order where LangGraph
defines it), on the embedded store, a real redis-server and the Upstash REST double.

The script puts each namespace's items in (namespace, key) order: LangGraph leaves a
search's order to the store (``InMemoryStore`` answers in insertion order, ``AcmiStore``
in namespace then key order), so with that insertion order both orders are one and
``limit``/``offset`` pages are comparable item for item. Each tenant is fresh (a random
name), so the shared Redis database holds nothing else of it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchItem,
    SearchOp,
    TTLConfig,
)
from langgraph.store.memory import InMemoryStore

from acmi_core import Settings, create_acmi
from acmi_core.base.errors import AcmiValidationError, PayloadTooLarge, SecretDetected
from acmi_core.client import Acmi
from acmi_core.entities import items as items_module
from acmi_core.entities.items import namespace_id, namespace_of
from acmi_core.integrations.langgraph import AcmiStore
from acmi_core.store import open_store
from acmi_core.store.upstash import UpstashStore
from acmi_core.testing.redis_cluster import RedisCluster
from acmi_core.testing.upstash_double import UpstashDouble
from tests.kit import FakeClock

NAMESPACES: list[tuple[str, ...]] = sorted(
    [
        ("docs",),
        ("docs", "a b"),
        ("docs", "é-ü"),
        ("docs", "reports", "2024"),
        ("users", "alice_1"),
        ("users", "alice_1", "prefs"),
        ("users", "bob"),
        ("users", "bob", "prefs"),
        ("users-x", "carol"),
    ]
)


def _fresh(acmi: Acmi) -> Acmi:
    return acmi.for_tenant(f"lg-{uuid.uuid4().hex[:12]}")


def _plain(result: Any) -> Any:
    """An answer as comparable data: items without their times (each store stamps its
    own clock), namespaces as tuples."""
    if isinstance(result, SearchItem):
        return ("search", result.namespace, result.key, result.value)
    if isinstance(result, Item):
        return ("item", result.namespace, result.key, result.value)
    if isinstance(result, list):
        return [_plain(r) for r in result]
    return result


Step = Callable[[BaseStore], Any]


def _script() -> list[tuple[str, Step]]:
    steps: list[tuple[str, Step]] = []
    for n, ns in enumerate(NAMESPACES):
        for k in ("a", "b", "c"):
            value = {
                "text": f"{k} note {n} of {' '.join(ns)}",
                "n": n,
                "kind": "odd" if n % 2 else "even",
                "meta": {"k": k, "tags": [k, "x"]},
            }
            steps.append((f"put {ns} {k}", lambda s, ns=ns, k=k, v=value: s.put(ns, k, v)))
    steps += [
        ("overwrite", lambda s: s.put(("users", "bob"), "b", {"text": "bob likes tea", "n": 99})),
        ("delete", lambda s: s.delete(("docs", "a b"), "c")),
        ("delete absent", lambda s: s.delete(("docs",), "zz")),
        ("get", lambda s: s.get(("users", "bob"), "b")),
        ("get deleted", lambda s: s.get(("docs", "a b"), "c")),
        ("get absent", lambda s: s.get(("users", "bob"), "nope")),
        ("get unicode", lambda s: s.get(("docs", "é-ü"), "a")),
        ("search all", lambda s: s.search((), limit=100)),
        ("search prefix", lambda s: s.search(("users",), limit=100)),
        ("search exact ns", lambda s: s.search(("users", "bob"), limit=100)),
        ("search no match", lambda s: s.search(("nobody",))),
        ("search page", lambda s: s.search(("users",), limit=4, offset=3)),
        ("search default limit", lambda s: s.search(())),
        ("search past the end", lambda s: s.search(("docs",), limit=5, offset=100)),
        ("search limit 0", lambda s: s.search(("docs",), limit=0)),
        ("filter eq", lambda s: s.search((), filter={"kind": "odd"}, limit=100)),
        ("filter two", lambda s: s.search((), filter={"kind": "even", "n": 4}, limit=100)),
        ("filter nested", lambda s: s.search((), filter={"meta": {"k": "b"}}, limit=100)),
        ("filter list", lambda s: s.search((), filter={"meta": {"tags": ["c", "x"]}}, limit=9)),
        ("filter $gt", lambda s: s.search((), filter={"n": {"$gt": 5}}, limit=100)),
        ("filter $lte", lambda s: s.search((), filter={"n": {"$lte": 2}}, limit=100)),
        ("filter $ne", lambda s: s.search(("users",), filter={"kind": {"$ne": "odd"}}, limit=50)),
        ("filter range", lambda s: s.search((), filter={"n": {"$gte": 3, "$lt": 6}}, limit=50)),
        ("filter page", lambda s: s.search((), filter={"kind": "odd"}, limit=3, offset=2)),
        ("filter missing field", lambda s: s.search((), filter={"absent": 1}, limit=100)),
        ("list all", lambda s: s.list_namespaces()),
        ("list prefix", lambda s: s.list_namespaces(prefix=("users",))),
        ("list prefix deep", lambda s: s.list_namespaces(prefix=("users", "bob"))),
        ("list prefix none", lambda s: s.list_namespaces(prefix=("user",))),
        ("list suffix", lambda s: s.list_namespaces(suffix=("prefs",))),
        ("list prefix+suffix", lambda s: s.list_namespaces(prefix=("users",), suffix=("bob",))),
        ("list wildcard", lambda s: s.list_namespaces(prefix=("users", "*", "prefs"))),
        ("list suffix wildcard", lambda s: s.list_namespaces(suffix=("*", "prefs"))),
        ("list depth 1", lambda s: s.list_namespaces(max_depth=1)),
        ("list depth 2", lambda s: s.list_namespaces(max_depth=2)),
        ("list depth+prefix", lambda s: s.list_namespaces(prefix=("users",), max_depth=2)),
        ("list page", lambda s: s.list_namespaces(limit=3, offset=2)),
        ("list depth page", lambda s: s.list_namespaces(max_depth=2, limit=2, offset=1)),
        (
            "batch",
            lambda s: s.batch(
                [
                    GetOp(("users", "bob"), "a"),
                    PutOp(("users", "bob"), "a", {"text": "changed", "n": 1}),
                    GetOp(("users", "bob"), "a"),  # reads see the state before the batch
                    SearchOp(("users", "bob"), filter={"n": 1}, limit=10),
                    ListNamespacesOp(
                        match_conditions=(MatchCondition("prefix", ("docs",)),), max_depth=2
                    ),
                    PutOp(("users", "bob"), "c", None),
                    PutOp(("users", "bob"), "c", {"text": "the last write wins", "n": 7}),
                ]
            ),
        ),
        ("after the batch", lambda s: s.search(("users", "bob"), limit=10)),
        (
            "query (results fit the limit)",
            lambda s: sorted(
                (r.namespace, r.key) for r in s.search(("users", "bob"), query="tea", limit=50)
            ),
        ),
    ]
    return steps


def test_the_same_script_answers_the_same_as_langgraphs_in_memory_store(acmi: Acmi) -> None:
    reference = InMemoryStore()
    ours = AcmiStore(_fresh(acmi))
    for name, step in _script():
        expected, got = _plain(step(reference)), _plain(step(ours))
        assert got == expected, name


@pytest.mark.slow
def test_the_same_script_on_a_redis_cluster_in_the_cluster_layout(
    redis_cluster3: RedisCluster,
) -> None:
    """Every key of a tenant's store carries its hash tag: each put's script (the items,
    the namespace and expiry indexes) runs on one node of a 3-master cluster."""
    settings = Settings(key_layout="cluster", redis_url=redis_cluster3.url, redis_cluster=True)
    with create_acmi(open_store(settings), settings) as client:
        reference, ours = InMemoryStore(), AcmiStore(_fresh(client))
        for name, step in _script():
            assert _plain(step(ours)) == _plain(step(reference)), name
        other = AcmiStore(_fresh(client))
        assert other.list_namespaces() == [] and other.search(()) == []


def test_gets_and_searches_answer_langgraph_items(acmi: Acmi) -> None:
    store = AcmiStore(_fresh(acmi))
    store.put(("a",), "k", {"x": 1})
    item = store.get(("a",), "k")
    assert isinstance(item, Item)
    assert item.created_at.tzinfo is not None and item.created_at == item.updated_at
    (found,) = store.search(("a",))
    assert isinstance(found, SearchItem) and found.score is None
    assert found.dict()["namespace"] == ["a"]


def test_an_overwrite_keeps_created_at_and_moves_updated_at(acmi: Acmi) -> None:
    clock = FakeClock()
    tenant = _fresh(acmi)
    store = AcmiStore(Acmi(tenant.store, tenant.settings, tenant=tenant.tenant, clock=clock))
    store.put(("a",), "k", {"v": 1})
    clock.now += 5_000
    store.put(("a",), "k", {"v": 2})
    item = store.get(("a",), "k")
    assert item is not None and item.value == {"v": 2}
    assert (item.updated_at - item.created_at).total_seconds() == 5


def test_a_query_ranks_by_the_share_of_its_words_found(acmi: Acmi) -> None:
    store = AcmiStore(_fresh(acmi))
    store.put(("m",), "1", {"text": "the user likes green tea"})
    store.put(("m",), "2", {"text": "coffee in the morning"})
    store.put(("m",), "3", {"text": "green tea and coffee", "note": {"when": "morning"}})
    ranked = store.search(("m",), query="green tea morning")
    assert [(r.key, r.score) for r in ranked] == [("3", 1.0), ("1", 2 / 3), ("2", 1 / 3)]
    assert [r.key for r in store.search(("m",), query="green tea morning", limit=1)] == ["3"]
    assert [
        r.key for r in store.search(("m",), query="tea", filter={"text": "coffee in the morning"})
    ] == ["2"]


def test_a_namespace_leaves_the_listing_with_its_last_item(acmi: Acmi) -> None:
    """Where the two stores differ on purpose: InMemoryStore keeps listing a namespace
    once touched (a get alone adds it); AcmiStore lists the namespaces holding an item."""
    store = AcmiStore(_fresh(acmi))
    store.put(("a", "b"), "k", {"v": 1})
    store.get(("c",), "k")
    assert store.list_namespaces() == [("a", "b")]
    store.delete(("a", "b"), "k")
    assert store.list_namespaces() == []
    assert store.search(()) == []
    reference = InMemoryStore()
    reference.put(("a", "b"), "k", {"v": 1})
    reference.delete(("a", "b"), "k")
    assert reference.list_namespaces() == [("a", "b")]


def test_the_namespace_encoding_is_a_valid_reversible_entity_id() -> None:
    for ns in [*NAMESPACES, ("x_y", "a.b".replace(".", "-")), ("1", "日本", "a/b:c")]:
        entity = namespace_id(ns)
        assert str(entity).startswith("ns:")
        assert namespace_of(type(entity).parse(str(entity))) == ns
    assert str(namespace_id(("users", "alice_1"))) == "ns:users.alice_5F1"


def test_bad_input_is_refused_naming_the_field_and_nothing_is_stored(acmi: Acmi) -> None:
    tenant = _fresh(acmi)
    store = AcmiStore(tenant)
    cases: list[tuple[Callable[[], Any], str, str]] = [
        (lambda: store.batch([PutOp(("a.b",), "k", {"v": 1})]), "", ""),
        (lambda: store.batch([PutOp((), "k", {"v": 1})]), "namespace", "namespace_empty"),
        (lambda: store.put(("a",), "k" * 1025, {"v": 1}), "key", "max_key_bytes"),
        (lambda: store.put(("a",), "k", {"v": "x" * 70_000}), "value", "max_object_bytes"),
        (lambda: store.put(("a",), "k", {"v": float("nan")}), "value", "finite"),
        (lambda: store.put(("a",), "k", {"v": 1}, ttl=-1), "ttl", "ttl_positive"),
        (lambda: store.put(("a",) * 40, "k", {"v": 1}), "namespace", "max_labels"),
        (lambda: store.put(("é" * 60,), "k", {"v": 1}), "namespace", "max_length"),
        (lambda: store.search(("a",), limit=-1), "limit", "non_negative"),
    ]
    for call, field, rule in cases:
        with pytest.raises(ValueError) as caught:
            call()
        if field:
            assert isinstance(caught.value, AcmiValidationError), caught.value
            assert (caught.value.field, caught.value.rule) == (field, rule)
    # one bad write in a batch: none of the batch is stored
    with pytest.raises(AcmiValidationError):
        store.batch([PutOp(("a",), "ok", {"v": 1}), PutOp(("a",), "k" * 2000, {"v": 1})])
    assert store.list_namespaces() == [] and store.get(("a",), "ok") is None
    assert isinstance(PayloadTooLarge("value", "r", "m"), AcmiValidationError)


def test_a_secret_in_a_value_is_refused_or_redacted_as_other_writes(acmi: Acmi) -> None:
    tenant = _fresh(acmi)
    store = AcmiStore(tenant)
    secret = "AKIA" + "IOSFODNN7" + "EXAMPLE"
    if tenant.secret_policy == "reject":
        with pytest.raises(SecretDetected) as caught:
            store.put(("a",), "k", {"creds": f"aws key {secret}"})
        assert caught.value.field is not None and caught.value.field.startswith("value")
        assert store.get(("a",), "k") is None
    with pytest.raises(SecretDetected):
        store.put(("a",), secret, {"v": 1})  # a secret in a key: refused under every policy


def test_two_tenants_never_see_each_others_namespaces(acmi: Acmi) -> None:
    one, two = AcmiStore(_fresh(acmi)), AcmiStore(_fresh(acmi))
    one.put(("users", "alice"), "k", {"who": "one"})
    two.put(("users", "alice"), "k", {"who": "two"})
    two.put(("only", "two"), "k", {"who": "two"})
    assert one.list_namespaces() == [("users", "alice")]
    assert two.list_namespaces() == [("only", "two"), ("users", "alice")]
    assert [i.value for i in one.search(())] == [{"who": "one"}]
    got = one.get(("users", "alice"), "k")
    assert got is not None and got.value == {"who": "one"}
    assert one.get(("only", "two"), "k") is None
    one.delete(("users", "alice"), "k")
    still = two.get(("users", "alice"), "k")
    assert still is not None and still.value == {"who": "two"}


def test_abatch_answers_what_batch_does(acmi: Acmi) -> None:
    store = AcmiStore(_fresh(acmi))

    async def run() -> list[Any]:
        await store.aput(("a",), "k", {"v": 1})
        await store.aput(("a", "b"), "k", {"v": 2})
        return await store.abatch(
            [
                GetOp(("a",), "k"),
                SearchOp(("a",), limit=10),
                ListNamespacesOp(max_depth=1),
            ]
        )

    got, found, namespaces = asyncio.run(run())
    assert isinstance(got, Item) and got.value == {"v": 1}
    assert [(i.namespace, i.value) for i in found] == [(("a",), {"v": 1}), (("a", "b"), {"v": 2})]
    assert namespaces == [("a",)]
    assert asyncio.run(store.aget(("a", "b"), "k")) is not None


def test_a_read_past_its_bound_is_refused_not_cut(
    acmi: Acmi, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = AcmiStore(_fresh(acmi))
    for k in range(6):
        store.put(("a", str(k // 2)), str(k), {"v": k})  # 3 namespaces of 2
    monkeypatch.setattr(items_module, "MAX_SCAN_ITEMS", 5)
    monkeypatch.setattr(items_module, "SCAN_PAGE", 2)
    with pytest.raises(PayloadTooLarge) as caught:
        store.search(("a",), query="v")
    assert caught.value.rule == "max_scan_items"
    # a namespace is read whole (to order its keys); a search stops at the namespace
    # that completes its page: 2 namespaces, 4 items, under the bound
    assert [i.key for i in store.search(("a",), limit=3)] == ["0", "1", "2"]


# --- TTL ----------------------------------------------------------------------------------


def _timed(acmi: Acmi, **config: Any) -> tuple[AcmiStore, FakeClock]:
    clock = FakeClock()
    tenant = _fresh(acmi)
    client = Acmi(tenant.store, tenant.settings, tenant=tenant.tenant, clock=clock)
    return AcmiStore(client, ttl=TTLConfig(**config) if config else None), clock


def test_an_item_with_a_ttl_is_never_read_once_expired(acmi: Acmi) -> None:
    store, clock = _timed(acmi)
    store.put(("a",), "brief", {"v": 1}, ttl=1)  # minutes
    store.put(("a",), "kept", {"v": 2})
    clock.now += 59_000
    assert store.get(("a",), "brief", refresh_ttl=False) is not None
    clock.now += 2_000
    assert store.get(("a",), "brief") is None
    assert [i.key for i in store.search(("a",))] == ["kept"]
    # an overwrite without a TTL keeps it for good
    store.put(("a",), "brief", {"v": 3}, ttl=1)
    store.put(("a",), "brief", {"v": 4})
    clock.now += 10 * 60_000
    got = store.get(("a",), "brief")
    assert got is not None and got.value == {"v": 4}


def test_a_read_refreshes_the_ttl_unless_told_not_to(acmi: Acmi) -> None:
    store, clock = _timed(acmi)
    store.put(("a",), "get", {"v": 1}, ttl=1)
    store.put(("a",), "search", {"v": 2}, ttl=1)
    store.put(("b",), "cold", {"v": 3}, ttl=1)
    clock.now += 50_000
    assert store.get(("a",), "get") is not None  # refresh_ttl defaults to True
    assert len(store.search(("a",), filter={"v": 2})) == 1
    assert store.get(("b",), "cold", refresh_ttl=False) is not None
    clock.now += 50_000  # 100 s after the puts, 50 s after the reads
    assert store.get(("a",), "get") is not None
    assert [i.key for i in store.search(("a",), refresh_ttl=False)] == ["get", "search"]
    assert store.get(("b",), "cold") is None


def test_the_stores_ttl_config_gives_the_default_and_the_refresh(acmi: Acmi) -> None:
    store, clock = _timed(acmi, default_ttl=1, refresh_on_read=False)
    store.put(("a",), "k", {"v": 1})  # the default TTL
    store.put(("a",), "long", {"v": 2}, ttl=10)
    store.put(("a",), "ever", {"v": 3}, ttl=None)
    clock.now += 50_000
    assert store.get(("a",), "k") is not None  # read, not refreshed
    clock.now += 20_000
    assert store.get(("a",), "k") is None
    assert [i.key for i in store.search(("a",))] == ["ever", "long"]


def test_a_refresh_never_undoes_a_delete_or_a_put_without_ttl(acmi: Acmi) -> None:
    store, clock = _timed(acmi)
    store.put(("a",), "k", {"v": 1}, ttl=1)
    read = store.acmi.items.get(("a",), "k")
    assert read is not None
    store.put(("a",), "k", {"v": 2})  # lands between the read and its refresh
    store.acmi.items.refresh([read])
    clock.now += 10 * 60_000
    got = store.get(("a",), "k")
    assert got is not None and got.value == {"v": 2}
    store.delete(("a",), "k")
    store.acmi.items.refresh([read])
    expiry = store.acmi.store.execute(("ZCARD", store.acmi.keys.store_expiry()))
    assert expiry == 0


def test_a_sweeper_is_refused_rather_than_ignored(acmi: Acmi) -> None:
    with pytest.raises(AcmiValidationError) as caught:
        AcmiStore(_fresh(acmi), ttl={"sweep_interval_minutes": 5})
    assert caught.value.field == "ttl.sweep_interval_minutes"


def test_a_large_batch_is_split_by_bytes_and_every_item_is_stored(acmi: Acmi) -> None:
    store = AcmiStore(_fresh(acmi))
    big = "x" * 60_000
    store.batch([PutOp(("a",), f"k{n:02d}", {"text": big}) for n in range(20)])  # 1.2 MB
    found = store.search(("a",), limit=100)
    assert [i.key for i in found] == [f"k{n:02d}" for n in range(20)]
    assert all(i.value == {"text": big} for i in found)


def test_doctor_finds_nothing_and_acmi_delete_drops_the_namespace(acmi: Acmi) -> None:
    """A namespace is an entity like any: in its category's list (doctor's check), and
    ``acmi delete ns:<id>`` removes its items and its entry in the namespace index."""
    from acmi_core.ops.doctor import Doctor

    tenant = _fresh(acmi)
    store = AcmiStore(tenant)
    store.put(("users", "x_1"), "k", {"v": 1}, ttl=5)
    store.put(("users",), "k", {"v": 2})
    mine = [f for f in Doctor(tenant).findings() if f.tenant == tenant.tenant]
    assert mine == []
    assert tenant.list("ns") == ["ns:users", "ns:users.x_5F1"]
    tenant.delete("ns:users.x_5F1")
    assert store.list_namespaces() == [("users",)]
    assert store.get(("users", "x_1"), "k") is None
    tenant.delete("ns:not_ZZ_a_namespace")  # another writer's id of that category: no error


def test_a_store_write_whose_reply_is_lost_is_retried_to_the_same_result(
    upstash_store: UpstashStore, upstash_double: UpstashDouble
) -> None:
    """The Upstash transport sends a write again when its reply is lost: the retry of a
    put finds the item its first run stored and keeps its created_at (HPUT), the indexes
    hold it once; a lost delete's retry deletes nothing more."""
    clock = FakeClock()
    client = Acmi(upstash_store, Settings(), tenant=f"lg-{uuid.uuid4().hex[:12]}", clock=clock)
    store = AcmiStore(client)
    store.put(("a",), "k", {"v": 1})
    first = store.get(("a",), "k")
    clock.now += 1_000
    upstash_double.reset_counts()
    upstash_double.lose_reply_next(1)
    store.put(("a",), "k", {"v": 2}, ttl=5)
    assert upstash_double.requests == 2  # the write, and its retry
    got = store.get(("a",), "k")
    assert first is not None and got is not None and got.value == {"v": 2}
    assert got.created_at == first.created_at
    assert client.store.execute(("ZCARD", client.keys.store_expiry())) == 1
    upstash_double.lose_reply_next(1)
    store.delete(("a",), "k")
    assert store.get(("a",), "k") is None and store.list_namespaces() == []


def test_sweep_ttl_deletes_what_expired_and_keeps_what_a_put_renewed(acmi: Acmi) -> None:
    store, clock = _timed(acmi)
    for n in range(5):
        store.put(("a", str(n)), "k", {"v": n}, ttl=1)
    store.put(("a", "0"), "kept", {"v": "no ttl"})
    store.put(("b",), "late", {"v": 1}, ttl=10)
    assert store.sweep_ttl() == 0  # nothing expired yet
    clock.now += 2 * 60_000
    assert store.sweep_ttl(max_items=2) == 2
    assert store.sweep_ttl() == 3
    assert store.list_namespaces() == [("a", "0"), ("b",)]  # emptied ones left the index
    assert store.acmi.store.execute(("ZCARD", store.acmi.keys.store_expiry())) == 1
    # an expired item overwritten before the sweep is the new item: kept (a put landing
    # between the sweep's read and its run: test_apply_index_ops's HDUE test)
    clock.now += 20 * 60_000
    store.put(("b",), "late", {"v": 3}, ttl=1)
    assert asyncio.run(store.asweep_ttl()) == 0
    got = store.get(("b",), "late")
    assert got is not None and got.value == {"v": 3}


def test_a_key_with_nul_is_refused(acmi: Acmi) -> None:
    store = AcmiStore(_fresh(acmi))
    with pytest.raises(AcmiValidationError) as caught:
        store.put(("a",), "k\x00x", {"v": 1})
    assert (caught.value.field, caught.value.rule) == ("key", "key_chars")


def test_under_the_redact_policy_a_secret_is_stored_redacted(acmi: Acmi) -> None:
    tenant = _fresh(acmi)
    settings = tenant.settings.replace(secret_policy="redact")
    store = AcmiStore(Acmi(tenant.store, settings, tenant=tenant.tenant))
    secret = "AKIA" + "IOSFODNN7" + "EXAMPLE"
    store.put(("a",), "k", {"note": f"aws key {secret}", "ok": "kept"})
    got = store.get(("a",), "k")
    assert got is not None and got.value["ok"] == "kept"
    assert secret not in str(got.value) and "[REDACTED:" in got.value["note"]
