"""Tier permissions: what a key bound to an agent may write, decided in one place.

A key minted with ``--agent agent:scout`` (``apikeys.ApiKey.agent``) acts for that agent,
and its writes are held to the agent's tier (:func:`check_write`; the HTTP access layer
and the MCP write check both call :meth:`TierGate.check`; the CLI's ``--api`` goes
through HTTP). A key bound to no agent is not affected at all.

The tier in force (:func:`effective_tier`): the agent's ``:permissions`` slot (the
reference's JSON ``{role_tier, allowed_namespaces, write_access, max_tokens_per_hour}``,
what ``acmi agents invite`` writes) when it is a valid document, else the ``TIERS``
document of its profile's ``rbac_tier``, else ``DEFAULT_TIER``'s (Utility). One round
trip (a pipeline of two GETs), cached per process for ``TIER_CACHE_S`` (30 s) per tenant
and agent (:class:`TierGate`): a tier change (an invite with another tier) takes effect
within that time.

The rules, for a bound key's write (a write row, or a read whose params say it writes):

- Each row names what it writes (:data:`WRITE_TARGETS`): an entity parameter (its
  namespace is the id's category: ``thread:x`` -> ``thread``), an agent parameter
  (``scout`` -> ``agent:scout``), or a fixed namespace: the coordination writes (locks,
  HITL) post to ``thread:agent-coordination``, so they are ``thread`` writes; work items
  are ``work:<id>`` entities (``work``); workflows ``workflow:<id>`` (``workflow``).
- The agent's own entity (``agent:scout`` for scout's key: its heartbeat, spawns,
  signals, timeline, memory, rollup, threads) is always writable.
- Otherwise: ``write_access`` false -> 403 ``tier_read_only``; a namespace outside
  ``allowed_namespaces`` (unless it holds ``"*"``) -> 403 ``tier_namespace``; each names
  the parameter (the field) that chose the entity.
- A row that names no entity (tenant-wide: keys, sources, jobs, invites; a webhook push,
  whose source maps the body to any entity) is refused unless the tier allows ``"*"``
  (Admin).

Identity (:func:`check_identity`): a bound key acts only as its agent. Each row whose
arguments say who acts (:data:`ACTORS`, beside ``WRITE_TARGETS``; the reference tools'
in :data:`REFERENCE_ACTORS`) is refused (403 ``tier_identity``, naming the field) when
that argument names anyone else: a lock's ``owner``, a HITL item's ``asked_by`` and a
resolve's ``by``, a work item's ``owner`` (a create or a claim), the ``agent`` of the
agent loop (heartbeat, spawn, threads, rollup, wake, a bootstrap's spawn) and of a
workflow step. An event's ``source`` is looser: it may name a relay (``user:mikey``,
``gmail:inbox``), so it is refused only when it names another agent (``agent:<x>``).
A memory write's ``entity`` (remember, forget, the hot layer, handoff, import, review,
prune, archive...) is looser the same way: the key's own agent's memory, or an entity
that is no agent's (``thread:x``, within the tier's namespaces), never another agent's;
so is an entity write that overwrites or deletes (profile, signals, an event's delete,
the entity; the reference's ``acmi_profile`` and ``acmi_signal``): an event appended to
another agent's timeline is a message, and only its ``source`` is checked.
The tenant-wide writes that name agents (store-only today; held for any surface that
routes them): an invite's ``invited_by`` is the key's agent, and a minted key's
``agent`` is the key's own (not another, not none: an unbound key acts for anyone).
A bare id is an agent's (``scout`` -> ``agent:scout``). The tier's rules are checked
first, so a write both rules refuse gets the tier's 403. Every tier, ``Admin``
included: an operator who acts for several agents uses a key bound to none.

Tokens (:meth:`TierGate.allowance`, ``acmi_core/bootstrap/allowance.py``): a bound key
is served at most ``max_tokens_per_hour`` bundle tokens an hour (the bundles of
:data:`TOKEN_ROWS` and the reference's ``acmi_bootstrap``; memory search and get, entity
reads and the rest are not counted: they are the agent's work, each capped on its own).
The bootstrap script reads the key's counter first and refuses (429 ``tier_tokens``,
Retry-After to the next hour) before it writes anything; a served bundle is charged its
tokens after it is built, so the bundle that crosses the limit is served and the next
is refused.

Reads are not limited by tier: an agent reads the tenant's shared context (its threads,
the coordination thread, other agents' liveness) to do its work, and the key's scope
already says whether it may read at all.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from acmi_core.base.cache import TtlCache
from acmi_core.base.errors import Forbidden, StoreCommandError
from acmi_core.base.keys import COORDINATION_THREAD, PERMISSIONS
from acmi_core.base.model import EntityId
from acmi_core.bootstrap.allowance import Allowance
from acmi_core.coordination.agents import DEFAULT_TIER, TIERS

if TYPE_CHECKING:
    from acmi_core.client import Acmi

# How long one process trusts a tier it read (seconds): a tier change is in force
# everywhere within this time, as a revoked key stops working within KeyCache's.
TIER_CACHE_S: Final = 30.0
ANY: Final = "*"
TENANT_WIDE_FIELD: Final = "authorization"


@dataclass(frozen=True, slots=True)
class EffectiveTier:
    """The tier a bound key's writes are held to, and where it came from (``source``:
    ``permissions`` the slot, ``profile`` the profile's rbac_tier, ``default``)."""

    name: str
    namespaces: frozenset[str]
    write_access: bool
    max_tokens_per_hour: int
    source: str

    def allows(self, namespace: str) -> bool:
        return ANY in self.namespaces or namespace in self.namespaces


