"""Gmail push ingestion with the history fetcher wired in (issue 9, item 5), through the
HTTP app: a push of a mailbox whose source names a credentials secret stores the
notification plus one event per new message and moves the mailbox's history cursor, in
one step; a Pub/Sub redelivery stores nothing; Google failing for now is a 503 with
nothing stored; Google refusing the credentials stores the notification with its
``fetch_error``; a gmail source without the secret (or ``acmi serve``, no fetcher) stores
the notification only. Also ``acmi sources set --gmail-credentials-secret`` and the
Lambda kit's ``GmailFetch`` (Secrets Manager through Powertools, moto).

Google is an ``httpx.MockTransport`` answering the documented Gmail API v1 shapes."""

from __future__ import annotations

import base64
import json
import logging
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import httpx
import pytest
import redis
from fastapi.testclient import TestClient
from moto import mock_aws

from acmi_core import Acmi, Settings
from acmi_core.api.app import create_app
from acmi_core.api.context import ApiContext
from acmi_core.auth import apikeys
from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.keys import Keys
from acmi_core.cli import main
from acmi_core.ingest import config as sources
from acmi_core.ingest.gmail_api import AccessTokens
from acmi_core.ingest.service import GmailFetch
from acmi_core.store.memory import MemoryStore
from acmi_core.store.redis import RedisStore
from acmi_core.testing.redis_server import RedisServer
from tests.kit import TEST_DBS, run_fresh

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")

CLI_DB = TEST_DBS["gmail_ingest"]  # this module's own database (tests/kit.py TEST_DBS)
ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:acmi/gmail-ops-AbCdEf"
CLIENT_ID = "123456789012-abcdefghijklmnop.apps.googleusercontent.com"
CLIENT_SECRET = "GOCSPX-integrationClientSecret7c1d"
REFRESH_TOKEN = "1//0gIntegrationRefreshTokenCgYIARAAGBASNwF-Q2"
ACCESS_TOKEN = "ya29.a0AfB_integration-access-token"
SECRETS = (CLIENT_SECRET, REFRESH_TOKEN, ACCESS_TOKEN)
AUTHORIZED_USER = json.dumps(
    {
        "client_id": CLIENT_ID,
        "client_secret": CLIENT_SECRET,
        "refresh_token": REFRESH_TOKEN,
        "type": "authorized_user",
    }
)
START = "9876500"
INBOX = ["UNREAD", "IMPORTANT", "CATEGORY_PERSONAL", "INBOX"]


# --- a recorded Google ----------------------------------------------------------------------


def added(record_id: str, *message_ids: str) -> dict[str, Any]:
    """A history record as history.list returns it with historyTypes=messageAdded."""
    return {
        "id": record_id,
        "messages": [{"id": mid, "threadId": mid} for mid in message_ids],
        "messagesAdded": [
            {"message": {"id": mid, "threadId": mid, "labelIds": INBOX}} for mid in message_ids
        ],
    }


def metadata(message_id: str, email: str, subject: str, internal_date: str) -> dict[str, Any]:
    """A messages.get?format=metadata answer."""
    return {
        "id": message_id,
        "threadId": message_id,
        "labelIds": INBOX,
        "snippet": "Hi, the quote we discussed is attached &amp; valid until Dec 15.",
        "sizeEstimate": 51234,
        "historyId": "9876540",
        "internalDate": internal_date,
        "payload": {
            "mimeType": "multipart/mixed",
            "headers": [
                {"name": "Date", "value": "Thu, 26 Nov 2026 14:03:11 +0000"},
                {"name": "From", "value": "Dana Ruiz <dana@acme.example>"},
                {"name": "Subject", "value": subject},
                {"name": "To", "value": f"Ops <{email}>"},
            ],
        },
    }


def google_error(code: int, status: str, reason: str) -> dict[str, Any]:
    return {
        "error": {
            "code": code,
            "message": "Backend Error",
            "errors": [{"message": "Backend Error", "domain": "global", "reason": reason}],
            "status": status,
        }
    }


