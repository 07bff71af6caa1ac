"""The MCP server (the official SDK's FastMCP) for one caller: its tenant and scope come
from its API key, looked up like the HTTP API does (over stdio ``ACMI_API_KEY``; without
one, the default tenant with full access: the embedded local store is one person's;
over HTTP the bearer key of each request, ``mcp/http.py``), never from a tool argument.
Each server is built around one bound client: no module globals, so two servers never
share a tenant.

The tools are the operation table's: one per row with an MCP tool (``tool_rows``), named
by the row, described by its params model's docstring, taking the model's fields as
arguments (the SDK builds the input schema from them, as it did from hand-written
functions), refused to a read-only key on a write row (or a read whose params say it
writes), and calling the row's core callable bound on the tenant's client, or, where the
tool answers in another shape, its entry in ``mcp/shapes.py``. Arguments are decoded in
``_Server.call_tool`` and answers encoded in ``tool_result``: one function each.

The reference's 17 tools (``REFERENCE_TOOLS``; it served them as ``acmi_<name>``) are all
here under their plain names, beside the tools for what the reference lacked (leases,
HITL, workflows, memory). ``ACMI_MCP_TOOLS=reference`` serves the reference's own set
instead (``mcp/reference.py``: its ``acmi_*`` names, arguments and answers), ``all``
both. Every failure is a tool error (``isError``) naming the field
and the rule: ACMI errors, bad arguments (the SDK's pydantic check) and arguments a tool
does not take (``tenant`` among them: it is never an argument)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Any, Final, ParamSpec, TypeVar

from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.server.lowlevel import Server
from mcp.types import CallToolResult, TextContent, ToolExecution
from mcp.types import Tool as ListedTool
from pydantic import ValidationError

from acmi_core import Acmi, AcmiError, __version__
from acmi_core.auth import apikeys
from acmi_core.auth.apikeys import Scope
from acmi_core.auth.tiers import (
    REFERENCE_ROW,
    REFERENCE_TARGETS,
    REFERENCE_TOKEN_TOOLS,
    TOKEN_ROWS,
    Target,
    TierGate,
)
from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.model import pydantic_rule
from acmi_core.base.stored import LONE_SURROGATE, render_json
from acmi_core.bootstrap.allowance import Allowance, allowed, charge
from acmi_core.bootstrap.allowance import check as check_tokens
from acmi_core.bootstrap.text import count_tokens
from acmi_core.client.tracing import operation_span
from acmi_core.mcp import reference, stdio
from acmi_core.mcp.shapes import SHAPES
from acmi_core.operations import OPERATIONS, Access, Operation, operation
from acmi_core.operations.bind import call_core, fields, params_model
from acmi_core.operations.params import Params

P = ParamSpec("P")
R = TypeVar("R")

TENANCY = " Tenant: the caller's API key (ACMI_API_KEY over stdio, the bearer key over HTTP)."
# The reference MCP server's tools (mcp/mcp-server.mjs v2.0, names without its `acmi_`
# prefix): each is served here under this name (tests/e2e/test_mcp_stdio.py holds it).
REFERENCE_TOOLS: Final = (
    *("profile", "signal", "event", "get", "list", "cat", "bootstrap", "spawn", "active"),
    *("rollup_set", "work_create", "work_event", "work_signal", "work_get", "work_list"),
    *("delete", "tenant_list"),
)


# The order tools/list gave before the tools were derived from the table (clients show it
# in this order); a new tool follows them, in table order.
LISTED_ORDER: Final = (
    "profile",
    "profile_get",
    "profile_merge",
    "signal",
    "signal_get",
    "signal_set",
    "event",
    "get",
    "list",
    "cat",
    "bootstrap",
    "delete",
    "tenant_list",
    "spawn",
    "active",
    "rollup_set",
    "rollup_get",
    "heartbeat",
    "work_create",
    "work_event",
    "work_signal",
    "work_get",
    "work_list",
    "work_sessions",
    "lock_claim",
    "lock_renew",
    "lock_release",
    "lock_get",
    "hitl_create",
    "hitl_list",
    "hitl_resolve",
    "assess",
    "improve",
    "memory_remember",
    "memory_search",
    "memory_status",
    "memory_active",
    "memory_review",
    "memory_prune",
    "memory_daily_summary",
    "memory_topic_create",
    "memory_debug",
    "memory_export",
    "memory_import",
    "memory_handoff",
)


def resolve_scope(acmi: Acmi, api_key: str | None) -> tuple[Acmi, Scope]:
    """The client bound to the key's tenant and the key's scope; the default tenant with
    admin scope without a key. An unknown or revoked key is refused outright."""
    bound, scope, _ = resolve_key(acmi, api_key)
    return bound, scope


def resolve_key(acmi: Acmi, api_key: str | None) -> tuple[Acmi, Scope, str | None]:
    """:func:`resolve_scope`, and the agent the key is bound to (None: none)."""
    if not api_key:
        return acmi, Scope.ADMIN, None
    record = apikeys.lookup(acmi.store, api_key)
    if record is None:
        raise AcmiValidationError("ACMI_API_KEY", "unknown_key", "is unknown or revoked")
    return acmi.for_tenant(record.tenant), record.scope, record.agent


class BoundKey:
    """A key bound to an agent, on the server's tenant: its tier check (``check``: row,
    values, targets -> None or a Forbidden) and its hourly bundle tokens (``allowance``),
    both through ``gate``'s cache (``auth/tiers.py``)."""

    def __init__(self, acmi: Acmi, agent: str, gate: TierGate) -> None:
        self.acmi, self.agent, self.gate = acmi, agent, gate

    def check(
        self, row: str, values: Mapping[str, object], targets: tuple[Target, ...] | None
    ) -> None:
        self.gate.check(self.acmi, self.agent, row, values, targets)

    def allowance(self) -> Allowance | None:
        return self.gate.allowance(self.acmi, self.agent)


