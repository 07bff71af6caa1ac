"""The Lock-Protocol: atomic leases with fencing tokens (``acmi.locks``).

    lease = acmi.locks.claim("deploy:prod", "agent:claude", ttl_ms=60_000)
    acmi.locks.renew("deploy:prod", lease.owner_token, ttl_ms=60_000)
    acmi.locks.release("deploy:prod", lease.owner_token)

Every operation is one run of ``store/lua/locks.lua``: one round trip, atomic. A claim,
a release and a losing claim (a deferral) post ``coord-claim`` / ``coord-release`` /
``coord-defer`` to the coordination thread in that same step, all events of one lease
sharing its correlationId. A claimant that keeps losing to the same lease posts one
``coord-defer`` for it, not one per attempt (a polling agent must not flood the thread).
The fencing token of a resource strictly increases over
every claim, after releases and expiries too, so a holder that was paused past its
lease can be fenced off by whoever checks the token.

Time is the client's clock (``acmi.clock``), not Redis's: every client of one store is
expected to keep its clock in sync, and tests can move time. The owner token is returned
only to the claimant; only its SHA-256 digest is stored.

A lost reply does not turn an operation into a Conflict: each carries a request id,
and a retry of it (the Upstash transport resends a request whose reply it lost) answers
with the first run's reply, recorded in that run (``scripts.REPLAY_TTL_MS``), so a claim
still returns its owner token and a release its lease.

Interop with the reference's Lock-Protocol, which has no lease, only events: a claim is
refused (409 ``hedged``, nothing written) while another agent's raw ``coord-claim`` for the
resource (``payload.resource`` or ``payload.task``, or its correlationId, naming it) is on the
coordination thread within the seed's hedge window (``HEDGE_MS``, 5 minutes) and no
``coord-release`` of the same source for it is newer; checked inside the claim's script run.

Limits: resource ``[A-Za-z0-9_.:-]{1,200}``, ttl_ms 1,000-86,400,000 (1 s-24 h),
owner an entity id (an unknown agent is fine), owner token 1-128 characters.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from acmi_core.base.errors import AcmiValidationError, Conflict, StoreCommandError, StoreError
from acmi_core.base.keys import COORDINATION_THREAD, MENTIONS_PER_EVENT, mentioned
from acmi_core.base.model import EntityId, parse_event
from acmi_core.coordination.results import LeaseBody, LockStateBody
from acmi_core.store import scripts
from acmi_core.store.base import Arg
from acmi_core.store.writes import script_error

if TYPE_CHECKING:
    from acmi_core.entities.context import Context

LOCKS: Final = scripts.LOCKS.script

RESOURCE_RE: Final = re.compile(r"[A-Za-z0-9_.:-]{1,200}")
MIN_TTL_MS: Final = 1_000
MAX_TTL_MS: Final = 24 * 3600 * 1000
MAX_TOKEN_LEN: Final = 128
# The seed's Lock-Protocol windows: a reference agent's raw coord-claim on the coordination
# thread holds its resource for HEDGE_MS (store/lua/locks.lua mirrors the three numbers;
# it reads at most HEDGE_EVENTS events, HEDGE_BYTES of them, newest first, of the window).
HEDGE_MS: Final = 5 * 60 * 1000
HEDGE_EVENTS: Final = 200
HEDGE_BYTES: Final = 256 * 1024

# Template slots; a string slot sits inside a JSON string (values are grammar-checked
# ids: no quote or backslash), a number slot replaces the whole quoted placeholder.
_MARK: Final = "@@acmi-slot:"


def check_resource(resource: object) -> str:
    if not isinstance(resource, str) or not RESOURCE_RE.fullmatch(resource):
        raise AcmiValidationError("resource", "resource_name", "must match [A-Za-z0-9_.:-]{1,200}")
    return resource


def check_ttl(ttl_ms: object) -> int:
    if isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int):
        raise AcmiValidationError("ttl_ms", "integer", "must be an integer number of ms")
    if not MIN_TTL_MS <= ttl_ms <= MAX_TTL_MS:
        raise AcmiValidationError(
            "ttl_ms", "range", f"must be {MIN_TTL_MS}-{MAX_TTL_MS} ms (1 s to 24 h)"
        )
    return ttl_ms


def check_token(token: object) -> str:
    if not isinstance(token, str) or not 1 <= len(token) <= MAX_TOKEN_LEN:
        raise AcmiValidationError(
            "owner_token", "string", f"must be the owner token: 1-{MAX_TOKEN_LEN} characters"
        )
    return token


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def _slot(name: str, *, number: bool = False) -> str:
    return f"{_MARK}{'n' if number else 's'}:{name}@@"


def _template(event_json: str) -> list[Arg]:
    """Split event JSON at its slots: [n, text, slot, text, ..., text]."""
    parts = re.split(r'"@@acmi-slot:n:([a-z_]+)@@"|@@acmi-slot:s:([a-z_]+)@@', event_json)
    items: list[Arg] = []
    for i in range(0, len(parts), 3):
        items.append(parts[i])
        if i + 1 < len(parts):
            items.append(parts[i + 1] or parts[i + 2])
    return [len(items), *items]


@dataclass(frozen=True)
class Lease:
    """A held lease. ``owner_token`` is set only in the claimant's own answer."""

    resource: str
    owner: str
    fence: int
    expires_at: int
    correlationId: str
    owner_token: str | None = None

    def to_dict(self) -> LeaseBody:
        iso = _iso(self.expires_at)
        if self.owner_token is None:
            return {
                "resource": self.resource,
                "owner": self.owner,
                "fence": self.fence,
                "expires_at": self.expires_at,
                "correlationId": self.correlationId,
                "expires_at_iso": iso,
            }
        return {  # the token before the iso time: the key order the JSON always had
            "resource": self.resource,
            "owner": self.owner,
            "fence": self.fence,
            "expires_at": self.expires_at,
            "correlationId": self.correlationId,
            "owner_token": self.owner_token,
            "expires_at_iso": iso,
        }


