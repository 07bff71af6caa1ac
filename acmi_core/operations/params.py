"""Each operation's parameters as a typed model: the field names, types and defaults every
surface takes (an MCP tool's arguments and input schema are derived from its model:
``acmi_core.mcp.server``). A row names its model as ``"<module>:<qualname>"``
(``Operation.params``), as it names its core callable, so importing the table imports no
pydantic model.

The rules beyond a field's type (ranges, formats, the secret guard) are the core's: a
model carries none of its own, so a surface cannot disagree with the core, and a failure
names the field and the rule the core or the type check gives (``pydantic_rule``). A
model's docstring is its MCP tool's description (whitespace collapsed to single spaces,
the tenancy sentence appended); ``tool_function`` keeps the name today's input schema's
title is made of (``<tool_function>Arguments``) where it is not the tool's.

``writes`` says when a read operation's call writes after all (a bundle that logs a spawn,
a hot layer replaced before it is read): the surface then asks for write access.

The models below the MCP ones are the rows without a tool: the same rule, their fields
the core callable's parameters (what the surface supplies itself, such as the client, a
clock or an output stream, is not a field), their defaults the core's
(``tests/unit/test_params.py`` holds each to its callable's signature)."""

from __future__ import annotations

from typing import Any, ClassVar, Final

from pydantic import BaseModel, ConfigDict

from acmi_core.base.pages import DEFAULT_PAGE_SIZE

# Held equal to acmi_core.bootstrap.bundle.DEFAULT_EVENTS and memory.state.DEFAULT_PRUNE_DAYS
# by tests/unit/test_params.py (this module may import nothing above base).
BUNDLE_EVENTS: Final = 20
PRUNE_DAYS: Final = 7


class Params(BaseModel):
    """An operation's parameters: only its own fields, frozen once validated."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool_function: ClassVar[str | None] = None
    # fields the MCP tool does not take (its arguments are a contract older than them)
    not_tool_arguments: ClassVar[frozenset[str]] = frozenset()

    def writes(self) -> bool:
        """Whether this call writes although its operation reads (see the module)."""
        return False


class ProfilePutParams(Params):
    """Replace an entity's profile (entity: ns:id) with a JSON object, or merge into it
    with merge=true: {entity, profile (as stored), merged}."""

    tool_function: ClassVar[str] = "profile_write"
    entity: str
    profile: dict[str, Any]
    merge: bool = False


class ProfileGetParams(Params):
    """Read an entity's profile: {entity, profile: object or null}."""

    entity: str


class ProfilePatchParams(Params):
    """Merge a JSON object into an entity's profile: {entity, profile (merged)}."""

    entity: str
    partial: dict[str, Any]


class SignalsPutParams(Params):
    """Replace an entity's signals with a JSON object (merge=true: set only these keys,
    keep the others): {entity, signals (all of them now), merged}."""

    tool_function: ClassVar[str] = "signal_write"
    entity: str
    signals: dict[str, Any]
    merge: bool = False


class SignalsGetParams(Params):
    """Read an entity's signals: {entity, signals}; with key, {entity, key, value} (null if
    unset)."""

    entity: str
    key: str | None = None


class SignalPutParams(Params):
    """Set one signal of an entity (others kept): {entity, key, value as stored}."""

    entity: str
    key: str
    value: Any


class EventsAppendParams(Params):
    """Append a Comms v1.1 event to an entity's timeline (event: {source, summary, kind,
    correlationId, ...}; ts defaults to now); returns the event as stored."""

    entity: str
    event: dict[str, Any]


class GetParams(Params):
    """An entity's context in one read: {profile, signals, timeline: the newest events
    (0-1000, oldest first)}."""

    entity: str
    events: int = 20


class ListParams(Params):
    """One page of a category's entities: {category, entities: [ns:id], next_cursor}; pass
    next_cursor back as cursor until it is null."""

    tool_function: ClassVar[str] = "list_ids"
    category: str
    cursor: str | None = None
    limit: int = DEFAULT_PAGE_SIZE


