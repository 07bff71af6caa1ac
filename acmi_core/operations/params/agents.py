"""The agent operations' params: heartbeats, spawns, threads, rollups, invites, wake slots."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from acmi_core.operations.params.base import Params, bounded

Agent = Annotated[str, bounded(description="claude or agent:claude", maxLength=256)]
Thread = Annotated[str, bounded(description="the thread's key or id", minLength=1, maxLength=256)]


class AgentsSpawnParams(Params):
    """Log an agent session start (kept apart from the timeline); returns the record."""

    agent: Agent
    session_id: str = Field(description="at most 256 characters")
    model_id: str = Field(description="at most 256 characters")
    host: str | None = Field(None, description="at most 256 characters")


class AgentsThreadsParams(Params):
    """An agent's active threads. action list (default): {thread: {role, joined_at}}; add
    (thread, role) or remove (thread) change them."""

    agent: Agent
    action: str = "list"
    thread: str | None = None
    role: str = "participant"

    def writes(self) -> bool:
        return self.action != "list"  # add and remove change the agent's threads


class AgentsRollupPutParams(Params):
    """Set an agent's latest rollup summary (read by bootstrap); returns it."""

    agent: Agent
    summary: str


class AgentsRollupGetParams(Params):
    """An agent's latest rollup: {agent, rollup: {ts, summary, ...} or null}."""

    agent: Agent


class AgentsHeartbeatParams(Params):
    """Record that an agent is alive (status: free text, default ACTIVE); returns the beat."""

    agent: Agent
    status: str = Field("ACTIVE", description="[A-Za-z0-9_ -]{1,64}, default ACTIVE")
    note: str | None = Field(None, description="at most 500 characters")


class AgentsSpawnsParams(Params):
    """An agent's newest spawns, newest first."""

    agent: Agent
    # checked here: the core took any number (HTTP refused outside 1-1000)
    limit: int = Field(5, ge=1, le=1000)


class AgentsJoinParams(Params):
    """An agent joins a thread with a role."""

    agent: Agent
    thread: Thread
    role: str = "participant"


class AgentsLeaveParams(Params):
    """An agent leaves a thread."""

    agent: Agent
    thread: Thread


class AgentsInviteParams(Params):
    """Onboard an agent: tier and permissions, signals, `agent-onboarded` (idempotent)."""

    agent: str
    tier: str = "Utility"
    name: str | None = None
    model: str | None = None
    role: str | None = None
    lane: str | None = None
    invited_by: str = "system:acmi-invite"


class AgentsWakeParams(Params):
    """An agent's wake slot: the minute of the hour, every so many hours, its target."""

    agent: str
    minute: int
    every_hours: int = 1
    target: dict[str, Any] | None = None
