"""The agent operations' params: heartbeats, spawns, threads, rollups, invites, wake slots."""

from __future__ import annotations

from typing import Any

from acmi_core.operations.params.base import Params


class AgentsSpawnParams(Params):
    """Log an agent session start (kept apart from the timeline); returns the record."""

    agent: str
    session_id: str
    model_id: str
    host: str | None = None


class AgentsThreadsParams(Params):
    """An agent's active threads. action list (default): {thread: {role, joined_at}}; add
    (thread, role) or remove (thread) change them."""

    agent: str
    action: str = "list"
    thread: str | None = None
    role: str = "participant"


class AgentsRollupPutParams(Params):
    """Set an agent's latest rollup summary (read by bootstrap); returns it."""

    agent: str
    summary: str


class AgentsRollupGetParams(Params):
    """An agent's latest rollup: {agent, rollup: {ts, summary, ...} or null}."""

    agent: str


class AgentsHeartbeatParams(Params):
    """Record that an agent is alive (status: free text, default ACTIVE); returns the beat."""

    agent: str
    status: str = "ACTIVE"
    note: str | None = None


class AgentsSpawnsParams(Params):
    """An agent's newest spawns, newest first."""

    agent: str
    limit: int = 5


class AgentsJoinParams(Params):
    """An agent joins a thread with a role."""

    agent: str
    thread: str
    role: str = "participant"


class AgentsLeaveParams(Params):
    """An agent leaves a thread."""

    agent: str
    thread: str


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
