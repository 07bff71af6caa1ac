"""The wake bundle: ``GET /v1/agents/{agent}/bootstrap`` reads it, ``POST`` logs a spawn
and reads it in the same step. One round trip either way (``store/lua/bootstrap.lua``).

The body is the bundle's text exactly as the budget measured it: JSON, or Markdown
(``format=markdown``) for a prompt. Its size and estimated tokens are in the
``X-Acmi-Bundle-Bytes`` and ``X-Acmi-Bundle-Tokens`` headers; what a budget cut is
listed in the bundle itself. The query and the body are the rows' params models'."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import Response

from acmi_core.api.access import Authorized, registrar
from acmi_core.bootstrap.bundle import Bundle
from acmi_core.operations.params.memory import BootstrapReadParams, BootstrapSpawnParams

router = APIRouter(tags=["bootstrap"])
route = registrar(router, "bootstrap")

RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "the bundle: JSON, or text/markdown with format=markdown",
        "content": {"application/json": {}, "text/markdown": {}},
    }
}


def _answer(bundle: Bundle) -> Response:
    media = "application/json" if bundle.format == "json" else "text/markdown; charset=utf-8"
    return Response(
        bundle.text.encode("utf-8", "surrogatepass").decode("utf-8", "replace"),
        media_type=media,
        headers={
            "X-Acmi-Bundle-Bytes": str(bundle.size_bytes),
            "X-Acmi-Bundle-Tokens": str(bundle.tokens),
        },
    )


# The route's format stays json (the MCP tool's: markdown, for a prompt).
@route("bootstrap.read", exclude=("spawn",), defaults={"format": "json"}, responses=RESPONSES)
async def read_bundle(req: Authorized) -> Response:
    return _answer(await req.run(await req.params(BootstrapReadParams)))


@route(
    "bootstrap.spawn",
    required=("spawn",),
    about="the spawn to log and the bundle's options",
    responses=RESPONSES,
)
async def spawn_and_read(req: Authorized) -> Response:
    return _answer(await req.run(await req.params(BootstrapSpawnParams)))
