"""API keys: minted once, stored only as a SHA-256 hash with tenant, scope, name, created
and, for a key bound to an agent, that agent (``agent``: an ``agent:<id>`` entity id, the
record's last key; a key minted before it, or not bound, has none). A bound key writes
only what its agent's tier allows (``acmi_core.auth.tiers``).

A key is ``acmi_<secret>`` with 256 random bits, so a plain SHA-256 (not a slow password
hash) is the right lookup key. Its ``id`` (the hash's first 12 hex digits) names it in
listings and revocation.

Layout (global: looked up before the tenant is known):
    acmi:_apikey:<sha256>   STRING JSON record
    acmi:_apikeys           HASH id -> JSON record (with its hash), for list/revoke
    acmi:_apikeys_revoked   SET of the hashes of revoked keys: :func:`register` refuses
                            them, so a configured key (ACMI_API_KEY) that was revoked is
                            never re-created by the next start

Each write is steps of one key each, in an order whose every gap is safe, so they run
on a Redis Cluster as on one node (the three keys hash to different slots; no plan can
span them), in either key layout, and keep their reference names:
- register: the record, then the index entry. A stop between them leaves a key that works
  but is not listed; a minted one's plaintext was never shown, so no one holds it, and a
  configured one (``ACMI_API_KEY``) is indexed by the next :func:`register` of it
  (``HSETNX``: the idempotent second step).
- revoke: the revoked hash, then the record, then the index entry. A lookup reads the
  revoked set with the record (one pipeline, one round trip), so the key stops working at
  the first step; a stop after it leaves the key listed, and revoke's retry (the index
  still names the key) finishes. A revoked hash is never registered again.

Lookups are cached per process (:class:`KeyCache`) so that a warm Lambda spends no round
trip on auth; a revoked key stops working within the cache time.

``ACMI_API_KEY`` (:func:`ensure_admin_key`): a value that is not a key yet is registered
as an admin key; a key that exists keeps the scope it was minted with (a read key stays a
read key). On the embedded store any key is registered (it lives as long as the process);
on a real store a public sample key (the events/
samples' key, anything starting ``acmi_local_example``) is refused with an error, and any
other key is registered unless it was revoked.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Final, TypedDict

from acmi_core.base.cache import TtlCache
from acmi_core.base.errors import AcmiValidationError, NotFound, StoreCommandError
from acmi_core.base.keys import internal_global
from acmi_core.base.model import EntityId, check_tenant, dumps
from acmi_core.store.base import Store

KEY_PREFIX: Final = "acmi_"
INDEX_KEY: Final = internal_global("apikeys")
REVOKED_KEY: Final = internal_global("apikeys_revoked")

# Published in events/ and the docs, so an admin key to anyone: only a throwaway in-memory
# store (name "memory": it lives as long as one process) may hold one; the persistent
# local store is named "embedded" and refuses it like Redis and Upstash.
EXAMPLE_EVENT_KEY: Final = "acmi_local_example_admin_key_0001"
SAMPLE_KEYS: Final = frozenset({EXAMPLE_EVENT_KEY})
SAMPLE_KEY_PREFIX: Final = "acmi_local_example"
EMBEDDED_STORE: Final = "memory"

# KeyCache bounds: known keys kept per process, and unknown tokens remembered apart from
# them (so random tokens cannot push known keys out).
KEY_CACHE_MAX_KEYS: Final = 10_000
KEY_CACHE_MAX_MISSES: Final = 1_000


class Scope(StrEnum):
    READ = "read"
    WRITE = "write"
    ADMIN = "admin"

    def allows(self, needed: Scope) -> bool:
        order = [Scope.READ, Scope.WRITE, Scope.ADMIN]
        return order.index(self) >= order.index(needed)


class _KeyFields(TypedDict):
    """The keys every record has."""

    id: str
    tenant: str
    scope: str  # a Scope's value: read, write or admin
    name: str
    created_ms: int


class ApiKeyBody(_KeyFields, total=False):
    """A key's record as stored and printed (``ApiKey.to_dict()``): never the key.
    ``agent`` (last, optional: ``total=False``, since NotRequired is not seen under
    ``from __future__ import annotations`` on Python 3.11): the agent the key is bound
    to (agent:<id>); absent for a key bound to none."""

    agent: str


@dataclass(frozen=True)
class ApiKey:
    """What a key may do. The key itself is never stored. ``agent``: the agent entity
    the key is bound to (its writes are held to that agent's tier), or None."""

    id: str
    tenant: str
    scope: Scope
    name: str
    created_ms: int
    agent: str | None = None

    def to_dict(self) -> ApiKeyBody:
        body: ApiKeyBody = {
            "id": self.id,
            "tenant": self.tenant,
            "scope": self.scope.value,
            "name": self.name,
            "created_ms": self.created_ms,
        }
        if self.agent is not None:  # added last: an unbound key's record is as it was
            body["agent"] = self.agent
        return body


def key_hash(plaintext: str) -> str:
    return hashlib.sha256(plaintext.encode("utf-8")).hexdigest()


def _record_key(digest: str) -> str:
    return internal_global("apikey", digest)


def _check_scope(scope: str) -> Scope:
    try:
        return Scope(scope)
    except ValueError:
        raise AcmiValidationError("scope", "enum", "must be one of read, write, admin") from None


class KeyRevoked(AcmiValidationError):
    """The key was revoked: it is never registered again."""

    def __init__(self) -> None:
        super().__init__(
            "api_key",
            "revoked",
            "this key was revoked and is never registered again; create a new one "
            "(acmi keys create)",
        )


def check_agent(agent: str | None) -> str | None:
    """The agent a key is bound to, as an entity id (a bare ``scout`` is ``agent:scout``);
    anything but an agent entity is refused, naming the field ``agent``."""
    if agent is None:
        return None
    raw = agent if ":" in agent else f"agent:{agent}"
    eid = EntityId.parse(raw, "agent")
    if eid.category != "agent":
        raise AcmiValidationError("agent", "category", "must be an agent:<id> entity")
    return str(eid)


def is_sample_key(plaintext: str) -> bool:
    return plaintext in SAMPLE_KEYS or plaintext.startswith(SAMPLE_KEY_PREFIX)


def _is_revoked(store: Store, digest: str) -> bool:
    return store.execute(("SISMEMBER", REVOKED_KEY, digest)) == 1


def register(
    store: Store,
    plaintext: str,
    *,
    tenant: str,
    scope: str,
    name: str,
    now_ms: int,
    agent: str | None = None,
) -> ApiKey:
    """Store the hash of a given key value (``ACMI_API_KEY``); idempotent. A key already
    registered keeps its record (tenant, scope, name, agent) and that record is returned:
    a key keeps the scope it was minted with, so a read key named again as admin stays a
    read key. A revoked key is refused (:class:`KeyRevoked`). ``agent``: bind the key to
    that agent (:func:`check_agent`)."""
    if len(plaintext) < 24:
        raise AcmiValidationError("api_key", "min_length", "must be at least 24 characters")
    if not 1 <= len(name) <= 64:
        raise AcmiValidationError("name", "length", "must be 1-64 characters")
    digest = key_hash(plaintext)
    record = ApiKey(
        digest[:12],
        check_tenant(tenant),
        _check_scope(scope),
        name,
        now_ms,
        check_agent(agent),
    )
    # one round trip: revoked?, the record, its index entry (each one key: any layout)
    revoked, raw, indexed = store.pipeline(
        [
            ("SISMEMBER", REVOKED_KEY, digest),
            ("GET", _record_key(digest)),
            ("HEXISTS", INDEX_KEY, record.id),
        ]
    )
    for reply in (revoked, raw, indexed):
        if isinstance(reply, StoreCommandError):
            raise reply
    if revoked == 1:
        raise KeyRevoked()
    existing = _decode(raw)
    if existing is not None:
        if indexed != 1:  # a register stopped between its two steps: finish it
            store.execute(("HSETNX", INDEX_KEY, existing.id, _indexed(existing, digest)))
        return existing
    store.execute(("SET", _record_key(digest), dumps(record.to_dict())))
    store.execute(("HSET", INDEX_KEY, record.id, _indexed(record, digest)))
    if _is_revoked(store, digest):  # revoked between the check and the write: undo it
        _forget(store, digest, record.id)
        raise KeyRevoked()
    return record


def _indexed(record: ApiKey, digest: str) -> str:
    """The key index's entry: the record with its hash (what revoke finds it by)."""
    return dumps({**record.to_dict(), "hash": digest})


# What keys.create (the key, printed once, and its record) and keys.list answer.
Minted = tuple[str, ApiKey]
KeyList = list[ApiKey]


def mint(
    store: Store,
    *,
    tenant: str,
    scope: str,
    name: str,
    now_ms: int,
    agent: str | None = None,
) -> Minted:
    """A new random key (bound to ``agent`` when given). Returns (plaintext, record):
    show the plaintext once."""
    plaintext = f"{KEY_PREFIX}{secrets.token_urlsafe(32)}"
    return plaintext, register(
        store, plaintext, tenant=tenant, scope=scope, name=name, now_ms=now_ms, agent=agent
    )


def lookup(store: Store, plaintext: str) -> ApiKey | None:
    """The key's record, or None when unknown or revoked (its hash in the revoked set,
    whatever a stopped revoke left of its record). One round trip."""
    digest = key_hash(plaintext)
    raw, revoked = store.pipeline(
        [("GET", _record_key(digest)), ("SISMEMBER", REVOKED_KEY, digest)]
    )
    for reply in (raw, revoked):  # an unreadable answer is not "unknown": never a 401
        if isinstance(reply, StoreCommandError):
            raise reply
    return None if revoked == 1 else _decode(raw)


def list_keys(store: Store, tenant: str | None = None) -> KeyList:
    raw = store.execute(("HGETALL", INDEX_KEY))
    items = raw if isinstance(raw, list) else []
    records = [_decode(value) for value in items[1::2]]
    return sorted(
        (r for r in records if r is not None and (tenant is None or r.tenant == tenant)),
        key=lambda r: (r.tenant, r.created_ms, r.id),
    )


def revoke(store: Store, key_id: str) -> ApiKey:
    raw = store.execute(("HGET", INDEX_KEY, key_id))
    record = _decode(raw)
    if record is None or not isinstance(raw, bytes):
        raise NotFound(f"key_id: no API key with id {key_id!r}", field="key_id")
    digest = json.loads(raw)["hash"]
    _forget(store, digest, key_id)
    return record


def _forget(store: Store, digest: str, key_id: str) -> None:
    """Revoke a key's hash, then delete its record and its index entry: three one-key
    steps (module docstring), the revoked mark first so that no stop between them lets
    the key be registered again, and the index entry last so that a retry finds it."""
    store.execute(("SADD", REVOKED_KEY, digest))
    store.execute(("DEL", _record_key(digest)))
    store.execute(("HDEL", INDEX_KEY, key_id))


def _decode(raw: object) -> ApiKey | None:
    if not isinstance(raw, bytes):
        return None
    try:
        data = json.loads(raw)
        agent = data.get("agent")  # absent in a record older than bound keys
        return ApiKey(
            data["id"],
            data["tenant"],
            Scope(data["scope"]),
            data["name"],
            data["created_ms"],
            agent if isinstance(agent, str) else None,
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def ensure_admin_key(store: Store, plaintext: str, *, tenant: str, now_ms: int) -> ApiKey | None:
    """Register a configured key value (ACMI_API_KEY) as ``tenant``'s admin key, the same
    way for ``acmi serve`` and the Lambda kit, unless it is a key already: then its record
    is returned as it is (a read or write key is never promoted; the caller looks at the
    scope). None when the key was revoked (it stays revoked; the caller says so). A
    public sample key on a store other than the embedded one is an error: it would be an
    admin key anyone can use, re-created on every start."""
    if store.name != EMBEDDED_STORE and is_sample_key(plaintext):
        raise AcmiValidationError(
            "ACMI_API_KEY",
            "sample_key",
            f"is a public sample key (prefix {SAMPLE_KEY_PREFIX!r}, carried by the events/ "
            f"samples) and is refused on the {store.name} store, where it would be an admin "
            "key anyone can use. Unset ACMI_API_KEY and create a key with `acmi keys create "
            "--tenant <tenant> --scope admin` (or run the samples on the embedded store: "
            "`acmi invoke`)",
        )
    try:
        return register(
            store, plaintext, tenant=tenant, scope=Scope.ADMIN, name="ACMI_API_KEY", now_ms=now_ms
        )
    except KeyRevoked:
        return None


class KeyCache:
    """Key lookups by plaintext, cached for ``ttl_s``: a revoked key stops working
    within it."""

    def __init__(
        self, store: Store, ttl_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._store = store
        self._cache: TtlCache[str, ApiKey] = TtlCache(
            ttl_s, max_entries=KEY_CACHE_MAX_KEYS, max_misses=KEY_CACHE_MAX_MISSES, clock=clock
        )

    def lookup(self, plaintext: str) -> ApiKey | None:
        return self._cache.get(key_hash(plaintext), lambda: lookup(self._store, plaintext))