@dataclass(frozen=True, slots=True)
class Target:
    """What a row writes: ``field``, the parameter naming it; ``kind``: ``entity`` (the
    value is an entity id), ``agent`` (an agent id, bare or not), ``pair`` (the value is
    the id inside the namespace given as ``namespace``: the reference tools' arguments),
    or ``fixed`` (the namespace is ``namespace`` whatever the value)."""

    field: str
    kind: str
    namespace: str = ""


def _entity(field: str = "entity") -> tuple[Target, ...]:
    return (Target(field, "entity"),)


def _agent(field: str = "agent") -> tuple[Target, ...]:
    return (Target(field, "agent"),)


def _fixed(field: str, namespace: str) -> tuple[Target, ...]:
    return (Target(field, "fixed", namespace),)


_COORDINATION_NS: Final = COORDINATION_THREAD.split(":", 1)[0]  # "thread"

# Each writing row -> what it writes. A writing row missing here is tenant-wide (refused
# to a bound key unless its tier allows "*"); tests hold this table to the operation
# table's write rows.
WRITE_TARGETS: Final[dict[str, tuple[Target, ...]]] = {
    "entities.events.append": _entity(),
    "entities.delete": _entity(),
    "entities.profile.put": _entity(),
    "entities.profile.patch": _entity(),
    "entities.profile.delete": _entity(),
    "entities.signals.put": _entity(),
    "entities.signals.patch": _entity(),
    "entities.signals.delete": _entity(),
    "entities.signal.put": _entity(),
    "entities.signal.delete": _entity(),
    "entities.timeline.delete": _entity(),
    # leases and HITL post to the coordination thread
    "locks.claim": _fixed("resource", _COORDINATION_NS),
    "locks.renew": _fixed("resource", _COORDINATION_NS),
    "locks.release": _fixed("resource", _COORDINATION_NS),
    "hitl.create": _fixed("topic", _COORDINATION_NS),
    "hitl.resolve": _fixed("correlation_id", _COORDINATION_NS),
    # work items are work:<id> entities, workflows workflow:<id>
    "work.create": _fixed("id", "work"),
    "work.event": _fixed("id", "work"),
    "work.signals": _fixed("id", "work"),
    "work.owner": _fixed("id", "work"),
    "workflows.execute": _fixed("workflow", "workflow"),
    "workflows.assess": _fixed("workflow", "workflow"),
    "workflows.improve": _fixed("workflow", "workflow"),
    # the agent's own slots (joining a thread writes the agent's active context only)
    "agents.heartbeat": _agent(),
    "agents.spawn": _agent(),
    "agents.join": _agent(),
    "agents.leave": _agent(),
    "agents.rollup.put": _agent(),
    "agents.wake": _agent(),
    "agents.threads": _agent(),
    "bootstrap.read": _agent(),  # with a spawn to log
    "bootstrap.spawn": _agent(),
    "memory.review": _entity(),
    "memory.forget": _entity(),
    "memory.remember": _entity(),
    "memory.active.get": _entity(),  # with a text to write
    "memory.active.put": _entity(),
    "memory.topics.create": _entity(),
    "memory.prune": _entity(),
    "memory.handoff": _entity(),
    "memory.handoff.take": _entity(),
    "memory.import": _entity(),
    "memory.archive": _entity(),
}


