"""Coordination: leases, work items, agents, human-in-the-loop queues, the RL cycle."""

from __future__ import annotations

from typing import Final

from acmi_core.operations.model import Access, Capability, Operation

LOCKS: Final = Capability("locks", reads="LockReads", writes="LockOperations")
WORK: Final = Capability("work", reads="WorkReads", writes="WorkWrites")
AGENTS: Final = Capability("agents", reads="AgentReads", writes="AgentWrites")
HITL: Final = Capability("hitl", reads="HitlReads", writes="HitlWrites")
WORKFLOWS: Final = Capability("workflows", reads="WorkflowReads", writes="WorkflowWrites")

_LOCK: Final = "acmi_core.coordination.locks:LockAPI"
_WORK: Final = "acmi_core.coordination.work:WorkAPI"
_AGENT: Final = "acmi_core.coordination.agents:AgentAPI"
_HITL: Final = "acmi_core.coordination.hitl:HitlAPI"
_WORKFLOW: Final = "acmi_core.coordination.workflows:WorkflowAPI"

LOCK_OPERATIONS: Final[tuple[Operation, ...]] = (
    LOCKS.write(
        "locks.claim",
        "POST",
        "/v1/locks/{resource}/claim",
        "Claim the lease (409 names the holder and its expiry); returns the owner token",
        f"{_LOCK}.claim",
        mcp="lock_claim",
        params="acmi_core.operations.params.locks:LocksClaimParams",
        cli="lock claim",
    ),
    LOCKS.write(
        "locks.renew",
        "POST",
        "/v1/locks/{resource}/renew",
        "Extend the lease to now + ttl_ms (owner token only)",
        f"{_LOCK}.renew",
        mcp="lock_renew",
        params="acmi_core.operations.params.locks:LocksRenewParams",
        cli="lock renew",
    ),
    LOCKS.write(
        "locks.release",
        "POST",
        "/v1/locks/{resource}/release",
        "Release the lease (owner token only)",
        f"{_LOCK}.release",
        mcp="lock_release",
        params="acmi_core.operations.params.locks:LocksReleaseParams",
        cli="lock release",
    ),
    LOCKS.read(
        "locks.get",
        "GET",
        "/v1/locks/{resource}",
        "The lease now: holder and expiry (never the token), and the last fence",
        f"{_LOCK}.get",
        mcp="lock_get",
        params="acmi_core.operations.params.locks:LocksGetParams",
        cli="lock show",
    ),
)

WORK_OPERATIONS: Final[tuple[Operation, ...]] = (
    WORK.write(
        "work.create",
        "POST",
        "/v1/work",
        "Create a work item (409 if the id exists); owner and status optional",
        f"{_WORK}.create",
        mcp="work_create",
        params="acmi_core.operations.params.work:WorkCreateParams",
        cli="work create",
    ),
    WORK.read(
        "work.list",
        "GET",
        "/v1/work",
        "List work items: an owner's open items (newest update first), or all",
        f"{_WORK}.list",
        mcp="work_list",
        params="acmi_core.operations.params.work:WorkListParams",
        cli="work list",
    ),
    WORK.read(
        "work.get",
        "GET",
        "/v1/work/{id}",
        "The work item: profile, signals, newest events, sessions, owner (one read)",
        f"{_WORK}.get",
        mcp="work_get",
        params="acmi_core.operations.params.work:WorkGetParams",
        cli="work get",
    ),
    WORK.write(
        "work.event",
        "POST",
        "/v1/work/{id}/events",
        "Append a Comms v1.1 event; its session_id joins the item's sessions",
        f"{_WORK}.event",
        mcp="work_event",
        params="acmi_core.operations.params.work:WorkEventParams",
        cli="work event",
    ),
    WORK.write(
        "work.signals",
        "PATCH",
        "/v1/work/{id}/signals",
        "Merge signals; a status change keeps the owner's open index exact",
        f"{_WORK}.signal",
        mcp="work_signal",
        params="acmi_core.operations.params.work:WorkSignalsParams",
        cli="work signal",
    ),
    WORK.write(
        "work.owner",
        "PUT",
        "/v1/work/{id}/owner",
        "Assign the item to an owner (moves it between owners' open indexes)",
        f"{_WORK}.assign",
        params="acmi_core.operations.params.work:WorkOwnerParams",
        result="builtins:str",
    ),
    WORK.read(
        "work.sessions",
        "GET",
        "/v1/work/{id}/sessions",
        "One page of the item's session ids",
        f"{_WORK}.sessions_page",
        mcp="work_sessions",
        params="acmi_core.operations.params.work:WorkSessionsParams",
        cli="work sessions",
    ),
)

