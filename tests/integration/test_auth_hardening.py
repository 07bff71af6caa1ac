"""Auth hardening through the HTTP app and the Lambda kit: source configs fail closed and
reach warm processes within the cache time, push tokens are checked against the config,
signature headers never cause a 500, signed timestamps bound replays, and the public
sample key is never an admin key of a real store."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from acmi_core import Acmi, Settings
from acmi_core.auth import apikeys
from acmi_core.auth.authenticator import Authenticator
from acmi_core.base.errors import AcmiValidationError
from acmi_core.ingest import config as sources
from acmi_core.store.base import Store
from acmi_core.store.memory import MemoryStore
from acmi_core.store.redis import RedisStore
from acmi_core.store.upstash import UpstashStore
from acmi_core.testing.redis_server import RedisServer
from functions.runtime import http_handler
from tests.kit import EXAMPLE_KEY, TEST_DBS, Api, FakeLambdaContext, assert_error, load_event

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")

DB = TEST_DBS["auth_hardening"]  # this module's own database (tests/kit.py TEST_DBS)
SECRET = "s" * 32
OTHER_SECRET = "t" * 32


class Clock:
    def __init__(self) -> None:
        self.now = 5000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def api() -> Api:
    return Api(Acmi(MemoryStore(), Settings(auth_cache_s=0)))


def signature(secret: str, message: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


BODY = b'{"message":"signed","entity":"deal:1"}'


# --- malformed signature headers (item 6) ---------------------------------------------------


@pytest.mark.parametrize(
    "header",
    [
        "sha256=" + "é" * 64,
        "sha256=" + "\u00ff" * 64,
        "sha256=" + "ab" * 16,
        "sha256=" + "g" * 64,
    ],
)
def test_a_malformed_signature_header_is_a_400_not_a_500(api: Api, header: str) -> None:
    sources.put_config(api.acmi.store, api.acmi.keys, "n8n-signed", hmac_secret=SECRET)
    headers: dict[str, Any] = {**api.auth(), "X-Acmi-Signature": header.encode("utf-8")}
    response = api.client.post("/v1/ingest/n8n-signed", content=BODY, headers=headers)
    body = assert_error(response, 400, "X-Acmi-Signature")
    assert body["rule"] == "format"
    assert api.acmi.timeline.size("deal:1") == 0


# --- signed timestamps (item 12c) -----------------------------------------------------------


def test_a_signed_timestamp_within_five_minutes_is_accepted_and_a_stale_one_is_not(
    api: Api,
) -> None:
    sources.put_config(api.acmi.store, api.acmi.keys, "n8n-signed", hmac_secret=SECRET)
    path = "/v1/ingest/n8n-signed"
    now = int(time.time())

    def signed(ts: int, body: bytes = BODY) -> dict[str, str]:
        return {
            **api.auth(),
            "X-Acmi-Timestamp": str(ts),
            "X-Acmi-Signature": signature(SECRET, f"{ts}.".encode() + body),
        }

    stale = api.client.post(path, content=BODY, headers=signed(now - 301))
    error = assert_error(stale, 401, "X-Acmi-Timestamp")
    assert error["rule"] == "window"
    assert "300" in error["message"]
    assert_error(api.client.post(path, content=BODY, headers=signed(now + 600)), 401)
    assert api.acmi.timeline.size("deal:1") == 0
    # a body-only signature does not pass once a timestamp is sent
    body_only = {
        **api.auth(),
        "X-Acmi-Timestamp": str(now),
        "X-Acmi-Signature": signature(SECRET, BODY),
    }
    assert_error(api.client.post(path, content=BODY, headers=body_only), 401, "X-Acmi-Signature")
    assert api.client.post(path, content=BODY, headers=signed(now)).status_code == 201
    # and without the header the signature covers the body, as before
    other = b'{"message":"unsigned time","entity":"deal:1"}'
    legacy = {**api.auth(), "X-Acmi-Signature": signature(SECRET, other)}
    assert api.client.post(path, content=other, headers=legacy).status_code == 201
    assert api.acmi.timeline.size("deal:1") == 2
    bad = {
        **api.auth(),
        "X-Acmi-Timestamp": "yesterday",
        "X-Acmi-Signature": signature(SECRET, BODY),
    }
    assert (
        assert_error(api.client.post(path, content=BODY, headers=bad), 400, "X-Acmi-Timestamp")[
            "rule"
        ]
        == "format"
    )


# --- source configs fail closed (item 4) ----------------------------------------------------

CORRUPT_CONFIGS = [
    b'{"source": "n8n-signed", "kind": "n8n", "hmac_secret": "' + SECRET.encode() + b'"',
    b'{"source": "n8n-signed", "kind": "n8n", "hmac_secret": "'
    + SECRET.encode()
    + b'", "written_by": "another tool"}',
    b'{"source": "n8n-signed", "kind": "n8n", "hmac_secret": ["' + SECRET.encode() + b'"]}',
    b'["' + SECRET.encode() + b'"]',
    b"\xff\xfe not even text " + SECRET.encode(),
]


@pytest.mark.parametrize(
    "raw", CORRUPT_CONFIGS, ids=["truncated", "extra", "type", "array", "bytes"]
)
def test_an_unreadable_source_config_fails_closed(
    api: Api, raw: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    api.acmi.store.execute(("SET", "acmi:_source:default:n8n-signed", raw))
    before = api.dbsize()
    with caplog.at_level(logging.ERROR, logger="acmi.auth"):
        response = api.client.post("/v1/ingest/n8n-signed", content=BODY, headers=api.auth())
    body = assert_error(response, 503)
    assert body["error"] == "source_config_unreadable"
    assert "n8n-signed" in body["message"]
    assert SECRET not in response.text and "written_by" not in response.text
    assert int(response.headers["retry-after"]) >= 1
    assert api.dbsize() == before  # nothing stored
    records = [r for r in caplog.records if r.name == "acmi.auth"]
    assert records, "the unreadable config is logged"
    logged = " ".join(r.getMessage() + json.dumps(r.__dict__, default=str) for r in records)
    assert "n8n-signed" in logged and "default" in logged
    assert SECRET not in logged


def test_another_redis_type_at_the_config_key_fails_closed(api: Api) -> None:
    api.acmi.store.execute(("SADD", "acmi:_source:default:n8n-signed", SECRET))
    response = api.client.post("/v1/ingest/n8n-signed", content=BODY, headers=api.auth())
    assert assert_error(response, 503)["error"] == "source_config_unreadable"
    assert SECRET not in response.text
    assert api.acmi.timeline.size("deal:1") == 0


def test_an_unreadable_config_also_stops_push_tokens(api: Api) -> None:
    acme = api.acmi.for_tenant("acme")
    _, token = sources.put_config(acme.store, acme.keys, "make", new_push_token=True)
    assert token
    api.acmi.store.execute(("SET", "acmi:_source:acme:make", b"{oops"))
    response = api.client.post(f"/v1/ingest/make?token={token}", content=b'{"entity":"deal:2"}')
    assert_error(response, 503)
    assert token not in response.text
    assert acme.timeline.size("deal:2") == 0


def test_a_changed_config_reaches_a_warm_process_within_the_cache_time() -> None:
    clock = Clock()
    acmi = Acmi(MemoryStore(), Settings(auth_cache_s=30))
    api = Api(acmi)
    api.ctx.auth = Authenticator(acmi.store, acmi.settings, clock=clock)
    path = "/v1/ingest/n8n-signed"
    sources.put_config(acmi.store, acmi.keys, "n8n-signed", hmac_secret=SECRET)

    def post(secret: str, n: int) -> int:
        body = json.dumps({"message": f"m{n}", "entity": "deal:1"}).encode()
        headers = {**api.auth(), "X-Acmi-Signature": signature(secret, body)}
        status: int = api.client.post(path, content=body, headers=headers).status_code
        return status

    assert post(SECRET, 1) == 201  # the config is now cached
    sources.put_config(acmi.store, acmi.keys, "n8n-signed", hmac_secret=OTHER_SECRET)
    clock.now += 29
    assert post(SECRET, 2) == 201  # within ACMI_AUTH_CACHE_S the warm process keeps it
    clock.now += 2
    assert post(SECRET, 3) == 401  # past it, the rotated secret applies
    assert post(OTHER_SECRET, 4) == 201
    # a removed secret stops being required within the cache time too
    sources.put_config(acmi.store, acmi.keys, "n8n-signed", remove_hmac_secret=True)
    assert post("wrong-secret-wrong-secret", 5) == 401
    clock.now += 31
    assert post("wrong-secret-wrong-secret", 6) == 201


def test_a_source_with_no_config_appears_within_the_miss_time() -> None:
    clock = Clock()
    acmi = Acmi(MemoryStore(), Settings(auth_cache_s=30))
    api = Api(acmi)
    api.ctx.auth = Authenticator(acmi.store, acmi.settings, clock=clock)
    body = b'{"message":"x","entity":"deal:3"}'
    assert (
        api.client.post("/v1/ingest/n8n-new", content=body, headers=api.auth()).status_code == 201
    )
    sources.put_config(acmi.store, acmi.keys, "n8n-new", hmac_secret=SECRET)
    clock.now += 2.5  # misses are trusted for 2 s at most
    assert_error(
        api.client.post("/v1/ingest/n8n-new", content=body, headers=api.auth()),
        401,
        "X-Acmi-Signature",
    )


# --- push tokens are checked against the config ---------------------------------------------


def test_a_rotated_or_removed_push_token_stops_working(api: Api) -> None:
    acme = api.acmi.for_tenant("acme")
    _, first = sources.put_config(acme.store, acme.keys, "make", new_push_token=True)
    _, second = sources.put_config(acme.store, acme.keys, "make", new_push_token=True)
    assert first and second and first != second
    body = b'{"message":"from make","entity":"deal:9"}'
    assert_error(api.client.post(f"/v1/ingest/make?token={first}", content=body), 401, "token")
    assert api.client.post(f"/v1/ingest/make?token={second}", content=body).status_code == 201
    sources.put_config(acme.store, acme.keys, "make", remove_push_token=True)
    assert_error(api.client.post(f"/v1/ingest/make?token={second}", content=body), 401, "token")
    assert acme.timeline.size("deal:9") == 1


def test_a_new_push_token_works_at_once_in_a_warm_process() -> None:
    """The config is cached, but a token whose record exists and the cached config does
    not name makes the process read the config again before refusing."""
    clock = Clock()
    acmi = Acmi(MemoryStore(), Settings(auth_cache_s=30))
    api = Api(acmi)
    api.ctx.auth = Authenticator(acmi.store, acmi.settings, clock=clock)
    acme = acmi.for_tenant("acme")
    _, first = sources.put_config(acme.store, acme.keys, "make", new_push_token=True)
    body = b'{"message":"from make","entity":"deal:9"}'
    assert api.client.post(f"/v1/ingest/make?token={first}", content=body).status_code == 201
    _, second = sources.put_config(acme.store, acme.keys, "make", new_push_token=True)
    other = b'{"message":"again","entity":"deal:9"}'
    assert api.client.post(f"/v1/ingest/make?token={second}", content=other).status_code == 201
    assert_error(api.client.post(f"/v1/ingest/make?token={first}", content=body), 401, "token")
    assert acme.timeline.size("deal:9") == 2


def test_a_push_token_the_config_does_not_name_is_refused(api: Api) -> None:
    """A token record left behind (by a crash between writes, or an older version)
    authenticates nothing unless the source's config names its hash."""
    acme = api.acmi.for_tenant("acme")
    sources.put_config(acme.store, acme.keys, "make", entity="deal:9")
    stray = "acmipt_" + "x" * 43
    digest = hashlib.sha256(stray.encode()).hexdigest()
    api.acmi.store.execute(
        ("SET", f"acmi:_pushtoken:{digest}", json.dumps({"tenant": "acme", "source": "make"}))
    )
    response = api.client.post(f"/v1/ingest/make?token={stray}", content=b'{"message":"m"}')
    assert_error(response, 401, "token")
    assert acme.timeline.size("deal:9") == 0