class FakeGoogle:
    """Google's token endpoint and the Gmail API for one mailbox: history since START
    adds m1 and m2 (current history id 9876599) unless ``history`` is replaced."""

    def __init__(self, email: str) -> None:
        self.email = email
        self.requests: list[httpx.Request] = []
        self.token: httpx.Response = httpx.Response(
            200, json={"access_token": ACCESS_TOKEN, "expires_in": 3599, "token_type": "Bearer"}
        )
        self.history_id = "9876599"
        self.history: httpx.Response | None = None
        self.records = [added("9876510", "18c1f0a1b2c3d4e1"), added("9876520", "18c1f0a1b2c3d4e2")]

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        path = request.url.path
        if path == "/token":
            return self.token
        if path == "/gmail/v1/users/me/profile":
            return httpx.Response(
                200, json={"emailAddress": self.email, "historyId": self.history_id}
            )
        if path == "/gmail/v1/users/me/history":
            if self.history is not None:
                return self.history
            return httpx.Response(200, json={"history": self.records, "historyId": self.history_id})
        if path.startswith("/gmail/v1/users/me/messages/"):
            message_id = path.rsplit("/", 1)[1]
            number = message_id[-1]
            return httpx.Response(
                200,
                json=metadata(
                    message_id, self.email, f"Renewal quote {number}", f"179570179{number}000"
                ),
            )
        return httpx.Response(404, json=google_error(404, "NOT_FOUND", "notFound"))

    def history_starts(self) -> list[str | None]:
        return [
            r.url.params.get("startHistoryId")
            for r in self.requests
            if r.url.path.endswith("/history")
        ]


# --- the app ---------------------------------------------------------------------------------


class Api:
    """An app on one store with a write key, fetching Gmail from ``google`` (None: no
    fetcher, as ``acmi serve``)."""

    def __init__(self, acmi: Acmi, google: FakeGoogle | None) -> None:
        self.acmi = acmi
        self.google = google
        self.secrets_read: list[str] = []
        gmail = None
        if google is not None:
            gmail = GmailFetch(
                secret=self._secret,
                client=httpx.Client(transport=httpx.MockTransport(google)),
                tokens=AccessTokens(),
            )
        self.ctx = ApiContext(acmi, gmail=gmail)
        self.client = TestClient(create_app(self.ctx), raise_server_exceptions=False)
        key, _ = apikeys.mint(
            acmi.store, tenant="default", scope="write", name="w", now_ms=acmi.clock()
        )
        self.headers = {"authorization": f"Bearer {key}"}

    def _secret(self, arn: str) -> str:
        self.secrets_read.append(arn)
        return AUTHORIZED_USER

    def push(self, email: str, message_id: str, history_id: int = 9876601) -> httpx.Response:
        data = json.dumps({"emailAddress": email, "historyId": history_id}).encode()
        envelope = {
            "message": {
                "data": base64.b64encode(data).decode(),
                "messageId": message_id,
                "publishTime": "2026-11-29T10:15:30.123Z",
            },
            "subscription": "projects/acme/subscriptions/gmail-push",
        }
        response: httpx.Response = self.client.post(
            "/v1/ingest/gmail", json=envelope, headers=self.headers
        )
        return response

    def cursor(self, email: str) -> Any:
        raw = self.acmi.store.execute(("GET", self.acmi.keys.gmail_history("gmail", email)))
        assert raw is None or isinstance(raw, bytes)
        return None if raw is None else json.loads(raw)

    def set_cursor(self, email: str, history_id: str) -> None:
        key = self.acmi.keys.gmail_history("gmail", email)
        self.acmi.store.execute(("SET", key, json.dumps({"historyId": history_id})))

    def timeline(self, entity: str) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = self.acmi.timeline.read(entity).to_dicts()
        return events


def mailbox() -> tuple[str, str]:
    """A mailbox address of its own (the `acmi` fixture's Redis is shared by a session),
    and the entity the notification lands on."""
    local = f"ops-{uuid.uuid4().hex[:12]}"
    return f"{local}@Example.com", f"mailbox:{local}_example.com"


