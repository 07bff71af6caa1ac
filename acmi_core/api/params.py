"""A route's input from its row's params model, the one definition every surface shares.

:class:`Takes` says where each field of the model arrives on HTTP: in the path (the
names in the row's path), in the query, or as a field of a JSON object body. From it:
the parameters FastAPI solves for the path and the query (their type and bounds are the
model field's, so the OpenAPI document shows them), the OpenAPI request body (the body
fields' schema from ``model_json_schema``), and :func:`read_params`, which reads the body
(``api/body.py``: the size cap, UTF-8, JSON, depth; rule ``object``), refuses a field the
route does not take (rule ``unknown``, naming it: a typo would otherwise be dropped), and
validates everything with ``bind.validated`` (the field and the rule, as the MCP tools and
the CLI name them)."""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Final

from fastapi import Path, Query, Request

from acmi_core.api.shapes import object_body, refuse_unknown, require
from acmi_core.base.errors import AcmiValidationError
from acmi_core.operations.bind import params_model, validated
from acmi_core.operations.model import Operation

if TYPE_CHECKING:
    from acmi_core.client import Acmi
    from acmi_core.operations.params import Params

_PATH_NAME: Final = re.compile(r"\{(\w+)(?::\w+)?\}")
# Methods whose fields beyond the path are the query's unless the route says otherwise.
_QUERY_METHODS: Final = frozenset({"GET", "DELETE"})


@dataclass(frozen=True, slots=True)
class Takes:
    """Where a route's params arrive: ``path``, ``query`` and ``body`` are model field
    names; ``wire``: a field's name on HTTP where it is not the field's own;
    ``aliases``: another name a body accepts for a field (both at once: rule ``one_of``);
    ``optional_body``: an empty body is ``{}``; ``about``: the body's OpenAPI description;
    ``defaults``: a query field's default on this route where it is not the model's;
    ``required``: a field this route requires though the model has a default;
    ``reader``: the handler reads the body itself (one that is not an object of the
    model's fields) and gives its fields to :func:`read_params`."""

    row: Operation
    path: tuple[str, ...]
    query: tuple[str, ...]
    body: tuple[str, ...]
    wire: Mapping[str, str] = field(default_factory=dict)
    aliases: Mapping[str, str] = field(default_factory=dict)
    optional_body: bool = False
    about: str = ""
    defaults: Mapping[str, Any] = field(default_factory=dict)
    reader: bool = False
    required: tuple[str, ...] = ()

    def name(self, field_name: str) -> str:
        return self.wire.get(field_name, field_name)

    @property
    def fields(self) -> tuple[str, ...]:
        return (*self.path, *self.query, *self.body)

    @property
    def model(self) -> type[Params]:
        return params_model(self.row)


def takes(
    row: Operation,
    *,
    query: tuple[str, ...] | None = None,
    exclude: tuple[str, ...] = (),
    wire: Mapping[str, str] | None = None,
    aliases: Mapping[str, str] | None = None,
    optional_body: bool = False,
    about: str = "",
    defaults: Mapping[str, Any] | None = None,
    reader: bool = False,
    required: tuple[str, ...] = (),
) -> Takes:
    """The route of ``row``: its path's names are path fields; ``query`` the query's
    (default: every other field on GET and DELETE, none otherwise); the rest, but
    ``exclude`` (fields this route leaves at their default), the body's."""
    assert row.path is not None and row.method is not None, row.name
    wire = dict(wire or {})
    by_wire = {name: f for f, name in wire.items()}
    fields = tuple(params_model(row).model_fields)
    path = tuple(by_wire.get(n, n) for n in _PATH_NAME.findall(row.path))
    rest = tuple(f for f in fields if f not in path and f not in exclude)
    if query is None:
        query = rest if row.method in _QUERY_METHODS else ()
    body = tuple(f for f in rest if f not in query)
    named = (*path, *query, *exclude, *(aliases or {}).values(), *(defaults or {}), *required)
    unknown = set(named)
    if unknown - set(fields):
        raise ValueError(f"{row.name}: no fields {sorted(unknown - set(fields))} in its model")
    if body and row.method in _QUERY_METHODS:
        raise ValueError(f"{row.name}: a {row.method} route takes no body ({body})")
    return Takes(
        row, path, query, body, wire, dict(aliases or {}), optional_body, about,
        dict(defaults or {}), reader, required,
    )  # fmt: skip