AGENT_OPERATIONS: Final[tuple[Operation, ...]] = (
    AGENTS.write(
        "agents.heartbeat",
        "POST",
        "/v1/agents/{agent}/heartbeat",
        "I am alive: last_heartbeat_ts, status and status_note signals + activity index",
        f"{_AGENT}.heartbeat",
        mcp="heartbeat",
        params="acmi_core.operations.params.agents:AgentsHeartbeatParams",
        cli="heartbeat",
        result="acmi_core.coordination.results:Heartbeat",
    ),
    AGENTS.write(
        "agents.spawn",
        "POST",
        "/v1/agents/{agent}/spawns",
        "Log a session start (the spawns log, never the timeline)",
        f"{_AGENT}.spawn",
        mcp="spawn",
        params="acmi_core.operations.params.agents:AgentsSpawnParams",
        cli="spawn",
        result="acmi_core.coordination.results:SpawnRecord",
    ),
    AGENTS.read(
        "agents.spawns",
        "GET",
        "/v1/agents/{agent}/spawns",
        "The newest spawns, newest first",
        f"{_AGENT}.spawns",
        params="acmi_core.operations.params.agents:AgentsSpawnsParams",
        result="acmi_core.coordination.results:SpawnLog",
    ),
    AGENTS.write(
        "agents.join",
        "PUT",
        "/v1/agents/{agent}/threads/{thread:path}",
        "Join a thread (active context), with a role (default participant)",
        f"{_AGENT}.join",
        params="acmi_core.operations.params.agents:AgentsJoinParams",
        result="acmi_core.coordination.results:ThreadEntry",
    ),
    AGENTS.write(
        "agents.leave",
        "DELETE",
        "/v1/agents/{agent}/threads/{thread:path}",
        "Leave a thread",
        f"{_AGENT}.leave",
        params="acmi_core.operations.params.agents:AgentsLeaveParams",
        result="types:NoneType",
    ),
    AGENTS.read(
        "agents.threads",
        "GET",
        "/v1/agents/{agent}/threads",
        "The threads the agent is active in: thread -> {role, joined_at}",
        f"{_AGENT}.active",
        mcp="active",
        params="acmi_core.operations.params.agents:AgentsThreadsParams",
        cli="active",
    ),
    AGENTS.write(
        "agents.rollup.put",
        "PUT",
        "/v1/agents/{agent}/rollup",
        "Replace the latest rollup: {summary, ...any other fields}",
        f"{_AGENT}.set_rollup",
        mcp="rollup_set",
        params="acmi_core.operations.params.agents:AgentsRollupPutParams",
        cli="rollup-set",
    ),
    AGENTS.read(
        "agents.rollup.get",
        "GET",
        "/v1/agents/{agent}/rollup",
        "The latest rollup (404 when there is none)",
        f"{_AGENT}.rollup",
        mcp="rollup_get",
        params="acmi_core.operations.params.agents:AgentsRollupGetParams",
    ),
    Operation(
        "agents.invite",
        "Onboard an agent: tier and permissions, signals, `agent-onboarded` (idempotent)",
        Access.WRITE,
        f"{_AGENT}.invite",
        cli="invite-agent",
        store_only=True,
        params="acmi_core.operations.params.agents:AgentsInviteParams",
        result="acmi_core.coordination.results:Invite",
    ),
    Operation(
        "agents.wake",
        "Set (or clear) an agent's wake slot: the wake tick wakes it at that minute",
        Access.WRITE,
        "acmi_core.coordination.wake:WakeAPI.set",
        cli="agents wake",
        store_only=True,
        params="acmi_core.operations.params.agents:AgentsWakeParams",
        result="acmi_core.coordination.results:WakeSet",
    ),
)

