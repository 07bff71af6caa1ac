"""A bound key's hourly token allowance for the bundles it is served.

A key bound to an agent (``auth/tiers.py``) is served at most its tier's
``max_tokens_per_hour`` bundle tokens an hour: the surface that knows the key (the HTTP
access layer, the MCP tools) sets an :class:`Allowance` for the call (:func:`allowed`, a
context variable: it crosses ``run_in_threadpool``), and the bundle's one script run
refuses the request before it writes anything when the key's counter for this hour is
at the limit already (:func:`refusal`: 429 ``tier_tokens``, Retry-After to the next
hour). A bundle that is served is then charged (:func:`charge`: one pipeline of INCRBY
and EXPIRE, the bundle's tokens as the bundle reports them). The check comes before the
bundle is built, so the bundle that crosses the limit is served whole and the next one
is refused. No allowance set (an unbound key, a local call): nothing read, nothing
charged.

The counter (``keys.tier_tokens``) is per tenant and agent and per hour window (UTC
hours since the epoch), kept ``COUNTER_TTL_S`` so the window's key expires by itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from acmi_core.base.errors import RateLimited, StoreCommandError
from acmi_core.base.model import EntityId

if TYPE_CHECKING:
    from acmi_core.base.keys import Keys
    from acmi_core.store.base import Store

HOUR_MS: Final = 3_600_000
# a window's counter outlives its hour (a clock a little behind still finds it), then goes
COUNTER_TTL_S: Final = 2 * 3600
RULE: Final = "tier_tokens"
FIELD: Final = "max_tokens_per_hour"


@dataclass(frozen=True, slots=True)
class Allowance:
    """``agent`` (the key's, ``agent:<id>``) may be served ``limit`` bundle tokens an
    hour; ``tier``: its tier's name, for the refusal's message."""

    agent: str
    limit: int
    tier: str

    def counter(self, keys: Keys, now_ms: int) -> str:
        """The key of this agent's counter for the hour of ``now_ms``."""
        return keys.tier_tokens(EntityId.parse(self.agent, "agent"), now_ms // HOUR_MS)


_CURRENT: ContextVar[Allowance | None] = ContextVar("acmi_token_allowance", default=None)


@contextmanager
def allowed(allowance: Allowance | None) -> Iterator[None]:
    """Inside the block, bundles are served under ``allowance`` (None: no allowance)."""
    token = _CURRENT.set(allowance)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def current() -> Allowance | None:
    """The allowance the bundles of this call are served under, if any."""
    return _CURRENT.get()


def refusal(allowance: Allowance, used: int, now_ms: int) -> RateLimited:
    """The 429 of a key whose counter this hour (``used``) is at its limit."""
    wait_s = (HOUR_MS - now_ms % HOUR_MS + 999) // 1000
    return RateLimited(
        f"{FIELD}: this key is bound to {allowance.agent}, whose tier {allowance.tier!r} "
        f"is served at most {allowance.limit} bundle tokens an hour; {used} served this "
        f"hour; retry in {wait_s} s (the next hour)",
        retry_after=wait_s,
        field=FIELD,
        rule=RULE,
    )


def check(store: Store, keys: Keys, allowance: Allowance, now_ms: int) -> None:
    """Refuse (429) when the counter is at the limit: one GET, for a bundle not read by
    bootstrap.lua (which reads the counter itself), e.g. the reference's acmi_bootstrap."""
    used = store.execute(("GET", allowance.counter(keys, now_ms)))
    count = int(used) if isinstance(used, bytes | int) else 0
    if count >= allowance.limit:
        raise refusal(allowance, count, now_ms)


def charge(store: Store, keys: Keys, allowance: Allowance, now_ms: int, tokens: int) -> None:
    """Add ``tokens`` served to the counter of the hour of ``now_ms``: one round trip."""
    key = allowance.counter(keys, now_ms)
    replies = store.pipeline([("INCRBY", key, tokens), ("EXPIRE", key, COUNTER_TTL_S)])
    for reply in replies:
        if isinstance(reply, StoreCommandError):
            raise reply