def solved_parameters(t: Takes) -> list[inspect.Parameter]:
    """The path and query fields as the parameters FastAPI solves (and documents): each
    the model field's type and constraints, under its name on HTTP."""
    model = t.model
    shown = []
    for names, where in ((t.path, Path), (t.query, Query)):
        for name in names:
            info = model.model_fields[name]
            marker = where(
                alias=t.name(name),
                description=info.description,
                json_schema_extra=info.json_schema_extra,
            )
            # a path value is always given; ``required``: this route's query must give it
            given = where is Path or name in t.required or info.is_required()
            default = inspect.Parameter.empty if given else t.defaults.get(name, info.default)
            shown.append(
                inspect.Parameter(
                    name,
                    inspect.Parameter.KEYWORD_ONLY,
                    default=default,
                    annotation=Annotated[info.annotation, *info.metadata, marker],
                )
            )
    return shown


def request_body(t: Takes) -> dict[str, Any]:
    """``openapi_extra`` for the body: the body fields' schema, from the model, closed
    (any other field is refused)."""
    schema = t.model.model_json_schema()
    props = schema.get("properties", {})
    required = set(schema.get("required", ()))
    body_schema: dict[str, Any] = {
        "type": "object",
        "properties": {t.name(f): props[f] for f in t.body},
        "required": [t.name(f) for f in t.body if f in required],
        "additionalProperties": False,
    }
    if "$defs" in schema:
        body_schema["$defs"] = schema["$defs"]
    return {
        "requestBody": {
            "required": not t.optional_body,
            "description": t.about,
            "content": {"application/json": {"schema": body_schema}},
        }
    }


async def read_params(
    t: Takes, request: Request, acmi: Acmi, solved: Mapping[str, Any], given: Mapping[str, Any]
) -> Params:
    """The route's params: ``solved`` (its path and query values, as FastAPI checked
    them), then the body's fields (``given``: as the handler's own reader read them),
    validated by the row's model."""
    values = {**solved, **given}
    if t.reader:
        if set(given) != set(t.body):
            raise TypeError(f"{t.row.name}: the handler gives {sorted(t.body)}")
    elif t.body or t.optional_body:  # an optional body may hold no field: {} or none
        if request.scope.get("query_string"):
            _refuse_body_fields_in_query(t, request)
        body = await object_body(request, acmi, optional=t.optional_body)
        for alias, name in t.aliases.items():
            if alias in body:
                if t.name(name) in body:
                    raise AcmiValidationError(
                        t.name(name), "one_of", f"give {t.name(name)} or {alias}, not both"
                    )
                body[t.name(name)] = body.pop(alias)
        by_wire = {t.name(f): f for f in t.body}
        refuse_unknown(body, tuple(by_wire))
        require(body, *(t.name(f) for f in t.required if f in t.body))
        values.update((by_wire[k], v) for k, v in body.items())
    try:
        # strict: a JSON body's values have their types (FastAPI converted the query's)
        return validated(t.row, values, strict=True)
    except AcmiValidationError as exc:
        head, dot, tail = exc.field.partition(".")
        shown = t.name(head)
        if shown == head:
            raise
        message = exc.message.removeprefix(f"{exc.field}: ")
        raise AcmiValidationError(shown + dot + tail, exc.rule, message) from None


def _refuse_body_fields_in_query(t: Takes, request: Request) -> None:
    """A body field given in the query (``POST .../bootstrap?format=markdown``) would be
    dropped without a word, as FastAPI drops every query parameter a route does not
    declare: refused instead (rule ``in_body``), naming where it belongs."""
    in_body = {t.name(f) for f in t.body} | set(t.aliases)
    for name in request.query_params:
        if name in in_body and name not in t.query:
            raise AcmiValidationError(
                name, "in_body", f"{request.method} takes {name} in its JSON body, not the query"
            )