# The reference MCP tools (ACMI_MCP_TOOLS=reference) that write -> what each writes;
# acmi_delete (a raw Redis key) is missing on purpose: tenant-wide, for "*" tiers only.
REFERENCE_TARGETS: Final[dict[str, tuple[Target, ...]]] = {
    "acmi_profile": (Target("id", "pair"),),
    "acmi_signal": (Target("id", "pair"),),
    "acmi_event": (Target("id", "pair"),),
    "acmi_spawn": _agent("agentId"),
    "acmi_active": _agent("agentId"),
    "acmi_rollup_set": _agent("agentId"),
    "acmi_work_create": _fixed("id", "work"),
    "acmi_work_event": _fixed("id", "work"),
    "acmi_work_signal": _fixed("id", "work"),
}


@dataclass(frozen=True, slots=True)
class Actor:
    """An argument saying who acts: ``field`` (dotted into an object: ``event.source``;
    over each item of a list of them), ``strict``: the value must be the key's agent;
    otherwise (an event's source, a memory's owner) it must only not name another agent.
    ``unbound``: a None value (given, or the model's default) names no agent, which is
    not the key's either (a key minted bound to none); otherwise None is not checked.
    ``owner``: the value is whose ``owns`` is written (memory, an entity), not who acts
    (the message says so); ``pair``: the value is an id in ``namespace`` (the reference
    tools' ``namespace`` + ``id``)."""

    field: str
    strict: bool = True
    unbound: bool = False
    owner: bool = False
    owns: str = "memory"
    pair: bool = False


def _actor(field: str = "agent") -> tuple[Actor, ...]:
    return (Actor(field),)


_SOURCE: Final = (Actor("event.source", strict=False),)
# a memory write's entity: the key's own agent's memory, or an entity that is no agent's
_MEMORY: Final = (Actor("entity", strict=False, owner=True),)
# an overwrite or a delete of an entity (its profile, signals, an event, the whole of it):
# the key's own agent's, or one that is no agent's; an event appended to another agent's
# timeline is a message, and stays allowed (its source is checked)
_OWN: Final = (Actor("entity", strict=False, owner=True, owns="entity"),)
_OWN_PAIR: Final = (Actor("id", strict=False, owner=True, owns="entity", pair=True),)

# Each row whose arguments say who acts -> those arguments (module docstring); tests
# hold this table to the operation table's params models.
ACTORS: Final[dict[str, tuple[Actor, ...]]] = {
    "entities.events.append": _SOURCE,
    "locks.claim": _actor("owner"),
    "hitl.create": _actor("asked_by"),
    "hitl.resolve": _actor("by"),
    "work.create": _actor("owner"),
    "work.owner": _actor("owner"),
    "work.event": _SOURCE,
    "workflows.execute": _actor(),
    "workflows.assess": _actor(),
    "workflows.improve": _actor(),
    "agents.heartbeat": _actor(),
    "agents.spawn": _actor(),
    "agents.join": _actor(),
    "agents.leave": _actor(),
    "agents.rollup.put": _actor(),
    "agents.wake": _actor(),
    "agents.threads": _actor(),  # add and remove (a list is a read)
    "bootstrap.read": _actor(),  # with a spawn to log
    "bootstrap.spawn": _actor(),
    # an agent's memory is its own: another agent's slots are refused whatever the tier
    **{row: _MEMORY for row in WRITE_TARGETS if row.startswith("memory.")},
    **{
        row: _OWN
        for row in WRITE_TARGETS
        if row.startswith("entities.") and row != "entities.events.append"
    },
    # tenant-wide ('*' tiers only), store-only today; held here for any surface that
    # routes them: an invite is made by the key's agent, and a bound key mints keys
    # bound to its own agent only (never an unbound one, which acts for anyone)
    "agents.invite": _actor("invited_by"),
    "keys.create": (Actor("agent", unbound=True),),
}

# The reference MCP tools' arguments saying who acts.
REFERENCE_ACTORS: Final[dict[str, tuple[Actor, ...]]] = {
    "acmi_event": (Actor("source", strict=False),),
    "acmi_profile": _OWN_PAIR,
    "acmi_signal": _OWN_PAIR,
    "acmi_work_event": (Actor("source", strict=False),),
    "acmi_spawn": _actor("agentId"),
    "acmi_active": _actor("agentId"),
    "acmi_rollup_set": _actor("agentId"),
}

