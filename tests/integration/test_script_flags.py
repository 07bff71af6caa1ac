"""Script flags (Redis 7 shebangs): no-writes on the read-only scripts, sent as
EVALSHA_RO/EVAL_RO; allow-key-locking where a store opts in and the server takes it.
Each store learns what its server takes from the server's own refusals."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from acmi_core import Settings, create_acmi
from acmi_core.base.errors import StoreCommandError
from acmi_core.store import scripts
from acmi_core.store.base import Script, ScriptDialect
from acmi_core.store.memory import MemoryStore
from acmi_core.store.redis import RedisStore, RespStore
from acmi_core.store.upstash import UpstashStore
from acmi_core.testing.redis_server import RedisServer
from tests.kit import DB

NOTE = {"kind": "note", "correlationId": "c"}


@pytest.fixture
def resp(redis_server: RedisServer) -> Iterator[RespStore]:
    store = RedisStore.from_url(redis_server.url_for(DB["backends"]))
    assert isinstance(store, RespStore)
    store.execute(("SCRIPT", "FLUSH"))
    yield store
    store.close()


def test_the_read_only_scripts_are_flagged_and_the_writes_are_not() -> None:
    flagged = {p.name for p in scripts.PROTOCOLS if p.script.read_only}
    assert flagged == {"page", "merge"}
    dialect = ScriptDialect(shebang=True)
    assert dialect.render(scripts.PAGE.script)[0].startswith("#!lua flags=no-writes\n")
    assert dialect.render(scripts.APPLY.script)[0].startswith("#!lua\n")


def test_redis_7_runs_reads_as_eval_ro_and_refuses_a_write_from_them(resp: RespStore) -> None:
    acmi = create_acmi(resp, Settings())
    acmi.timeline.append("user:f", {**NOTE, "source": "user:f", "summary": "x"})
    assert [e.summary for e in acmi.timeline.page("user:f").events] == ["x"]
    dialect = resp.script_dialect
    assert (dialect.shebang, dialect.read_only, dialect.key_locking) == (True, True, False)
    page_sha = dialect.render(scripts.PAGE.script)[1]
    assert resp.execute(("SCRIPT", "EXISTS", page_sha)) == [1]  # its no-writes form ran
    # the flag is the server's to enforce: a no-writes script that writes is refused
    sneaky = Script("return redis.call('SET', KEYS[1], 'x')", read_only=True)
    with pytest.raises(StoreCommandError, match="not allowed from read-only scripts"):
        resp.eval(sneaky, ["user:f:sneaky"], [])
    assert resp.execute(("EXISTS", "user:f:sneaky")) == 0


def test_oss_redis_refuses_allow_key_locking_and_the_scripts_still_run(
    resp: RespStore,
) -> None:
    resp.script_dialect = ScriptDialect(key_locking=None)  # opt in: try the flag
    acmi = create_acmi(resp, Settings())
    acmi.signals.set("user:k", "a", 1)  # a write script
    acmi.timeline.page("user:k")  # a read-only one
    assert resp.script_dialect.key_locking is False  # "Unexpected flag in script shebang"
    assert resp.script_dialect.shebang is True
    assert acmi.signals.all("user:k") == {"a": 1}


def test_the_upstash_store_tries_key_locking_and_learns_the_refusal(
    upstash_store: UpstashStore,
) -> None:
    assert upstash_store.script_dialect.key_locking is None  # not assumed either way
    acmi = create_acmi(upstash_store, Settings())
    acmi.profile.set("user:u", {"name": "u"})
    acmi.timeline.cat(["user:u"])  # merge.lua: no-writes, EVALSHA_RO
    assert upstash_store.script_dialect.key_locking is False  # the double runs OSS 7.0
    assert upstash_store.script_dialect.read_only is True
    assert (acmi.profile.get("user:u") or {})["name"] == "u"


def test_the_embedded_engine_gets_plain_lua() -> None:
    store = MemoryStore()  # fakeredis: no shebang, no EVAL_RO
    acmi = create_acmi(store, Settings())
    acmi.timeline.append("user:m", {**NOTE, "source": "user:m", "summary": "m"})
    assert [e.summary for e in acmi.timeline.page("user:m").events] == ["m"]
    assert store.script_dialect.shebang is False
    assert store.script_dialect.read_only is not True  # no flags: EVAL_RO is not tried
