"""The MCP server over streamable HTTP, stateless: what the mcp Lambda function serves
(``POST /mcp``, behind mangum in ``functions/mcp.py``).

Stateless (the SDK's ``stateless=True``, ``json_response=True``): each POST carries one
JSON-RPC message and gets one JSON answer, with no session to find again, so any Lambda
instance can serve any request and nothing outlives the invocation. The SDK's session
manager runs once per instance, so one is made per request; the FastMCP server behind it
(``build_server``, ~45 ms to build) is kept per (tenant, scope) while the process is warm.

A request goes through, in order:

1. the route: ``POST /mcp`` only. A GET would open an SSE stream that an invocation cannot
   hold (it hangs), and a stateless server has no session to DELETE: 405 with
   ``Allow: POST``; any other path is 404.
2. the caller: ``Authorization: Bearer <key>`` checked as every HTTP route checks it
   (``Authenticator.api_key``, cached per process); none or an unknown key is a 401 naming
   ``authorization`` and the rule, before any tool can run. The key's tenant and scope
   choose the server: a read-only key gets tool errors from write tools.
3. the body: at most ``settings.max_body_bytes`` (ACMI_MAX_BODY_BYTES, the API's cap), 413
   beyond.
4. the message, if the SDK could not decode it (``mcp/arguments.py``: nesting, long
   integers, lone surrogates): a tool error naming the argument and the rule;
5. the SDK's transport: Content-Type and Accept checks, JSON-RPC parsing (bad JSON is a
   JSON-RPC parse error, HTTP 400), the call.

Errors of steps 1-3 have the API's JSON error body: error, message, field, rule.

The tools are the set ``ACMI_MCP_TOOLS`` names (``build_server``). ``acmi serve`` answers
``/mcp`` with this same app beside the HTTP API (``with_mcp``).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Final

from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from acmi_core import Acmi
from acmi_core.api.status import error_answer, error_body
from acmi_core.auth.apikeys import Scope as KeyScope
from acmi_core.auth.authenticator import Authenticator
from acmi_core.auth.principal import TENANT_HEADER
from acmi_core.auth.tiers import TierGate
from acmi_core.base.errors import AcmiError, PayloadTooLarge
from acmi_core.mcp.arguments import refusal
from acmi_core.mcp.server import build_server, protocol_server

log = logging.getLogger("acmi.mcp")

MCP_PATH: Final = "/mcp"
ALLOWED_METHODS: Final = "POST"

# Servers kept per (tenant, scope) in one warm process. A Lambda instance serves one
# request at a time and few tenants call one instance: the bound only caps memory if many do.
MAX_SERVERS: Final = 16

# Why no Host/Origin check (the SDK's DNS-rebinding protection): it defends a server on
# localhost or a private network against a web page whose domain was re-pointed at it, so
# that the victim's browser talks to the server as if same-origin, with the browser's
# ambient credentials. Here the server is public behind API Gateway, which only routes
# requests for its own domain (execute-api, or a custom domain), and every request must
# carry a bearer key that a browser never attaches by itself (no cookies, no ambient
# credentials; a cross-origin page cannot set Authorization without a CORS preflight, and
# the API enables no CORS). The check has nothing to add, and its default allow-list
# (localhost) answers API Gateway's Host with 421 Invalid Host header. The SDK still
# checks Content-Type on every POST.
TRANSPORT_SECURITY: Final = TransportSecuritySettings(enable_dns_rebinding_protection=False)


def error_response(exc: AcmiError) -> JSONResponse:
    """The API's answer to ``exc`` (``api/status.py``: the one place errors map to HTTP)."""
    status, body, headers = error_answer(exc)
    return JSONResponse(body, status_code=status, headers=headers)


