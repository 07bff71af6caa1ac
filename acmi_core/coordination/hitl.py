"""Human-in-the-loop queues (``acmi.hitl``): SPEC v1.3 §11.6 per-addressee queues plus
the v1.2 shared queue, one convention.

    item = acmi.hitl.create("prod deploy", "approve the migration in PR 42",
                            urgency="P0", asked_by="agent:claude", addressee="user:mikey",
                            correlation_id="deploy-42")
    page = acmi.hitl.list("user:mikey")            # open items, most urgent first
    acmi.hitl.resolve("deploy-42", "approved", by="user:mikey")

The index contract (the bootstrap reads the queues directly, ZRANGE 0..N):

- ``keys.hitl_queue(addressee, "open")``: ZSET, score = deadline ms (ZRANGE gives the most
  urgent first), member = the ``hitl-required`` Comms v1.1 event JSON: ``{ts, source:
  asker, kind: "hitl-required", correlationId, summary: "[HITL] <topic> (<urgency>, due
  <iso>)", payload: {topic, concrete_unblock_request, urgency: P0|P1|P2, deadline (ms),
  addressee (entity id, or null for the shared queue)}, speaker_type, tenant_id}``.
  ``addressee=None`` is the shared queue ``acmi:thread:hitl:open``.
- ``keys.hitl_queue(addressee, "closed")``: score = resolution ms, member = the same
  event with ``payload.resolution = {by, ts, text}``.
- ``keys.hitl_items()``: HASH correlationId -> record (``store/lua/hitl.lua`` describes it):
  what makes create idempotent and tells resolve which queue holds the item.
- ``keys.tenants_with(HITL_OPERATOR | HITL_SHARED)``: a create into the operator's queue
  or the shared one marks the tenant there (ZADD LT deadline, same run), so the
  standup-brief job briefs a tenant whose only work is an open item; the job re-syncs it
  from the queue after each brief (gone once the queue is empty). In the cluster layout
  the mark is the tenant's own and the create then adds the tenant to the registry the
  jobs read, as a plan's marked write does (``store/writes.py`` ``register_marked``: an
  idempotent second step, once per process and tenant; a retry of the create does it too).

Operations, each one request (``store/lua/hitl.lua``, or one ZRANGE for ``list``):

- ``create`` is idempotent by correlationId: re-creating an existing one writes nothing
  and returns the stored item (``created=False``; the API answers 200 instead of 201).
  Without ``correlation_id`` a ``hitl-<uuid>`` is generated, so a retried create cannot
  be recognised: pass your own id when you may retry.
- ``resolve`` moves the item from open to closed and posts ``hitl-resolved`` (same
  correlationId, payload ``{resolution, by, addressee}``) to the coordination thread, in
  one atomic step. Resolving a resolved item is a Conflict (409) naming who resolved it
  and when; an unknown correlationId is NotFound (404). Nothing is written on a refusal.
- ``list`` pages a queue: open items by deadline (soonest first), closed ones by
  resolution time (newest first).

Items another tool wrote straight into a queue (a raw ZADD, no record): they are listed
like any other. ``resolve`` adopts one when it is among the first 100 members (the most
urgent) of the queue ``addressee`` names: the first request finds no record and returns
that window, the client picks the member whose correlationId matches, and a second
request moves it (its closed member is re-rendered from the decoded item, with
``payload.resolution`` added). So a foreign item costs two requests; beyond the window it
is a 404 saying so.

A lost reply does not turn a resolve into a Conflict (or a create into created=False):
each run carries a request id, and the transport's retry of it answers with the first
run's reply (``scripts.REPLAY_TTL_MS``).

Limits: topic 1-200 characters, request and resolution 1-4,000, correlationId
``[A-Za-z0-9_.:-]{1,128}``, urgency P0|P1|P2, deadline an integer ms (default now + 24 h),
asker, addressee and resolver entity ids, page size 1-1,000. Time is the client's clock.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from acmi_core.base.errors import (
    AcmiValidationError,
    Conflict,
    NotFound,
    StoreCommandError,
    StoreError,
)
from acmi_core.base.keys import (
    COORDINATION_THREAD,
    HITL_OPERATOR,
    HITL_SHARED,
    MENTIONS_PER_EVENT,
    mentioned,
)
from acmi_core.base.model import MAX_TS_MS, EntityId, dumps, parse_event
from acmi_core.base.pages import MAX_PAGE_SIZE, decode_cursor, encode_cursor, page_size
from acmi_core.base.stored import Unreadable, load_stored, render_json
from acmi_core.coordination.results import HitlPageBody, ResolvedBody
from acmi_core.store import scripts
from acmi_core.store.base import Arg
from acmi_core.store.writes import register_marked, script_error

if TYPE_CHECKING:
    from acmi_core.entities.context import Context

HITL: Final = scripts.HITL.script

URGENCIES: Final = ("P0", "P1", "P2")
STATES: Final = ("open", "closed")
CID_RE: Final = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
MAX_TOPIC_LEN: Final = 200
MAX_TEXT_LEN: Final = 4000
DEFAULT_DEADLINE_MS: Final = 24 * 3600 * 1000
DEFAULT_LIST_SIZE: Final = 50
ADOPT_WINDOW: Final = 100  # members of a queue a resolve looks through for a foreign item
_PROBE: Final = "@@acmi-hitl-resolution@@"
# A REKEY answer names the record's addressee and the agents the event mentions, read in
# that run; a record keeps its addressee, so a second run has the keys (a third: spare)
_REKEY_TRIES: Final = 3
_ADDRESSEES_KEPT: Final = 1024  # the items this process created or resolved, newest last
_MARK: Final = "@@acmi-slot:addressee@@"


def check_cid(cid: object, name: str = "correlationId") -> str:
    if not isinstance(cid, str) or not CID_RE.fullmatch(cid):
        raise AcmiValidationError(name, "correlation_id", "must match [A-Za-z0-9_.:-]{1,128}")
    return cid


def check_urgency(urgency: object) -> str:
    if urgency not in URGENCIES:
        raise AcmiValidationError("urgency", "enum", "must be P0, P1 or P2")
    assert isinstance(urgency, str)
    return urgency


def check_state(state: object) -> str:
    if state not in STATES:
        raise AcmiValidationError("state", "enum", "must be open or closed")
    assert isinstance(state, str)
    return state


def _text(value: object, name: str, max_len: int) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= max_len or not value.strip():
        raise AcmiValidationError(
            name, "string", f"must be a non-blank string of 1-{max_len} characters"
        )
    return value


def _ms(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TS_MS:
        raise AcmiValidationError(name, "timestamp", f"must be an integer ms from 0 to {MAX_TS_MS}")
    return value


def _entity(value: object, name: str) -> EntityId:
    if not isinstance(value, str):
        raise AcmiValidationError(name, "entity_id", "must be an entity id, e.g. agent:claude")
    return EntityId.parse(value, name)


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds")


def _decode(raw: object) -> dict[str, Any] | None:
    try:
        value = load_stored(raw) if isinstance(raw, bytes) else None
    except Unreadable:
        return None
    return value if isinstance(value, dict) else None


def _score(reply: object) -> float:
    try:
        return float(reply) if isinstance(reply, bytes | str | int) else math.nan
    except ValueError:
        return math.nan


def _str(reply: object) -> str:
    return reply.decode("utf-8", "replace") if isinstance(reply, bytes) else str(reply)


@dataclass(frozen=True)
class Created:
    """What ``create`` returns: the stored item, and whether this call stored it."""

    item: dict[str, Any]
    created: bool


@dataclass(frozen=True)
class Resolved:
    correlationId: str
    addressee: str | None
    by: str
    resolved_at: int
    deadline: int

    def to_dict(self) -> ResolvedBody:
        return {
            "correlationId": self.correlationId,
            "addressee": self.addressee,
            "by": self.by,
            "resolved_at": self.resolved_at,
            "deadline": self.deadline,
            "resolved": True,
        }


@dataclass(frozen=True)
class HitlPage:
    """One page of a queue. ``skipped``: members that are not JSON objects (another
    tool's), counted in the page but not returned."""

    addressee: str | None
    state: str
    items: list[dict[str, Any]]
    next_cursor: str | None
    skipped: list[str] = field(default_factory=list)

    def to_dict(self) -> HitlPageBody:
        return {
            "addressee": self.addressee,
            "state": self.state,
            "items": self.items,
            "next_cursor": self.next_cursor,
            "skipped": self.skipped,
        }


class HitlAPI:
    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._keys = ctx.keys
        self._addressees: dict[str, str | None] = {}

    def _eval(
        self, keys: dict[str, str], args: dict[str, Arg | list[Arg]], addressee: str | None = None
    ) -> tuple[str, dict[str, Any]]:
        """One run of hitl.lua: its reply's tag and slots (as Redis sent them).

        A resolve or an adopt names every key it touches before it runs: the queues of
        the record's addressee (``record_*``, first guessed as the addressee the caller
        named) and the mentions index of each agent the event mentions (those the
        template and that addressee name). A record naming another addressee, or an
        event naming another agent, is answered REKEY, nothing written, and the run is
        sent again with those keys: a record keeps its addressee once written, so that is
        one more run, and only for a resolve whose caller named another addressee."""
        keys_run: dict[str, str | list[str]] = dict(keys)
        args_run = dict(args)
        rekeyed = args["op"] != "create"
        ids = self._mentions_of(args, addressee)
        for _ in range(_REKEY_TRIES):
            if rekeyed:
                to = None if addressee is None else EntityId.parse(addressee)
                keys_run["record_open"] = self._keys.hitl_queue(to, "open")
                keys_run["record_closed"] = self._keys.hitl_queue(to, "closed")
                keys_run["mentions"] = [self._keys.mentions(i) for i in ids[:MENTIONS_PER_EVENT]]
                args_run["record_addressee"] = dumps(addressee)
            try:
                reply = scripts.HITL.eval(
                    self._ctx.store,
                    # one id per run: the transport's retries of this run carry the same one
                    {**keys_run, "replay": self._keys.request(scripts.new_request_id())},
                    args_run,
                    script=HITL,
                )
            except StoreCommandError as exc:
                error = script_error(exc)
                if error is exc:
                    raise
                raise error from None
            assert reply.tag is not None
            if reply.tag != "REKEY":
                if rekeyed and reply.tag in ("OK", "RESOLVED"):
                    self._saw(str(args["cid"]), addressee)
                return reply.tag, dict(reply)
            raw = reply["addressee"]
            named = _decode(b'{"a":' + (raw if isinstance(raw, bytes) else b"null") + b"}") or {}
            found = named.get("a")
            addressee = found if isinstance(found, str) else None
            said = reply["ids"]
            more = (
                [i.decode() for i in said if isinstance(i, bytes)] if isinstance(said, list) else []
            )
            ids = more or self._mentions_of(args, addressee)  # the event's, as the script said
        raise StoreError("hitl.lua: the keys of this item's resolution kept changing")

    def _saw(self, cid: str, addressee: str | None) -> None:
        """Remember ``cid``'s addressee: the guess of its resolve in this process (the
        script checks it; a wrong one costs a REKEY run)."""
        self._addressees.pop(cid, None)
        self._addressees[cid] = addressee
        while len(self._addressees) > _ADDRESSEES_KEPT:
            del self._addressees[next(iter(self._addressees))]

    @staticmethod
    def _mentions_of(args: dict[str, Arg | list[Arg]], addressee: str | None) -> list[str]:
        """The agents the event a run writes mentions, as far as the client can tell: its
        template's text and the addressee it fills in (the script checks)."""
        template = args.get("resolved_template")
        texts = [str(t) for t in template[1::2]] if isinstance(template, list) else []
        return mentioned(" ".join([*texts, *([addressee] if addressee else [])]))

    # create ---------------------------------------------------------------------------

    def create(
        self,
        topic: str,
        request: str,
        *,
        asked_by: str,
        urgency: str = "P1",
        deadline: int | None = None,
        addressee: str | None = None,
        correlation_id: str | None = None,
    ) -> Created:
        """Queue an item for ``addressee`` (None: the shared queue); one request.
        Idempotent by ``correlation_id`` (module docstring)."""
        topic = _text(self._ctx.guard(topic, "topic"), "topic", MAX_TOPIC_LEN)
        request = _text(self._ctx.guard(request, "request"), "request", MAX_TEXT_LEN)
        asker = _entity(asked_by, "asked_by")
        urgency = check_urgency(urgency)
        to = None if addressee is None else _entity(addressee, "addressee")
        cid = f"hitl-{uuid.uuid4().hex}" if correlation_id is None else check_cid(correlation_id)
        self._ctx.guard_ids((asker, "asked_by"), (to, "addressee"), (cid, "correlationId"))
        now = self._ctx.clock()
        due = now + DEFAULT_DEADLINE_MS if deadline is None else _ms(deadline, "deadline")
        payload: dict[str, Any] = {
            "topic": topic,
            "concrete_unblock_request": request,
            "urgency": urgency,
            "deadline": due,
            "addressee": None if to is None else str(to),
        }
        raw = {
            "source": str(asker),
            "kind": "hitl-required",
            "correlationId": cid,
            "summary": f"[HITL] {topic} ({urgency}, due {_iso(due)})",
        }
        tenant = self._keys.tenant
        member = parse_event({**raw, "payload": payload}, now_ms=now, tenant=tenant).to_json()
        probe = parse_event(
            {**raw, "payload": {**payload, "resolution": _PROBE}}, now_ms=now, tenant=tenant
        ).to_json()
        # where payload.resolution goes when the item is resolved: the end of the payload
        insert = f',"resolution":"{_PROBE}"'
        at = probe.index(insert)
        assert probe[:at] + probe[at + len(insert) :] == member
        header = (
            f'{{"state":"open","addressee":{dumps(payload["addressee"])},"score":{due},'
            f'"at":{len(probe[:at].encode("utf-8"))},"by":null,"item":'
        )
        # a queue the standup brief reads marks the tenant for it, in the same run
        briefed = to is None or to == EntityId.parse(self._ctx.settings.operator)
        brief_index = HITL_SHARED if to is None else HITL_OPERATOR
        status, reply = self._eval(
            {
                "items": self._keys.hitl_items(),
                "queue": self._keys.hitl_queue(to, "open"),
                "tenants": self._keys.tenants_with(brief_index),
            },
            {
                "op": "create",
                "cid": cid,
                "deadline": due,
                "record_header": header,
                "member": member,
                "tenant": tenant if briefed else "",
            },
        )
        if briefed:  # the mark's registry entry: a second step (module docstring)
            register_marked(self._ctx.store, [self._keys.tenants_with(brief_index)])
        if status == "EXISTS":
            record = _decode(reply["record"])
            item = record.get("item") if record else None
            return Created(item if isinstance(item, dict) else {}, False)
        created = _decode(member.encode("utf-8"))
        assert created is not None
        self._saw(cid, None if to is None else str(to))
        return Created(created, True)

    # list -----------------------------------------------------------------------------

    def list(
        self,
        addressee: str | None = None,
        state: str = "open",
        limit: int = DEFAULT_LIST_SIZE,
        cursor: str | None = None,
    ) -> HitlPage:
        """One page of a queue (one request): open by deadline, soonest first; closed by
        resolution time, newest first. Follow ``next_cursor`` until None. A page after
        an item of the same score (ms) was removed meanwhile may skip one item."""
        to = None if addressee is None else _entity(addressee, "addressee")
        state = check_state(state)
        limit = page_size(limit)
        reverse = state == "closed"
        score, run = ("+inf" if reverse else "-inf"), 0
        if cursor is not None:
            score_n, run = _decode_list_cursor(cursor, state, to)
            score = repr(score_n)
        end = "-inf" if reverse else "+inf"
        command: list[str | int] = ["ZRANGE", self._keys.hitl_queue(to, state), score, end]
        command += ["BYSCORE", *(["REV"] if reverse else []), "LIMIT", run, limit + 1]
        reply = self._ctx.store.execute((*command, "WITHSCORES"))
        items = reply if isinstance(reply, list) else []
        pairs = list(zip(items[::2], items[1::2], strict=False))
        more = len(pairs) > limit
        pairs = pairs[:limit]
        page: list[dict[str, Any]] = []
        skipped: list[str] = []
        for member, _ in pairs:
            item = _decode(member)
            if item is None:
                skipped.append(
                    f"a member of {self._keys.hitl_queue(to, state)} is not a JSON object"
                )
            else:
                page.append(item)
        next_cursor = None
        if more and pairs:
            last = _score(pairs[-1][1])
            same = sum(1 for _, s in pairs if _score(s) == last)
            first_page_run = run if cursor is not None and repr(last) == score else 0
            next_cursor = encode_cursor(
                "h", state, None if to is None else str(to), repr(last), first_page_run + same
            )
        return HitlPage(None if to is None else str(to), state, page, next_cursor, skipped)

    # resolve --------------------------------------------------------------------------

    def resolve(
        self, correlation_id: str, resolution: str, *, by: str, addressee: str | None = None
    ) -> Resolved:
        """Close the item and post ``hitl-resolved``, atomically: one request (two for an
        item another tool wrote, found in ``addressee``'s queue: module docstring)."""
        cid = check_cid(correlation_id)
        text = _text(self._ctx.guard(resolution, "resolution"), "resolution", MAX_TEXT_LEN)
        who = _entity(by, "by")
        to = None if addressee is None else _entity(addressee, "addressee")
        self._ctx.guard_ids((cid, "correlationId"), (who, "by"), (to, "addressee"))
        now = self._ctx.clock()
        event = parse_event(
            {
                "source": str(who),
                "kind": "hitl-resolved",
                "correlationId": cid,
                "summary": f"[HITL] {cid} resolved by {who}",
                "payload": {"resolution": text, "by": str(who), "addressee": _MARK},
            },
            now_ms=now,
            tenant=self._keys.tenant,
        ).to_json()
        head, _, tail = event.partition(f'"{_MARK}"')
        template: list[Arg] = [3, head, "addressee", tail]
        keys = {
            "items": self._keys.hitl_items(),
            "thread": self._keys.coordination_timeline(),
            "index": self._keys.index("thread"),
            "named_open": self._keys.hitl_queue(to, "open"),
            "named_closed": self._keys.hitl_queue(to, "closed"),
        }
        resolution_json = dumps({"by": str(who), "ts": now, "text": text})
        thread_member = EntityId.parse(COORDINATION_THREAD).local_id
        common: dict[str, Arg | list[Arg]] = {
            "cid": cid,
            "now": now,
            "by": dumps(str(who)),
            "thread_member": thread_member,
            "resolved_template": template,
        }
        named = None if to is None else str(to)
        # the record's addressee: as this process created or last resolved it, else the
        # one the caller named (the shared queue when none)
        guess = self._addressees.get(cid, named)
        status, reply = self._eval(
            keys,
            {"op": "resolve", **common, "resolution": resolution_json, "window": ADOPT_WINDOW},
            guess,
        )
        if status == "NONE":
            foreign = self._find(reply["members"], cid)
            if foreign is None:
                queue = self._keys.hitl_queue(to, "open")
                raise NotFound(
                    f"correlationId: no HITL item {cid}: ACMI has no record of it and it is "
                    f"not among the {ADOPT_WINDOW} most urgent items of {queue} (an item "
                    "another tool wrote is resolved by naming its queue's addressee)",
                    field="correlationId",
                    rule="exists",
                )
            member, item = foreign
            found = item.get("payload")
            payload: dict[str, Any] = found if isinstance(found, dict) else {}
            # decoded with load_stored: render_json writes its numbers back exactly
            closed = render_json(
                {
                    **item,
                    "payload": {**payload, "resolution": {"by": str(who), "ts": now, "text": text}},
                }
            ).decode("utf-8")
            addressee_json = dumps(None if to is None else str(to))
            status, reply = self._eval(
                keys,
                {
                    "op": "adopt",
                    **common,
                    "closed_member": closed,
                    "foreign_member": member,
                    "addressee": addressee_json,
                },
                named,
            )
            if status == "GONE":  # resolved, or created through ACMI, meanwhile
                return self.resolve(cid, text, by=str(who), addressee=addressee)
        if status == "RESOLVED":
            by_then = _decode(b'{"by":' + reply["by"] + b"}") or {}
            when = int(reply["at"])
            raise Conflict(
                f"correlationId: HITL item {cid} was already resolved by {by_then.get('by')} "
                f"at {_iso(when)} ({when} ms)",
                field="correlationId",
                rule="open",
            )
        addressee_value = _decode(b'{"a":' + reply["addressee"] + b"}") or {}
        return Resolved(cid, addressee_value.get("a"), str(who), now, int(float(reply["score"])))

    @staticmethod
    def _find(members: Sequence[Any], cid: str) -> tuple[str, dict[str, Any]] | None:
        for member in members:
            item = _decode(member)
            if item is not None and item.get("correlationId") == cid:
                return _str(member), item
        return None


def _decode_list_cursor(cursor: object, state: str, to: EntityId | None) -> tuple[float, int]:
    fields = decode_cursor(cursor, "h", 4)
    cur_state, cur_to, score_text, run = fields
    try:
        score = float(score_text) if isinstance(score_text, str) else math.nan
    except ValueError:
        score = math.nan
    bad = AcmiValidationError(
        "cursor", "cursor", "is not a cursor of this queue; pass next_cursor back unchanged"
    )
    if cur_state != state or cur_to != (None if to is None else str(to)) or math.isnan(score):
        raise bad
    if isinstance(run, bool) or not isinstance(run, int) or not 0 <= run <= MAX_PAGE_SIZE * 2**20:
        raise bad
    return score, run


__all__ = ["Created", "HitlAPI", "HitlPage", "Resolved"]