# The rows whose answer is a bundle, charged to a bound key's hourly tokens.
TOKEN_ROWS: Final = frozenset({"bootstrap.read", "bootstrap.spawn"})
REFERENCE_TOKEN_TOOLS: Final = frozenset({"acmi_bootstrap"})
REFERENCE_ROW: Final = "reference."  # a reference tool's row name: reference.<tool>


def _document(raw: object) -> dict[str, object] | None:
    """A stored JSON object, or None when the key is missing or holds anything else."""
    if not isinstance(raw, bytes):
        return None
    try:
        doc = json.loads(raw)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _permissions(raw: object) -> EffectiveTier | None:
    """The slot's document as a tier, or None when it is missing or not a valid one."""
    doc = _document(raw)
    if doc is None:
        return None
    namespaces = doc.get("allowed_namespaces")
    write = doc.get("write_access")
    tokens = doc.get("max_tokens_per_hour")
    name = doc.get("role_tier")
    if (
        not isinstance(namespaces, list)
        or not all(isinstance(ns, str) and ns for ns in namespaces)
        or not isinstance(write, bool)
        or not isinstance(tokens, int)
        or isinstance(tokens, bool)
        or tokens < 0
    ):
        return None
    return EffectiveTier(
        name if isinstance(name, str) and name else "custom",
        frozenset(namespaces),
        write,
        tokens,
        "permissions",
    )


def _named(name: str, source: str) -> EffectiveTier:
    tier = TIERS[name]
    return EffectiveTier(
        name, frozenset(tier.namespaces), tier.write_access, tier.max_tokens_per_hour, source
    )


_BY_LOWER: Final = {name.lower(): name for name in TIERS}


def _profile_tier(raw: object) -> EffectiveTier | None:
    doc = _document(raw)
    tier = None if doc is None else doc.get("rbac_tier")
    name = _BY_LOWER.get(tier.lower()) if isinstance(tier, str) else None
    return None if name is None else _named(name, "profile")


def effective_tier(acmi: Acmi, agent: str) -> EffectiveTier:
    """The tier ``agent`` (an ``agent:<id>`` id) holds in ``acmi``'s tenant: its
    permissions slot if valid, else its profile's rbac_tier, else the default. One round
    trip."""
    eid = EntityId.parse(agent, "agent")
    keys = acmi.keys
    permissions, profile = acmi.store.pipeline(
        [("GET", keys.slot(eid, PERMISSIONS)), ("GET", keys.profile(eid))]
    )
    for reply in (permissions, profile):
        if isinstance(reply, StoreCommandError):
            raise reply
    return _permissions(permissions) or _profile_tier(profile) or _named(DEFAULT_TIER, "default")


def _refuse(field: str, rule: str, message: str) -> Forbidden:
    return Forbidden(f"{field}: {message}", field=field, rule=rule)


def _written(target: Target, values: Mapping[str, object]) -> tuple[str, str | None]:
    """The namespace ``target`` writes and, for an entity, its id (None otherwise)."""
    if target.kind == "fixed":
        return target.namespace, None
    value = values.get(target.field)
    text = value if isinstance(value, str) else str(value)
    if target.kind == "pair":
        text = f"{values.get('namespace')}:{text}"
    if target.kind == "agent" and ":" not in text:
        text = f"agent:{text}"
    namespace = text.split(":", 1)[0] if ":" in text else text
    return namespace, text


def _at(values: Mapping[str, object], path: str) -> list[object]:
    """The values at dotted ``path`` in ``values`` (each item's, through a list)."""
    head, _, rest = path.partition(".")
    value = values.get(head)
    if not rest:
        return [value]
    items = value if isinstance(value, list) else [value]
    return [v for item in items if isinstance(item, Mapping) for v in _at(item, rest)]


def actors_of(row: str) -> tuple[Actor, ...]:
    """The arguments of ``row`` (``reference.<tool>`` for a reference tool) saying who acts."""
    if row.startswith(REFERENCE_ROW):
        return REFERENCE_ACTORS.get(row[len(REFERENCE_ROW) :], ())
    return ACTORS.get(row, ())


