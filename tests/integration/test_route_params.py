"""A route's input is its row's params model (``acmi_core/api/params.py``): the OpenAPI
document shows the model's fields, an unknown field is refused by name, and the bounds
that HTTP alone checked before are the model's, so the MCP tools and the CLI (which
validate through ``bind.validated``) refuse the same values with the same field and rule."""

from __future__ import annotations

from typing import Any

import pytest

from acmi_core import Acmi
from acmi_core.api.access import TAKES_OF
from acmi_core.base.errors import AcmiValidationError
from acmi_core.operations import bind, operation
from tests.kit import RouteClient, assert_error

ROUTERS = ("entities", "locks", "agents", "hitl", "workflows", "work", "memory", "bootstrap")


def _refused(name: str, values: dict[str, Any]) -> tuple[str, str]:
    """(field, rule) of the model's refusal, as the MCP tools and the CLI get it."""
    with pytest.raises(AcmiValidationError) as caught:
        bind.validated(operation(name), values)
    return caught.value.field, caught.value.rule


def test_the_openapi_document_shows_each_converted_routes_model_fields(acmi: Acmi) -> None:
    routes = RouteClient(acmi, *ROUTERS)
    app = routes.client.app
    document = app.openapi()  # type: ignore[attr-defined]
    checked = 0
    for route in app.routes:  # type: ignore[attr-defined]
        taken = TAKES_OF.get(getattr(route, "endpoint", None))  # type: ignore[arg-type]
        if taken is None:
            continue  # a route with its own input (its module says why)
        row = taken.row
        assert row.openapi_path is not None and row.method is not None
        shown = document["paths"][row.openapi_path][row.method.lower()]
        names = {p["name"] for p in shown.get("parameters", ())}
        assert names == {taken.name(f) for f in (*taken.path, *taken.query)}, row.name
        if taken.body and not taken.reader:
            schema = shown["requestBody"]["content"]["application/json"]["schema"]
            assert schema.get("additionalProperties") is False, (row.name, schema)
            assert set(schema["properties"]) == {taken.name(f) for f in taken.body}, row.name
            model = bind.params_model(row).model_json_schema()
            for f in taken.body:  # the document leaves a null default out
                want = {k: v for k, v in model["properties"][f].items() if v is not None}
                got = {k: v for k, v in schema["properties"][taken.name(f)].items()}
                assert got == want, row.name
        checked += 1
    assert checked >= 40, checked


def test_an_unknown_body_field_is_refused_by_name(acmi: Acmi) -> None:
    routes = RouteClient(acmi, "locks")
    answer = routes.call("POST", "/v1/locks/deploy:web/claim", {"owner": "agent:a", "ttl": 5})
    body = assert_error(answer, 400, "ttl")
    assert body["rule"] == "unknown"
    # the MCP tools and the CLI name it the same (the model's extra="forbid")
    values = {"resource": "deploy:web", "owner": "agent:a", "ttl": 5}
    assert _refused("locks.claim", values) == ("ttl", "unknown")


@pytest.mark.parametrize(
    ("name", "method", "path", "values", "field", "rule"),
    [
        # the core took any number of spawns, any category length, inf as a timeline bound
        # and any include: HTTP refused them; now every surface does
        ("agents.spawns", "GET", "/v1/agents/a/spawns?limit=5000", {"agent": "a", "limit": 5000},
         "limit", "range"),
        ("entities.list", "GET", "/v1/namespaces/" + "c" * 129 + "/entities",
         {"category": "c" * 129}, "category", "max_length"),
        ("entities.timeline", "GET", "/v1/entities/user:a/timeline?since_ms=inf",
         {"entity": "user:a", "since_ms": float("inf")}, "since_ms", "finite"),
        ("bootstrap.read", "GET", "/v1/agents/a/bootstrap?include=" + "t" * 101,
         {"agent": "a", "include": "t" * 101}, "include", "max_length"),
    ],
)  # fmt: skip
def test_a_bound_http_alone_checked_is_every_surfaces(
    acmi: Acmi, name: str, method: str, path: str, values: dict[str, Any], field: str, rule: str
) -> None:
    row = operation(name)
    assert row.function is not None
    routes = RouteClient(acmi, row.function)
    answer = assert_error(routes.call(method, path, scope="write"), 400, field)
    assert answer["rule"] == rule
    assert _refused(name, values) == (field, rule)


def test_the_core_refuses_more_than_1000_events_as_http_and_mcp_did(acmi: Acmi) -> None:
    """The entity read's bound was HTTP's and the MCP tool's only: the CLI's store
    backend (the core) read any number."""
    with pytest.raises(AcmiValidationError) as caught:
        bind.call_core(acmi, operation("entities.get"), bind.validated(
            operation("entities.get"), {"entity": "user:a", "events": 1001}
        ))  # fmt: skip
    assert (caught.value.field, caught.value.rule) == ("events", "range")
    routes = RouteClient(acmi, "entities")
    answer = assert_error(routes.call("GET", "/v1/entities/user:a?events=1001"), 400, "events")
    assert answer["rule"] == "range"
