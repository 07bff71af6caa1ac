"""The core's JSON limits, checked before anything is sent: nesting depth, fields per object
edit, the size of one stored object; and the settings a write script argument comes from."""

from __future__ import annotations

import re
from typing import Any

import pytest

from acmi_core.base.errors import AcmiValidationError, PayloadTooLarge
from acmi_core.base.model import (
    MAX_EDIT_FIELDS,
    MAX_JSON_DEPTH,
    MAX_OBJECT_BYTES,
    check_json_object,
    check_profile,
    dumps,
    parse_event,
)
from acmi_core.base.settings import Settings
from acmi_core.store import scripts
from acmi_core.store.writes import FieldMode, WritePlan
from tests.kit import ROOT

EVENT = {"source": "agent:a", "kind": "note", "correlationId": "c-1", "summary": "hello"}


def nested(depth: int, leaf: Any = 0) -> Any:
    """``depth`` containers inside each other, lists and objects alternating."""
    value = leaf
    for level in range(depth):
        value = [value] if level % 2 else {"d": value}
    return value


# --- nesting depth --------------------------------------------------------------------------


def test_the_deepest_allowed_value_is_written() -> None:
    assert dumps(nested(MAX_JSON_DEPTH)).count("[") + dumps(nested(MAX_JSON_DEPTH)).count("{") == (
        MAX_JSON_DEPTH
    )
    assert check_json_object({"a": nested(MAX_JSON_DEPTH - 1)}, "signals")


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 1_000, 100_000])
def test_a_value_nested_too_deep_is_refused_naming_the_field(depth: int) -> None:
    value = {"deep": nested(depth - 1)}
    with pytest.raises(AcmiValidationError) as err:
        dumps(value, "value")
    assert (err.value.field, err.value.rule) == ("value.deep", "max_depth")
    assert f"{MAX_JSON_DEPTH}" in err.value.message


@pytest.mark.parametrize(
    ("write", "field"),
    [
        (lambda v: check_json_object({"ok": 1, "deep": v}, "signals"), "signals.deep"),
        (lambda v: check_profile({"deep": v}), "profile.deep"),
        (lambda v: dumps([1, v], "value"), "value[1]"),
        (
            lambda v: parse_event({**EVENT, "payload": v}, now_ms=1, tenant="t", field="events[0]"),
            "events[0].payload",
        ),
        (
            lambda v: parse_event({**EVENT, "extra": v}, now_ms=1, tenant="t"),
            "event.extra",
        ),
    ],
)
def test_every_write_path_refuses_a_100000_deep_value(write: Any, field: str) -> None:
    with pytest.raises(AcmiValidationError) as err:
        write(nested(100_000))
    assert (err.value.field, err.value.rule) == (field, "max_depth")


def test_a_value_that_contains_itself_is_refused_not_looped_on() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(AcmiValidationError) as err:
        dumps({"a": loop}, "signals")
    assert (err.value.field, err.value.rule) == ("signals.a", "max_depth")


# --- the size of one stored object ----------------------------------------------------------


def test_an_object_over_the_stored_size_cap_is_refused() -> None:
    filler = "x" * (MAX_OBJECT_BYTES - len('{"a":""}'))
    assert check_json_object({"a": filler}, "profile")  # exactly at the cap
    with pytest.raises(PayloadTooLarge) as err:
        check_json_object({"a": filler + "x"}, "profile")
    assert (err.value.field, err.value.rule) == ("profile", "max_object_bytes")
    with pytest.raises(PayloadTooLarge):  # bytes, not characters: é is two
        check_json_object({"a": "é" * (MAX_OBJECT_BYTES // 2)}, "signals")


# --- fields per object edit -----------------------------------------------------------------


def fields(n: int, mode: FieldMode = "set") -> list[tuple[FieldMode, str, str]]:
    return [(mode, f"f{i}", "0") for i in range(n)]


def test_an_edit_of_the_most_fields_allowed_is_planned() -> None:
    plan = WritePlan()
    plan.edit_object("k", [*fields(MAX_EDIT_FIELDS), ("setnx", "tenant_id", '"t"')])
    assert len(plan) == 1


@pytest.mark.parametrize("mode", ["set", "del"])
def test_an_edit_of_too_many_fields_is_refused_before_sending(mode: FieldMode) -> None:
    plan = WritePlan()
    with pytest.raises(AcmiValidationError) as err:
        plan.edit_object("acmi:user:x:signals", fields(MAX_EDIT_FIELDS + 1, mode))
    assert (err.value.field, err.value.rule) == ("acmi:user:x:signals", "max_fields")
    assert f"{MAX_EDIT_FIELDS}" in err.value.message
    assert len(plan) == 0  # nothing queued
    with pytest.raises(AcmiValidationError) as err:
        plan.edit_object("k", fields(MAX_EDIT_FIELDS + 1, mode), field="signals")
    assert err.value.field == "signals"


@pytest.mark.parametrize("protocol", [scripts.APPLY, scripts.LEAN, scripts.WORK, scripts.SWEEP])
def test_the_script_enforces_the_same_object_size_cap(protocol: scripts.ScriptProtocol) -> None:
    """objedit.lua, the OBJ edit every script that edits objects runs, holds the cap as a
    constant (the script stays self-contained): mirrored, once, in the text sent."""
    lua = ROOT / "acmi_core" / "store" / "lua"
    assert "objedit" in protocol.sources
    source = protocol.script.source
    assert "\n".join((lua / f"{name}.lua").read_text() for name in protocol.sources) == source
    found = re.findall(r"^local MAX_OBJECT_BYTES = (\d+)", source, re.MULTILINE)
    assert found == [str(MAX_OBJECT_BYTES)], "objedit.lua declares MAX_OBJECT_BYTES, once"


# --- settings that become script arguments ----------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "variable"),
    [
        ("idempotency_ttl_s", "ACMI_IDEMPOTENCY_TTL_S"),
        ("derived_idempotency_ttl_s", "ACMI_DERIVED_IDEMPOTENCY_TTL_S"),
    ],
)
@pytest.mark.parametrize("ttl", [0, -1])
def test_an_idempotency_ttl_the_script_would_refuse_is_refused_by_settings(
    setting: str, variable: str, ttl: int
) -> None:
    """ONCE takes ttl_s * 1000 as PX: 0 would reach the script and fail every ingest
    with a PlanError (a 500), so the settings refuse it when the process starts."""
    overrides: dict[str, Any] = {setting: ttl}
    with pytest.raises(AcmiValidationError) as err:
        Settings(**overrides)
    assert (err.value.field, err.value.rule) == (variable, "range")
    with pytest.raises(AcmiValidationError) as err:
        Settings.from_env({variable: str(ttl)})
    assert (err.value.field, err.value.rule) == (variable, "range")
