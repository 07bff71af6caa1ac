"""The seed's memory commands over HTTP (``/v1/memory/{entity}/...``, issue 13):
status, review, search, get (a file's lines), forget (one line), remember, active,
daily-summary, topics, prune, handoff, debug, export, import and archive. Each route is
one ``MemoryAPI`` call (its round trips are listed in ``acmi_core.memory.service``) or,
for archive, ``memory_archive.archive_now``; reads take a read key, writes a write key. The archive
sink is ``ACMI_ARCHIVE_URL`` only, never a URL from the request: a tenant must not choose
where its data goes (the memory function registers the s3 sink); search reads the
archived raw events there too. Over a layer's budget is a 400 (rule ``memory_budget``)
naming the layer, the limit and the seed's fix, with nothing stored."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query
from fastapi.responses import JSONResponse

from acmi_core.api.access import Authorized, registrar
from acmi_core.api.shapes import Json, read_fields, request_body
from acmi_core.base.errors import AcmiValidationError
from acmi_core.jobs import sink as archive_sink
from acmi_core.jobs.archive import archive_now, archived_reader
from acmi_core.memory.results import Exported, HandoffTaken
from acmi_core.memory.service import (
    MAX_QUERY_LEN,
    MAX_SEARCH_HITS,
    REMEMBER_LAYERS,
)
from acmi_core.memory.tree import parse_tree, render_tree
from acmi_core.operations.params.memory import (
    MemoryActiveGetParams,
    MemoryActivePutParams,
    MemoryArchiveParams,
    MemoryDailySummaryParams,
    MemoryDebugParams,
    MemoryExportParams,
    MemoryForgetParams,
    MemoryGetParams,
    MemoryHandoffParams,
    MemoryHandoffTakeParams,
    MemoryPruneParams,
    MemoryReviewParams,
    MemoryStatusParams,
    MemoryTopicsCreateParams,
)

router = APIRouter(tags=["memory"])
route = registrar(router, "memory")

Entity = Annotated[str, Path(max_length=256, description="the memory's owner, e.g. agent:atlas")]


TEXT = {"type": "string", "description": "one line"}


@route("memory.status", response_model=Json)
async def status(req: Authorized) -> JSONResponse:
    return JSONResponse(await req.run(await req.params(MemoryStatusParams)))


@route(
    "memory.review", about="nothing; the body may be empty", optional_body=True, response_model=Json
)
async def review(req: Authorized) -> JSONResponse:
    return JSONResponse(await req.run(await req.params(MemoryReviewParams)))


# Its own query: the terms are q here (query in the params model), and archived (the
# deployment's archive read too) is this route's alone.
@route("memory.search", response_model=Json)
async def search(
    req: Authorized,
    entity: Entity,
    q: Annotated[str, Query(min_length=1, max_length=MAX_QUERY_LEN, description="terms")],
    limit: Annotated[int, Query(ge=1, le=MAX_SEARCH_HITS)] = 20,
    archived: Annotated[
        bool, Query(description="also the raw archived events (ACMI_ARCHIVE_URL), if set")
    ] = True,
    mode: Annotated[
        str, Query(max_length=16, description="hybrid (BM25 + embeddings) | keyword")
    ] = "hybrid",
) -> JSONResponse:
    acmi = req.acmi
    dest, no_sink = (
        archive_sink.open_destination(acmi.settings.archive_url) if archived else (None, None)
    )
    reader = archived_reader(acmi, dest) if dest else None
    found = await req.call(acmi.memory.search, entity, q, limit=limit, archived=reader, mode=mode)
    if no_sink:
        found["notes"] = [no_sink]
    return JSONResponse(found)


@route("memory.get", response_model=Json)
async def get(req: Authorized) -> JSONResponse:
    return JSONResponse(await req.run(await req.params(MemoryGetParams)))


@route("memory.forget", about="the line: path and line, or text", response_model=Json)
async def forget(req: Authorized) -> JSONResponse:
    return JSONResponse(await req.run(await req.params(MemoryForgetParams)))


# Its own reader: a layer, section or topic of another type is refused before the core
# (rule type), as the params model's strict check would not name it the same.
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
            "ttl": {"type": "string", "description": "time to live: 30m, 24h, 7d (not daily)"},
        },
    ),
    response_model=Json,
    status_code=201,
)
async def remember(req: Authorized, entity: Entity) -> JSONResponse:
    acmi = req.acmi
    body = await read_fields(req.request, acmi, ("text",), ("layer", "section", "topic", "ttl"))
    for name in ("layer", "section", "topic", "ttl"):
        if name in body and not isinstance(body[name], str):
            raise AcmiValidationError(name, "type", "must be a string")
    stored = await req.call(
        acmi.memory.remember,
        entity,
        body["text"],
        layer=body.get("layer", "warm"),
        section=body.get("section"),
        topic=body.get("topic"),
        ttl=body.get("ttl"),
    )
    return JSONResponse(stored, status_code=201)


# GET reads; the MCP tool's text (replace first) is PUT here.
@route("memory.active.get", exclude=("text",), response_model=Json)
async def active(req: Authorized) -> JSONResponse:
    return JSONResponse(await req.run(await req.params(MemoryActiveGetParams)))


@route("memory.active.put", about="the file's text", response_model=Json)
async def set_active(req: Authorized) -> JSONResponse:
    return JSONResponse(await req.run(await req.params(MemoryActivePutParams)))


@route("memory.daily_summary", response_model=Json)
async def daily_summary(req: Authorized) -> JSONResponse:
    return JSONResponse(await req.run(await req.params(MemoryDailySummaryParams)))


@route("memory.topics.create", about="the topic", response_model=Json, status_code=201)
async def topic_create(req: Authorized) -> JSONResponse:
    made = await req.run(await req.params(MemoryTopicsCreateParams))
    return JSONResponse(made, status_code=201 if made["created"] else 200)


@route(
    "memory.prune",
    about="how old a dated item may be; the body may be empty",
    optional_body=True,
    response_model=Json,
)
async def prune(req: Authorized) -> JSONResponse:
    return JSONResponse(await req.run(await req.params(MemoryPruneParams)))


# PUT leaves one (the text or the template's parts: the core says which is missing);
# taking it is POST .../handoff/take.
@route(
    "memory.handoff",
    about="what was done, in progress, next steps, decisions, gotchas",
    response_model=Json,
)
async def handoff(req: Authorized) -> JSONResponse:
    return JSONResponse(await req.run(await req.params(MemoryHandoffParams)))


@route("memory.handoff.take", response_model=Json)
async def take_handoff(req: Authorized) -> JSONResponse:
    taken: HandoffTaken = {"handoff": await req.run(await req.params(MemoryHandoffTakeParams))}
    return JSONResponse(taken)


@route("memory.debug", response_model=Json)
async def debug(req: Authorized) -> JSONResponse:
    return JSONResponse(await req.run(await req.params(MemoryDebugParams)))


@route("memory.export", response_model=Json)
async def export(req: Authorized) -> JSONResponse:
    params = await req.params(MemoryExportParams)
    snapshot = await req.run(params)
    files = {path: data.decode("utf-8") for path, data in render_tree(snapshot).items()}
    exported: Exported = {"entity": params.entity, "files": files}
    return JSONResponse(exported)


# Its own reader: the files' checks name each file (files.<path>), which the params
# model's dict[str, str] does not.
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


# The core callable is the job's, given the deployment's sink: called here, not by run.
@route(
    "memory.archive",
    about="the retention and how many events at most; the body may be empty",
    optional_body=True,
    response_model=Json,
)
async def archive(req: Authorized) -> JSONResponse:
    acmi = req.acmi
    params = await req.params(MemoryArchiveParams)
    # the destination is the deployment's, never the caller's (a tenant must not choose it)
    dest, no_sink = archive_sink.open_destination(acmi.settings.archive_url)
    done = await req.call(
        archive_now,
        acmi,
        params.entity,
        retention_days=params.retention_days,
        max_events=params.max_events,
        dest=dest,
        no_sink=no_sink,
    )
    return JSONResponse(done)
