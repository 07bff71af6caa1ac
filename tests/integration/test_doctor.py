"""`acmi doctor` and `acmi migrate` on a keyspace shaped as the reference TypeScript ACMI
writes it (SDK entities without an index entry, CLI legacy events, MCP server v2.0 keys,
ids outside our grammar, an array profile), on a real redis-server and the Upstash double.

Redis databases: 8 (redis backend), 9 (the CLI); the Upstash double flushes its own."""

from __future__ import annotations

import io
import json
import math
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from acmi_core import Acmi, AcmiValidationError, Settings, create_acmi
from acmi_core.ops.doctor import Doctor, Kind, doctor_report
from acmi_core.ops.keyspace import member_state
from acmi_core.ops.migrate import Action, Migrate, migrate_report
from acmi_core.store.redis import RedisStore
from acmi_core.store.upstash import UpstashStore
from acmi_core.testing.redis_server import RedisServer
from acmi_core.testing.upstash_double import UpstashDouble
from tests.kit import DB, TEST_DBS

REDIS_DB = TEST_DBS["doctor.redis"]  # this module's own database (tests/kit.py TEST_DBS)
CLI_DB = TEST_DBS["doctor.cli"]  # this module's own database (tests/kit.py TEST_DBS)
# The reference's default tenant_id (SPEC §12.1), configured as ours: MCP keys of
# tenant madez then map to the unprefixed layout.
SETTINGS = Settings(default_tenant="madez")
EVENT = {"source": "agent:ours", "kind": "note", "correlationId": "c-1", "summary": "ours"}
TS = 1_700_000_000_000


def _event(summary: str, **extra: Any) -> bytes:
    data = {"ts": TS, "source": "user:x", "kind": "note", "correlationId": "m-1"}
    return json.dumps({**data, "summary": summary, **extra}).encode()


@pytest.fixture(params=("redis", "upstash"))
def env(
    request: pytest.FixtureRequest, redis_server: RedisServer
) -> Iterator[tuple[Acmi, redis.Redis]]:
    """An ACMI client (default tenant madez) and a raw client on the same database."""
    if request.param == "redis":
        redis_server.flush(REDIS_DB)
        url = redis_server.url_for(REDIS_DB)
        store = RedisStore.from_url(url)
        acmi = create_acmi(store, SETTINGS)
        with redis.Redis.from_url(url) as raw:
            yield acmi, raw
        store.close()
    else:
        upstash: UpstashStore = request.getfixturevalue("upstash_store")
        with redis.Redis.from_url(redis_server.url_for(DB["upstash_double"])) as raw:
            yield create_acmi(upstash, SETTINGS), raw


def seed_reference(raw: redis.Redis) -> None:
    """What a reference deployment leaves behind."""
    # SDK: entity keys, no acmi:user:list entry (its SDK never writes one)
    raw.set("acmi:user:sdk1:profile", '{"name":"Ann","actor_type":"human","tenant_id":"madez"}')
    raw.set("acmi:user:sdk1:signals", '{"mood":"ok"}')
    raw.zadd("acmi:user:sdk1:timeline", {_event("sdk event"): TS})
    # CLI: legacy events (no kind/correlationId), plus members nothing can read
    raw.sadd("acmi:agent:list", "cli1")
    raw.zadd(
        "acmi:agent:cli1:timeline",
        {
            b'{"ts":1700000000000,"source":"agent:cli1","summary":"legacy 1"}': TS,
            b'{"ts":1700000000001,"source":"agent:cli1","summary":"legacy 2"}': TS + 1,
            _event("x" * 501, source="agent:cli1"): TS + 2,  # summary out of range
            b"not json": TS + 3,
            b"\xff\xfe": TS + 4,
            b"[1,2]": TS + 5,
            b'{"note":"no event at all"}': TS + 6,
            _event("fine", source="agent:cli1"): TS + 7,
        },
    )
    # ids the reference CLI accepts and we do not: reported, never touched
    raw.set("acmi:user:John Smith:profile", '{"name":"John"}')
    raw.set("acmi:User:x:profile", '{"name":"X"}')
    # non-object profile, wrong Redis type
    raw.sadd("acmi:user:list", "arr", "h")
    raw.set("acmi:user:arr:profile", "[1,2]")
    raw.hset("acmi:user:h:signals", "a", "1")
    # MCP server v2.0 layout: tenant madez (ours: unprefixed) and tenant other
    raw.set("acmi:madez:user:x:profile", '{"name":"Ex","tenant_id":"madez"}')
    raw.zadd("acmi:madez:user:x:timeline", {_event("mcp event"): TS})
    raw.set("acmi:other:user:z:profile", '{"name":"Zed"}')
    # MCP key whose SPEC destination already holds something else
    raw.set("acmi:madez:user:c:profile", '{"a":1}')
    raw.set("acmi:user:c:profile", '{"a":2}')
    raw.sadd("acmi:user:list", "c")