@dataclass(frozen=True)
class LockState:
    """What ``get`` shows: the holder (never its token) and the last fence issued."""

    resource: str
    held: bool
    owner: str | None
    expires_at: int | None
    fence: int

    def to_dict(self) -> LockStateBody:
        return {
            "resource": self.resource,
            "held": self.held,
            "owner": self.owner,
            "expires_at": self.expires_at,
            "fence": self.fence,
        }


def parse_lease_entry(member: object) -> Lease | None:
    """A member of the lease index, ``<owner>|<resource>|<expires>|<fence>|<cid>``
    (``store/lua/locks.lua``); None for anything else."""
    if not isinstance(member, bytes):
        return None
    parts = member.decode("utf-8", "replace").split("|")
    if len(parts) != 5 or not parts[2].isdigit() or not parts[3].isdigit():
        return None
    owner, resource, expires, fence, cid = parts
    return Lease(resource, owner, int(fence), int(expires), cid)


# A run answered REKEY names the agents its event mentions, read in that run; a second
# REKEY means the lease changed hands in between (a third: it keeps changing)
_REKEY_TRIES: Final = 3
_HOLDERS_KEPT: Final = 1024  # the holders this process saw, newest last (a bounded hint)


class LockAPI:
    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._keys = ctx.keys
        self._holders: dict[str, str] = {}

    def _event(
        self, source: str, kind: str, cid: str, summary: str, payload: dict[str, Any], now: int
    ) -> list[Arg]:
        event = parse_event(
            {
                "source": source,
                "kind": kind,
                "correlationId": cid,
                "summary": summary,
                "payload": payload,
            },
            now_ms=now,
            tenant=self._keys.tenant,
        )
        return _template(event.to_json())

    def _run(self, resource: str, args: dict[str, Arg | list[Arg]]) -> tuple[str, dict[str, Any]]:
        """One run of locks.lua: its reply's tag and slots (bytes decoded).

        The script names every key it touches before it runs, the mentions index of each
        agent its event mentions too. The client declares those its templates name and
        the holder it last saw for this resource (a hint: the script checks it); an
        event that names another agent (a holder this process never saw) is answered
        REKEY, nothing written, and the run is sent again with those keys. So a release
        or a first deferral costs a second round trip only when this process did not
        see the lease's holder."""
        self._ctx.guard_id(resource, "resource")
        keys: dict[str, str | list[str]] = {
            "lease": self._keys.lock(resource),
            "thread": self._keys.coordination_timeline(),
            "index": self._keys.index("thread"),
            "leases": self._keys.leases(),
            # one id per call: the transport's retries of this run carry the same one
            "replay": self._keys.request(scripts.new_request_id()),
        }
        texts = [a for v in args.values() if isinstance(v, list) for a in v[1::2]]
        holder = self._holders.get(resource)
        ids = mentioned(" ".join([*map(str, texts), *([holder] if holder else [])]))
        for _ in range(_REKEY_TRIES):
            keys["mentions"] = [self._keys.mentions(i) for i in ids[:MENTIONS_PER_EVENT]]
            try:
                reply = scripts.LOCKS.eval(
                    self._ctx.store, keys, {**args, "resource": resource}, script=LOCKS
                )
            except StoreCommandError as exc:
                error = script_error(exc)
                if error is exc:
                    raise
                raise error from None
            assert reply.tag is not None
            if reply.tag != "REKEY":
                break
            said = reply["ids"]
            more = (
                [i.decode() for i in said if isinstance(i, bytes)] if isinstance(said, list) else []
            )
            ids = more  # every agent the event mentions, as the script found them
        else:
            raise StoreError(f"locks.lua: the mentions of {resource}'s event kept changing")
        found = {k: v.decode() if isinstance(v, bytes) else v for k, v in reply.items()}
        owner = found.get("owner")
        if isinstance(owner, str):
            self._saw(resource, owner)
        return reply.tag, found

    def _saw(self, resource: str, holder: str) -> None:
        """Remember ``resource``'s holder: the hint of its next release or deferral."""
        self._holders.pop(resource, None)
        self._holders[resource] = holder
        while len(self._holders) > _HOLDERS_KEPT:
            del self._holders[next(iter(self._holders))]

    def claim(self, resource: str, owner: str, ttl_ms: int) -> Lease:
        """Take the lease for ``ttl_ms``, or raise Conflict (409) naming the holder and
        its expiry (and post coord-defer). An expired lease is free to claim."""
        resource = check_resource(resource)
        owner_id = str(EntityId.parse(owner, "owner"))
        self._ctx.guard_id(owner_id, "owner")
        ttl_ms = check_ttl(ttl_ms)
        now = self._ctx.clock()
        expires = now + ttl_ms
        token = secrets.token_urlsafe(32)
        cid = f"lock-{uuid.uuid4().hex}"
        claim_event = self._event(
            owner_id,
            "coord-claim",
            cid,
            f"{owner_id} claimed lock {resource}",
            {
                "resource": resource,
                "owner": owner_id,
                "fence": _slot("fence", number=True),
                "expires_at": expires,
                "ttl_ms": ttl_ms,
            },
            now,
        )
        defer_event = self._event(
            owner_id,
            "coord-defer",
            _slot("holder_cid"),
            f"{owner_id} deferred on lock {resource}",
            {
                "resource": resource,
                "claimant": owner_id,
                "attempt": cid,
                "holder": _slot("holder"),
                "held_until": _slot("held_until", number=True),
                "fence": _slot("holder_fence", number=True),
            },
            now,
        )
        member = EntityId.parse(COORDINATION_THREAD).local_id
        status, reply = self._run(
            resource,
            {
                "op": "claim",
                "now": now,
                "owner": owner_id,
                "token_hash": _digest(token),
                "expires": expires,
                "cid": cid,
                "index_member": member,
                "claim_template": claim_event,
                "defer_template": defer_event,
            },
        )
        if status == "HEDGED":
            holder, until = reply["owner"], int(reply["expires"])
            raise Conflict(
                f"resource: {resource} is claimed by {holder} on the coordination thread "
                f"(coord-claim {reply['cid']}, not released) until {_iso(until)} ({until} ms); "
                "retry after its hedge window or its coord-release",
                field="resource",
                rule="hedged",
            )
        if status == "HELD":
            holder, until = reply["owner"], int(reply["expires"])
            raise Conflict(
                f"resource: {resource} is held by {holder} until {_iso(until)} "
                f"({until} ms); retry after it expires or is released",
                field="resource",
                rule="held",
            )
        self._saw(resource, owner_id)
        return Lease(resource, owner_id, int(reply["fence"]), expires, cid, token)

    def renew(self, resource: str, owner_token: str, ttl_ms: int) -> Lease:
        """Extend a held lease to now + ``ttl_ms`` (only with its owner token)."""
        resource = check_resource(resource)
        owner_token = check_token(owner_token)
        ttl_ms = check_ttl(ttl_ms)
        now = self._ctx.clock()
        status, reply = self._run(
            resource,
            {
                "op": "renew",
                "now": now,
                "token_hash": _digest(owner_token),
                "expires": now + ttl_ms,
            },
        )
        self._refused(resource, status, reply)
        return Lease(resource, reply["owner"], int(reply["fence"]), now + ttl_ms, reply["cid"])

    def release(self, resource: str, owner_token: str) -> Lease:
        """Give the lease up (only with its owner token); posts coord-release."""
        resource = check_resource(resource)
        owner_token = check_token(owner_token)
        now = self._ctx.clock()
        release_event = self._event(
            _slot("owner"),
            "coord-release",
            _slot("cid"),
            f"{_slot('owner')} released lock {resource}",
            {"resource": resource, "owner": _slot("owner"), "fence": _slot("fence", number=True)},
            now,
        )
        member = EntityId.parse(COORDINATION_THREAD).local_id
        status, reply = self._run(
            resource,
            {
                "op": "release",
                "now": now,
                "token_hash": _digest(owner_token),
                "index_member": member,
                "release_template": release_event,
            },
        )
        self._refused(resource, status, reply)
        return Lease(resource, reply["owner"], int(reply["fence"]), now, reply["cid"])

    def get(self, resource: str) -> LockState:
        """The lease as it stands now (one round trip)."""
        resource = check_resource(resource)
        reply = self._ctx.store.execute(
            ("HMGET", self._keys.lock(resource), "fence", "owner", "expires")
        )
        fence, owner, expires = (
            [v.decode("utf-8", "replace") if isinstance(v, bytes) else None for v in reply]
            if isinstance(reply, list) and len(reply) == 3
            else [None, None, None]
        )
        until = int(expires) if expires and expires.isdigit() else None
        held = owner is not None and until is not None and until > self._ctx.clock()
        return LockState(
            resource,
            held,
            owner if held else None,
            until if held else None,
            int(fence) if fence and fence.isdigit() else 0,
        )

    def held_by(self, owner: str, limit: int = 100) -> list[Lease]:
        """The leases ``owner`` holds now, soonest expiry first (one round trip: a
        ZRANGEBYLEX on the tenant's lease index; expired leases are left out)."""
        owner_id = str(EntityId.parse(owner, "owner"))
        reply = self._ctx.store.execute(
            ("ZRANGEBYLEX", self._keys.leases(), f"[{owner_id}|", f"({owner_id}}}")
        )
        now = self._ctx.clock()
        held = [
            lease
            for lease in (parse_lease_entry(m) for m in (reply if isinstance(reply, list) else []))
            if lease is not None and lease.owner == owner_id and lease.expires_at > now
        ]
        return sorted(held, key=lambda lease: lease.expires_at)[:limit]

    @staticmethod
    def _refused(resource: str, status: str, reply: dict[str, Any]) -> None:
        if status == "NONE":
            raise Conflict(
                f"resource: {resource} is not held by anyone; claim it first",
                field="resource",
                rule="not_held",
            )
        if status == "TOKEN":
            raise Conflict(
                f"owner_token: does not match the token of the holder of {resource} "
                f"({reply['owner']})",
                field="owner_token",
                rule="matches_holder",
            )
        if status == "EXPIRED":
            until = int(reply["expires"])
            raise Conflict(
                f"resource: the lease of {resource} by {reply['owner']} expired at "
                f"{_iso(until)} ({until} ms); claim it again",
                field="resource",
                rule="expired",
            )


__all__ = ["Lease", "LockAPI", "LockState", "parse_lease_entry"]
