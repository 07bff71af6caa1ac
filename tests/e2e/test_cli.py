"""The `acmi` command line, run in-process against a real Redis (state across calls)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from acmi_core.cli import main
from acmi_core.testing.redis_server import RedisServer
from tests.kit import DB, ROOT


@pytest.fixture
def redis_env(redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> str:
    url = redis_server.url_for(DB["cli"])
    for name in ("UPSTASH_REDIS_REST_URL", "UPSTASH_REDIS_REST_TOKEN", "ACMI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ACMI_REDIS_URL", url)
    return url


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, json.loads(out) if out.strip() else None, err


def test_demo_runs_on_the_embedded_store() -> None:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).parents[1])}
    result = subprocess.run(
        [sys.executable, "-m", "acmi_core", "demo"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "# backend: memory" in result.stdout
    context = json.loads(result.stdout.split("\n", 1)[1])
    assert context["signals"] == {"current_task": "shooting ACMI manifesto", "mood": "focused"}
    assert len(context["timeline"]) == 2


def test_reference_commands(redis_env: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        run(capsys, "profile", "sales", "client-123", '{"name":"ClientCo"}')[1]["name"]
        == "ClientCo"
    )
    assert run(capsys, "signal", "sales", "client-123", '{"sentiment":"positive"}')[1] == {
        "sentiment": "positive"
    }
    code, event, _ = run(
        capsys, "event", "sales", "client-123", "gmail", "Sent the PDF proposal.",
        "--kind", "email-sent", "--correlation-id", "prop-1", "--parent", "deal-1",
        "--payload", '{"pages": 4}',
    )  # fmt: skip
    assert code == 0
    assert (event["kind"], event["correlationId"], event["parentCorrelationId"]) == (
        "email-sent",
        "prop-1",
        "deal-1",
    )
    assert event["payload"] == {"pages": 4}
    context = run(capsys, "get", "sales", "client-123")[1]
    assert context["profile"]["name"] == "ClientCo"
    assert run(capsys, "list", "sales")[1] == ["sales:client-123"]
    run(capsys, "delete", "sales", "client-123")
    assert run(capsys, "list", "sales")[1] == []


def test_errors_name_the_field(redis_env: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "profile", "Sales", "x", "{}")
    assert code == 2
    assert "category must match" in err
    code, _, err = run(capsys, "signal", "sales", "x", "{oops")
    assert (code, "json: is not valid JSON" in err) == (2, True)


def test_keys_lifecycle(redis_env: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, created, err = run(capsys, "keys", "create", "--tenant", "acme", "--scope", "write")
    assert code == 0
    assert "shown once" in err
    key = created["key"]
    listed = run(capsys, "keys", "list", "--tenant", "acme")[1]
    assert [k["id"] for k in listed] == [created["id"]]
    assert key not in json.dumps(listed)
    assert run(capsys, "keys", "revoke", created["id"])[1]["revoked"]["id"] == created["id"]
    assert run(capsys, "keys", "list", "--tenant", "acme")[1] == []
    code, _, err = run(capsys, "keys", "revoke", created["id"])
    assert code == 3  # not found
    assert "no API key" in err


def test_sources_set_never_prints_the_secret(
    redis_env: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("N8N_SECRET", "a-very-long-hmac-secret-value")
    code, shown, err = run(
        capsys, "sources", "set", "n8n", "--hmac-secret-env", "N8N_SECRET", "--push-token"
    )
    assert code == 0
    assert shown["hmac_secret"] == "***"
    assert shown["push_token"].startswith("acmipt_")
    assert "a-very-long-hmac-secret-value" not in json.dumps(shown) + err


def test_sources_list_and_get_show_what_exists_never_a_secret(
    redis_env: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import uuid

    tenant, other = f"src-{uuid.uuid4().hex[:8]}", f"src-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("N8N_SECRET", "a-very-long-hmac-secret-value")
    base = ["--tenant", tenant, "sources"]
    code, set_, _ = run(
        capsys, *base, "set", "n8n-billing", "--hmac-secret-env", "N8N_SECRET", "--push-token"
    )
    assert code == 0
    token = set_["push_token"]
    run(capsys, "--tenant", other, "sources", "set", "make-ops", "--map", "summary=deal.name")
    code, listed, err = run(capsys, *base, "list")
    assert code == 0, err
    by_name = {row["source"]: row for row in listed}
    # every sender of the table, configured or not, and the named one; not the other tenant's
    assert set(by_name) == {
        "make",
        "n8n",
        "gmail",
        "generic",
        "slack",
        "github",
        "vapi",
        "n8n-billing",
    }
    assert by_name["n8n"] == {"source": "n8n", "kind": "n8n", "configured": False}
    assert by_name["n8n-billing"] == {
        "source": "n8n-billing",
        "kind": "n8n",
        "configured": True,
        "hmac_secret": "***",
        "push_token": "set",  # which exists, never the token nor its hash
    }
    assert run(capsys, *base, "list", "--configured")[1] == [by_name["n8n-billing"]]
    code, got, err = run(capsys, *base, "get", "n8n-billing")
    assert (code, got) == (0, by_name["n8n-billing"]), err
    code, got, _ = run(capsys, "--tenant", other, "sources", "get", "make-ops")
    assert got["mapping"] == {"summary": "deal.name"} and got["configured"] is True
    printed = json.dumps([listed, got]) + err
    assert token not in printed and "a-very-long-hmac-secret-value" not in printed
    assert "push_token_hash" not in printed
    code, _, err = run(capsys, *base, "get", "nope")
    assert code == 2 and "rule: unknown" in err


@pytest.mark.slow  # a fresh interpreter
def test_invoke_runs_a_handler_like_sam_local_invoke(tmp_path: Path) -> None:
    event = {
        "version": "2.0",
        "routeKey": "POST /v1/ingest/{source}",
        "rawPath": "/v1/ingest/n8n",
        "rawQueryString": "entity=deal:acme-42",
        "headers": {
            "authorization": "Bearer acmi_local_example_admin_key_0001",
            "content-type": "application/json",
        },
        "requestContext": {
            "http": {"method": "POST", "path": "/v1/ingest/n8n", "sourceIp": "127.0.0.1"},
            "requestId": "req-1",
            "stage": "$default",
        },
        "body": '{"message": "Invoice paid"}',
        "isBase64Encoded": False,
    }
    path = tmp_path / "event.json"
    path.write_text(json.dumps(event))
    # a fresh process on the embedded store, as a user runs it
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-m", "acmi_core", "invoke", "ingest", "--event", str(path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    response = json.loads(result.stdout)  # stdout holds the response only
    assert response["statusCode"] == 201
    stored = json.loads(response["body"])["events"][0]
    assert stored["summary"] == "Invoice paid"
    # Powertools' structured log line and EMF metric go to stderr
    logs = result.stderr
    log_line = json.loads(next(line for line in logs.splitlines() if '"handled"' in line))
    assert log_line["status"] == 201
    assert log_line["correlation_id"] == stored["correlationId"]
    assert '"WebhookEventsStored"' in logs
