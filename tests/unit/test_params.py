"""The operations' params models: their defaults are the core's, and a failure names the
field and the rule (as every surface reports it)."""

from __future__ import annotations

import inspect

import pytest
from pydantic import ValidationError

from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.model import pydantic_rule
from acmi_core.bootstrap.bundle import DEFAULT_EVENTS
from acmi_core.memory.state import DEFAULT_PRUNE_DAYS
from acmi_core.operations import OPERATIONS, Operation, bind, operation, params
from tests.kit import run_fresh


def test_the_defaults_are_the_cores() -> None:
    assert params.BUNDLE_EVENTS == DEFAULT_EVENTS
    assert params.PRUNE_DAYS == DEFAULT_PRUNE_DAYS
    assert params.BootstrapReadParams(agent="a").events == DEFAULT_EVENTS
    assert params.MemoryPruneParams(entity="user:a").days == DEFAULT_PRUNE_DAYS


@pytest.mark.parametrize(
    ("given", "field", "rule"),
    [
        ({"entity": "user:a", "events": "many"}, "events", "type"),
        ({}, "entity", "required"),
    ],
)
def test_a_failure_names_the_field_and_the_rule(
    given: dict[str, object], field: str, rule: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        params.GetParams.model_validate(given)
    (error,) = caught.value.errors()
    assert (error["loc"], pydantic_rule(error["type"])) == ((field,), rule)


def test_writes_says_when_a_read_writes() -> None:
    assert not params.BootstrapReadParams(agent="a").writes()
    assert params.BootstrapReadParams(agent="a", spawn={"session_id": "s"}).writes()
    assert params.MemoryActiveGetParams(entity="user:a", text="x").writes()
    assert not params.GetParams(entity="user:a").writes()


def _core_parameters(row: Operation) -> dict[str, inspect.Parameter]:
    assert row.call is not None
    return dict(inspect.signature(bind.resolve(row.call)).parameters)


@pytest.mark.parametrize(
    "row", [r for r in OPERATIONS if r.mcp is None and r.call is not None], ids=lambda r: r.name
)
def test_a_rows_params_without_a_tool_are_its_core_callables(row: Operation) -> None:
    """Every row with a core callable has a params model; where no MCP tool's arguments
    fix its fields, they are parameters of the callable, with the callable's defaults."""
    taken = _core_parameters(row)
    model = bind.params_model(row)
    assert model.model_fields, row.name
    for name, field in model.model_fields.items():
        assert name in taken, f"{row.name}: {name} is not a parameter of {row.call}"
        core = taken[name].default
        if field.is_required():
            continue
        assert core is not inspect.Parameter.empty, f"{row.name}: {name} has no core default"
        assert field.default == core, (row.name, name, field.default, core)


def test_the_arguments_newer_than_the_tool_are_no_tool_arguments() -> None:
    """``hitl.create`` takes the correlation id its command gives (a retry stays one
    item) and the deadline its HTTP body gives, ``hitl.resolve`` the addressee of an item
    another tool wrote; the MCP tools' arguments stay the ones they always had."""
    for name, newer in (
        ("hitl.create", {"correlation_id", "deadline"}),
        ("hitl.resolve", {"addressee"}),
    ):
        model = bind.params_model(operation(name))
        assert newer <= set(model.model_fields)
        assert model.not_tool_arguments == newer
        assert newer <= set(_core_parameters(operation(name)))


def test_a_validation_failure_is_an_acmi_error_naming_field_and_rule() -> None:
    with pytest.raises(AcmiValidationError) as caught:
        bind.validated(operation("entities.get"), {"entity": "user:a", "events": "many"})
    assert (caught.value.field, caught.value.rule) == ("events", "type")
    with pytest.raises(AcmiValidationError) as caught:
        bind.validated(operation("entities.get"), {"entity": "user:a", "tenant": "t"})
    assert (caught.value.field, caught.value.rule) == ("tenant", "unknown")  # as the API names it


def test_each_rows_model_is_the_packages_attribute_in_its_capabilitys_module() -> None:
    for row in OPERATIONS:
        if row.params is None:
            continue
        model = bind.params_model(row)
        assert getattr(params, model.__name__) is model, row.name
        assert model.__name__ in params.__all__, row.name


def test_a_command_builds_only_its_capabilitys_models() -> None:
    """Building a model costs cold start time: validating an entity read imports the
    entity models only, never the other capabilities' (nor the MCP server)."""
    code = (
        "import json, sys\n"
        "from acmi_core.operations import bind, operation\n"
        "bind.validated(operation('entities.get'), {'entity': 'user:a'})\n"
        "prefixes = ('acmi_core.operations.params.', 'acmi_core.mcp')\n"
        "print(json.dumps({'modules': sorted(m for m in sys.modules if m.startswith(prefixes))}))\n"
    )
    modules = run_fresh(code, {})["modules"]
    assert modules == ["acmi_core.operations.params.base", "acmi_core.operations.params.entities"]


def test_the_work_id_bound_shown_is_the_cores() -> None:
    """The OpenAPI document's bound on a work id (params/work.py) is the core's own."""
    from acmi_core.coordination.work import MAX_ID_LEN
    from acmi_core.operations.params.work import MAX_WORK_ID_LEN

    assert MAX_WORK_ID_LEN == MAX_ID_LEN
