"""The only place that builds a Redis key.

Default tenant (wire-compatible with the reference deployment)::

    acmi:<cat>:<id>:profile | signals | timeline      STRING | STRING | ZSET
    acmi:<cat>:list                                    SET of ids
    acmi:agent:<id>:spawns | active_context | rollup:latest
    acmi:work:<id>:sessions
    acmi:hitl:<cat>:<id>:open | closed                 ZSET (SPEC v1.3 §11.6 per-addressee HITL)
    acmi:thread:hitl:open | closed                     ZSET (the shared HITL queue, SPEC v1.2)

Other tenants (ACMI SPEC v1.3 §12.2): the same under ``acmi:tenant:<tenant>:``.
ACMI's own bookkeeping lives under ``acmi:_<kind>:<tenant>:...``: a category must start
with a letter, so no entity key can ever equal one of these.
"""

from __future__ import annotations

import hashlib
from enum import StrEnum
from typing import Final

from acmi_core.base.model import EntityId, check_category, check_tenant


class Slot(StrEnum):
    PROFILE = "profile"
    SIGNALS = "signals"
    TIMELINE = "timeline"


# Long-context extension slots (reference layout). `acmi.delete` removes these too;
# a new extension slot is registered here and nowhere else.
SPAWNS: Final = "spawns"  # ZSET score=ts, member JSON {ts, session_id, model_id, host?}
ACTIVE_CONTEXT: Final = "active_context"  # HASH thread -> JSON {role, joined_at}
ROLLUP_LATEST: Final = "rollup:latest"  # STRING JSON {ts, summary, ...}
SESSIONS: Final = "sessions"  # SET (work items)
LAST_BRIEF: Final = "last_brief"  # STRING JSON: the operator's daily standup brief
# The memory layers' own (acmi_core.memory.service, acmi_core.jobs.hygiene):
MEMORY_ARCHIVE: Final = "memory:archive"  # HASH quarter (YYYY-QN) -> archive document JSON
MEMORY_HANDOFF: Final = "memory:handoff"  # STRING JSON {text, ts}: taken (GETDEL) on wake
# ZSET score=ts, member=str(ts): the stamps of the daily-note events on the timeline, kept
# by the write that adds them, so the bootstrap reads a day's note lines, not the day's events
MEMORY_STAMPS: Final = "memory:stamps"
EXTENSION_SLOTS: Final = (
    SPAWNS,
    ACTIVE_CONTEXT,
    ROLLUP_LATEST,
    SESSIONS,
    LAST_BRIEF,
    MEMORY_ARCHIVE,
    MEMORY_HANDOFF,
    MEMORY_STAMPS,
)
ALL_SLOTS: Final = (*(s.value for s in Slot), *EXTENSION_SLOTS)

# The fleet coordination bus (reference layout): lock claims, releases and deferrals.
COORDINATION_THREAD: Final = "thread:agent-coordination"

ROOT: Final = "acmi"
INTERNAL_MARK: Final = "_"


