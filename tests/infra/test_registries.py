"""The two registries held to everything that repeats them.

- The function table (``acmi_core.base.lambdas``) against template.yaml (one resource per row,
  its Handler, HTTP events for HTTP rows, valid ScheduleV2 events for job rows), the
  handler modules in functions/, the router table, and ``acmi invoke``.
- The source table (``acmi_core.ingest.sources``) against the ingest route's docs, the
  sample events and the credential policy.

``function_table_problems`` is a plain function, tested on synthetic tables and templates
too, so a disagreement is shown to fail, not only agreement to pass.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Iterable
from typing import Any

import pytest

from acmi_core import Acmi, Settings
from acmi_core.api.app import ROUTER_MODULES, create_app
from acmi_core.api.context import ApiContext
from acmi_core.base.lambdas import FUNCTIONS, FunctionSpec, function, http_routers
from acmi_core.cli import main
from acmi_core.ingest.sources import SOURCES, Credential, source_spec
from acmi_core.store.memory import MemoryStore
from functions.runtime import LambdaFunction
from tests.kit import EVENTS_DIR, ROOT, load_template

SCHEDULE_INPUT_PLACEHOLDER = "<aws.scheduler.execution-id>"


# --- the function table against a template ---------------------------------------------------


def _functions(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        name: resource
        for name, resource in template.get("Resources", {}).items()
        if resource.get("Type") == "AWS::Serverless::Function"
    }


def _events(resource: dict[str, Any], *types: str) -> dict[str, dict[str, Any]]:
    events = resource.get("Properties", {}).get("Events") or {}
    return {name: e for name, e in events.items() if e.get("Type") in types}


def function_table_problems(table: Iterable[FunctionSpec], template: dict[str, Any]) -> list[str]:
    """Every way ``table`` and ``template`` disagree; [] when they agree."""
    rows = {spec.logical_id: spec for spec in table}
    resources = _functions(template)
    problems = [f"{lid}: in the table, not in the template" for lid in rows.keys() - resources]
    problems += [f"{lid}: in the template, not in the table" for lid in resources.keys() - rows]
    for lid in rows.keys() & resources.keys():
        spec, resource = rows[lid], resources[lid]
        handler = resource.get("Properties", {}).get("Handler")
        if handler != spec.handler:
            problems.append(f"{lid}: Handler {handler!r}, the table says {spec.handler!r}")
        http, schedules = _events(resource, "HttpApi"), _events(resource, "ScheduleV2", "Schedule")
        if spec.kind in ("http", "mcp"):  # mcp: POST /mcp on the same HTTP API
            if not http or schedules:
                problems.append(f"{lid}: an HTTP function needs HttpApi events and no schedule")
            continue
        if http or not schedules:
            problems.append(f"{lid}: a job needs ScheduleV2 events and no HttpApi event")
        for name, event in schedules.items():
            problems += [f"{lid}.{name}: {p}" for p in schedule_problems(event)]
    return problems


def schedule_problems(event: dict[str, Any]) -> list[str]:
    """What a job's schedule must have: ScheduleV2 (exactly its Input reaches the job), a
    valid expression, an Input carrying the execution id, a retry policy, a dead-letter
    queue."""
    if event.get("Type") != "ScheduleV2":
        return ["use ScheduleV2 (EventBridge Scheduler), not Schedule"]
    props = event.get("Properties", {})
    problems = []
    if problem := schedule_expression_problem(str(props.get("ScheduleExpression"))):
        problems.append(problem)
    try:
        payload = json.loads(props.get("Input", ""))
    except (TypeError, ValueError):
        payload = None
    if not isinstance(payload, dict) or payload.get("execution_id") != SCHEDULE_INPUT_PLACEHOLDER:
        problems.append(f'Input must be JSON with "execution_id": "{SCHEDULE_INPUT_PLACEHOLDER}"')
    if "RetryPolicy" not in props:
        problems.append("needs a RetryPolicy")
    if "DeadLetterConfig" not in props:
        problems.append("needs a DeadLetterConfig")
    return problems


_CRON_FIELD = r"[0-9A-Za-z*?,/#L-]+"


def schedule_expression_problem(expression: str) -> str | None:
    """None when EventBridge Scheduler would accept ``expression`` (rate, cron, at);
    `sam validate --lint` accepts a bad cron."""
    if m := re.fullmatch(r"rate\((\d+) (minute|minutes|hour|hours|day|days)\)", expression):
        value, unit = int(m[1]), m[2]
        if value < 1:
            return "rate must be >= 1"
        if (value == 1) != (not unit.endswith("s")):
            return "rate: use the singular unit for 1 and the plural otherwise"
        return None
    if re.fullmatch(r"at\(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\)", expression):
        return None
    if m := re.fullmatch(r"cron\((.*)\)", expression):
        fields = m[1].split()
        if len(fields) != 6:
            return "cron needs 6 fields: minutes hours day-of-month month day-of-week year"
        if not all(re.fullmatch(_CRON_FIELD, f) for f in fields):
            return "cron: a field has characters EventBridge does not accept"
        day_of_month, day_of_week = fields[2], fields[4]
        if (day_of_month == "?") == (day_of_week == "?"):
            return "cron: exactly one of day-of-month and day-of-week must be '?'"
        return None
    return "must be rate(...), cron(...) or at(...)"


def test_the_function_table_agrees_with_the_template() -> None:
    assert function_table_problems(FUNCTIONS, load_template()) == []


# The checker itself, on a synthetic job row and templates that get it right or wrong.
# (a name no real row has: rollup-cron is a real function now)
JOB = FunctionSpec("archive-cron", "test row", job="acmi_core.jobs.runner:load_job")
GOOD_SCHEDULE = {
    "Type": "ScheduleV2",
    "Properties": {
        "ScheduleExpression": "rate(15 minutes)",
        "Input": json.dumps(
            {"execution_id": SCHEDULE_INPUT_PLACEHOLDER, "scheduled_time": "<aws.scheduler.x>"}
        ),
        "RetryPolicy": {"MaximumRetryAttempts": 2},
        "DeadLetterConfig": {"Type": "SQS"},
    },
}


def _template_with(events: dict[str, Any], handler: str = JOB.handler) -> dict[str, Any]:
    resource = {"Type": "AWS::Serverless::Function", "Properties": {"Handler": handler}}
    resource["Properties"]["Events"] = events
    return {"Resources": {JOB.logical_id: resource}}


def test_a_well_formed_job_row_agrees() -> None:
    assert JOB.logical_id == "ArchiveCronFunction"
    assert JOB.handler == "functions.archive_cron.handler"
    assert function_table_problems([JOB], _template_with({"Tick": GOOD_SCHEDULE})) == []


def _broken(**changes: Any) -> dict[str, Any]:
    props = {**GOOD_SCHEDULE["Properties"], **changes}
    return {"Type": "ScheduleV2", "Properties": {k: v for k, v in props.items() if v is not None}}


@pytest.mark.parametrize(
    ("events", "handler", "expected"),
    [
        ({}, JOB.handler, "a job needs ScheduleV2 events"),
        ({"Tick": GOOD_SCHEDULE}, "functions.other.handler", "Handler"),
        ({"Tick": {**GOOD_SCHEDULE, "Type": "Schedule"}}, JOB.handler, "use ScheduleV2"),
        ({"Tick": _broken(ScheduleExpression="cron(0 9 * * MON *)")}, JOB.handler, "cron"),
        ({"Tick": _broken(Input='{"x": 1}')}, JOB.handler, "execution_id"),
        ({"Tick": _broken(RetryPolicy=None)}, JOB.handler, "RetryPolicy"),
        ({"Tick": _broken(DeadLetterConfig=None)}, JOB.handler, "DeadLetterConfig"),
        (
            {"Tick": GOOD_SCHEDULE, "Api": {"Type": "HttpApi", "Properties": {}}},
            JOB.handler,
            "no HttpApi event",
        ),
    ],
)
def test_the_checker_reports_each_disagreement(
    events: dict[str, Any], handler: str, expected: str
) -> None:
    problems = function_table_problems([JOB], _template_with(events, handler))
    assert any(expected in p for p in problems), problems


def test_the_checker_reports_rows_and_resources_missing_on_either_side() -> None:
    template = load_template()
    problems = function_table_problems([*FUNCTIONS, JOB], template)
    assert problems == ["ArchiveCronFunction: in the table, not in the template"]
    problems = function_table_problems(FUNCTIONS[1:], template)
    assert problems == [f"{FUNCTIONS[0].logical_id}: in the template, not in the table"]


@pytest.mark.parametrize(
    ("expression", "ok"),
    [
        ("rate(5 minutes)", True),
        ("rate(1 hour)", True),
        ("rate(1 hours)", False),
        ("cron(15 * * * ? *)", True),
        ("cron(0 9 ? * MON-FRI *)", True),
        ("cron(15 * * * *)", False),  # Unix cron: 5 fields
        ("cron(0 9 * * MON *)", False),  # neither is '?'
        ("at(2026-12-01T09:00:00)", True),
        ("every 5 minutes", False),
    ],
)
def test_schedule_expression_check(expression: str, ok: bool) -> None:
    assert (schedule_expression_problem(expression) is None) is ok


# --- the function table against the code -----------------------------------------------------


@pytest.mark.parametrize("spec", FUNCTIONS, ids=lambda s: s.name)
def test_each_row_has_its_handler_module(spec: FunctionSpec) -> None:
    """functions/<module>.py exists and its ``handler`` is built from this very row; the
    import does no I/O (nothing is built until the first invocation)."""
    module_name, _, attribute = spec.handler.rpartition(".")
    assert (ROOT / (module_name.replace(".", "/") + ".py")).is_file()
    handler = getattr(importlib.import_module(module_name), attribute)
    assert isinstance(handler, LambdaFunction)
    assert handler.spec == spec


def test_every_handler_module_has_a_row() -> None:
    modules = {p.stem for p in (ROOT / "functions").glob("*.py")} - {"__init__", "runtime"}
    assert modules == {spec.module for spec in FUNCTIONS}


def test_names_are_unique_and_lookups_name_the_known_ones() -> None:
    assert len({spec.name for spec in FUNCTIONS}) == len(FUNCTIONS)
    assert function("ingest").routers == ("ingest",)
    with pytest.raises(KeyError, match="known: ingest"):
        function("nope")


def test_a_row_is_http_or_a_job() -> None:
    with pytest.raises(ValueError, match="routers/docs"):
        FunctionSpec("both", "x", routers=("ingest",), job="m:f")
    with pytest.raises(ValueError, match="routers/docs"):
        FunctionSpec("neither", "x")


def test_the_router_table_and_the_function_table_agree() -> None:
    """Every router a row names exists; every router exists for some row."""
    assert set(http_routers()) == set(ROUTER_MODULES)
    assert create_app(ApiContext(Acmi(MemoryStore(), Settings()))).routes  # all mount


def test_acmi_invoke_offers_every_function(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["invoke", "nope", "--event", "x.json"]) == 2
    assert f"must be one of {', '.join(spec.name for spec in FUNCTIONS)}" in capsys.readouterr().err


# --- the source table ------------------------------------------------------------------------


def test_source_names_resolve_with_and_without_a_suffix() -> None:
    for spec in SOURCES:
        assert source_spec(spec.name) is spec
        assert source_spec(f"{spec.name}-billing") is spec


def test_the_ingest_docs_describe_every_source_and_its_credentials() -> None:
    app = create_app(ApiContext(Acmi(MemoryStore(), Settings())), ["ingest"])
    description = app.openapi()["paths"]["/v1/ingest/{source}"]["post"]["description"]
    for spec in SOURCES:
        assert f"`{spec.name}`: {spec.summary}" in description
    assert "OIDC" in description


def test_every_source_has_a_sample_event() -> None:
    posted = set()
    for path in EVENTS_DIR.glob("ingest.*.json"):
        event = json.loads(path.read_text())
        source = event["pathParameters"].get("source", "")
        if event["routeKey"] == "POST /v1/ingest/{source}" and not source.startswith("zapier"):
            posted.add(source_spec(source).name)  # zapier: the unknown-source sample
    assert posted == {spec.name for spec in SOURCES}


def test_every_source_accepts_api_keys_and_only_gmail_accepts_google_tokens() -> None:
    for spec in SOURCES:
        assert spec.accepts(Credential.API_KEY)
        assert spec.accepts(Credential.GOOGLE_OIDC) == (spec.name == "gmail")