def bound_key(acmi: Acmi, agent: str | None, tiers: TierGate | None) -> BoundKey | None:
    """The checks of a key bound to ``agent`` (None: bound to none, no check), on
    ``tiers``' cache."""
    return None if agent is None else BoundKey(acmi, agent, tiers or TierGate())


def _tool_errors(func: Callable[P, R]) -> Callable[P, R]:
    """An ACMI error becomes an MCP tool error (isError) naming its field and rule."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except AcmiError as exc:
            text = (
                exc.message if exc.message.startswith(exc.field) else f"{exc.field}: {exc.message}"
            )
            raise ToolError(f"{text} (rule: {exc.rule})") from exc

    return wrapper


def _argument_errors(exc: ValidationError) -> str:
    """The SDK's pydantic failure as ``field: message (rule: type)``, one per problem."""
    parts = []
    for error in exc.errors(include_url=False)[:5]:
        where = ".".join(str(p) for p in error["loc"]) or "arguments"
        parts.append(f"{where}: {error['msg']} (rule: {pydantic_rule(error['type'])})")
    return "; ".join(parts)


# pydantic, which carries the SDK's messages, stops at depth 255: leave it room
STRUCTURED_DEPTH: Final = 200


def tool_result(value: Any) -> CallToolResult:
    """A tool's answer: its JSON as the HTTP API renders it (``render_json``: every stored
    value exactly, as deep as reads allow, numbers as written, lone surrogates escaped),
    indented as the SDK would; also as structured content when pydantic can carry it
    as it is (not deeper than ``STRUCTURED_DEPTH``, no lone surrogate, no number beyond
    the double range, which it would turn into a string): otherwise the answer is text
    only. A text answer (a markdown bundle) is the text, and ``{"result": text}``
    structured, as the SDK gives a ``str``."""
    if isinstance(value, str):
        return CallToolResult(
            content=[TextContent(type="text", text=value)], structuredContent={"result": value}
        )
    text = render_json(value, indent=2).decode("utf-8")
    structured = value if isinstance(value, dict) and _carried(value, 0) else None
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structuredContent=structured
    )