def _error(
    code: str,
    message: str,
    field: str,
    rule: str,
    status: int,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    body = error_body(code, message, field, rule)
    return JSONResponse(body, status_code=status, headers=dict(headers or {}))


class McpHttpApp:
    """The ASGI app: one request, authenticated, handed to a stateless SDK transport."""

    def __init__(
        self,
        acmi: Acmi,
        authenticator: Authenticator | None = None,
        tiers: TierGate | None = None,
    ) -> None:
        self._acmi = acmi
        self._auth = authenticator or Authenticator(acmi.store, acmi.settings)
        self._max_body = acmi.settings.max_body_bytes
        # the tiers of keys bound to an agent, cached per process (auth/tiers.py)
        self.tiers = tiers or TierGate()
        self._servers: OrderedDict[tuple[str, KeyScope, str | None], Server[Any, Any]] = (
            OrderedDict()
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # mangum runs no lifespan (lifespan="off")
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self._serve(scope, receive, tracking_send)
        except AcmiError as exc:
            if started:  # the SDK answered already: nothing more can be sent
                raise
            await error_response(exc)(scope, receive, send)
        except Exception:
            # mangum would turn this into a text/plain 500: answer the API's JSON instead
            log.exception("unhandled error")
            if started:
                raise
            await _error("internal_error", "unexpected server error", "server", "internal", 500)(
                scope, receive, send
            )

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", "")).rstrip("/") or "/"
        if path != MCP_PATH:
            message = f"path: no route {path}; the MCP endpoint is POST {MCP_PATH}"
            await _error("not_found", message, "path", "route_exists", 404)(scope, receive, send)
            return
        if scope.get("method") != ALLOWED_METHODS:
            message = (
                f"method: {MCP_PATH} takes POST only (stateless streamable HTTP: no SSE stream "
                "to GET, no session to DELETE)"
            )
            allow = {"Allow": ALLOWED_METHODS}
            refused = _error("method_not_allowed", message, "method", "method_allowed", 405, allow)
            await refused(scope, receive, send)
            return
        headers = _headers(scope)
        principal = self._auth.api_key(
            headers.get("authorization"),
            KeyScope.READ,
            tenant_header=headers.get(TENANT_HEADER.lower()),
        )
        body = await self._read_body(headers, receive)
        undecodable = refusal(body)
        if undecodable is not None:  # what the SDK cannot decode: answered as a tool error
            await JSONResponse(undecodable[1], status_code=undecodable[0])(scope, receive, send)
            return
        server = self._server(principal.tenant, principal.scope, principal.agent)
        manager = StreamableHTTPSessionManager(
            app=server,
            json_response=True,
            stateless=True,
            security_settings=TRANSPORT_SECURITY,
        )
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        async with manager.run():
            await manager.handle_request(scope, replay, send)

    async def _read_body(self, headers: Mapping[str, str], receive: Receive) -> bytes:
        """The whole body, refused past the cap before it is parsed (as the API does)."""
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self._max_body:
            raise self._too_large()
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self._max_body:
                raise self._too_large()
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)

    def _too_large(self) -> PayloadTooLarge:
        return PayloadTooLarge("body", "max_bytes", f"must be at most {self._max_body} bytes")

    def _server(self, tenant: str, scope: KeyScope, agent: str | None) -> Server[Any, Any]:
        """The low-level server of ``build_server`` for the caller's tenant, scope and
        bound agent, built on its first request and kept (least recently used out past
        MAX_SERVERS)."""
        key = (tenant, scope, agent)
        server = self._servers.get(key)
        if server is None:
            # FastMCP offers no public handle on the low-level server it wraps, and its
            # own streamable_http_app() keeps a single session manager (usable once).
            bound = self._acmi.for_tenant(tenant)
            built = build_server(
                bound, scope, self._acmi.settings.mcp_tools, agent=agent, tiers=self.tiers
            )
            server = protocol_server(built)
            self._servers[key] = server
            while len(self._servers) > MAX_SERVERS:
                self._servers.popitem(last=False)
        self._servers.move_to_end(key)
        return server


def with_mcp(app: ASGIApp, mcp: McpHttpApp) -> ASGIApp:
    """``app`` with ``mcp`` answering ``/mcp`` (``acmi serve``: the HTTP API and the
    endpoint the mcp function serves, with the same key auth, on one port)."""

    async def dispatch(scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", ""))
        if scope["type"] == "http" and (path.rstrip("/") == MCP_PATH):
            await mcp(scope, receive, send)
        else:
            await app(scope, receive, send)

    return dispatch


def _headers(scope: Scope) -> dict[str, str]:
    """Request headers by lower-case name (ASGI gives them lower-case, as bytes)."""
    return {
        name.decode("latin-1"): value.decode("latin-1") for name, value in scope.get("headers", ())
    }