def seed_ours(acmi: Acmi) -> None:
    acmi.profile.set("user:ours", {"name": "Ours"})
    acmi.signals.set("user:ours", "k", 1)
    acmi.timeline.append("agent:ours", EVENT)


def snapshot(raw: redis.Redis) -> dict[bytes, Any]:
    """Every key's type, value and TTL (not DUMP: a read may rehash a set, which
    reorders its DUMP without changing it)."""
    readers = {
        b"string": raw.get,
        b"set": lambda k: sorted(raw.smembers(k)),
        b"zset": lambda k: raw.zrange(k, 0, -1, withscores=True),
        b"hash": raw.hgetall,
    }
    state = {}
    for key in raw.scan_iter(count=1000):
        kind = raw.type(key)
        state[key] = (kind, readers[kind](key), raw.pttl(key))
    return state


EXPECTED = {
    (Kind.INDEX_MISSING, "acmi:user:list", "user:sdk1"),
    (Kind.TIMELINE_MEMBERS, "acmi:agent:cli1:timeline", "agent:cli1"),
    (Kind.BAD_ID, "acmi:user:John Smith:profile", None),
    (Kind.BAD_ID, "acmi:User:x:profile", None),
    (Kind.NOT_OBJECT, "acmi:user:arr:profile", "user:arr"),
    (Kind.WRONG_TYPE, "acmi:user:h:signals", "user:h"),
    (Kind.MCP_LAYOUT, "acmi:madez:user:x:profile", "user:x"),
    (Kind.MCP_LAYOUT, "acmi:madez:user:x:timeline", "user:x"),
    (Kind.MCP_LAYOUT, "acmi:other:user:z:profile", "user:z"),
    (Kind.MCP_LAYOUT, "acmi:madez:user:c:profile", "user:c"),
}


def test_doctor_finds_each_reference_shape(env: tuple[Acmi, redis.Redis]) -> None:
    acmi, raw = env
    seed_ours(acmi)
    seed_reference(raw)
    findings = list(Doctor(acmi).findings())
    assert {(f.kind, f.key, f.entity) for f in findings} == EXPECTED
    by_key = {f.key: f for f in findings}
    assert by_key["acmi:agent:cli1:timeline"].counts == {"legacy": 3, "invalid": 1, "unreadable": 3}
    assert by_key["acmi:madez:user:x:profile"].destination == "acmi:user:x:profile"
    assert by_key["acmi:other:user:z:profile"].destination == "acmi:tenant:other:user:z:profile"
    assert by_key["acmi:madez:user:c:profile"].state == "conflict"
    assert by_key["acmi:madez:user:x:profile"].state == "to_copy"
    assert "array" in by_key["acmi:user:arr:profile"].detail
    assert "hash" in by_key["acmi:user:h:signals"].detail


def test_doctor_is_clean_on_our_own_data(env: tuple[Acmi, redis.Redis]) -> None:
    acmi, raw = env
    seed_ours(acmi)
    before = snapshot(raw)
    out, err = io.StringIO(), io.StringIO()
    assert doctor_report(acmi, out=out, err=err) == 0
    assert "no problems" in out.getvalue()
    assert "# scanned" in err.getvalue()
    assert snapshot(raw) == before


def test_doctor_category_filter(env: tuple[Acmi, redis.Redis]) -> None:
    acmi, raw = env
    seed_reference(raw)
    kinds = {(f.kind, f.key) for f in Doctor(acmi, category="agent").findings()}
    assert kinds == {(Kind.TIMELINE_MEMBERS, "acmi:agent:cli1:timeline")}


