"""An MCP-layout key against its SPEC destination (``ops/doctor.py`` reads both; this
says what copying it would write): a string, a timeline (its spawn records going to the
agent's ``:spawns``), an agent's ``active_threads`` set (into its ``:active_context``)."""

from __future__ import annotations

from typing import Final

from acmi_core.base.errors import StoreCommandError
from acmi_core.base.model import dumps
from acmi_core.base.stored import Unreadable, load_stored
from acmi_core.ops.findings import McpCopy, McpState
from acmi_core.ops.keyspace import mcp_spawn
from acmi_core.store.base import Reply

# A copied MCP timeline is one ZADD per member inside one script, which blocks Redis
# while it runs; a longer timeline is reported, not copied.
MAX_COPY_MEMBERS: Final = 10_000


def _utf8(raw: bytes) -> str | None:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _zset_pairs(reply: Reply | StoreCommandError) -> set[tuple[bytes, bytes]]:
    items = reply if isinstance(reply, list) else []
    return {
        (m, s)
        for m, s in zip(items[::2], items[1::2], strict=False)
        if isinstance(m, bytes) and isinstance(s, bytes)
    }


def _same_profile(source: bytes, dest: bytes) -> bool:
    """Whether ``dest`` is ``source`` plus the tenant_id migrate may have added."""
    try:
        before, after = load_stored(source), load_stored(dest)
    except Unreadable:
        return False
    if not isinstance(before, dict) or not isinstance(after, dict) or "tenant_id" in before:
        return False
    after.pop("tenant_id", None)
    return bool(before == after)


def compare_string(
    source: Reply | StoreCommandError, dest_type: str, dest: Reply, *, profile: bool
) -> McpCopy:
    if not isinstance(source, bytes):
        return McpCopy(McpState.UNCOPYABLE)
    same = isinstance(dest, bytes) and (dest == source or (profile and _same_profile(source, dest)))
    if dest_type == "string" and same:
        return McpCopy(McpState.COPIED)
    if dest_type != "none":
        return McpCopy(McpState.CONFLICT)
    text = _utf8(source)
    return McpCopy(McpState.UNCOPYABLE) if text is None else McpCopy(McpState.TO_COPY, text)


def compare_timeline(
    size: int,
    source: Reply | StoreCommandError,
    dest_type: str,
    dest: Reply,
    spawns_dest: Reply | None = None,
) -> McpCopy:
    """An MCP timeline against its SPEC timeline; with ``spawns_dest`` (an agent's
    :spawns), its spawn records go there instead, as our spawn records."""
    if size > MAX_COPY_MEMBERS:
        return McpCopy(McpState.TOO_LARGE)
    if not isinstance(source, list):
        return McpCopy(McpState.UNCOPYABLE)
    pairs = _zset_pairs(source)
    spawns: set[tuple[bytes, bytes]] = set()
    if spawns_dest is not None:
        for member, score in list(pairs):
            spawn = mcp_spawn(member)
            if spawn is not None:
                pairs.discard((member, score))
                spawns.add((spawn, score))
    spawns_missing = spawns - _zset_pairs(spawns_dest)
    if (not pairs or (dest_type == "zset" and pairs <= _zset_pairs(dest))) and not spawns_missing:
        return McpCopy(McpState.COPIED)
    if pairs and dest_type != "none" and not pairs <= _zset_pairs(dest):
        return McpCopy(McpState.CONFLICT)
    copies: list[list[tuple[float, str]]] = [[], []]
    for target, chosen in ((0, pairs if dest_type == "none" else set()), (1, spawns_missing)):
        for member, score in sorted(chosen):
            text = _utf8(member)
            if text is None:
                return McpCopy(McpState.UNCOPYABLE)  # a partial copy would be retried forever
            copies[target].append((float(score), text))
    return McpCopy(McpState.TO_COPY, members=copies[0], spawns=copies[1])


def compare_threads(
    size: int, source: Reply | StoreCommandError, dest_type: str, dest: Reply
) -> McpCopy:
    """An MCP ``active_threads`` SET (``<thread>:<role>:<ts>`` members, one a call of its
    acmi_active) against the agent's :active_context: each thread it names, with its
    latest role and ts as ``{role, joined_at}``, is to copy unless our hash has the thread
    (a join written here wins)."""
    if size > MAX_COPY_MEMBERS:
        return McpCopy(McpState.TOO_LARGE)
    if not isinstance(source, list):
        return McpCopy(McpState.UNCOPYABLE)
    if dest_type not in ("none", "hash"):
        return McpCopy(McpState.CONFLICT)
    latest: dict[str, tuple[int, str]] = {}
    for member in source:
        text = _utf8(member) if isinstance(member, bytes) else None
        thread, role, ts = [*text.rsplit(":", 2), "", ""][:3] if text else ("", "", "")
        if not thread or not role or not ts.isdigit():
            return McpCopy(McpState.UNCOPYABLE)  # not its shape: reported, never guessed
        if thread not in latest or int(ts) > latest[thread][0]:
            latest[thread] = (int(ts), role)
    ours = dest if isinstance(dest, list) else []
    have = {f.decode("utf-8", "replace") for f in ours[::2] if isinstance(f, bytes)}
    fields = [
        (thread, dumps({"role": role, "joined_at": ts}))
        for thread, (ts, role) in sorted(latest.items())
        if thread not in have
    ]
    if not fields:
        return McpCopy(McpState.COPIED)
    return McpCopy(McpState.TO_COPY, fields=fields)