# --- the public sample key and ACMI_API_KEY (item 5) ----------------------------------------


@pytest.fixture
def redis_store(redis_server: RedisServer) -> Iterator[RedisStore]:
    url = redis_server.url_for(DB)
    with redis.Redis.from_url(url) as client:
        client.flushdb()
    store = RedisStore.from_url(url)
    yield store
    store.close()


@pytest.fixture(params=["redis", "upstash"])
def real_store(request: pytest.FixtureRequest) -> Store:
    if request.param == "redis":
        store: Store = request.getfixturevalue("redis_store")
    else:
        store = request.getfixturevalue("upstash_store")
        assert isinstance(store, UpstashStore)
    return store


def dbsize(store: Store) -> int:
    size = store.execute(("DBSIZE",))
    assert isinstance(size, int)
    return size


@pytest.mark.parametrize("key", [EXAMPLE_KEY, "acmi_local_example_my_own_key_42"])
def test_the_sample_key_is_refused_on_a_real_store(real_store: Store, key: str) -> None:
    with pytest.raises(AcmiValidationError) as caught:
        apikeys.ensure_admin_key(real_store, key, tenant="default", now_ms=0)
    assert (caught.value.field, caught.value.rule) == ("ACMI_API_KEY", "sample_key")
    assert "acmi keys create" in caught.value.message
    assert key not in caught.value.message
    assert dbsize(real_store) == 0
    assert apikeys.lookup(real_store, key) is None