class Keys:
    """Key builder bound to one tenant."""

    def __init__(self, tenant: str, default_tenant: str) -> None:
        self.tenant = check_tenant(tenant)
        self.is_default = tenant == default_tenant
        self._prefix = f"{ROOT}:" if self.is_default else f"{ROOT}:tenant:{tenant}:"

    def slot(self, entity: EntityId, slot: str) -> str:
        return f"{self._prefix}{entity.category}:{entity.local_id}:{slot}"

    def profile(self, entity: EntityId) -> str:
        return self.slot(entity, Slot.PROFILE)

    def signals(self, entity: EntityId) -> str:
        return self.slot(entity, Slot.SIGNALS)

    def timeline(self, entity: EntityId) -> str:
        return self.slot(entity, Slot.TIMELINE)

    def all_slots(self, entity: EntityId) -> list[str]:
        return [self.slot(entity, s) for s in ALL_SLOTS]

    def index(self, category: str) -> str:
        """The namespace index: a SET of the category's ids."""
        return f"{self._prefix}{check_category(category)}:list"

    def internal(self, kind: str, *parts: str) -> str:
        """A bookkeeping key of this tenant (idempotency records, sources, leases)."""
        return internal_global(kind, self.tenant, *parts)

    def lock(self, resource: str) -> str:
        """The lease HASH of ``resource`` (owner, token digest, expiry, fencing counter).
        Resource names are checked by ``acmi_core.coordination.locks`` before they get here."""
        return self.internal("lock", resource)

    def coordination_timeline(self) -> str:
        return self.timeline(EntityId.parse(COORDINATION_THREAD))

    @property
    def prefix(self) -> str:
        """What every entity key of this tenant starts with (``acmi:`` or
        ``acmi:tenant:<t>:``): a script that reads items named by an index builds their
        keys from it (``store/lua/bootstrap.lua``)."""
        return self._prefix

    # coordination bookkeeping: each kept by the write that changes what it indexes,
    # in the same atomic step, so readers and sweeps never scan

    def leases(self) -> str:
        """Every lease with an owner, as a lexicographic ZSET (all scores 0) of
        ``<owner>|<resource>|<expires ms>|<fence>|<cid>``: a ZRANGEBYLEX on ``<owner>|``
        lists what an owner holds. Kept by ``store/lua/locks.lua``."""
        return self.internal("leases")

    def changed(self) -> str:
        """ZSET entity id -> when its timeline last changed (ms, the writer's clock): kept
        by every timeline write, so scheduled jobs visit what changed since their last run
        (ZRANGEBYSCORE) and never scan."""
        return self.internal("changed")

    def job_state(self, job: str) -> str:
        """STRING JSON: a scheduled job's last run (watermark, counts, backlog)."""
        return self.internal("job", job)

    def job_run(self, job: str, execution_id: str) -> str:
        """The record of one finished execution (WritePlan.once): a retried execution
        id finds it and does nothing. The id is hashed: any id fits in a key."""
        digest = hashlib.sha256(execution_id.encode("utf-8")).hexdigest()[:32]
        return self.internal("jobrun", job, digest)

    def request(self, request_id: str) -> str:
        """STRING: the recorded reply of one request of a script that is not idempotent
        (``store/lua/locks.lua``, ``hitl.lua``, ``work.lua``, a WritePlan's RECORD op),
        written by its first run for ``scripts.REPLAY_TTL_MS``: the transport's retry of
        that request (same id) answers with it instead of running again."""
        return self.internal("req", request_id)

    def registry(self, name: str) -> str:
        """A registry document the reference's tools keep as a raw STRING (JSON), e.g.
        ``acmi:registry:agent-model-policy``: not an entity slot."""
        return f"{self._prefix}registry:{name}"

    def wake_due(self) -> str:
        """ZSET agent id -> its next wake (ms): the wake tick takes the due ones."""
        return self.internal("wake")

    def drift_report(self) -> str:
        """STRING JSON: drift-diff's latest report (never written into a thread it scans)."""
        return self.internal("drift")

    def activity(self) -> str:
        """ZSET entity id -> its last heartbeat (ms): the liveness sweep's index."""
        return self.internal("activity")

    def hitl_queue(self, addressee: EntityId | None, state: str) -> str:
        """A HITL queue (ZSET, score = deadline ms when open, resolution ms when closed;
        member = the ``hitl-required`` event JSON). ``addressee`` None: the shared queue."""
        if state not in ("open", "closed"):
            raise ValueError(f"HITL queue state {state!r}: open or closed")
        if addressee is None:
            return f"{self._prefix}thread:hitl:{state}"
        return f"{self._prefix}hitl:{addressee.category}:{addressee.local_id}:{state}"

    def hitl_items(self) -> str:
        """HASH correlationId -> the HITL item's record: what makes create idempotent and
        lets resolve find the item without scanning a queue."""
        return self.internal("hitl")

    def work_open(self, owner: EntityId) -> str:
        """ZSET work id -> last update (ms): the open work items ``owner`` owns."""
        return self.internal("work-open", str(owner))

    def work_owners(self) -> str:
        """HASH work id -> owner entity id, for the work items that have an owner."""
        return self.internal("work-owner")

    def lessons(self) -> str:
        """ZSET of the tenant's newest ``improvement`` events (score ts), trimmed by the
        write that adds one: what a bootstrap filters by the agent's workflows."""
        return self.internal("lessons")

    def agent_workflows(self, agent: EntityId) -> str:
        """ZSET workflow id -> last time ``agent`` executed, assessed or improved a step."""
        return self.internal("workflows", str(agent))

    def hygiene_due(self) -> str:
        """ZSET entity -> when its next memory hygiene task is due (ms), fed from the
        change index by the hygiene job: what it reads instead of scanning entities."""
        return self.internal("hygiene")

    def hygiene_lease(self) -> str:
        """STRING, SET NX PX: one hygiene run at a time rewrites a quarter's S3 object."""
        return self.internal("hygiene-lease")

    def gmail_history(self, source: str, email: str) -> str:
        """Where a Gmail source keeps the history id the next fetch of ``email`` starts
        from (JSON ``{"historyId": "<id>"}``). A digest of the address: no mail address
        in a key name, and any address fits."""
        digest = hashlib.sha256(email.lower().encode("utf-8")).hexdigest()
        return self.internal("gmail", source, digest)


def internal_global(kind: str, *parts: str) -> str:
    """A bookkeeping key looked up before the tenant is known (API keys, push tokens)."""
    return ":".join((ROOT, INTERNAL_MARK + kind, *parts))
