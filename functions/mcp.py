"""POST /mcp: the MCP server over stateless streamable HTTP (``acmi_core.mcp.http``)
behind mangum, lifespan off.

Its own function: the MCP SDK's import (~0.8 s) falls in this cold start only. As with
every handler, importing the module does no I/O (the SDK is imported now, in Lambda's init
phase); settings, the token secret, the store and the app are built on the first
invocation. The log line names the route and the status, never a header (the bearer key).
"""

from __future__ import annotations

import logging

import acmi_core.mcp.http  # noqa: F401  (the SDK's import, in the init phase)
from acmi_core import Settings, Store
from acmi_core.base.lambdas import FunctionSpec, function
from functions.runtime import Invoke, LambdaFunction, asgi_invoke

# The SDK logs each request's lifecycle at INFO (manager started, request type, shutting
# down): three lines an invocation under the function's INFO level. Its warnings stay.
logging.getLogger("mcp").setLevel(logging.WARNING)


def build(spec: FunctionSpec, settings: Settings, store: Store) -> Invoke:
    from acmi_core.mcp.http import McpHttpApp

    return asgi_invoke(spec, settings, store, McpHttpApp)


handler = LambdaFunction(function("mcp"), build)
