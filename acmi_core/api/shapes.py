"""What the route modules share: the response class, the type aliases, the OpenAPI request
body, and reading a JSON object body field by field.

Reading a body is :func:`acmi_core.api.body.read_raw` (size cap) and ``parse_json``, no
round trip to the store. Every refusal is a 4xx naming the field and the rule:
``object`` (the body is not a JSON object), ``unknown`` (a field the route does not
take: a typo would otherwise be dropped silently) and ``required``."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Annotated, Any

from fastapi import Query, Request
from fastapi.responses import JSONResponse

from acmi_core.api.body import parse_json, read_raw
from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.pages import MAX_CURSOR_LEN, MAX_PAGE_SIZE
from acmi_core.base.stored import render_json
from acmi_core.client import Acmi


class StoredJSON(JSONResponse):
    """JSON rendered exactly from what a read returned (see ``render_json``): stored
    numbers as written, no pydantic pass (whose depth limit, 255, turned deep stored
    values into 500s). A JSONResponse only so that the OpenAPI document shows the
    response model."""

    def render(self, content: Any) -> bytes:
        return render_json(content)


Json = dict[str, Any]
Cursor = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=MAX_CURSOR_LEN,
        description="next_cursor of the previous page, unchanged; omit for the first page",
    ),
]
PageLimit = Annotated[
    int, Query(ge=1, le=MAX_PAGE_SIZE, description=f"page size, at most {MAX_PAGE_SIZE}")
]


def request_body(
    description: str,
    required: Iterable[str] | None = None,
    props: Mapping[str, Any] | None = None,
    *,
    optional: bool = False,
    closed: bool = False,
) -> dict[str, Any]:
    """``openapi_extra`` for a JSON object body (the routes read it themselves). Without
    ``required`` and ``props`` the schema is any object; ``optional``: the body may be
    empty; ``closed``: the schema says ``additionalProperties: false``."""
    schema: dict[str, Any] = {"type": "object"}
    if required is not None:
        schema["required"] = list(required)
    if props is not None:
        schema["properties"] = dict(props)
    if closed:
        schema["additionalProperties"] = False
    return {
        "requestBody": {
            "required": not optional,
            "description": description,
            "content": {"application/json": {"schema": schema}},
        }
    }


async def object_body(
    request: Request, acmi: Acmi, *, field: str = "body", optional: bool = False
) -> dict[str, Any]:
    """The body as a JSON object (rule ``object`` on ``field`` otherwise); with
    ``optional`` an empty body is ``{}``."""
    raw = await read_raw(request, acmi.settings.max_body_bytes)
    if optional and not raw.strip():
        return {}
    body = parse_json(raw)
    if not isinstance(body, dict):
        raise AcmiValidationError(field, "object", "must be a JSON object")
    return body


def refuse_unknown(body: Mapping[str, Any], known: Collection[str]) -> None:
    """Rule ``unknown`` on the first field (sorted) that is not in ``known``."""
    unknown = sorted(set(body) - set(known))
    if unknown:
        raise AcmiValidationError(
            unknown[0], "unknown", f"is not a field here (fields: {', '.join(known)})"
        )


def require(body: Mapping[str, Any], *names: str) -> list[Any]:
    """The values of ``names``, in order; rule ``required`` on the first missing."""
    for name in names:
        if name not in body:
            raise AcmiValidationError(name, "required", "is required")
    return [body[name] for name in names]


def check_fields(
    body: Mapping[str, Any], required: tuple[str, ...], optional: tuple[str, ...] = ()
) -> None:
    """Nothing unknown first (a typo is named rather than the field it misspells), then
    every required field present."""
    refuse_unknown(body, (*required, *optional))
    require(body, *required)


async def read_fields(
    request: Request,
    acmi: Acmi,
    required: tuple[str, ...],
    optional: tuple[str, ...] = (),
    *,
    empty_ok: bool = False,
) -> dict[str, Any]:
    """The body as a JSON object holding every ``required`` field and nothing beyond
    ``required`` and ``optional``; ``empty_ok``: an empty body is ``{}``."""
    body = await object_body(request, acmi, optional=empty_ok)
    check_fields(body, required, optional)
    return body