def _carried(value: Any, depth: int) -> bool:
    """Whether pydantic serializes ``value`` as the same JSON (see ``tool_result``)."""
    if isinstance(value, str):
        return LONE_SURROGATE.search(value) is None
    if isinstance(value, dict):
        return depth < STRUCTURED_DEPTH and all(
            _carried(k, depth) and _carried(v, depth + 1) for k, v in value.items()
        )
    if isinstance(value, list):
        return depth < STRUCTURED_DEPTH and all(_carried(v, depth + 1) for v in value)
    return not isinstance(value, Decimal)  # a JsonNumber: pydantic writes a string


class _Server(FastMCP):
    """FastMCP whose tool calls refuse arguments the tool does not take and report the
    SDK's argument validation like an ACMI error (field and rule), both as isError; the
    reference's tools are listed with the reference's own schemas (``reference_listing``)."""

    listed_as: dict[str, ListedTool]

    async def list_tools(self) -> list[ListedTool]:
        # the SDK would list the schema it derives from the function (titles, anyOf
        # null): a reference tool is listed byte for byte as the reference lists it
        return [self.listed_as.get(t.name, t) for t in await super().list_tools()]

    async def call_tool(
        self, name: str, arguments: dict[str, Any]
    ) -> Sequence[Any] | dict[str, Any]:
        tool = self._tool_manager.get_tool(name)
        if tool is not None:
            # Without this an extra argument (``tenant`` above all) is silently dropped,
            # and the caller believes it chose what it did not.
            known = set(tool.parameters.get("properties", {}))
            for given in sorted(set(arguments or {}) - known):
                why = (
                    "the tenant comes from the caller's API key, never an argument"
                    if given == "tenant"
                    else f"is not an argument of {name} (it takes {', '.join(sorted(known))})"
                )
                raise ToolError(f"{given}: {why} (rule: unknown_argument)")
        try:
            return await super().call_tool(name, arguments)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                raise ToolError(_argument_errors(cause)) from cause
            if isinstance(cause, ToolError):  # ours (field and rule): without the SDK's prefix
                raise cause from cause.__cause__
            raise

    async def run_stdio_async(self) -> None:
        # the stdio transport that checks each line as the HTTP one checks each body
        await stdio.serve(protocol_server(self))


def protocol_server(server: FastMCP) -> Server[Any, Any]:
    """The SDK's low-level server inside ``server``: what a stateless HTTP transport runs
    per request (FastMCP's own app keeps a session manager that runs once per app). The
    one place that reaches into FastMCP's private attribute."""
    return server._mcp_server


TOOL_SETS: Final = ("ours", "reference", "all")  # ACMI_MCP_TOOLS


def build_server(
    acmi: Acmi,
    scope: Scope,
    tools: str = "ours",
    *,
    log_level: str = "INFO",
    agent: str | None = None,
    tiers: TierGate | None = None,
) -> FastMCP:
    """The server for one principal: ``acmi`` is already bound to its tenant. ``tools``
    (``ACMI_MCP_TOOLS``): ``ours``, one tool per row of the operation table with an MCP
    tool, in table order, and the bootstrap prompt and resource; ``reference``, the
    reference server's 17 tools (``mcp/reference.py``); ``all``, both (their names never
    clash: the reference's all start ``acmi_``). ``log_level``: the level the SDK gives the
    root logger when nothing configured it (its INFO is a line per request; ``acmi mcp``
    passes WARNING unless -v). ``agent``: the agent the key is bound to, whose tier every
    write is checked against, who every write must act as, and whose hourly bundle tokens
    every bootstrap is served under (``auth/tiers.py``; ``tiers``: the cache to read it
    through)."""
    bound = bound_key(acmi, agent, tiers)
    if tools not in TOOL_SETS:
        raise AcmiValidationError(
            "ACMI_MCP_TOOLS", "enum", f"must be one of {', '.join(TOOL_SETS)}"
        )
    mcp = _Server(
        "acmi",
        instructions="ACMI: profiles, signals and timelines." + TENANCY,
        log_level=log_level,  # type: ignore[arg-type]
    )
    mcp.listed_as = {}
    # serverInfo.version: ours (the SDK reports its own version when given none)
    protocol_server(mcp).version = __version__
    if tools != "reference":
        _add_ours(mcp, acmi, scope, bound)
    if tools != "ours":
        for tool in reference.REFERENCE:
            mcp.add_tool(
                _reference_tool(acmi, scope, tool, bound),
                name=tool.name,
                description=tool.description,
                structured_output=False,
            )
            mcp.listed_as[tool.name] = reference_listing(tool)
    return mcp


