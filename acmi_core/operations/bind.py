"""A row made callable: its params model and its core callable bound on a tenant's client,
shared by every surface that calls the core in this process (the MCP tools, the CLI's
store backend), so they validate and call an operation the same way.

Imported only by those surfaces (the table itself stays pure data): the params models
and the client's modules load on first use, by the names the row gives."""

from __future__ import annotations

import dataclasses
import functools
import importlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from pydantic import ValidationError

from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.model import pydantic_rule
from acmi_core.operations.model import Operation

if TYPE_CHECKING:
    from acmi_core.client.facade import Acmi
    from acmi_core.operations.params import Params


def resolve(name: str) -> Any:
    """``"<module>:<qualname>"`` imported and looked up."""
    module, _, qualname = name.partition(":")
    value: Any = importlib.import_module(module)
    for part in qualname.split("."):
        value = getattr(value, part)
    return value


@functools.cache
def params_model(row: Operation) -> type[Params]:
    """The row's params model (``Operation.params``), imported on first use."""
    from acmi_core.operations.params import Params

    assert row.params is not None, row.name
    model = resolve(row.params)
    if not (isinstance(model, type) and issubclass(model, Params)):
        raise TypeError(f"operation {row.name!r}: {row.params} is not a params model")
    return model


def validated(row: Operation, values: Mapping[str, Any], *, strict: bool = False) -> Params:
    """``values`` as the row's params; a failure is the AcmiValidationError naming the
    first field and its rule (as the API and the MCP tools name it), a field the model
    does not take before any other (rule ``unknown``, as the API's bodies). ``strict``: no
    conversion between types (a JSON body's ``"5000"`` is not the integer 5000)."""
    try:
        return params_model(row).model_validate(dict(values), strict=strict)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        # a field the operation does not take first, by the rule the API names it
        # (``unknown``): a typo is named rather than the field it misspells
        extra = [e for e in errors if e["type"] == "extra_forbidden"]
        if extra:
            field = ".".join(str(p) for p in extra[0]["loc"])
            fields = ", ".join(params_model(row).model_fields)
            raise AcmiValidationError(
                field, "unknown", f"is not a field here (fields: {fields})"
            ) from None
        first = errors[0]
        field = ".".join(str(p) for p in first["loc"]) or "params"
        raise AcmiValidationError(field, pydantic_rule(first["type"]), first["msg"]) from None


# Where the client keeps each API a row's call names ("<module>:<Class>.<method>"): the
# attribute of ``Acmi`` holding it ("" for the facade itself).
CLIENT_APIS: Final = {
    "Acmi": "",
    "EntityAPI": "entities",
    "ProfileAPI": "profile",
    "SignalsAPI": "signals",
    "TimelineAPI": "timeline",
    "AgentAPI": "agents",
    "LockAPI": "locks",
    "WorkAPI": "work",
    "HitlAPI": "hitl",
    "WorkflowAPI": "workflows",
    "MemoryAPI": "memory",
    "Bootstrapper": "bootstrap",
    "WakeAPI": "wake",
    "DashboardAPI": "dashboard",
}


def core_call(acmi: Acmi, row: Operation) -> Callable[..., Any]:
    """The row's core callable, bound on the tenant's client; with traces on, run in a
    span of the row's name (unless one is open: the surface's own)."""
    assert row.call is not None, row.name
    if acmi.settings.traces:
        from acmi_core.client.tracing import traced_call

        call: Callable[..., Any] = traced_call(acmi, row.name, lambda view: _bound(view, row))
        return call
    return _bound(acmi, row)


def _bound(acmi: Acmi, row: Operation) -> Callable[..., Any]:
    assert row.call is not None, row.name
    owner, _, method = row.call.partition(":")[2].rpartition(".")
    attribute = CLIENT_APIS[owner]
    api = getattr(acmi, attribute) if attribute else acmi
    bound: Callable[..., Any] = getattr(api, method)
    return bound


def fields(params: Params) -> dict[str, Any]:
    """The params' fields by name, as given (no copy: the core checks what it gets)."""
    return {name: getattr(params, name) for name in type(params).model_fields}


def plain(result: Any) -> Any:
    """A core answer as JSON-ready values: its ``to_dict()``, a dataclass's fields (one
    level, as the surfaces always built them), anything else as it is."""
    if hasattr(result, "to_dict"):
        return result.to_dict()
    if dataclasses.is_dataclass(result) and not isinstance(result, type):
        return {f.name: getattr(result, f.name) for f in dataclasses.fields(result)}
    return result


def call_core(acmi: Acmi, row: Operation, params: Params) -> Any:
    """The row's core callable, bound at the call, given the params' fields by name."""
    return plain(core_call(acmi, row)(**fields(params)))
