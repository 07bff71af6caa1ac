"""The README's "Deploy from zero", held to what it describes: its answers table names
every parameter of template.yaml, its schedules are the template's, and its steps work as
written as far as this machine allows: the token as a plain-string secret (moto), the
stack's environment, the first key and a source minted with the store-only commands on
the Upstash REST protocol (the double), then the deployed handlers answering with them."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml

from acmi_core.cli import main
from tests.infra.test_runtime import _secret, _template_environment, secretsmanager
from tests.kit import ROOT, FakeLambdaContext, load_event

__all__ = ["secretsmanager"]  # the moto fixture, used by name below

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")

README = (ROOT / "README.md").read_text(encoding="utf-8")
WALKTHROUGH = README.split("### Deploy from zero", 1)[1].split("\n## ", 1)[0]


class _Loader(yaml.SafeLoader):
    """template.yaml with its intrinsics (!Ref, !Sub...) read as plain values."""


_Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
TEMPLATE: dict[str, Any] = yaml.load((ROOT / "template.yaml").read_text(), Loader=_Loader)


def test_the_answers_table_names_every_parameter_of_the_template() -> None:
    named = set(
        re.findall(r"^\s*\| `?([A-Z][A-Za-z]+)`?(?:, `([A-Z][A-Za-z]+)`)? \|", WALKTHROUGH, re.M)
    )
    answered = {name for pair in named for name in pair if name}
    assert set(TEMPLATE["Parameters"]) <= answered, set(TEMPLATE["Parameters"]) - answered


SCHEDULES = {  # the walkthrough's words -> the template's expressions
    "RollupCronFunction": "rate(15 minutes)",
    "SweepFunction": "rate(15 minutes)",
    "WakeFunction": "rate(5 minutes)",
    "DriftDiffFunction": "rate(1 hour)",
    "StandupBriefFunction": "cron(0 9 ? * MON-FRI *)",
    "HygieneFunction": "cron(0 3 * * ? *)",
}


def test_the_schedules_it_lists_are_the_templates() -> None:
    scheduled = {
        name: event["Properties"]["ScheduleExpression"]
        for name, resource in TEMPLATE["Resources"].items()
        for event in (resource.get("Properties", {}).get("Events") or {}).values()
        if event.get("Type") == "ScheduleV2"
    }
    assert scheduled == SCHEDULES
    for words in ("every 15 minutes", "every 5", "hourly", "09:00 UTC on weekdays", "03:00 UTC"):
        assert words in WALKTHROUGH, words


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["--json", *argv]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def test_the_steps_work_as_written(
    secretsmanager: Any,
    upstash_double: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # step 2: the token as the plain string `create-secret --secret-string` stores
    arn = _secret(secretsmanager, upstash_double.token)
    # step 3: the stack's environment with the answers the table gives
    env = _template_environment(
        {"UpstashRedisRestUrl": upstash_double.url, "UpstashTokenSecretArn": arn}
    )
    # steps 4 and 5: the store-only commands with the two Upstash variables
    monkeypatch.setenv("UPSTASH_REDIS_REST_URL", upstash_double.url)
    monkeypatch.setenv("UPSTASH_REDIS_REST_TOKEN", upstash_double.token)
    monkeypatch.setenv("ACMI_CONFIG", str(tmp_path / "absent.toml"))
    monkeypatch.delenv("ACMI_API_URL", raising=False)
    key = run(capsys, "keys", "create", "--tenant", "default", "--scope", "admin")["key"]
    token = run(capsys, "sources", "set", "n8n", "--push-token")["push_token"]

    from functions.entities import handler as entities
    from functions.ingest import handler as ingest

    try:
        for handler in (ingest, entities):
            handler.configure(env=env)  # exactly the template's environment
        delivery = load_event("ingest.n8n")
        delivery["headers"] = {
            k: v for k, v in delivery["headers"].items() if k.lower() != "authorization"
        }
        delivery["rawQueryString"] = f"token={token}&entity=deal:acme"
        delivery["queryStringParameters"] = {"token": token, "entity": "deal:acme"}
        stored = ingest(delivery, FakeLambdaContext("acmi-ingest"))
        assert stored["statusCode"] == 201, stored["body"]
        read = load_event("entities.get")
        read["headers"]["authorization"] = f"Bearer {key}"
        read["rawPath"] = read["requestContext"]["http"]["path"] = "/v1/entities/deal:acme"
        read["pathParameters"] = {"entity": "deal:acme"}
        got = entities(read, FakeLambdaContext("acmi-entities"))
        assert got["statusCode"] == 200, got["body"]
        assert json.loads(got["body"])["timeline"], got["body"]
    finally:
        for handler in (ingest, entities):
            handler.configure()