HITL_OPERATIONS: Final[tuple[Operation, ...]] = (
    HITL.write(
        "hitl.create",
        "POST",
        "/v1/hitl",
        "Queue an item for a human (idempotent by correlationId: 201 new, 200 existing)",
        f"{_HITL}.create",
        mcp="hitl_create",
        params="acmi_core.operations.params.hitl:HitlCreateParams",
        cli="hitl create",
    ),
    HITL.read(
        "hitl.list",
        "GET",
        "/v1/hitl",
        "A queue, a page at a time: open by deadline (soonest first), closed newest first",
        f"{_HITL}.list",
        mcp="hitl_list",
        params="acmi_core.operations.params.hitl:HitlListParams",
        cli="hitl list",
    ),
    HITL.write(
        "hitl.resolve",
        "POST",
        "/v1/hitl/{correlationId}/resolve",
        "Resolve: move the item to closed and post hitl-resolved (409 if resolved)",
        f"{_HITL}.resolve",
        mcp="hitl_resolve",
        params="acmi_core.operations.params.hitl:HitlResolveParams",
        cli="hitl resolve",
    ),
)

WORKFLOW_OPERATIONS: Final[tuple[Operation, ...]] = (
    WORKFLOWS.write(
        "workflows.execute",
        "POST",
        "/v1/workflows/{workflow}/executions",
        "Log that an agent executed a step (kind step-executed)",
        f"{_WORKFLOW}.execute",
        params="acmi_core.operations.params.workflows:WorkflowsExecuteParams",
        result="acmi_core.base.model:Event",
    ),
    WORKFLOWS.write(
        "workflows.assess",
        "POST",
        "/v1/workflows/{workflow}/assessments",
        "Score an executed step 0-100 with criteria (kind assessment)",
        f"{_WORKFLOW}.assess",
        mcp="assess",
        params="acmi_core.operations.params.workflows:WorkflowsAssessParams",
        result="acmi_core.base.model:Event",
    ),
    WORKFLOWS.write(
        "workflows.improve",
        "POST",
        "/v1/workflows/{workflow}/improvements",
        "Record a lesson on a step (kind improvement); it seeds the next bootstrap",
        f"{_WORKFLOW}.improve",
        mcp="improve",
        params="acmi_core.operations.params.workflows:WorkflowsImproveParams",
        result="acmi_core.base.model:Event",
    ),
    WORKFLOWS.read(
        "workflows.lessons",
        "GET",
        "/v1/workflows/{workflow}/lessons",
        "The newest lessons of a workflow, newest first",
        f"{_WORKFLOW}.lessons",
        params="acmi_core.operations.params.workflows:WorkflowsLessonsParams",
    ),
    WORKFLOWS.read(
        "workflows.unassessed",
        "GET",
        "/v1/workflows/{workflow}/unassessed",
        "Executed steps no assessment covers, newest first (bounded scan)",
        f"{_WORKFLOW}.unassessed",
        params="acmi_core.operations.params.workflows:WorkflowsUnassessedParams",
    ),
    WORKFLOWS.read(
        "workflows.assessments",
        "GET",
        "/v1/workflows/{workflow}/assessments",
        "Scores per step: count, mean, last (bounded scan)",
        f"{_WORKFLOW}.assessments",
        params="acmi_core.operations.params.workflows:WorkflowsAssessmentsParams",
    ),
    WORKFLOWS.read(
        "workflows.agent_lessons",
        "GET",
        "/v1/lessons",
        "The newest lessons of the workflows an agent works on (what seeds its next run)",
        f"{_WORKFLOW}.lessons",
        params="acmi_core.operations.params.workflows:WorkflowsLessonsParams",
    ),
)

OPERATIONS: Final[tuple[Operation, ...]] = (
    *LOCK_OPERATIONS,
    *WORK_OPERATIONS,
    *AGENT_OPERATIONS,
    *HITL_OPERATIONS,
    *WORKFLOW_OPERATIONS,
)