def test_the_sample_key_is_an_admin_key_of_the_embedded_store() -> None:
    store = MemoryStore()
    record = apikeys.ensure_admin_key(store, EXAMPLE_KEY, tenant="default", now_ms=0)
    assert record is not None and record.scope == apikeys.Scope.ADMIN
    assert apikeys.lookup(store, EXAMPLE_KEY) == record


def test_a_revoked_configured_key_is_never_registered_again(real_store: Store) -> None:
    key = "acmi_operator_chosen_key_0123456789"
    record = apikeys.ensure_admin_key(real_store, key, tenant="default", now_ms=1)
    assert record is not None
    assert apikeys.lookup(real_store, key) is not None
    apikeys.revoke(real_store, record.id)
    assert apikeys.ensure_admin_key(real_store, key, tenant="default", now_ms=2) is None
    assert apikeys.lookup(real_store, key) is None
    assert apikeys.list_keys(real_store) == []
    with pytest.raises(AcmiValidationError) as caught:
        apikeys.register(real_store, key, tenant="default", scope="admin", name="again", now_ms=3)
    assert (caught.value.field, caught.value.rule) == ("api_key", "revoked")
    assert apikeys.lookup(real_store, key) is None
    # the marker holds the hash only
    members = real_store.execute(("SMEMBERS", apikeys.REVOKED_KEY))
    assert members == [apikeys.key_hash(key).encode()]


