"""The seed's memory commands over HTTP (``/v1/memory/{entity}/...``, issue 13):
status, review, search, remember, active, daily-summary, topics, prune, handoff, debug,
export, import and archive. Each route is one ``MemoryAPI`` call (its round trips are
listed in ``acmi_core.memory.service``) or, for archive, ``memory_archive.archive_now``;
reads take a read key, writes a write key. The archive sink is ``ACMI_ARCHIVE_URL`` only,
never a URL from the request: a tenant must not choose where its data goes (the memory
function registers the s3 sink); search reads the archived raw events there too. Over a layer's
budget is a 400 (rule ``memory_budget``) naming the layer, the limit and the seed's fix,
with nothing stored."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query
from fastapi.responses import JSONResponse

from acmi_core.api.access import Authorized, registrar
from acmi_core.api.shapes import Json, read_fields, request_body
from acmi_core.base.errors import AcmiValidationError
from acmi_core.jobs import quarterly
from acmi_core.jobs import sink as archive_sink
from acmi_core.jobs.archive import archive_now, archived_reader
from acmi_core.memory.results import Exported, HandoffTaken
from acmi_core.memory.service import (
    DEFAULT_PRUNE_DAYS,
    MAX_QUERY_LEN,
    MAX_SEARCH_HITS,
    REMEMBER_LAYERS,
)
from acmi_core.memory.tree import parse_tree, render_tree

router = APIRouter(tags=["memory"])
route = registrar(router, "memory")

Entity = Annotated[str, Path(max_length=256, description="the memory's owner, e.g. agent:atlas")]


TEXT = {"type": "string", "description": "one line"}


@route("memory.status", response_model=Json)
async def status(req: Authorized, entity: Entity) -> JSONResponse:
    acmi = req.acmi
    return JSONResponse(await req.call(acmi.memory.status, entity))


@route(
    "memory.review",
    openapi_extra=request_body("nothing; the body may be empty", [], {}, optional=True),
    response_model=Json,
)
async def review(req: Authorized, entity: Entity) -> JSONResponse:
    acmi = req.acmi
    await read_fields(req.request, acmi, (), (), empty_ok=True)
    return JSONResponse(await req.call(acmi.memory.review, entity))


@route("memory.search", response_model=Json)
async def search(
    req: Authorized,
    entity: Entity,
    q: Annotated[str, Query(min_length=1, max_length=MAX_QUERY_LEN, description="terms")],
    limit: Annotated[int, Query(ge=1, le=MAX_SEARCH_HITS)] = 20,
    archived: Annotated[
        bool, Query(description="also the raw archived events (ACMI_ARCHIVE_URL), if set")
    ] = True,
) -> JSONResponse:
    acmi = req.acmi
    dest, no_sink = (
        archive_sink.open_destination(acmi.settings.archive_url) if archived else (None, None)
    )
    reader = archived_reader(acmi, dest) if dest else None
    found = await req.call(acmi.memory.search, entity, q, limit=limit, archived=reader)
    if no_sink:
        found["notes"] = [no_sink]
    return JSONResponse(found)


@route(
    "memory.remember",
    openapi_extra=request_body(
        "the line, its layer (default warm) and section",
        ["text"],
        {
            "text": TEXT,
            "layer": {"type": "string", "enum": list(REMEMBER_LAYERS)},
            "section": {"type": "string", "description": "a section key of the layer"},
            "topic": {"type": "string", "description": "layer topic: the topic's slug"},
        },
    ),
    response_model=Json,
    status_code=201,
)
async def remember(req: Authorized, entity: Entity) -> JSONResponse:
    acmi = req.acmi
    body = await read_fields(req.request, acmi, ("text",), ("layer", "section", "topic"))
    for name in ("layer", "section", "topic"):
        if name in body and not isinstance(body[name], str):
            raise AcmiValidationError(name, "type", "must be a string")
    stored = await req.call(
        acmi.memory.remember,
        entity,
        body["text"],
        layer=body.get("layer", "warm"),
        section=body.get("section"),
        topic=body.get("topic"),
    )
    return JSONResponse(stored, status_code=201)


@route("memory.active.get", response_model=Json)
async def active(req: Authorized, entity: Entity) -> JSONResponse:
    acmi = req.acmi
    return JSONResponse(await req.call(acmi.memory.active, entity))


@route(
    "memory.active.put",
    openapi_extra=request_body("the file's text", ["text"], {"text": {"type": "string"}}),
    response_model=Json,
)
async def set_active(req: Authorized, entity: Entity) -> JSONResponse:
    acmi = req.acmi
    body = await read_fields(req.request, acmi, ("text",))
    return JSONResponse(await req.call(acmi.memory.set_active, entity, body["text"]))


@route("memory.daily_summary", response_model=Json)
async def daily_summary(
    req: Authorized,
    entity: Entity,
    date: Annotated[str | None, Query(max_length=10, description="YYYY-MM-DD")] = None,
) -> JSONResponse:
    acmi = req.acmi
    return JSONResponse(await req.call(acmi.memory.daily_summary, entity, date))


@route(
    "memory.topics.create",
    openapi_extra=request_body(
        "the topic",
        ["slug", "name"],
        {"slug": {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,128}$"}, "name": TEXT},
    ),
    response_model=Json,
    status_code=201,
)
async def topic_create(req: Authorized, entity: Entity) -> JSONResponse:
    acmi = req.acmi
    body = await read_fields(req.request, acmi, ("slug", "name"))
    made = await req.call(acmi.memory.topic_create, entity, body["slug"], body["name"])
    return JSONResponse(made, status_code=201 if made["created"] else 200)


@route(
    "memory.prune",
    openapi_extra=request_body(
        "how old a dated item may be; the body may be empty",
        [],
        {"days": {"type": "integer", "minimum": 0, "maximum": 365, "default": DEFAULT_PRUNE_DAYS}},
        optional=True,
    ),
    response_model=Json,
)
async def prune(req: Authorized, entity: Entity) -> JSONResponse:
    acmi = req.acmi
    body = await read_fields(req.request, acmi, (), ("days",), empty_ok=True)
    days = body.get("days", DEFAULT_PRUNE_DAYS)
    return JSONResponse(await req.call(acmi.memory.prune, entity, days))


@route(
    "memory.handoff",
    openapi_extra=request_body(
        "what was done, in progress, next steps, decisions, gotchas",
        ["text"],
        {"text": {"type": "string", "maxLength": 16384}},
    ),
    response_model=Json,
)
async def handoff(req: Authorized, entity: Entity) -> JSONResponse:
    acmi = req.acmi
    body = await read_fields(req.request, acmi, ("text",))
    return JSONResponse(await req.call(acmi.memory.handoff, entity, body["text"]))


@route("memory.handoff.take", response_model=Json)
async def take_handoff(req: Authorized, entity: Entity) -> JSONResponse:
    acmi = req.acmi
    taken: HandoffTaken = {"handoff": await req.call(acmi.memory.take_handoff, entity)}
    return JSONResponse(taken)


@route("memory.debug", response_model=Json)
async def debug(req: Authorized, entity: Entity) -> JSONResponse:
    acmi = req.acmi
    return JSONResponse(await req.call(acmi.memory.debug, entity))


@route("memory.export", response_model=Json)
async def export(req: Authorized, entity: Entity) -> JSONResponse:
    acmi = req.acmi
    snapshot = await req.call(acmi.memory.export_snapshot, entity)
    files = {path: data.decode("utf-8") for path, data in render_tree(snapshot).items()}
    exported: Exported = {"entity": entity, "files": files}
    return JSONResponse(exported)


@route(
    "memory.import",
    openapi_extra=request_body(
        "the tree's files; strict: refuse files over budget",
        ["files"],
        {
            "files": {"type": "object", "additionalProperties": {"type": "string"}},
            "strict": {"type": "boolean", "default": False},
        },
    ),
    response_model=Json,
)
async def import_tree(req: Authorized, entity: Entity) -> JSONResponse:
    acmi = req.acmi
    body = await read_fields(req.request, acmi, ("files",), ("strict",))
    files: Any = body["files"]
    if not isinstance(files, dict) or not files:
        raise AcmiValidationError("files", "object", "must be a non-empty object path -> text")
    for path, text in files.items():
        if not isinstance(text, str):
            raise AcmiValidationError(f"files.{path}", "type", "must be the file's text")
    strict = body.get("strict", False)
    if not isinstance(strict, bool):
        raise AcmiValidationError("strict", "type", "must be true or false")
    snapshot = parse_tree({p: t.encode("utf-8", "surrogatepass") for p, t in files.items()})
    result = await req.call(acmi.memory.import_snapshot, entity, snapshot, strict=strict)
    return JSONResponse(result)


@route(
    "memory.archive",
    openapi_extra=request_body(
        "the retention and how many events at most; the body may be empty",
        [],
        {
            "retention_days": {
                "type": "integer",
                "minimum": 1,
                "maximum": quarterly.MAX_RETENTION_DAYS,
                "default": quarterly.DEFAULT_RETENTION_DAYS,
            },
            "max_events": {
                "type": "integer",
                "minimum": 1,
                "maximum": quarterly.MAX_EVENTS_MAX,
                "default": quarterly.MAX_EVENTS_PER_ENTITY,
            },
        },
        optional=True,
    ),
    response_model=Json,
)
async def archive(req: Authorized, entity: Entity) -> JSONResponse:
    acmi = req.acmi
    body = await read_fields(req.request, acmi, (), ("retention_days", "max_events"), empty_ok=True)
    # the destination is the deployment's, never the caller's (a tenant must not choose it)
    dest, no_sink = archive_sink.open_destination(acmi.settings.archive_url)
    done = await req.call(
        archive_now,
        acmi,
        entity,
        retention_days=body.get("retention_days"),
        max_events=body.get("max_events"),
        dest=dest,
        no_sink=no_sink,
    )
    return JSONResponse(done)
