"""What the coordination core returns, key by key: the shapes the surfaces print.

TypedDicts, so an answer is still the plain dict whose JSON is the contract (the HTTP
bodies, the CLI's JSON, the MCP tools' results); mypy checks each key the core writes
and each key a surface reads. The ``*Body`` types are what a result object's
``to_dict()`` gives (a lease, a work item, a queue page): the dict the surfaces print."""

# No `from __future__ import annotations`: on Python 3.11 a TypedDict's NotRequired keys
# are only seen as such when the annotation is evaluated at class creation.
from typing import Any, Literal, NotRequired, TypedDict

from acmi_core.base.stored import StoredObject

# --- agents ----------------------------------------------------------------------------


class Heartbeat(TypedDict):
    """``agents.heartbeat``: the signals it set; ``note`` only when one was given."""

    agent: str
    ts: int
    status: str
    note: NotRequired[str]


class SpawnRecord(TypedDict):
    """A member of an agent's spawns log, as ``agents.spawn`` stores it."""

    ts: int
    session_id: str
    model_id: str
    host: NotRequired[str]


SpawnLog = list[SpawnRecord]  # ``agents.spawns``: the newest first
Lessons = list[StoredObject]  # ``workflows.lessons``: improvement events as stored, newest first


class ThreadEntry(TypedDict):
    """An agent's entry in a thread it joined (``agents.join``)."""

    role: str
    joined_at: int


class SpawnsBody(TypedDict):
    """``GET /v1/agents/{agent}/spawns``: the log, under ``spawns``."""

    spawns: list[SpawnRecord]


class JoinedBody(ThreadEntry):
    """``PUT /v1/agents/{agent}/threads/{thread}``: the entry, under the thread's name."""

    thread: str


class LeftBody(TypedDict):
    """``DELETE /v1/agents/{agent}/threads/{thread}`` (the core answers None)."""

    thread: str
    left: Literal[True]


class Permissions(TypedDict):
    """A tier's permissions document (the reference's field names)."""

    role_tier: str
    allowed_namespaces: list[str]
    write_access: bool
    max_tokens_per_hour: int


InviteAction = Literal["onboarded", "tier-changed", "updated", "unchanged"]


class Transition(TypedDict):
    """What an invite's tier transition (onboarding or a tier change) writes over the
    invite's first answer."""

    created: bool
    action: InviteAction
    changed: list[str]
    # the stored profile and the event as written: free-form JSON objects
    profile: dict[str, Any] | None
    event: dict[str, Any] | None


class Invite(Transition):
    """``agents.invite``: the tier now and before, and what this invite wrote."""

    agent: str
    tier: str
    previous_tier: str | None
    permissions: Permissions


class WebhookTarget(TypedDict):
    type: Literal["webhook"]
    url: str


class EventBridgeTarget(TypedDict):
    type: Literal["eventbridge"]
    bus: str


WakeTarget = WebhookTarget | EventBridgeTarget


class WakeSlot(TypedDict):
    """An agent's wake slot as its profile stores it."""

    minute: int
    every_hours: int
    target: WakeTarget | None


class WakeSet(WakeSlot):
    """``agents.wake``: the slot stored and when it is next due (ms)."""

    agent: str
    next_due: int


# --- locks -----------------------------------------------------------------------------


class LeaseBody(TypedDict):
    """A lease as the surfaces print it (``Lease.to_dict()``); ``owner_token`` only in
    the claimant's own answer."""

    resource: str
    owner: str
    fence: int
    expires_at: int
    correlationId: str
    owner_token: NotRequired[str]
    expires_at_iso: str


class ReleasedBody(LeaseBody):
    """``POST /v1/locks/{resource}/release``: the lease it gave up, and that it did."""

    released: Literal[True]


class LockStateBody(TypedDict):
    """``LockState.to_dict()``: the holder and expiry when held, and the last fence."""

    resource: str
    held: bool
    owner: str | None
    expires_at: int | None
    fence: int


# --- work ------------------------------------------------------------------------------


class LegacyRow(TypedDict):
    """An event of the timeline another tool wrote breaking a rule: its index, and why."""

    index: int
    reasons: list[str]


class SkippedMember(TypedDict):
    """A timeline member that could not be read: where it is, and why."""

    key: str
    position: int
    reason: str