def test_migrate_repairs_and_a_second_run_is_a_no_op(env: tuple[Acmi, redis.Redis]) -> None:
    acmi, raw = env
    seed_ours(acmi)
    seed_reference(raw)
    assert "user:sdk1" not in acmi.list("user")

    steps = {(s.action, s.key) for s in Migrate(acmi).run()}
    assert steps == {
        (Action.INDEX_ADD, "acmi:user:list"),
        (Action.COPY, "acmi:user:x:profile"),
        (Action.COPY, "acmi:user:x:timeline"),
        (Action.COPY, "acmi:tenant:other:user:z:profile"),
        (Action.CONFLICT, "acmi:user:c:profile"),
    }
    # the index gap and the MCP entity are readable through the normal API now
    assert {"user:sdk1", "user:x"} <= set(acmi.list("user"))
    assert acmi.profile.get("user:x") == {"name": "Ex", "tenant_id": "madez"}
    assert [e.summary for e in acmi.timeline.read("user:x")] == ["mcp event"]
    other = acmi.for_tenant("other")
    assert other.profile.get("user:z") == {"name": "Zed"}
    assert other.list("user") == ["user:z"]
    # the conflict is left alone, the MCP keys too, what is outside the grammar as well
    assert raw.get("acmi:user:c:profile") == b'{"a":2}'
    assert raw.get("acmi:madez:user:x:profile") == b'{"name":"Ex","tenant_id":"madez"}'
    assert raw.get("acmi:user:John Smith:profile") == b'{"name":"John"}'

    after_first = snapshot(raw)
    second = [(s.action, s.key) for s in Migrate(acmi).run()]
    assert second == [(Action.CONFLICT, "acmi:user:c:profile")]
    assert snapshot(raw) == after_first

    # doctor no longer reports what migrate repaired
    remaining = {(f.kind, f.key) for f in Doctor(acmi).findings()}
    assert remaining == {
        (kind, key)
        for kind, key, _ in EXPECTED
        if kind is not Kind.INDEX_MISSING
        and key not in ("acmi:madez:user:x:profile", "acmi:madez:user:x:timeline")
        and key != "acmi:other:user:z:profile"
    }


def test_migrate_dry_run_writes_nothing(env: tuple[Acmi, redis.Redis]) -> None:
    acmi, raw = env
    seed_ours(acmi)
    seed_reference(raw)
    raw.set("acmi:user:sdk2:profile", '{"name":"NoTenant"}')
    before = snapshot(raw)
    out = io.StringIO()
    code = migrate_report(
        acmi, out=out, err=io.StringIO(), dry_run=True, tenant_id="madez", as_json=True
    )
    assert snapshot(raw) == before
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    planned = {(d["action"], d["key"]) for d in lines[:-1]}
    assert ("copy", "acmi:user:x:profile") in planned
    assert ("tenant_id_set", "acmi:user:sdk2:profile") in planned
    assert lines[-1]["summary"]["dry_run"] is True
    assert code == 1  # the conflict remains

    # the real run does exactly what the dry run printed
    done = {(s.action.value, s.key) for s in Migrate(acmi, tenant_id="madez").run()}
    assert done == planned


def test_migrate_sets_tenant_id_once_through_the_write_path(
    env: tuple[Acmi, redis.Redis],
) -> None:
    acmi, raw = env
    raw.set("acmi:user:sdk2:profile", '{"name":"NoTenant","n":12345678901234567}')
    raw.set("acmi:user:sdk3:profile", '{"name":"Kept","tenant_id":"acme"}')
    raw.set("acmi:madez:user:m:profile", '{"name":"Mcp"}')
    raw.sadd("acmi:user:list", "sdk2", "sdk3")
    steps = {(s.action, s.key) for s in Migrate(acmi, tenant_id="madez").run()}
    assert steps == {
        (Action.TENANT_ID_SET, "acmi:user:sdk2:profile"),
        (Action.COPY, "acmi:user:m:profile"),
    }
    # spliced as text: the big integer survives exactly, the existing tenant_id is kept
    assert raw.get("acmi:user:sdk2:profile") == (
        b'{"name":"NoTenant","n":12345678901234567,"tenant_id":"madez"}'
    )
    assert raw.get("acmi:user:sdk3:profile") == b'{"name":"Kept","tenant_id":"acme"}'
    assert acmi.profile.get("user:m") == {"name": "Mcp", "tenant_id": "madez"}
    after = snapshot(raw)
    assert list(Migrate(acmi, tenant_id="madez").run()) == []
    assert snapshot(raw) == after


def test_member_states() -> None:
    assert member_state(_event("ok")) == "ok"
    assert member_state(b'{"ts":1,"source":"a","summary":"s"}') == "legacy"
    assert member_state(b'{"ts":1,"source":"a","summary":"s","speaker_type":"robot"}') == "legacy"
    assert member_state(b'{"source":"a"}') == "invalid"
    assert member_state(b"NaN") == "unreadable"
    assert member_state(b"\xc3\x28") == "unreadable"
    assert member_state(b'"text"') == "unreadable"