class CatParams(Params):
    """Several timelines merged, newest first: {since, until, events: [{entity, ...}]}.
    since/until are durations ago (30m, 24h, 7d); until absent means now."""

    entities: list[str]
    since: str = "24h"
    until: str | None = None
    limit: int = 50


class BootstrapReadParams(Params):
    """An agent's wake bundle as text (markdown, or format=json). scope: main | group |
    subagent; include: topics,yesterday,archive; topic: one topic file; events: 0-200;
    max_tokens/max_bytes: a budget. spawn {session_id, model_id} logs a session start (a
    write; a main bundle then takes the handoff)."""

    agent: str
    scope: str = "main"
    format: str = "markdown"
    events: int = BUNDLE_EVENTS
    include: str | None = None
    topic: str | None = None
    max_tokens: int | None = None
    max_bytes: int | None = None
    spawn: dict[str, Any] | None = None

    def writes(self) -> bool:
        return self.spawn is not None


class DeleteParams(Params):
    """Delete an entity of this tenant (entity: ns:id; never a key, pattern or other
    tenant): a dry run unless dry_run=false. {entity, dry_run, deleted, found}."""

    entity: str
    dry_run: bool = True


class TenantsListParams(Params):
    """This server's tenant (only its own) and its key's scope: {tenants, scope}."""


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


class WorkCreateParams(Params):
    """Create a work item (id; title and/or a profile object; owner ns:id; status, default
    open); returns the item. Refused if it exists."""

    id: str
    title: str | None = None
    profile: dict[str, Any] | None = None
    owner: str | None = None
    status: str = "open"


class WorkEventParams(Params):
    """Append a Comms v1.1 event to a work item (session_id joins its sessions); returns
    the event as stored."""

    id: str
    event: dict[str, Any]
    session_id: str | None = None


class WorkSignalsParams(Params):
    """Merge signals into a work item's (status closes or reopens it); returns them."""

    id: str
    signals: dict[str, Any]


class WorkGetParams(Params):
    """A work item: {profile, signals, owner, status, timeline (newest events 0-1000,
    oldest first), sessions}."""

    id: str
    events: int = 50


class WorkListParams(Params):
    """One page of work items: {items: [{id, ...}], next_cursor}. owner: ns:id; status open
    (default) or null for any; pass next_cursor back as cursor."""

    owner: str | None = None
    status: str | None = "open"
    cursor: str | None = None
    limit: int = DEFAULT_PAGE_SIZE


class WorkSessionsParams(Params):
    """One page of a work item's session ids: {sessions, next_cursor}."""

    id: str
    cursor: str | None = None
    limit: int = DEFAULT_PAGE_SIZE


class LocksClaimParams(Params):
    """Claim a lease on a resource for ttl_ms (owner: ns:id); returns it with the
    owner_token that renews and releases it. Refused while another holds it."""

    resource: str
    owner: str
    ttl_ms: int


class LocksRenewParams(Params):
    """Renew a lease with its owner_token for ttl_ms more; returns the lease."""

    resource: str
    owner_token: str
    ttl_ms: int


class LocksReleaseParams(Params):
    """Release a lease with its owner_token; returns the lease released."""

    resource: str
    owner_token: str


class LocksGetParams(Params):
    """A lease's state now: {resource, held, owner, expires_at, fence}."""

    resource: str


class HitlCreateParams(Params):
    """Queue a human-in-the-loop request (urgency P0-P2; addressee ns:id, else the shared
    queue): {item, created}."""

    topic: str
    request: str
    not_tool_arguments: ClassVar[frozenset[str]] = frozenset({"correlation_id"})
    asked_by: str
    urgency: str = "P1"
    addressee: str | None = None
    correlation_id: str | None = None