class WorkItemBody(TypedDict):
    """A work item (``WorkItem.to_dict()``); ``next_cursor`` only when the page byte cap
    cut its events."""

    id: str
    entity: str
    profile: dict[str, Any] | None  # free-form JSON objects, as stored
    signals: dict[str, Any]
    owner: str | None
    status: Any  # the stored status signal, whatever JSON another tool wrote there
    open: bool
    timeline: list[dict[str, Any]]  # the events as stored
    legacy: list[LegacyRow]
    skipped: list[SkippedMember]
    sessions: list[str]
    sessions_total: int
    problems: list[str]
    next_cursor: NotRequired[str]


class WorkRefBody(TypedDict):
    """One row of a work list (``WorkRef.to_dict()``): unset values are left out."""

    id: str
    updated_at: NotRequired[int | float]
    status: NotRequired[Any]  # the stored status signal, whatever JSON it is
    owner: NotRequired[str]


class WorkPageBody(TypedDict):
    items: list[WorkRefBody]
    next_cursor: str | None


class SessionPageBody(TypedDict):
    sessions: list[str]
    next_cursor: str | None


class SessionsBody(SessionPageBody):
    """``GET /v1/work/{id}/sessions``: the page, under the item's id."""

    id: str


class OwnerBody(TypedDict):
    """``PUT /v1/work/{id}/owner``: the item and its owner's entity id (the core's str)."""

    id: str
    owner: str


# --- hitl ------------------------------------------------------------------------------


class CreatedBody(TypedDict):
    """``POST /v1/hitl`` and the ``hitl_create`` tool: the stored item (its
    ``hitl-required`` event as stored), and whether this call stored it."""

    item: dict[str, Any]
    created: bool


class HitlPageBody(TypedDict):
    addressee: str | None
    state: str
    items: list[dict[str, Any]]  # the queue's members, as stored
    next_cursor: str | None
    skipped: list[str]


class ResolvedBody(TypedDict):
    correlationId: str
    addressee: str | None
    by: str
    resolved_at: int
    deadline: int
    resolved: Literal[True]


# --- workflows -------------------------------------------------------------------------


class WindowBody(TypedDict):
    """How much of a workflow's timeline a scan read (``Window.to_dict()``)."""

    examined: int
    complete: bool
    oldest_examined_ts: int | float | None
    scan_limit: int


class UnassessedBody(WindowBody):
    workflow: str
    unassessed: list[dict[str, Any]]  # the step-executed events, as stored


class StepScoresBody(TypedDict):
    count: int
    mean: float | None
    last: int | None
    last_ts: int | float | None


class AssessmentsBody(WindowBody):
    workflow: str
    steps: dict[str, StepScoresBody]


# --- the fleet dashboard (acmi_core.coordination.dashboard) ----------------------------


class DashboardAgent(TypedDict):
    """An agent by its last heartbeat: ``stalled`` when the sweep marked it or its
    heartbeat is older than the sweep's threshold."""

    agent: str
    last_heartbeat_ts: int
    age_ms: int
    status: str | None
    status_note: str | None
    stalled: bool


class DashboardLock(TypedDict):
    """A held lease (never its token)."""

    resource: str
    owner: str
    fence: int
    expires_at: int
    expires_in_ms: int


class DashboardHitl(TypedDict):
    """An open HITL item of the shared queue (``queue: shared``) or the operator's."""

    correlationId: str | None
    queue: str
    topic: str | None
    request: str | None
    urgency: str | None
    deadline: int | None
    asked_by: str | None
    addressee: str | None
    summary: str | None


class DashboardWork(TypedDict):
    """A work item: its owner (the owners index) and its status signal."""

    id: str
    owner: str | None
    status: str | None
    open: bool


class DashboardStep(TypedDict):
    count: int
    mean: float
    last: int | float | None


class DashboardWorkflow(TypedDict):
    """Assessment scores per step among the workflow's newest ``examined`` events."""

    workflow: str
    steps: dict[str, DashboardStep]
    lessons: int
    examined: int
    complete: bool


class DashboardBody(TypedDict):
    """``dashboard.read``: everything the page shows, each part capped (``limits``);
    ``truncated`` names the parts a cap cut, ``problems`` what could not be read."""

    tenant: str
    now: int
    agents: list[DashboardAgent]
    locks: list[DashboardLock]
    hitl: list[DashboardHitl]
    work: list[DashboardWork]
    workflows: list[DashboardWorkflow]
    lessons: list[StoredObject]
    events: list[StoredObject]
    truncated: list[str]
    problems: list[str]
    limits: dict[str, int]