def configure(acmi: Acmi, **changes: Any) -> None:
    sources.put_config(acmi.store, acmi.keys, "gmail", **changes)


# --- a push with the fetcher ----------------------------------------------------------------


def test_a_push_stores_each_new_message_and_moves_the_cursor_once(acmi: Acmi) -> None:
    email, entity = mailbox()
    google = FakeGoogle(email)
    api = Api(acmi, google)
    configure(acmi, gmail_credentials_secret=ARN)
    api.set_cursor(email, START)
    message_id = f"207044360{uuid.uuid4().int % 10**7}"

    response = api.push(email, message_id)

    assert response.status_code == 201, response.text
    body = response.json()
    assert body["stored"] == 3
    assert [e["kind"] for e in body["events"]] == [
        "gmail-notification",
        "gmail-message",
        "gmail-message",
    ]
    notification = body["events"][0]
    assert {e["entity"] for e in body["events"]} == {entity}
    assert [e["correlationId"] for e in body["events"][1:]] == [
        "gmail-18c1f0a1b2c3d4e1",
        "gmail-18c1f0a1b2c3d4e2",
    ]
    assert all(
        e["parentCorrelationId"] == notification["correlationId"] for e in body["events"][1:]
    )
    assert body["events"][1]["summary"] == "Renewal quote 1 (from Dana Ruiz <dana@acme.example>)"
    assert body["events"][1]["ts"] == 1795701791000  # Gmail's internalDate
    assert api.secrets_read == [ARN]
    assert google.history_starts() == [START]
    assert api.cursor(email) == {"historyId": "9876599"}
    stored = api.timeline(entity)
    assert sorted(e["correlationId"] for e in stored) == sorted(
        e["correlationId"] for e in body["events"]
    )

    # Pub/Sub redelivers the same message while the mailbox has moved on: nothing is
    # written, neither a new message nor the cursor.
    google.records = [added("9876610", "18c1f0a1b2c3d4e3")]
    google.history_id = "9876650"
    again = api.push(email, message_id)
    assert again.status_code == 201, again.text
    assert again.headers.get("idempotent-replayed") == "true"
    assert again.json()["stored"] == 3
    assert api.cursor(email) == {"historyId": "9876599"}
    assert len(api.timeline(entity)) == 3

    # The next push starts at the stored cursor and stores the one new message.
    following = api.push(email, message_id + "1", history_id=9876651)
    assert following.status_code == 201, following.text
    assert following.json()["stored"] == 2
    assert google.history_starts()[-1] == "9876599"
    assert api.cursor(email) == {"historyId": "9876650"}
    assert len(api.timeline(entity)) == 5