def entities_get(key: str) -> dict[str, Any]:
    event = load_event("entities.get")
    event["headers"]["authorization"] = f"Bearer {key}"
    return event


def test_the_lambda_kit_refuses_the_sample_key_on_a_real_store(
    redis_server: RedisServer, redis_store: RedisStore
) -> None:
    handler = http_handler("entities")
    handler.configure(env={"ACMI_REDIS_URL": redis_server.url_for(DB), "ACMI_API_KEY": EXAMPLE_KEY})
    with pytest.raises(AcmiValidationError) as caught:
        handler(entities_get(EXAMPLE_KEY), FakeLambdaContext("acmi-entities"))
    assert caught.value.rule == "sample_key"
    assert dbsize(redis_store) == 0


def test_the_lambda_kit_never_recreates_a_revoked_key_on_a_cold_start(
    redis_server: RedisServer, redis_store: RedisStore
) -> None:
    key = "acmi_operator_chosen_key_0123456789"
    env = {"ACMI_REDIS_URL": redis_server.url_for(DB), "ACMI_API_KEY": key}
    handler = http_handler("entities")
    handler.configure(env=env)
    context = FakeLambdaContext("acmi-entities")
    assert handler(entities_get(key), context)["statusCode"] == 200
    record = apikeys.lookup(redis_store, key)
    assert record is not None
    apikeys.revoke(redis_store, record.id)
    handler.configure(env=env)  # the next cold start, same environment
    assert handler(entities_get(key), context)["statusCode"] == 401
    assert apikeys.lookup(redis_store, key) is None


def test_the_lambda_kit_registers_the_sample_key_on_the_embedded_store() -> None:
    handler = http_handler("entities")
    handler.configure(env={"ACMI_API_KEY": EXAMPLE_KEY})
    response = handler(entities_get(EXAMPLE_KEY), FakeLambdaContext("acmi-entities"))
    assert response["statusCode"] == 200, response["body"]