def reference_listing(tool: reference.RefTool) -> ListedTool:
    """What tools/list shows for a reference tool: the reference's own entry."""
    return ListedTool(
        name=tool.name,
        description=tool.description,
        inputSchema=tool.input_schema(),
        execution=ToolExecution(taskSupport="forbidden"),
    )


def _reference_tool(
    acmi: Acmi, scope: Scope, tool: reference.RefTool, bound: BoundKey | None = None
) -> Callable[..., CallToolResult]:
    """The reference tool's function: the SDK checks the arguments against its signature
    (``reference_signature``); the answer is the reference's JSON text, a failure its
    ``{ok: false, ...}`` text flagged isError. For a bound key: its tier and identity on
    a write, its hourly tokens on ``acmi_bootstrap`` (a GET first, the answer's tokens
    charged after)."""
    counted = tool.name in REFERENCE_TOKEN_TOOLS

    def call(**arguments: Any) -> CallToolResult:
        given = {name: value for name, value in arguments.items() if value is not None}
        writes = tool.writes and (tool.name != "acmi_delete" or bool(given.get("confirm")))
        if writes and not scope.allows(Scope.WRITE):
            message = "scope: this key is read-only (rule: write_scope)"
            return _text_result(
                reference.text({"ok": False, "tool": tool.name, "error": message}), True
            )
        allowance = None
        try:
            if writes and bound is not None:
                # a tool missing from REFERENCE_TARGETS is a tenant-wide write
                bound.check(f"{REFERENCE_ROW}{tool.name}", given, REFERENCE_TARGETS.get(tool.name))
            if counted and bound is not None:
                allowance = bound.allowance()
            now = acmi.clock()
            if allowance is not None:
                check_tokens(acmi.store, acmi.keys, allowance, now)
            answer = tool.run(acmi, given)
        except reference.RefusedAnswer as refused:
            return _text_result(reference.text(refused.answer), True)
        except AcmiError as exc:
            return _text_result(reference.failure(tool.name, exc), True)
        text = reference.text(answer)
        if allowance is not None:  # what was served: the answer's text
            charge(acmi.store, acmi.keys, allowance, now, count_tokens(text))
        return _text_result(text, False)

    call.__name__ = call.__qualname__ = tool.name  # the SDK names its model after it
    call.__signature__ = reference_signature(tool)  # type: ignore[attr-defined]
    return call


_ARG_TYPES: Final[dict[str, Any]] = {
    "string": str,
    "number": float,
    "boolean": bool,
    "array": list[str],
}


def reference_signature(tool: reference.RefTool) -> inspect.Signature:
    """The reference tool's arguments as keyword arguments (optional ones default None)."""
    return inspect.Signature(
        [
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=inspect.Parameter.empty if required else None,
                annotation=_ARG_TYPES[kind] if required else _ARG_TYPES[kind] | None,
            )
            for name, kind, required, _ in tool.args
        ]
    )


def _text_result(text: str, error: bool) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], isError=error)


