"""The operations' params models: their defaults are the core's, and a failure names the
field and the rule (as every surface reports it)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from acmi_core.base.model import pydantic_rule
from acmi_core.bootstrap.bundle import DEFAULT_EVENTS
from acmi_core.memory.state import DEFAULT_PRUNE_DAYS
from acmi_core.operations import params


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