class HitlListParams(Params):
    """One page of a human-in-the-loop queue (addressee, else the shared one; state open or
    closed): {items, next_cursor}."""

    addressee: str | None = None
    state: str = "open"
    cursor: str | None = None
    limit: int = DEFAULT_PAGE_SIZE


class HitlResolveParams(Params):
    """Resolve a human-in-the-loop request by its correlation id; returns it."""

    correlation_id: str
    resolution: str
    by: str


class WorkflowsAssessParams(Params):
    """Score an executed workflow step 0-100 against criteria (a list of names, or name ->
    result); returns the assessment event."""

    workflow: str
    step: str
    score: int
    criteria: list[str] | dict[str, Any]
    agent: str
    note: str | None = None


class WorkflowsImproveParams(Params):
    """Record a lesson for a workflow step (it seeds the next bootstrap)."""

    workflow: str
    step: str
    lesson: str
    agent: str


class MemoryRememberParams(Params):
    """Remember a line in an entity's memory: layer warm (MEMORY.md), hot
    (ACTIVE-CONTEXT.md), daily (today's note) or topic (topic: slug); section optional."""

    entity: str
    text: str
    layer: str = "warm"
    section: str | None = None
    topic: str | None = None


class MemorySearchParams(Params):
    """Search an entity's memory layers, fast layers first: {hits, ...}."""

    entity: str
    query: str
    limit: int = 20


class MemoryStatusParams(Params):
    """An entity's memory status: layers, budgets, handoff_pending."""

    entity: str


class MemoryActiveGetParams(Params):
    """The hot layer: {entity, path, text: ACTIVE-CONTEXT.md or null, sections, budget};
    with text, replace ACTIVE-CONTEXT.md first (needs a write key)."""

    entity: str
    text: str | None = None

    def writes(self) -> bool:
        return self.text is not None


class MemoryReviewParams(Params):
    """The weekly review: promote the last 7 days' lessons and decisions to MEMORY.md and
    prune the hot layer."""

    entity: str


class MemoryPruneParams(Params):
    """Prune the hot layer: completed tasks, items older than days (0-365) and yesterday's
    decisions move to today's note. Idempotent."""

    entity: str
    days: int = PRUNE_DAYS


class MemoryDailySummaryParams(Params):
    """A day's note (date YYYY-MM-DD, default today in the entity's tz): entries,
    decisions, lessons, takeaways, open tasks for tomorrow, the text."""

    entity: str
    date: str | None = None


class MemoryTopicsCreateParams(Params):
    """Create the topic:<slug> file from the seed's template, linked from MEMORY.md."""

    entity: str
    slug: str
    name: str


class MemoryDebugParams(Params):
    """Missing pieces, hot-vs-warm conflicts and stale items: {ok, problems, ...}."""

    entity: str


class MemoryExportParams(Params):
    """The seed's file tree of an entity's memory: {entity, files: {path: text}}."""

    entity: str


class MemoryImportParams(Params):
    """Import a seed file tree ({path: text}; strict: refuse files over budget) into an
    entity's memory. Idempotent: a second import writes nothing."""

    entity: str
    files: dict[str, str]
    strict: bool = False


class MemoryHandoffParams(Params):
    """With text: leave a handoff (HANDOFF.md) for the next session; returns it. Without:
    take the pending handoff (read and cleared at once): {entity, handoff or null}."""

    entity: str
    text: str | None = None


# --- rows without an MCP tool ---------------------------------------------------------------


class IngestWebhookParams(Params):
    """A webhook as the route received it: the source's name, the raw body and its JSON,
    the query, the idempotency key and the headers (the route loads the source's config)."""

    source: str
    raw_body: bytes
    body: Any
    query: dict[str, str]
    idempotency_key: str | None
    headers: dict[str, str] | None = None


class ProfileDeleteParams(Params):
    """Delete an entity's profile."""

    entity: str


class SignalsPatchParams(Params):
    """Set the given signals of an entity, keep the others."""

    entity: str
    values: dict[str, Any]