@pytest.mark.parametrize("stored", [None, "not json", '{"historyId": "12a"}'])
def test_a_push_without_a_readable_cursor_reads_the_last_day(stored: str | None) -> None:
    email, entity = "ops@example.com", "mailbox:ops_example.com"
    google = FakeGoogle(email)
    api = Api(Acmi(MemoryStore(), Settings(auth_cache_s=0)), google)
    configure(api.acmi, gmail_credentials_secret=ARN)
    if stored is not None:  # an unreadable cursor must not stall the mailbox
        api.acmi.store.execute(("SET", api.acmi.keys.gmail_history("gmail", email), stored))

    def recent(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/gmail/v1/users/me/messages":
            assert request.url.params["q"] == "newer_than:1d"
            return httpx.Response(200, json={"messages": [{"id": "18c1f0a1b2c3d4e7"}]})
        return google(request)

    api.ctx.gmail = GmailFetch(
        secret=lambda arn: AUTHORIZED_USER,
        client=httpx.Client(transport=httpx.MockTransport(recent)),
        tokens=AccessTokens(),
    )
    response = api.push(email, "1")
    assert response.status_code == 201, response.text
    assert [e["correlationId"] for e in response.json()["events"][1:]] == ["gmail-18c1f0a1b2c3d4e7"]
    assert google.history_starts() == []
    assert api.cursor(email) == {"historyId": "9876599"}
    assert len(api.timeline(entity)) == 2


@pytest.fixture
def api() -> Api:
    api = Api(Acmi(MemoryStore(), Settings(auth_cache_s=0)), FakeGoogle("ops@example.com"))
    configure(api.acmi, gmail_credentials_secret=ARN)
    api.set_cursor("ops@example.com", START)
    return api


def test_google_failing_for_now_is_a_503_and_stores_nothing(api: Api) -> None:
    assert api.google is not None
    api.google.history = httpx.Response(
        503, json=google_error(503, "UNAVAILABLE", "backendError"), headers={"Retry-After": "7"}
    )
    response = api.push("ops@example.com", "42")
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"] == "7"
    assert response.json()["error"] == "gmail_unavailable"
    assert api.timeline("mailbox:ops_example.com") == []
    assert api.cursor("ops@example.com") == {"historyId": START}

    # no idempotency record either: Pub/Sub's redelivery, once Google is back, stores all
    api.google.history = None
    retried = api.push("ops@example.com", "42")
    assert retried.status_code == 201, retried.text
    assert "idempotent-replayed" not in retried.headers
    assert retried.json()["stored"] == 3
    assert api.cursor("ops@example.com") == {"historyId": "9876599"}


def test_refused_credentials_store_the_notification_with_the_fetch_error(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    assert api.google is not None
    api.google.token = httpx.Response(
        400, json={"error": "invalid_grant", "error_description": "Token has been expired"}
    )
    with caplog.at_level(logging.INFO):
        response = api.push("ops@example.com", "43")
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["stored"] == 1
    [event] = api.timeline("mailbox:ops_example.com")
    assert event["kind"] == "gmail-notification"
    assert event["payload"]["fetch_error"] == "gmail_auth_error"
    assert event["payload"]["emailAddress"] == "ops@example.com"
    assert api.cursor("ops@example.com") == {"historyId": START}
    assert "gmail_auth_error" in caplog.text
    for secret in SECRETS:
        assert secret not in caplog.text
        assert secret not in response.text


def test_credentials_of_another_mailbox_are_refused_not_stored_on_this_one(api: Api) -> None:
    assert api.google is not None
    api.google.email = "someone-else@example.com"  # the profile Google answers
    response = api.push("ops@example.com", "44")
    assert response.status_code == 201, response.text
    [event] = api.timeline("mailbox:ops_example.com")
    assert event["payload"]["fetch_error"] == "gmail_auth_error"
    assert api.cursor("ops@example.com") == {"historyId": START}


def test_a_secret_that_is_not_authorized_user_json_is_a_fetch_error(api: Api) -> None:
    assert api.ctx.gmail is not None
    api.ctx.gmail = GmailFetch(
        secret=lambda arn: "not json", client=api.ctx.gmail.client, tokens=AccessTokens()
    )
    response = api.push("ops@example.com", "45")
    assert response.status_code == 201, response.text
    [event] = api.timeline("mailbox:ops_example.com")
    assert event["payload"]["fetch_error"] == "gmail_auth_error"
    assert api.google is not None and api.google.requests == []


def test_a_gmail_source_without_the_secret_stores_the_notification_only() -> None:
    google = FakeGoogle("ops@example.com")
    api = Api(Acmi(MemoryStore(), Settings(auth_cache_s=0)), google)
    configure(api.acmi, entity="deal:ops")
    response = api.push("ops@example.com", "46")
    assert response.status_code == 201, response.text
    [event] = api.timeline("deal:ops")
    assert event["kind"] == "gmail-notification"
    assert "fetch_error" not in event["payload"]
    assert google.requests == []
    assert api.secrets_read == []
    assert api.cursor("ops@example.com") is None


def test_without_a_fetcher_a_configured_secret_stores_the_notification_only() -> None:
    # `acmi serve`: no GmailFetch, so no secret store and no Google
    api = Api(Acmi(MemoryStore(), Settings(auth_cache_s=0)), None)
    configure(api.acmi, gmail_credentials_secret=ARN)
    response = api.push("ops@example.com", "47")
    assert response.status_code == 201, response.text
    assert response.json()["stored"] == 1
    assert api.cursor("ops@example.com") is None


def test_the_cursor_is_per_tenant_source_and_mailbox_and_names_no_address() -> None:
    keys = Keys("default", "default")
    key = keys.gmail_history("gmail", "Ops@Example.com")
    assert key == keys.gmail_history("gmail", "ops@example.com")
    assert key.startswith("acmi:_gmail:default:gmail:")
    assert "example" not in key.lower()
    assert key != keys.gmail_history("gmail-sales", "ops@example.com")
    assert key != Keys("acme", "default").gmail_history("gmail", "ops@example.com")


# --- the config ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "value", "rule"),
    [
        ("gmail", AUTHORIZED_USER, "arn"),
        ("gmail", "arn:aws:ssm:us-east-1:123456789012:parameter/x", "arn"),
        ("gmail", ARN + " ", "arn"),
        ("generic", ARN, "unsupported"),
    ],
)
def test_only_a_secret_arn_of_a_gmail_source_is_accepted(
    source: str, value: str, rule: str
) -> None:
    store = MemoryStore()
    with pytest.raises(AcmiValidationError) as raised:
        sources.put_config(
            store, Keys("default", "default"), source, gmail_credentials_secret=value
        )
    assert (raised.value.field, raised.value.rule) == ("gmail_credentials_secret", rule)
    assert CLIENT_SECRET not in raised.value.message
    assert store.execute(("DBSIZE",)) == 0


@pytest.fixture
def cli_store(redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[RedisStore]:
    url = redis_server.url_for(CLI_DB)
    with redis.Redis.from_url(url) as client:
        client.flushdb()
    for name in ("UPSTASH_REDIS_REST_URL", "UPSTASH_REDIS_REST_TOKEN", "ACMI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ACMI_REDIS_URL", url)
    opened = RedisStore.from_url(url)
    yield opened
    opened.close()


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, json.loads(out) if out.strip() else None, err


def test_sources_set_gmail_credentials_secret_merges_and_removes(
    cli_store: RedisStore, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = Keys("default", "default")
    assert run(capsys, "sources", "set", "gmail", "--entity", "deal:ops")[0] == 0
    code, shown, _ = run(capsys, "sources", "set", "gmail", "--gmail-credentials-secret", ARN)
    assert code == 0
    assert shown["gmail_credentials_secret"] == ARN
    config = sources.get_config(cli_store, keys, "gmail")
    assert config is not None
    assert (config.entity, config.gmail_credentials_secret) == ("deal:ops", ARN)

    code, _, err = run(
        capsys,
        "sources",
        "set",
        "gmail",
        "--gmail-credentials-secret",
        ARN,
        "--remove-gmail-credentials-secret",
    )
    assert code != 0
    assert "--remove-gmail-credentials-secret: conflicts" in err

    code, _, err = run(capsys, "sources", "set", "gmail", "--gmail-credentials-secret", "x" * 40)
    assert code != 0
    assert "gmail_credentials_secret" in err and "x" * 40 not in err

    assert run(capsys, "sources", "set", "gmail", "--remove-gmail-credentials-secret")[0] == 0
    config = sources.get_config(cli_store, keys, "gmail")
    assert config is not None
    assert (config.entity, config.gmail_credentials_secret) == ("deal:ops", None)


# --- the Lambda kit --------------------------------------------------------------------------


@pytest.fixture
def secretsmanager(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        yield boto3.client("secretsmanager", region_name="us-east-1")


def test_the_ingest_function_wires_a_gmail_fetch_reading_secrets_manager(
    secretsmanager: Any,
) -> None:
    from acmi_core.base.errors import Unavailable
    from acmi_core.base.lambdas import function
    from functions import runtime

    arn = secretsmanager.create_secret(Name="acmi/gmail-ops", SecretString=AUTHORIZED_USER)["ARN"]
    acmi = Acmi(MemoryStore(), Settings())
    app = runtime.http_app(function("ingest"), acmi)
    gmail = app.state.acmi.gmail
    assert isinstance(gmail, GmailFetch)
    assert isinstance(gmail.tokens, AccessTokens)
    assert gmail.secret(arn) == AUTHORIZED_USER
    # cached (max_age): a rotation is seen within GMAIL_SECRET_MAX_AGE_S, not per push
    secretsmanager.put_secret_value(SecretId=arn, SecretString="rotated")
    assert gmail.secret(arn) == AUTHORIZED_USER
    assert runtime.GMAIL_SECRET_MAX_AGE_S == 300
    missing = arn.replace("acmi/gmail-ops", "acmi/none")
    with pytest.raises(Unavailable) as raised:
        gmail.secret(missing)
    assert raised.value.field == "gmail_credentials_secret"
    # the entities function takes no push: no client to Google
    assert runtime.http_app(function("entities"), acmi).state.acmi.gmail is None


def test_the_connection_pool_to_google_is_built_on_the_first_fetch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from functions import runtime

    built: list[Any] = []

    class Transport(httpx.BaseTransport):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            built.append(self)

        def handle_request(self, request: httpx.Request) -> httpx.Response:
            return httpx.Response(200, json={"host": request.url.host})

    monkeypatch.setattr(httpx, "HTTPTransport", Transport)
    monkeypatch.setattr("httpx._client.HTTPTransport", Transport)  # what Client() builds
    gmail = runtime.gmail_fetch()
    assert built == []  # no client, no CA bundle on a cold start that sees no Gmail push
    assert gmail.client.get("https://oauth2.googleapis.com/token").json() == {
        "host": "oauth2.googleapis.com"
    }
    gmail.client.get("https://gmail.googleapis.com/gmail/v1/users/me/profile")
    assert len(built) == 1
    gmail.client.close()


def test_wiring_the_gmail_fetch_imports_no_boto3() -> None:
    code = (
        "import json, sys\n"
        "from acmi_core import Acmi, Settings\n"
        "from acmi_core.base.lambdas import function\n"
        "from acmi_core.store.memory import MemoryStore\n"
        "from functions import runtime\n"
        "app = runtime.http_app(function('ingest'), Acmi(MemoryStore(), Settings()))\n"
        "print(json.dumps({'gmail': app.state.acmi.gmail is not None,\n"
        "    'loaded': [m for m in ('boto3', 'botocore.session', 'botocore.client',\n"
        "    'aws_lambda_powertools.utilities.parameters') if m in sys.modules]}))\n"
    )
    assert run_fresh(code, {}) == {"gmail": True, "loaded": []}


def test_a_push_stores_no_more_events_than_a_batch_and_resumes_after_them() -> None:
    email, entity = "ops@example.com", "mailbox:ops_example.com"
    google = FakeGoogle(email)
    api = Api(Acmi(MemoryStore(), Settings(auth_cache_s=0, max_batch_events=2)), google)
    configure(api.acmi, gmail_credentials_secret=ARN)
    api.set_cursor(email, START)
    first = api.push(email, "50")
    assert first.status_code == 201, first.text
    assert [e["correlationId"] for e in first.json()["events"][1:]] == ["gmail-18c1f0a1b2c3d4e1"]
    assert api.cursor(email) == {"historyId": "9876510"}  # the last record read whole
    google.records = google.records[1:]  # Gmail, asked from 9876510, has the rest
    second = api.push(email, "51")
    assert [e["correlationId"] for e in second.json()["events"][1:]] == ["gmail-18c1f0a1b2c3d4e2"]
    assert google.history_starts() == [START, "9876510"]
    assert api.cursor(email) == {"historyId": "9876599"}
    assert len(api.timeline(entity)) == 4
