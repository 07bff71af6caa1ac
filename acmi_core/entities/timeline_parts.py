"""An ``extend`` too large for one request, in parts (``TimelineAPI.extend``).

Every request stays within ``store.base.MAX_REQUEST_ARGS`` (ElastiCache Serverless refuses
more than 3,999 arguments) and ``MAX_REQUEST_BYTES``. One event costs 4 arguments (its
ZADD), and on the coordination thread 8 more per agent it mentions (the mention index's
ZADD and ZKEEP, and its key), so about 990 plain events, or 30 coordination events that
each mention 16 agents, fit one request. More are split, in order, into parts: each part
is one write script, all-or-nothing, but the extend as a whole is not (no atomic step
spans two requests). A part that fails raises its error (its class, so its status) with
what was stored said in its message: the first k events, and a retry of the rest alone
stores each once (an exact duplicate of a stored event is stored once, so sending a part
again is harmless when every event carries its ``ts``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from acmi_core.base.errors import AcmiError
from acmi_core.base.keys import mentioned
from acmi_core.store.base import MAX_REQUEST_ARGS, MAX_REQUEST_BYTES, arg_bytes

# What a part's request carries beside its events: EVALSHA, SHA, counts, the timeline,
# category list, change index and tenants-with-work keys, and their SADD, ZSET and ZMAX.
PART_OVERHEAD_ARGS: Final = 64
PART_OVERHEAD_BYTES: Final = 64 * 1024
EVENT_ARGS: Final = 4  # ZADD, key index, score, member
MENTION_ARGS: Final = 8  # ZADD (4) and ZKEEP (3) in the agent's index, and its key


def event_parts(texts: Sequence[str], coordination: bool) -> list[range]:
    """The events (by index) of each part, in order: one part when they all fit."""
    parts: list[range] = []
    start = args = size = 0
    for i, text in enumerate(texts):
        copies = 1 + (len(mentioned(text)) if coordination else 0)
        cost_args = EVENT_ARGS + MENTION_ARGS * (copies - 1)
        cost_bytes = (arg_bytes(text) + 32) * copies  # the member, its score and indexes
        over = (
            args + cost_args > MAX_REQUEST_ARGS - PART_OVERHEAD_ARGS
            or size + cost_bytes > MAX_REQUEST_BYTES - PART_OVERHEAD_BYTES
        )
        if i > start and over:
            parts.append(range(start, i))
            start, args, size = i, 0, 0
        args += cost_args
        size += cost_bytes
    parts.append(range(start, len(texts)))
    return parts


def incomplete(exc: AcmiError, stored: int, total: int) -> None:
    """Say in ``exc`` (which keeps its class) what an extend that failed part-way stored."""
    note = (
        f" (extend incomplete: the first {stored} of {total} events were stored, in parts of "
        "one request each; the part from events[" + str(stored) + "] failed and nothing of "
        "it was stored: send events[" + str(stored) + ":] again)"
    )
    exc.message += note
    exc.args = (exc.message, *exc.args[1:])


__all__ = ["event_parts", "incomplete"]
