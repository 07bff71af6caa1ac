"""The `acmi` command's hardening, in process against a real Redis: `sources set` merges
with the stored config (removing needs an explicit flag), an unreadable config is never
silently replaced, `serve` refuses the public sample key on a real store, never re-creates
a revoked ACMI_API_KEY, and its access log shows no push token or key."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import redis
import uvicorn

from acmi_core.auth import apikeys
from acmi_core.base.keys import Keys
from acmi_core.cli import main
from acmi_core.ingest import config as sources
from acmi_core.store.redis import RedisStore
from acmi_core.testing.redis_server import RedisServer
from tests.kit import EXAMPLE_KEY, ROOT, TEST_DBS

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")

DB = TEST_DBS["cli_hardening"]  # this module's own database (tests/kit.py TEST_DBS)
SECRET = "a-very-long-hmac-secret-value"


@pytest.fixture
def store(redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[RedisStore]:
    url = redis_server.url_for(DB)
    with redis.Redis.from_url(url) as client:
        client.flushdb()
    for name in ("UPSTASH_REDIS_REST_URL", "UPSTASH_REDIS_REST_TOKEN", "ACMI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ACMI_REDIS_URL", url)
    monkeypatch.setenv("SRC_SECRET", SECRET)
    opened = RedisStore.from_url(url)
    yield opened
    opened.close()


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, json.loads(out) if out.strip() else None, err


def stored(store: RedisStore, source: str) -> dict[str, Any]:
    config = sources.get_config(store, Keys("default", "default"), source)
    assert config is not None
    return config.model_dump(exclude_none=True)


def token_record(store: RedisStore, token: str) -> Any:
    return sources.resolve_push_token(store, token)


# --- sources set merges (item 4) ------------------------------------------------------------


def test_sources_set_changes_only_what_it_names(
    store: RedisStore, capsys: pytest.CaptureFixture[str]
) -> None:
    code, shown, _ = run(
        capsys, "sources", "set", "generic-crm", "--hmac-secret-env", "SRC_SECRET",
        "--entity", "customer:default", "--mapping", '{"entity": "customer.id"}',
        "--oidc-audience", "https://acmi.example/v1/ingest/generic-crm",
        "--oidc-email", "push@acme.iam.gserviceaccount.com",
    )  # fmt: skip
    assert code == 0
    assert shown["hmac_secret"] == "***"
    code, shown, err = run(capsys, "sources", "set", "generic-crm", "--push-token")
    assert code == 0, err
    token = shown["push_token"]
    assert token.startswith("acmipt_")
    assert SECRET not in json.dumps(shown) + err
    after = stored(store, "generic-crm")
    assert after["hmac_secret"] == SECRET
    assert after["entity"] == "customer:default"
    assert after["mapping"] == {"entity": "customer.id"}
    assert after["oidc_audience"] == "https://acmi.example/v1/ingest/generic-crm"
    assert after["oidc_email"] == "push@acme.iam.gserviceaccount.com"
    assert token_record(store, token) == ("default", "generic-crm")
    # another field later: the push token (and everything else) stays
    assert run(capsys, "sources", "set", "generic-crm", "--entity", "customer:other")[0] == 0
    again = stored(store, "generic-crm")
    assert again == {**after, "entity": "customer:other"}
    assert token_record(store, token) == ("default", "generic-crm")


@pytest.mark.parametrize(
    ("flag", "gone"),
    [
        ("--remove-hmac-secret", {"hmac_secret"}),
        ("--remove-entity", {"entity"}),
        ("--remove-mapping", {"mapping"}),
        ("--remove-oidc", {"oidc_audience", "oidc_email"}),
        ("--remove-push-token", {"push_token_hash"}),
    ],
)
def test_sources_set_removes_only_with_an_explicit_flag(
    store: RedisStore, capsys: pytest.CaptureFixture[str], flag: str, gone: set[str]
) -> None:
    code, shown, _ = run(
        capsys, "sources", "set", "generic-crm", "--hmac-secret-env", "SRC_SECRET",
        "--entity", "customer:default", "--mapping", '{"entity": "customer.id"}',
        "--oidc-audience", "aud", "--oidc-email", "push@acme.iam.gserviceaccount.com",
        "--push-token",
    )  # fmt: skip
    assert code == 0
    token = shown["push_token"]
    before = stored(store, "generic-crm")
    code, shown, err = run(capsys, "sources", "set", "generic-crm", flag)
    assert code == 0, err
    after = stored(store, "generic-crm")
    assert after == {k: v for k, v in before.items() if k not in gone}
    assert set(shown) == set(after)
    expected = None if "push_token_hash" in gone else ("default", "generic-crm")
    assert token_record(store, token) == expected


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (("--hmac-secret-env", "SRC_SECRET", "--remove-hmac-secret"), "--remove-hmac-secret"),
        (("--push-token", "--remove-push-token"), "--remove-push-token"),
        (("--entity", "deal:1", "--remove-entity"), "--remove-entity"),
        (("--mapping", '{"entity": "id"}', "--remove-mapping"), "--remove-mapping"),
        (("--oidc-audience", "aud", "--remove-oidc"), "--remove-oidc"),
    ],
)
def test_setting_and_removing_one_thing_at_once_is_refused(
    store: RedisStore, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], named: str
) -> None:
    assert run(capsys, "sources", "set", "generic-crm", "--entity", "customer:x")[0] == 0
    before = stored(store, "generic-crm")
    code, _, err = run(capsys, "sources", "set", "generic-crm", *argv)
    assert code == 2
    assert named in err and "conflict" in err
    assert stored(store, "generic-crm") == before


def test_a_half_oidc_pair_merges_with_the_stored_half(
    store: RedisStore, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "sources", "set", "gmail", "--oidc-audience", "aud-1")
    assert code == 2
    assert "oidc" in err and "both" in err
    run(capsys, "sources", "set", "gmail", "--oidc-audience", "aud-1", "--oidc-email", "a@x.com")
    assert run(capsys, "sources", "set", "gmail", "--oidc-audience", "aud-2")[0] == 0
    assert stored(store, "gmail")["oidc_audience"] == "aud-2"
    assert stored(store, "gmail")["oidc_email"] == "a@x.com"


def test_an_unreadable_stored_config_is_replaced_only_on_request(
    store: RedisStore, capsys: pytest.CaptureFixture[str]
) -> None:
    code, shown, _ = run(capsys, "sources", "set", "make", "--push-token")
    old_token = shown["push_token"]
    raw = b'{"source": "make", "kind": "make", "hmac_secret": 42'
    store.execute(("SET", "acmi:_source:default:make", raw))
    code, _, err = run(capsys, "sources", "set", "make", "--entity", "deal:1")
    assert code == 7  # stored data another tool made unreadable
    assert "--replace" in err and "unreadable" in err
    assert store.execute(("GET", "acmi:_source:default:make")) == raw
    code, shown, err = run(capsys, "sources", "set", "make", "--replace", "--entity", "deal:1")
    assert code == 0, err
    assert stored(store, "make") == {"source": "make", "kind": "make", "entity": "deal:1"}
    assert old_token not in err


# --- acmi serve: ACMI_API_KEY policy (item 5) -----------------------------------------------


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, dict[str, Any]]]:
    """`uvicorn.run` recorded instead of serving."""
    calls: list[tuple[Any, dict[str, Any]]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: calls.append((app, kwargs)))
    return calls


def test_serve_refuses_the_sample_key_on_a_real_store(
    store: RedisStore,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    served: list[Any],
) -> None:
    monkeypatch.setenv("ACMI_API_KEY", EXAMPLE_KEY)
    code, _, err = run(capsys, "serve")
    assert code == 2
    assert "ACMI_API_KEY" in err and "sample" in err and "acmi keys create" in err
    assert served == []
    assert store.execute(("DBSIZE",)) == 0


def test_serve_never_recreates_a_revoked_acmi_api_key(
    store: RedisStore,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    served: list[Any],
) -> None:
    key = "acmi_operator_chosen_key_0123456789"
    monkeypatch.setenv("ACMI_API_KEY", key)
    assert run(capsys, "serve")[0] == 0
    record = apikeys.lookup(store, key)
    assert record is not None
    assert run(capsys, "keys", "revoke", record.id)[0] == 0
    code, _, err = run(capsys, "serve")
    assert code == 0
    assert "revoked" in err
    assert key not in err
    assert apikeys.lookup(store, key) is None
    assert len(served) == 2


def test_invoke_on_a_real_store_says_why_the_sample_event_is_refused(
    store: RedisStore, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code, response, err = run(
            capsys, "invoke", "entities", "--event", str(ROOT / "events" / "entities.get.json")
        )
    finally:
        # imported by `acmi invoke` (so its logs went where invoke sends them); back to the
        # process environment, as this test's store closes after it
        from functions.entities import handler

        handler.configure()
    assert code == 0
    assert response["statusCode"] == 401
    assert "public sample key" in err and "acmi keys create" in err
    assert apikeys.lookup(store, EXAMPLE_KEY) is None


# --- acmi serve: the access log (item 8) ----------------------------------------------------


@pytest.fixture
def restore_uvicorn_logging() -> Iterator[None]:
    names = ("uvicorn", "uvicorn.error", "uvicorn.access")
    saved = {
        name: (lg.handlers[:], lg.filters[:], lg.level, lg.propagate)
        for name in names
        for lg in [logging.getLogger(name)]
    }
    yield
    for name, (handlers, filters, level, propagate) in saved.items():
        lg = logging.getLogger(name)
        lg.handlers, lg.filters, lg.level, lg.propagate = handlers, filters, level, propagate


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_serve_access_log_shows_no_push_token_or_key(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    served: list[tuple[Any, dict[str, Any]]],
    restore_uvicorn_logging: None,
) -> None:
    for name in ("UPSTASH_REDIS_REST_URL", "UPSTASH_REDIS_REST_TOKEN", "ACMI_REDIS_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ACMI_API_KEY", "acmi_dev_admin_key_for_the_log_test_0001")
    assert run(capsys, "serve")[0] == 0
    app, kwargs = served[0]
    # the server `acmi serve` would run: its app and its logging configuration
    config = uvicorn.Config(app, log_config=kwargs["log_config"], log_level="info")
    records = Records()
    logging.getLogger("uvicorn.access").addHandler(records)
    server = uvicorn.Server(config)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    push_token = "acmipt_" + "Q" * 43
    api_key = "acmi_" + "K" * 43
    try:
        deadline = time.monotonic() + 10
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.01)
        base = f"http://127.0.0.1:{port}"
        httpx.post(f"{base}/v1/ingest/make?token={push_token}&entity=deal:1", content=b"{}")
        httpx.get(f"{base}/v1/entities/user:x?key={api_key}&events=5")
        httpx.get(f"{base}/v1/entities/{api_key}")
        # the app decodes %74oken to token: so does the mask (before: the token was logged)
        httpx.post(f"{base}/v1/ingest/make?%74oken={push_token}&entity=deal:1", content=b"{}")
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
    lines = [r.getMessage() for r in records.records]
    assert len(lines) == 4, lines
    printed = capsys.readouterr().out  # the access handler's own output
    for text in [*lines, printed]:
        assert "Q" * 20 not in text and "K" * 20 not in text
    assert "POST /v1/ingest/make?token=***&entity=deal:1" in lines[0]
    assert "events=5" in lines[1]
    assert "/v1/entities/acmi_***" in lines[2]
    assert "POST /v1/ingest/make?%74oken=***&entity=deal:1" in lines[3]
    assert "token=***" in printed


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/v1/ingest/make?token=acmipt_abc", "/v1/ingest/make?token=***"),
        (
            "/v1/ingest/make?entity=x&TOKEN=abc&map.a=b",
            "/v1/ingest/make?entity=x&TOKEN=***&map.a=b",
        ),
        ("/v1/ingest/make?access_token=abc", "/v1/ingest/make?access_token=***"),
        ("/x?next=acmi_0123456789abcdefghij", "/x?next=acmi_***"),
        ("/x?next=acmipt_0123456789abcdefghij", "/x?next=acmipt_***"),
        ("/v1/entities/user:acmi_team", "/v1/entities/user:acmi_team"),  # no key: kept
        ("/v1/namespaces/user/entities", "/v1/namespaces/user/entities"),
        # percent-encoded names and values, as the app decodes them (before: kept whole)
        ("/v1/ingest/make?%74oken=acmipt_abc", "/v1/ingest/make?%74oken=***"),
        ("/v1/ingest/make?entity=x&%54OKEN=abc", "/v1/ingest/make?entity=x&%54OKEN=***"),
        ("/v1/ingest/make?to%6Ben=abc&a=1", "/v1/ingest/make?to%6Ben=***&a=1"),
        ("/v1/ingest/make?api%5Fkey=abc", "/v1/ingest/make?api%5Fkey=***"),
        ("/x?next=%61cmipt_0123456789abcdefghij", "/x?next=acmipt_***"),
        ("/v1/entities/%61cmi_0123456789abcdefghij", "/v1/entities/acmi_***"),
        ("/v1/entities/user%3Aann?limit=5", "/v1/entities/user%3Aann?limit=5"),  # kept
    ],
)
def test_the_redaction_rule(path: str, expected: str) -> None:
    from acmi_core.cli.local import redact_secrets

    assert redact_secrets(path) == expected
