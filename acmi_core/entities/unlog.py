"""Deleting one timeline event (``TimelineAPI.delete_event``, issue 24): by its ts and
correlationId, or by its stored member, with an audit event on the same timeline, in one
run of ``store/lua/unlog.lua`` (one round trip; one more on the coordination thread when
the event names an agent this process did not expect: REKEY).

What references an event, and what happens to it:
- the coordination thread's mentions index (a copy of the event per agent it mentions):
  kept consistent, the copies removed in the same run (and the audit event indexed as
  any coordination event is);
- the change index and the index of tenants with changes: the deletion is a change,
  recorded at now in the same run (the jobs see the timeline moved);
- a daily-note line's stamp (``keys.MEMORY_STAMPS``): tolerated, the stamp stays and
  reads nothing (as for a trim);
- a page cursor or a job's ``keep_after`` past the event: tolerated, a position, not a
  copy.

The audit event (``kind: event-delete``) names the deleted event's ts and correlationId
(ids are checked by the secret guard like every id), never its summary or payload. A
retry of the same request (a lost reply) answers the first run's result from the
request's record; a new request for an event already gone is a 404."""

from __future__ import annotations

import math
import uuid
from typing import TYPE_CHECKING, Final

from acmi_core.base.errors import (
    AcmiValidationError,
    NotFound,
    StoreCommandError,
    StoreError,
)
from acmi_core.base.keys import CHANGED, COORDINATION_THREAD, MENTIONS_PER_EVENT, mentioned
from acmi_core.base.model import EntityId, Event
from acmi_core.base.stored import decode_events
from acmi_core.entities.results import EventDeleted
from acmi_core.store import scripts
from acmi_core.store.writes import script_error

if TYPE_CHECKING:
    from acmi_core.entities.context import Context

DELETE_KIND: Final = "event-delete"
MAX_ID_LEN: Final = 256
MAX_MEMBER_BYTES: Final = 1_048_576
# A REKEY names every agent the two events mention: a second means the event changed
# between the runs (deleted and written again), a third that it keeps changing.
_REKEY_TRIES: Final = 3


def _check(ts: object, id: object, member: object) -> tuple[float | int, str, str]:
    """(ts, id, member) checked: the member alone, or ts and id together."""
    if member is not None:
        if ts is not None or id is not None:
            raise AcmiValidationError("member", "exclusive", "give member, or ts and id")
        if not isinstance(member, str) or not member:
            raise AcmiValidationError("member", "required", "must be the stored event's JSON")
        if len(member.encode("utf-8", "surrogatepass")) > MAX_MEMBER_BYTES:
            raise AcmiValidationError("member", "max_bytes", f"at most {MAX_MEMBER_BYTES} bytes")
        decoded, _ = decode_events([member.encode("utf-8", "surrogatepass")])
        if not decoded:
            raise AcmiValidationError("member", "event", "must be a stored event's JSON")
        event = decoded[0][0]
        return event.ts, event.correlationId, member
    if ts is None:
        raise AcmiValidationError("ts", "required", "give ts and id, or member")
    if isinstance(ts, bool) or not isinstance(ts, int | float) or math.isnan(ts) or ts < 0:
        raise AcmiValidationError("ts", "number", "must be the event's ts (epoch ms)")
    if not isinstance(id, str) or not id:
        raise AcmiValidationError("id", "required", "must be the event's correlationId")
    if len(id) > MAX_ID_LEN:
        raise AcmiValidationError("id", "max_length", f"at most {MAX_ID_LEN} characters")
    # a surface's float of an integral ts answers as the int it is
    return int(ts) if float(ts).is_integer() else ts, id, ""


def _score(ts: float | int) -> str:
    """The ts as ZRANGE BYSCORE takes it (an integral float without its ``.0``)."""
    return str(int(ts)) if float(ts).is_integer() else repr(float(ts))


def delete_event(
    ctx: Context,
    entity: str | EntityId,
    ts: object = None,
    id: object = None,
    member: object = None,
) -> EventDeleted:
    """Delete one event of ``entity``'s timeline (module docstring): 1 round trip."""
    eid = EntityId.parse(entity)
    ts_, cid, exact = _check(ts, id, member)
    ctx.guard_id(cid, "id")
    keys = ctx.keys
    now = ctx.clock()
    audit = Event(
        ts=now,
        source="acmi",
        kind=DELETE_KIND,
        correlationId=f"unlog-{uuid.uuid4().hex}",
        summary=f"deleted one event (ts {_score(ts_)})",
        payload={"audit": "timeline.delete_event", "ts": ts_, "correlationId": cid},
        tenant_id=keys.tenant,
    )
    audit_json = audit.to_json()
    thread = str(eid) == COORDINATION_THREAD
    ids = mentioned(f"{exact} {audit_json}") if thread else []
    named: dict[str, str | list[str]] = {
        "timeline": keys.timeline(eid),
        "changed": keys.changed(),
        "tenants": keys.tenants_with(CHANGED),
        # one id per call: the transport's retries of this run carry the same one
        "replay": keys.request(scripts.new_request_id()),
    }
    args: dict[str, scripts.Value] = {
        "now": now,
        "entity": str(eid),
        "tenant": keys.tenant,
        "thread": 1 if thread else 0,
        "score": _score(ts_),
        "id": "" if exact else cid,
        "member": exact,
        "audit": audit_json,
    }
    for _ in range(_REKEY_TRIES):
        named["mentions"] = [keys.mentions(i) for i in ids[: 2 * MENTIONS_PER_EVENT]]
        try:
            reply = scripts.UNLOG.eval(ctx.store, named, args)
        except StoreCommandError as exc:
            error = script_error(exc)
            if error is exc:
                raise
            raise error from None
        if reply.tag != "REKEY":
            break
        said = reply["ids"]
        ids = [i.decode() for i in said if isinstance(i, bytes)] if isinstance(said, list) else []
    else:
        raise StoreError(f"unlog.lua: the mentions of {eid}'s event kept changing")
    if reply.tag == "NONE":
        raise NotFound(f"{eid} has no event {cid} at ts {_score(ts_)}", field="id", rule="exists")
    if reply.tag == "CROWDED":
        raise AcmiValidationError(
            "member",
            "required",
            f"too many events share ts {_score(ts_)} (or too many bytes of them): give member",
        )
    deleted = reply["member"]
    size = len(deleted) if isinstance(deleted, bytes | str) else 0
    return {
        "entity": str(eid),
        "deleted": True,
        "ts": ts_,
        "correlationId": cid,
        "bytes": size,
        "audit": {"ts": now, "correlationId": audit.correlationId, "kind": DELETE_KIND},
    }


__all__ = ["DELETE_KIND", "MAX_ID_LEN", "MAX_MEMBER_BYTES", "delete_event"]