def _add_ours(mcp: FastMCP, acmi: Acmi, scope: Scope, bound: BoundKey | None = None) -> None:
    for row in tool_rows():
        mcp.add_tool(
            _tool(acmi, scope, row, bound),
            name=row.mcp,
            description=tool_description(row),
            structured_output=False,  # tool_result gives it where it can be carried
        )
    bootstrap_row = operation("bootstrap.read")

    def bootstrap(agent: str) -> str:
        call = _tool_errors(_caller(acmi, scope, bootstrap_row))
        params = params_model(bootstrap_row).model_validate({"agent": agent})
        allowance = _tool_errors(bound.allowance)() if bound is not None else None
        with allowed(allowance):  # a bound key's hourly tokens
            return str(call(params))

    @mcp.prompt(name="bootstrap", description="An agent's bootstrap, markdown." + TENANCY)
    def bootstrap_prompt(agent: str) -> str:
        return bootstrap(agent)

    @mcp.resource("acmi://agents/{agent}/bootstrap", name="bootstrap", mime_type="text/markdown")
    def bootstrap_resource(agent: str) -> str:
        return bootstrap(agent)


@functools.cache
def tool_rows() -> tuple[Operation, ...]:
    """The rows with an MCP tool, in the order the server lists them (``LISTED_ORDER``)."""
    rows = [row for row in OPERATIONS if row.mcp is not None]
    rank = {name: n for n, name in enumerate(LISTED_ORDER)}
    return tuple(sorted(rows, key=lambda row: rank.get(row.mcp or "", len(rank))))


def tool_description(row: Operation) -> str:
    """The tool's description: its params model's docstring on one line, then tenancy."""
    return " ".join((params_model(row).__doc__ or "").split()) + TENANCY


@functools.cache
def tool_signature(row: Operation) -> inspect.Signature:
    """The params model's fields as the tool function's keyword arguments: the SDK builds
    the input schema (and checks the arguments) from this signature, as it did from the
    hand-written functions."""
    return inspect.Signature(
        [
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=inspect.Parameter.empty if field.is_required() else field.default,
                annotation=field.annotation,
            )
            for name, field in params_model(row).model_fields.items()
            if name not in params_model(row).not_tool_arguments
        ]
    )


def _caller(acmi: Acmi, scope: Scope, row: Operation) -> Callable[[Params], Any]:
    """What the tool does with its validated params: its shape (``mcp/shapes.py``), else
    the core callable given the params' fields by name, its answer as a dict."""
    shaped = SHAPES.get(row.name)

    def run(params: Params) -> Any:
        # in the row's span (traces on), on the client measuring it
        with operation_span(acmi, row.name, fields(params)) as client:
            if shaped is not None:
                return shaped(client, scope, params)
            # bound at the call: building the server builds no sub-API it may never use
            return call_core(client, row, params)

    return run


def _tool(
    acmi: Acmi, scope: Scope, row: Operation, bound: BoundKey | None = None
) -> Callable[..., CallToolResult]:
    """The row's tool function: the params model built from the SDK's checked arguments,
    the write scope checked (a write row, or a read whose call writes) and, for a key
    bound to an agent (``bound``), its tier and identity, and a bundle's hourly tokens;
    then the call; ACMI errors become tool errors naming their field and rule."""
    model = params_model(row)
    call = _tool_errors(_caller(acmi, scope, row))
    checked = None if bound is None else _tool_errors(bound.check)
    allowance = (
        _tool_errors(bound.allowance) if bound is not None and row.name in TOKEN_ROWS else None
    )
    writes = row.access is not Access.READ

    def tool(**arguments: Any) -> CallToolResult:
        params = model(**arguments)
        if writes or params.writes():
            if not scope.allows(Scope.WRITE):
                raise ToolError("scope: this key is read-only (rule: write_scope)")
            if checked is not None:
                checked(row.name, fields(params), None)
        with allowed(None if allowance is None else allowance()):
            return tool_result(call(params))

    # the SDK names the input schema after the function (``<name>Arguments``)
    tool.__name__ = tool.__qualname__ = model.tool_function or row.mcp or row.name
    tool.__signature__ = tool_signature(row)  # type: ignore[attr-defined]
    return tool