class SignalsDeleteParams(Params):
    """Delete all signals of an entity."""

    entity: str


class SignalGetParams(Params):
    """One signal of an entity."""

    entity: str
    key: str


class SignalDeleteParams(Params):
    """Delete one signal of an entity."""

    entity: str
    key: str


class TimelineParams(Params):
    """One page of an entity's timeline, oldest first (reverse: newest first)."""

    entity: str
    cursor: str | None = None
    limit: int = DEFAULT_PAGE_SIZE
    reverse: bool = False
    since_ms: float | None = None
    until_ms: float | None = None


class WorkOwnerParams(Params):
    """Assign a work item to an owner."""

    id: str
    owner: str


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


class WorkflowsExecuteParams(Params):
    """Log that an agent executed a workflow step."""

    workflow: str
    step: str
    agent: str
    summary: str | None = None
    correlation_id: str | None = None
    payload: dict[str, Any] | None = None


class WorkflowsLessonsParams(Params):
    """The newest lessons of a workflow (or of an agent's workflows), newest first."""

    workflow: str | None = None
    agent: str | None = None
    limit: int = 10


class WorkflowsUnassessedParams(Params):
    """Executed steps of a workflow no assessment covers, newest first."""

    workflow: str
    since_ms: float | None = None
    limit: int = 50


class WorkflowsAssessmentsParams(Params):
    """Scores per step of a workflow: count, mean, last."""

    workflow: str
    step: str | None = None
    since_ms: float | None = None


class BootstrapSpawnParams(BootstrapReadParams):
    """Log a spawn and read the wake bundle in the same step."""

    format: str = "json"


class MemoryActivePutParams(Params):
    """Replace an entity's ACTIVE-CONTEXT.md."""

    entity: str
    text: str


class MemoryHandoffTakeParams(Params):
    """Read and clear an entity's pending handoff (null when none)."""

    entity: str


class MemoryArchiveParams(Params):
    """Archive an entity's events older than the retention now."""

    entity: str
    retention_days: int | None = None
    max_events: int | None = None


class DoctorParams(Params):
    """Check a keyspace (read-only), one category or all."""

    as_json: bool = False
    category: str | None = None


class MigrateParams(Params):
    """Repair what doctor finds (dry_run: say what it would do)."""

    as_json: bool = False
    dry_run: bool = False
    tenant_id: str | None = None
    category: str | None = None


class KeysCreateParams(Params):
    """Mint a key of a tenant with a scope and a name."""

    tenant: str
    scope: str
    name: str


class KeysListParams(Params):
    """The keys of a tenant (or every tenant's), never the key itself."""

    tenant: str | None = None


class KeysRevokeParams(Params):
    """Revoke a key by its id."""

    key_id: str


class SourcesSetParams(Params):
    """Configure a source: its secrets, push token, OIDC audience, entity and mapping."""

    source: str
    hmac_secret: str | None = None
    remove_hmac_secret: bool = False
    new_push_token: bool = False
    remove_push_token: bool = False
    oidc_audience: str | None = None
    oidc_email: str | None = None
    remove_oidc: bool = False
    entity: str | None = None
    remove_entity: bool = False
    mapping: dict[str, str] | None = None
    remove_mapping: bool = False
    gmail_credentials_secret: str | None = None
    remove_gmail_credentials_secret: bool = False
    replace: bool = False


class JobsRunParams(Params):
    """Run a scheduled job now, by its name (the runner makes its run and its clock)."""

    job: str


class JobsStatusParams(Params):
    """A job's last run and what waits."""

    job: str


class QuotaMonitorParams(Params):
    """Each provider's quota health (record: keep the readings; alert_to: who hears)."""

    record: bool = True
    alert_to: str | None = None
    max_age_ms: int | None = 86_400_000


class QuotaReportParams(Params):
    """Post a quota reading of a provider's meter."""

    provider: str
    meter: str
    remaining: Any
    limit: Any
    unit: str | None = None
    resets_at: str | int | None = None
