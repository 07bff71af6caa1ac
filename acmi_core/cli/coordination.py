"""``acmi lock`` and ``acmi hitl``: leases between agents, and the human-in-the-loop
queues (what the reference only described)."""

from __future__ import annotations

from typing import Annotated

import typer

from acmi_core.cli.output import emit, pairs, table
from acmi_core.cli.state import state

locks = typer.Typer(help="leases: one holder at a time, fenced, expiring", no_args_is_help=True)
hitl = typer.Typer(help="human-in-the-loop queues", no_args_is_help=True)

Resource = Annotated[str, typer.Argument(help="what the lease guards, e.g. deal:acme")]
Ttl = Annotated[int, typer.Option("--ttl-ms", help="how long it lasts unless renewed (ms)")]
Token = Annotated[str, typer.Argument(help="the owner_token the claim returned")]


@locks.command()
def claim(
    resource: Resource,
    owner: Annotated[str, typer.Argument(help="the claiming agent, e.g. agent:atlas")],
    ttl_ms: Ttl = 60_000,
) -> None:
    """Claim a lease; exits 4 when another owner holds it."""
    lease = state().backend().call("locks.claim", resource=resource, owner=owner, ttl_ms=ttl_ms)
    emit(lease, state().output, pairs)


@locks.command()
def renew(resource: Resource, owner_token: Token, ttl_ms: Ttl = 60_000) -> None:
    """Extend a lease you hold."""
    lease = (
        state()
        .backend()
        .call("locks.renew", resource=resource, owner_token=owner_token, ttl_ms=ttl_ms)
    )
    emit(lease, state().output, pairs)


@locks.command()
def release(resource: Resource, owner_token: Token) -> None:
    """Give a lease back."""
    lease = state().backend().call("locks.release", resource=resource, owner_token=owner_token)
    emit(lease, state().output, pairs)


@locks.command()
def show(resource: Resource) -> None:
    """Who holds a lease (never its token) and the last fence issued."""
    emit(state().backend().call("locks.get", resource=resource), state().output, pairs)


@hitl.command()
def create(
    topic: Annotated[str, typer.Argument(help="a short subject")],
    request: Annotated[str, typer.Argument(help="what the human is asked")],
    asked_by: Annotated[str, typer.Option(help="the asking agent, e.g. agent:atlas")],
    urgency: Annotated[str, typer.Option(help="P0 | P1 | P2")] = "P1",
    to: Annotated[
        str | None, typer.Option(help="the addressee (default: the shared queue)")
    ] = None,
    correlation_id: Annotated[
        str | None, typer.Option(help="makes a retry idempotent (default: a new one)")
    ] = None,
) -> None:
    """Ask a human: queue a request."""
    created = state().backend().call(
        "hitl.create", topic=topic, request=request, asked_by=asked_by, urgency=urgency,
        addressee=to, correlation_id=correlation_id,
    )  # fmt: skip
    emit(
        created, state().output, lambda v: pairs(v["item"], "created" if v["created"] else "exists")
    )


@hitl.command("list")
def list_(
    to: Annotated[str | None, typer.Option(help="an addressee's queue (default: shared)")] = None,
    state_: Annotated[str, typer.Option("--state", help="open | closed")] = "open",
    cursor: Annotated[str | None, typer.Option(help="the previous page's next_cursor")] = None,
    limit: Annotated[int, typer.Option(help="items a page")] = 50,
) -> None:
    """One page of a queue: open by deadline, closed newest first."""
    page = (
        state().backend().call("hitl.list", addressee=to, state=state_, cursor=cursor, limit=limit)
    )
    emit(
        page,
        state().output,
        lambda p: table(p["items"], ("correlationId", "urgency", "topic", "request", "asked_by")),
    )


@hitl.command()
def resolve(
    correlation_id: Annotated[str, typer.Argument(help="the request's correlationId")],
    resolution: Annotated[str, typer.Argument(help="the answer")],
    by: Annotated[str, typer.Option(help="who resolved it, e.g. user:mikey")],
) -> None:
    """Answer a request: closes it and posts `hitl-resolved` on the coordination thread."""
    resolved = (
        state()
        .backend()
        .call("hitl.resolve", correlation_id=correlation_id, resolution=resolution, by=by)
    )
    emit(resolved, state().output, pairs)
