"""The fleet dashboard: the page (``GET /dashboard``) and what it shows (``GET /v1/dashboard``).

The page is plain HTML, CSS and JavaScript shipped in the package (``acmi_core/api/static``,
package data): no CDN, so it works offline, and no secret in it. It asks for an API key,
keeps it in the tab's memory (sessionStorage only when asked to remember it for the tab),
and sends it as ``Authorization: Bearer`` to the JSON routes, never in a URL. It polls
``GET /v1/dashboard`` (one read row, any key scope: ``acmi.dashboard.read``, two round
trips) and resolves a HITL item through the HITL resolve route, which needs a write key.
Every value is rendered as text (``textContent``), never as markup: ids and summaries are
user data. The assets are at ``/dashboard?asset=<name>``, the one path of the page, so a
deployed page needs no route of its own for them (as the docs page does), and the page
answers with a Content-Security-Policy allowing only its own scripts and connections."""

from __future__ import annotations

import functools
from importlib import resources
from typing import Final

from fastapi import APIRouter, Request
from fastapi.responses import Response

from acmi_core.api.access import Authorized, public_route, registrar
from acmi_core.api.shapes import Json, StoredJSON
from acmi_core.base.errors import NotFound
from acmi_core.operations.params.dashboard import DashboardReadParams

router = APIRouter(tags=["dashboard"], default_response_class=StoredJSON)
route = registrar(router, "dashboard")

ASSETS: Final = {
    "dashboard.js": "text/javascript; charset=utf-8",
    "dashboard.css": "text/css; charset=utf-8",
}
# Only the page's own files run and only its origin is called: a value that slipped into
# markup could not load or send anything elsewhere.
HEADERS: Final = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


@functools.cache
def _static(name: str) -> bytes:
    return resources.files("acmi_core.api").joinpath("static", name).read_bytes()


async def page(request: Request) -> Response:
    asset = request.query_params.get("asset")
    if asset is None:
        return Response(_static("dashboard.html"), media_type="text/html; charset=utf-8",
                        headers=HEADERS)  # fmt: skip
    if asset not in ASSETS:
        raise NotFound(
            f"asset: no dashboard asset {asset!r}; one of {sorted(ASSETS)}", field="asset"
        )
    return Response(_static(asset), media_type=ASSETS[asset], headers=HEADERS)


router.routes.append(public_route("dashboard.page", page))


@route("dashboard.read", response_model=Json)
async def read(req: Authorized) -> StoredJSON:
    body = await req.run(await req.params(DashboardReadParams))
    return StoredJSON(body, headers={"Cache-Control": "no-store"})