def check_identity(agent: str, row: str, values: Mapping[str, object]) -> None:
    """Refuse (403 ``tier_identity``) a call of ``row`` by a key bound to ``agent`` whose
    arguments ``values`` say someone else acts (module docstring); an argument absent
    from ``values`` is not checked (a surface checks again once it has the body)."""
    for actor in actors_of(row):
        if actor.field.partition(".")[0] not in values:
            continue
        for value in _at(values, actor.field):
            if value is None:
                if actor.unbound:
                    raise _refuse(
                        actor.field,
                        "tier_identity",
                        f"this key is bound to {agent} and mints keys bound to it only; "
                        f"{actor.field} names no agent (a key bound to none acts for "
                        "anyone: an operator's unbound key mints it)",
                    )
                continue
            text = value if isinstance(value, str) else str(value)
            if actor.pair:
                text = f"{values.get('namespace')}:{text}"
            named = text if ":" in text else f"agent:{text}"
            if named == agent or (not actor.strict and not named.startswith("agent:")):
                continue
            who = "another agent" if named.startswith("agent:") else "someone else"
            does = f"writes only its own agent's {actor.owns}" if actor.owner else "acts only as it"
            raise _refuse(
                actor.field,
                "tier_identity",
                f"this key is bound to {agent} and {does}; {actor.field} names {who} ({named!r})",
            )


def check_write(
    tier: EffectiveTier,
    agent: str,
    row: str,
    values: Mapping[str, object],
    targets: tuple[Target, ...] | None = None,
) -> None:
    """Refuse (403) a write of row ``row`` with parameters ``values`` by a key bound to
    ``agent`` holding ``tier`` (module docstring): its tier's rules, then who acts;
    return when it may go ahead. ``targets``: what it writes, when not the row's
    (``WRITE_TARGETS``)."""
    _check_targets(tier, agent, row, values, targets)
    check_identity(agent, row, values)


def _check_targets(
    tier: EffectiveTier,
    agent: str,
    row: str,
    values: Mapping[str, object],
    targets: tuple[Target, ...] | None,
) -> None:
    targets = WRITE_TARGETS.get(row) if targets is None else targets
    if targets is None:
        if ANY not in tier.namespaces:
            raise _refuse(
                TENANT_WIDE_FIELD,
                "tier_namespace",
                f"{row} is a tenant-wide write; this key is bound to {agent}, whose tier "
                f"{tier.name!r} does not allow every namespace ('*')",
            )
        return
    for target in targets:
        namespace, entity = _written(target, values)
        if entity is not None and entity == agent:
            continue  # the agent's own entity is always writable
        what = entity or f"namespace {namespace!r}"
        if not tier.write_access:
            raise _refuse(
                target.field,
                "tier_read_only",
                f"this key is bound to {agent}, whose tier {tier.name!r} is read-only "
                f"except its own entity; it may not write {what}",
            )
        if not tier.allows(namespace):
            allowed = ", ".join(sorted(tier.namespaces)) or "none"
            raise _refuse(
                target.field,
                "tier_namespace",
                f"this key is bound to {agent}, whose tier {tier.name!r} may write the "
                f"namespaces {allowed}; not {namespace!r} ({what})",
            )


class TierGate:
    """The tier check with its per-process cache: tiers by (tenant, agent), each kept
    ``ttl_s`` (``TIER_CACHE_S``); ``clock`` times the cache (tests move it)."""

    def __init__(
        self, ttl_s: float = TIER_CACHE_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._cache: TtlCache[tuple[str, str], EffectiveTier] = TtlCache(
            ttl_s, miss_ttl_s=0, clock=clock
        )

    def tier(self, acmi: Acmi, agent: str) -> EffectiveTier:
        """``agent``'s tier in ``acmi``'s tenant, read at most once per ``ttl_s``."""
        key = (acmi.tenant, agent)
        tier = self._cache.get(key, lambda: effective_tier(acmi, agent))
        assert tier is not None  # effective_tier always finds one
        return tier

    def check(
        self,
        acmi: Acmi,
        agent: str | None,
        row: str,
        values: Mapping[str, object],
        targets: tuple[Target, ...] | None = None,
    ) -> None:
        """:func:`check_write` for a write of ``row`` by a key bound to ``agent`` (None:
        bound to no agent, nothing to check; no store read either)."""
        if agent is None:
            return
        check_write(self.tier(acmi, agent), agent, row, values, targets)

    def allowance(self, acmi: Acmi, agent: str | None) -> Allowance | None:
        """The hourly token allowance of a key bound to ``agent`` (None: bound to no
        agent, no allowance and no store read), from its tier (cached)."""
        if agent is None:
            return None
        tier = self.tier(acmi, agent)
        return Allowance(agent, tier.max_tokens_per_hour, tier.name)
