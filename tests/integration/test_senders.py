"""Webhooks as real senders send them, through the HTTP API on every backend: Slack's
Events API (signing secret, 5-minute window, url_verification, retries with the same
event_id), GitHub (X-Hub-Signature-256, redelivery with the same delivery id), nested
Make and n8n bodies, the stored make/n8n mapping (`acmi sources set make --map`), and
generic's literal category. Clocks are fixed: the auth clock (signed timestamps) and the
store's."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient

from acmi_core import Acmi, Settings
from acmi_core.api.app import create_app
from acmi_core.api.context import ApiContext
from acmi_core.auth import apikeys
from acmi_core.auth.authenticator import Authenticator
from acmi_core.auth.signatures import sign, sign_github, sign_slack
from acmi_core.cli import main
from acmi_core.cli.state import CliState
from acmi_core.ingest import config as source_configs

NOW_S = 1_795_977_726  # 2026-11-29T18:42:06Z
NOW_MS = NOW_S * 1000 + 311
SLACK_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
GITHUB_SECRET = "gh-webhook-secret-acme-2026-0001"


class Senders:
    """The app on one backend, with a fixed clock, a write key, and signing secrets
    configured for slack and github."""

    def __init__(self, acmi: Acmi) -> None:
        self.acmi = Acmi(acmi.store, Settings(auth_cache_s=0), clock=lambda: NOW_MS)
        self.ctx = ApiContext(self.acmi)
        self.ctx.auth = Authenticator(
            self.acmi.store, self.acmi.settings, wall_clock=lambda: float(NOW_S)
        )
        self.client = TestClient(create_app(self.ctx), raise_server_exceptions=False)
        key, _ = apikeys.mint(self.acmi.store, tenant="default", scope="write", name="w", now_ms=0)
        self.auth = {"authorization": f"Bearer {key}"}
        for source, secret in (("slack", SLACK_SECRET), ("github", GITHUB_SECRET)):
            source_configs.put_config(self.acmi.store, self.acmi.keys, source, hmac_secret=secret)

    def post(self, path: str, body: bytes, headers: dict[str, str]) -> Any:
        return self.client.post(path, content=body, headers={**self.auth, **headers})

    def timeline(self, entity: str) -> list[Any]:
        return list(self.acmi.timeline.read(entity))

    def keys(self) -> frozenset[str]:
        """The database's keys: no key added by a refused request means nothing was
        stored (a count is not: other tests' request records expire meanwhile)."""
        keys = self.acmi.store.execute(("KEYS", "*"))
        assert isinstance(keys, list)
        return frozenset(k.decode() if isinstance(k, bytes) else str(k) for k in keys)


@pytest.fixture
def senders(acmi: Acmi) -> Senders:
    return Senders(acmi)


def error(response: Any, status: int, field: str, rule: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert (body.get("field"), body.get("rule")) == (field, rule), body
    return body


def unique(prefix: str) -> str:
    # the redis backend's database is shared by the module's tests: ids must not repeat
    return f"{prefix}{uuid.uuid4().hex[:10].upper()}"


# --- slack ------------------------------------------------------------------------------


def slack_message(event_id: str, channel: str, text: str = "Acme says SSO loops again") -> bytes:
    """An Events API event_callback as Slack serialises it (compact JSON)."""
    body = {
        "token": "XXYYZZ0123456789abcdefAB",
        "team_id": "T061EG9R6",
        "api_app_id": "A0PNCHHK2",
        "event": {
            "type": "message",
            "user": "U061F7AUR",
            "text": text,
            "ts": "1795977725.000200",
            "channel": channel,
            "event_ts": "1795977725.000200",
            "channel_type": "channel",
        },
        "type": "event_callback",
        "event_id": event_id,
        "event_time": 1795977725,
        "authorizations": [{"team_id": "T061EG9R6", "user_id": "U0JD3BPNC", "is_bot": True}],
        "is_ext_shared_channel": False,
    }
    return json.dumps(body, separators=(",", ":")).encode()


def test_slack_signed_event_is_stored_once_and_its_retries_replay(senders: Senders) -> None:
    event_id, channel = unique("Ev"), unique("C")
    entity = f"slack-channel:{channel}"
    body = slack_message(event_id, channel)
    first = senders.post("/v1/ingest/slack", body, sign_slack(SLACK_SECRET, body, NOW_S - 1))
    assert first.status_code == 201, first.text
    (event,) = first.json()["events"]
    assert (event["entity"], event["kind"], event["correlationId"]) == (
        entity,
        "message",
        f"slack-{event_id}",
    )
    # Slack retries with the same event_id, signed anew, saying which retry it is
    for retry_num in ("1", "2"):
        retry_headers = {
            **sign_slack(SLACK_SECRET, body, NOW_S),
            "X-Slack-Retry-Num": retry_num,
            "X-Slack-Retry-Reason": "http_timeout",
        }
        retry = senders.post("/v1/ingest/slack", body, retry_headers)
        assert retry.status_code == 201 and retry.headers["idempotent-replayed"] == "true"
    # the event_id, not the body, names the delivery (a retry's body need not be the same)
    edited = slack_message(event_id, channel, text="Acme says SSO loops again (edited)")
    again = senders.post("/v1/ingest/slack", edited, sign_slack(SLACK_SECRET, edited, NOW_S))
    assert again.headers.get("idempotent-replayed") == "true"
    assert len(senders.timeline(entity)) == 1
    # Slack's verification token is a credential: not stored
    assert "token" not in senders.timeline(entity)[0].payload


@pytest.mark.parametrize(
    ("headers", "status", "field", "rule"),
    [
        ({}, 401, "X-Slack-Signature", "required"),
        ({"X-Slack-Signature": "sha256=" + "0" * 64}, 400, "X-Slack-Signature", "format"),
        ({"X-Slack-Signature": "v0=" + "0" * 64}, 401, "X-Slack-Request-Timestamp", "required"),
        (
            {"X-Slack-Signature": "v0=" + "0" * 64, "X-Slack-Request-Timestamp": str(NOW_S)},
            401,
            "X-Slack-Signature",
            "mismatch",
        ),
        (
            {"X-Slack-Signature": "v0=" + "0" * 64, "X-Slack-Request-Timestamp": "17e8"},
            400,
            "X-Slack-Request-Timestamp",
            "format",
        ),
    ],
)
def test_slack_bad_signatures_store_nothing(
    senders: Senders, headers: dict[str, str], status: int, field: str, rule: str
) -> None:
    body = slack_message(unique("Ev"), unique("C"))
    before = senders.keys()
    error(senders.post("/v1/ingest/slack", body, headers), status, field, rule)
    assert senders.keys() <= before  # no key added


@pytest.mark.parametrize("age_s", [301, -301, 3600])
def test_slack_signature_outside_five_minutes_is_stale(senders: Senders, age_s: int) -> None:
    """A captured request replayed later (or signed by a clock far ahead) is refused even
    though its signature is good."""
    body = slack_message(unique("Ev"), unique("C"))
    before = senders.keys()
    stale = sign_slack(SLACK_SECRET, body, NOW_S - age_s)
    error(senders.post("/v1/ingest/slack", body, stale), 401, "X-Slack-Request-Timestamp", "window")
    assert senders.keys() <= before  # no key added
    # at the edge of the window it is accepted
    edge = sign_slack(SLACK_SECRET, body, NOW_S - 300)
    assert senders.post("/v1/ingest/slack", body, edge).status_code == 201


def test_slack_signed_with_another_secret_is_refused(senders: Senders) -> None:
    body = slack_message(unique("Ev"), unique("C"))
    forged = sign_slack("another-workspace-secret-0000000", body, NOW_S)
    error(senders.post("/v1/ingest/slack", body, forged), 401, "X-Slack-Signature", "mismatch")


def test_slack_url_verification_answers_the_challenge_only_when_signed(senders: Senders) -> None:
    challenge = "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
    body = json.dumps(
        {"token": "Jhj5dZrVaK7ZwHHjRyZWjbDl", "challenge": challenge, "type": "url_verification"}
    ).encode()
    before = senders.keys()
    unsigned = senders.post("/v1/ingest/slack", body, {})
    error(unsigned, 401, "X-Slack-Signature", "required")
    assert challenge not in unsigned.text
    answered = senders.post("/v1/ingest/slack", body, sign_slack(SLACK_SECRET, body, NOW_S))
    assert answered.status_code == 200, answered.text
    assert answered.json() == {"challenge": challenge}
    assert senders.keys() <= before  # stored nothing, not even an idempotency record


def test_a_slack_source_without_a_signing_secret_accepts_nothing(senders: Senders) -> None:
    """Slack always signs: an unconfigured secret is refused, never taken as 'unsigned'."""
    body = slack_message(unique("Ev"), unique("C"))
    before = senders.keys()
    response = senders.post("/v1/ingest/slack-other", body, sign_slack(SLACK_SECRET, body, NOW_S))
    error(response, 401, "X-Slack-Signature", "not_configured")
    assert senders.keys() <= before  # no key added


def test_our_own_signature_does_not_pass_for_slacks(senders: Senders) -> None:
    body = slack_message(unique("Ev"), unique("C"))
    ours = sign(SLACK_SECRET, body, timestamp=NOW_S)
    error(senders.post("/v1/ingest/slack", body, ours), 401, "X-Slack-Signature", "required")


# --- github -----------------------------------------------------------------------------


def github_issue(repo: str, number: int = 1287) -> bytes:
    body = {
        "action": "opened",
        "issue": {
            "number": number,
            "title": "SSO login loops back to the sign-in page",
            "user": {"login": "dana-ruiz"},
            "state": "open",
            "labels": [{"name": "bug"}],
        },
        "repository": {"full_name": f"acme-corp/{repo}", "name": repo, "private": True},
        "organization": {"login": "acme-corp"},
        "sender": {"login": "dana-ruiz"},
    }
    return json.dumps(body, separators=(",", ":")).encode()


def github_headers(body: bytes, delivery: str, event: str = "issues") -> dict[str, str]:
    return {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery,
        "X-GitHub-Hook-ID": "512349876",
        "User-Agent": "GitHub-Hookshot/7a1f3c9",
        **sign_github(GITHUB_SECRET, body),
    }


def test_github_signed_delivery_is_stored_and_a_redelivery_replays(senders: Senders) -> None:
    repo, delivery = unique("repo-").lower(), str(uuid.uuid4())
    entity = f"github-repo:acme-corp_{repo}"
    body = github_issue(repo)
    first = senders.post("/v1/ingest/github", body, github_headers(body, delivery))
    assert first.status_code == 201, first.text
    (event,) = first.json()["events"]
    assert (event["entity"], event["kind"], event["correlationId"]) == (
        entity,
        "issues.opened",
        f"github-{delivery}",
    )
    # "Redeliver" in GitHub's UI sends the same delivery id and body
    again = senders.post("/v1/ingest/github", body, github_headers(body, delivery))
    assert again.status_code == 201 and again.headers["idempotent-replayed"] == "true"
    # another delivery of the same body (another event that serialises alike) is new
    other = senders.post("/v1/ingest/github", body, github_headers(body, str(uuid.uuid4())))
    assert other.status_code == 201 and "idempotent-replayed" not in other.headers
    assert len(senders.timeline(entity)) == 2


@pytest.mark.parametrize(
    ("signature", "status", "rule"),
    [
        (None, 401, "required"),
        ("sha1=" + "0" * 40, 400, "format"),
        ("sha256=" + "0" * 64, 401, "mismatch"),
    ],
)
def test_github_bad_signatures_store_nothing(
    senders: Senders, signature: str | None, status: int, rule: str
) -> None:
    body = github_issue(unique("repo-").lower())
    headers = github_headers(body, str(uuid.uuid4()))
    del headers["X-Hub-Signature-256"]
    if signature is not None:
        headers["X-Hub-Signature-256"] = signature
    before = senders.keys()
    error(senders.post("/v1/ingest/github", body, headers), status, "X-Hub-Signature-256", rule)
    assert senders.keys() <= before  # no key added


def test_github_without_its_event_header_is_a_400_naming_it(senders: Senders) -> None:
    body = github_issue(unique("repo-").lower())
    headers = github_headers(body, str(uuid.uuid4()))
    del headers["X-GitHub-Event"]
    before = senders.keys()
    error(senders.post("/v1/ingest/github", body, headers), 400, "X-GitHub-Event", "required")
    assert senders.keys() <= before  # no key added


# --- make / n8n: nested bodies, run ids, stored mapping -----------------------------------


def test_two_items_of_one_n8n_run_get_their_own_correlation_ids(senders: Senders) -> None:
    entity = f"sheet:{unique('leads').lower()}"
    ids = []
    for item in ("a", "b"):
        body = json.dumps({"executionId": "run-7", "item": item, "message": "row"}).encode()
        response = senders.post(f"/v1/ingest/n8n?entity={entity}", body, {})
        assert response.status_code == 201, response.text
        ids.append(response.json()["events"][0]["correlationId"])
    assert ids[0] != ids[1] and all(i.startswith("n8n-run-7-") for i in ids)
    assert len(senders.timeline(entity)) == 2


def test_make_gmail_bundle_lands_with_the_email_subject(senders: Senders) -> None:
    entity = f"deal:{unique('acme').lower()}"
    body = {
        "email": {
            "id": "18c2f9a7b4e3d1c0",
            "subject": "Re: Platform renewal - legal review",
            "from": {"name": "Priya Natarajan", "email": "priya@acme.example"},
            "fullTextBody": "Hi Dana,\nlegal signed off.",
        },
        "scenario": {"id": 4415823, "executionId": "b3f1c2a9e7d84c5f9a0e6d2b1c3f4a5e"},
    }
    response = senders.post(f"/v1/ingest/make?entity={entity}", json.dumps(body).encode(), {})
    assert response.status_code == 201, response.text
    (event,) = senders.timeline(entity)
    assert event.summary == "Re: Platform renewal - legal review"
    assert event.correlationId == "18c2f9a7b4e3d1c0"


def sources_set(acmi: Acmi, *argv: str) -> None:
    assert main(["sources", "set", *argv], state=CliState(preset=acmi)) == 0


def test_a_stored_make_mapping_wins_over_the_found_fields(
    senders: Senders, capsys: pytest.CaptureFixture[str]
) -> None:
    source = f"make-{unique('crm').lower()}"
    sources_set(senders.acmi, source, "--map", "summary=email.subject", "--map", "kind=event")
    shown = json.loads(capsys.readouterr().out)
    assert shown["mapping"] == {"summary": "email.subject", "kind": "event"}
    entity = f"deal:{unique('acme').lower()}"
    body = {
        "event": "email.received",
        "message": "not this one",
        "email": {"id": "18c2", "subject": "Renewal signed"},
    }
    response = senders.post(f"/v1/ingest/{source}?entity={entity}", json.dumps(body).encode(), {})
    assert response.status_code == 201, response.text
    (event,) = senders.timeline(entity)
    assert (event.kind, event.summary) == ("email.received", "Renewal signed")
    # a body without the mapped path is refused, naming it; nothing stored
    before = senders.keys()
    missing = json.dumps({"event": "x", "email": {"id": "1"}}).encode()
    error(
        senders.post(f"/v1/ingest/{source}?entity={entity}", missing, {}),
        400,
        "body.email.subject",
        "required",
    )
    assert senders.keys() <= before  # no key added


def test_a_mapping_for_a_source_that_reads_none_is_refused(
    senders: Senders, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["sources", "set", "slack", "--map", "summary=event.text"]
    assert main(argv, state=CliState(preset=senders.acmi)) == 2
    err = capsys.readouterr().err
    assert "error: mapping: " in err and "(rule: unsupported)" in err


def test_the_readme_generic_example_is_stored(senders: Senders) -> None:
    customer = unique("cus_")
    body = {"type": "customer.updated", "title": "Plan changed", "customer": {"id": customer}}
    path = (
        "/v1/ingest/generic?map.entity=customer.id&map.category=customer"
        "&map.kind=type&map.summary=title"
    )
    response = senders.post(path, json.dumps(body).encode(), {})
    assert response.status_code == 201, response.text
    (event,) = senders.timeline(f"customer:{customer}")
    assert (event.kind, event.summary) == ("customer.updated", "Plan changed")


def test_a_generic_category_that_is_no_name_is_a_400(senders: Senders) -> None:
    before = senders.keys()
    response = senders.post(
        "/v1/ingest/generic?map.entity=id&map.category=Customer%20Accounts&map.summary=t",
        b'{"id": "c1", "t": "x"}',
        {},
    )
    error(response, 400, "mapping.category", "category_format")
    assert senders.keys() <= before  # no key added