def test_round_trips_per_thousand_keys(
    upstash_store: UpstashStore, upstash_double: UpstashDouble, redis_server: RedisServer
) -> None:
    """SCAN steps of 1,000 keys, each with one pipeline of per-key reads and timeline
    members in pipelines of up to 5,000: a handful of round trips per 1,000 keys."""
    acmi = create_acmi(upstash_store, SETTINGS)
    entities = 1000
    with redis.Redis.from_url(redis_server.url_for(DB["upstash_double"])) as raw:
        pipe = raw.pipeline(transaction=False)
        for n in range(entities):
            pipe.set(f"acmi:user:u{n}:profile", '{"name":"n"}')
            pipe.set(f"acmi:user:u{n}:signals", "{}")
            pipe.zadd(f"acmi:user:u{n}:timeline", {_event(f"e{n}"): TS, _event(f"f{n}"): TS})
        pipe.execute()
        keys = raw.dbsize()
    upstash_double.reset_counts()
    findings = list(Doctor(acmi).findings())
    requests = upstash_double.requests
    assert len(findings) == entities  # each one missing from acmi:user:list
    assert all(f.kind is Kind.INDEX_MISSING for f in findings)
    per_thousand = requests / (keys / 1000)
    # SCAN (COUNT is a hint: a step returns about 1,000 keys) + the key pipeline + one
    # member pipeline per step; a per-key read would be ~2,000 per 1,000 keys
    assert per_thousand <= 4, (requests, keys)
    assert requests >= 2 * math.ceil(keys / 1000)


def test_cli_exit_codes_and_json(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from acmi_core.cli import main

    redis_server.flush(CLI_DB)
    url = redis_server.url_for(CLI_DB)
    for name in ("UPSTASH_REDIS_REST_URL", "UPSTASH_REDIS_REST_TOKEN", "ACMI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ACMI_REDIS_URL", url)
    monkeypatch.setenv("ACMI_DEFAULT_TENANT", "madez")
    with redis.Redis.from_url(url) as raw:
        raw.set("acmi:user:sdk1:profile", '{"name":"Ann"}')
        raw.set("acmi:madez:user:x:profile", '{"name":"Ex"}')

    assert main(["doctor", "--json"]) == 1  # problems found
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {d["kind"] for d in lines[:-1]} == {"index_missing", "mcp_layout"}
    assert lines[-1]["summary"]["problems"] == 2

    assert main(["migrate"]) == 0
    out = capsys.readouterr().out
    assert "index_add" in out and "copy" in out
    assert main(["doctor"]) == 0
    assert "no problems" in capsys.readouterr().out
    assert main(["list", "user"]) == 0
    assert json.loads(capsys.readouterr().out) == ["user:sdk1", "user:x"]


def test_an_unindexed_entity_is_reported_once_across_scan_steps(
    env: tuple[Acmi, redis.Redis], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its keys come in different SCAN steps; doctor keeps no memory of what it reported
    (bounded memory), so each entity is reported with its first existing slot key."""
    acmi, raw = env
    monkeypatch.setattr("acmi_core.ops.keyspace.SCAN_COUNT", 2)
    for n in range(20):
        raw.set(f"acmi:user:s{n}:profile", "{}")
        raw.set(f"acmi:user:s{n}:signals", "{}")
        raw.zadd(f"acmi:user:s{n}:timeline", {_event("e"): TS})
        raw.set(f"acmi:user:t{n}:signals", "{}")  # no profile: reported with its signals
        raw.zadd(f"acmi:user:t{n}:timeline", {_event("e"): TS})
    doctor = Doctor(acmi)
    findings = list(doctor.findings())
    assert doctor.scanned >= 100
    assert sorted(f.entity or "" for f in findings) == sorted(
        [f"user:s{n}" for n in range(20)] + [f"user:t{n}" for n in range(20)]
    )


def test_bad_options_name_the_flag(env: tuple[Acmi, redis.Redis]) -> None:
    acmi, _ = env
    with pytest.raises(AcmiValidationError) as bad_tenant:
        Migrate(acmi, tenant_id="Not A Tenant")
    assert (bad_tenant.value.field, bad_tenant.value.rule) == ("--tenant-id", "tenant_format")
    with pytest.raises(AcmiValidationError) as bad_category:
        Doctor(acmi, category="User")
    assert (bad_category.value.field, bad_category.value.rule) == ("--category", "category_format")
