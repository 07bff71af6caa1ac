"""The quarterly archive of one entity (the hygiene job's third task, and ``archive_now``):
events older than the retention summarized into the quarter's archive document (the seed's
``memory/archive/YYYY-QN.md``) and, with a sink (:mod:`acmi_core.jobs.sink`), written raw to
the quarter's JSONL object and trimmed from the live timeline once the object is verified.

Nothing is lost (the archive's order of steps, each crash point tested): read the oldest
``events`` members older than the cutoff -> per quarter, the object is read, the new
members appended (a member already in it is not added again), written, and read back:
its line count and sha256 must equal what was written -> one script
(``store/lua/hygiene.lua``) writes the quarter's document and ZREMs exactly those members,
only if each is still in the timeline at the score read. A crash anywhere leaves every
event in Redis, in the object, or in both; the next run appends nothing twice and trims
what is left. Concurrent runs: the archive step takes a lease (``SET NX PX``, the
execution id, released by the script) so two runs never rewrite one object at once; a
run that finds it held leaves archiving to the next run.

Limits (documented, not hidden): a quarter's object is rewritten whole when a run adds to
it (S3 has no append), so a run costs O(that quarter's archived bytes) in the sink; a
member that cannot be one JSONL line or restored exactly (a raw newline, not an event,
ts not its score) is kept in Redis and counted ``events_kept``; without a sink, the
documents follow ``heartbeat.archived_through``, so an event backdated below it is not
in a document until a sink archives it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, TypedDict

from acmi_core.base.errors import StoreCommandError
from acmi_core.base.keys import MEMORY_ARCHIVE, MEMORY_STAMPS
from acmi_core.base.model import EntityId, dumps
from acmi_core.base.stored import decode_event, load_object
from acmi_core.jobs.quarters import day_start_ms, quarter_end_ms, quarter_of, quarter_start
from acmi_core.jobs.sink import Destination, SinkError, jsonl, object_key, split_jsonl
from acmi_core.jobs.summarizers import (
    Digest,
    Extractive,
    Summarizer,
    SummarizerError,
    Window,
    digest,
    iso,
)
from acmi_core.memory.layers import Quarter
from acmi_core.memory.slots import archive_from_document
from acmi_core.store import scripts
from acmi_core.store.base import Arg, Reply, Script
from acmi_core.store.writes import script_error

if TYPE_CHECKING:
    from acmi_core.client import Acmi

DEFAULT_RETENTION_DAYS: Final = 30  # seed §4: "Keep 30 days of daily notes"
MAX_RETENTION_DAYS: Final = 3650
MAX_EVENTS_PER_ENTITY: Final = 1_000  # archived per entity and run; the rest next run
MAX_EVENTS_MAX: Final = 10_000
TRIM_BYTES: Final = 512 * 1024  # members per trim script (Upstash takes 1 MB a request)
# members per trim script: its work is a ZSCORE and a removal each (hygiene.lua holds the
# same number): 50,000 members of 10 bytes, within TRIM_BYTES, were one run of 0.5 s. Two
# arguments a member: 1,900 keep the request under store.base.MAX_REQUEST_ARGS (2,000 sent
# 4,010 arguments, over ElastiCache Serverless's 3,999)
TRIM_MEMBERS: Final = 1900
DOC_EVENTS: Final = 2_000  # the newest events of a quarter its document is written from
MAX_QUARTERS: Final = 4  # quarters documented per entity and run without a sink

HYGIENE: Script = scripts.HYGIENE.script


def _line(text: object, limit: int = 300) -> str:
    flat = " ".join(str(text).split()).lstrip("#").strip()
    return flat if len(flat) <= limit else f"{flat[: limit - 1]}…"


def _sentence(facts: Digest, total: int) -> str:
    """The extractive summary: what the quarter held, in one paragraph."""
    kinds = ", ".join(f"{n} {kind}" for kind, n in facts.kinds.items())
    who = ", ".join(facts.actors)
    text = f"{total} events from {iso(facts.first_ts)} to {iso(facts.last_ts)}: {kinds}."
    if who:
        text += f" Most active: {who}."
    if facts.closed:
        text += f" {facts.closed} items closed."
    text += f" {len(facts.open)} still open at the end." if facts.open else " Nothing left open."
    return text


def archive_document(
    entity: EntityId,
    quarter: Quarter,
    events: Sequence[Mapping[str, Any]],
    total: int,
    summarizer: Summarizer,
    *,
    until_ms: int,
    raw: str | None = None,
) -> tuple[dict[str, Any], str | None]:
    """The quarter's archive (the seed's template: Summary, Major Events, Metrics,
    Lessons Carried Forward) as ``archive_to_document`` stores it, written from the
    quarter's newest ``events`` (oldest first) of ``total``; and the summarizer's
    failure, if it failed (the extractive summary stands in)."""
    window = Window(
        str(entity), float(day_start_ms(quarter_start(quarter))), until_ms, events, total
    )
    facts = digest(window)
    failure = None
    if isinstance(summarizer, Extractive):  # its rollup text is a list: one sentence here
        text = _sentence(facts, total)
    else:
        try:
            text = summarizer.summarize(window, facts)
        except SummarizerError as exc:
            failure = str(exc)
            text = _sentence(facts, total)
    major = [
        _line(f"{iso(item.get('ts'))} {kind} by {item['source']}: {item['summary']}")
        for kind, item in facts.latest.items()
    ]
    major += [
        _line(f"still open: {i['kind']} {i['correlationId']} by {i['source']}: {i['summary']}")
        for i in facts.open
    ]
    lessons = [
        _line(f"{iso(e.get('ts'))[:10]} — {e.get('summary', '')}")
        for e in events
        if e.get("kind") in ("lesson", "improvement", "takeaway")
    ][-20:]
    metrics = [
        f"Events: {total}"
        + (f" (the newest {len(events)} summarized)" if total > len(events) else ""),
        f"First: {iso(facts.first_ts)}; last: {iso(facts.last_ts)}",
        "Kinds: " + (", ".join(f"{k} {n}" for k, n in facts.kinds.items()) or "none"),
        "Sources: " + (", ".join(f"{s} {a['events']}" for s, a in facts.actors.items()) or "none"),
        f"Summarizer: {summarizer.name if failure is None else 'extractive'}",
    ]
    if raw is not None:
        metrics.append(_line(f"Raw events: {raw}", 1000))
    doc: dict[str, Any] = {
        "archive.summary": _line(text, 2000) or "(no events)",
        "archive.major_events": major,
        "archive.metrics": metrics,
        "archive.lessons": lessons or ["(none recorded)"],
    }
    archive_from_document(quarter, doc)  # it renders and reads back: never a broken file
    return doc, failure


# --- archiving one entity ---------------------------------------------------------------------


class ArchivedObject(TypedDict):
    """One verified object an archive wrote: its quarter, sink key, line count, digest."""

    quarter: str
    key: str
    count: int
    sha256: str


@dataclass
class ArchiveOutcome:
    """What :func:`archive_entity` did for one entity."""

    read: int = 0  # members older than the cutoff read
    archived: int = 0  # of them, in a verified object
    trimmed: int = 0  # removed from the live timeline
    kept: int = 0  # members that are not archivable events (a newline, not an event): kept
    documents: list[str] = field(default_factory=list)  # quarters whose document was written
    objects: list[ArchivedObject] = field(default_factory=list)
    backlog: bool = False
    archived_through: int | None = None  # without a sink: documented up to here (ms)
    problems: list[str] = field(default_factory=list)
    llm_failures: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v not in (None, [], 0)}


def _pairs(reply: Reply) -> list[tuple[bytes, bytes]]:
    items = reply if isinstance(reply, list) else []
    return [
        (m, s)
        for m, s in zip(items[::2], items[1::2], strict=False)
        if isinstance(m, bytes) and isinstance(s, bytes)
    ]


def _archivable(member: bytes, score: bytes) -> dict[str, Any] | None:
    """The member's stored event when it can be a JSONL line and restored exactly (one
    line, an event whose ts is its score); else None (kept in Redis)."""
    if b"\n" in member or b"\r" in member:
        return None
    decoded = decode_event(member)
    if isinstance(decoded, str):
        return None
    event, stored = decoded
    try:
        same = float(event.ts) == float(score)
    except (TypeError, ValueError):
        return None
    return stored if same else None


def run_script(acmi: Acmi, keys: dict[str, str], args: dict[str, Arg | list[Arg]]) -> scripts.Slots:
    """``store/lua/hygiene.lua`` (a trim, a lease release) by name (``scripts.HYGIENE``),
    its errors as ACMI errors. Each call is one request: its own record (replay.lua), so
    the transport's retry of a trim whose reply was lost answers what that trim did."""
    view = acmi.keys.beside(next(iter(keys.values())))  # the record shares its keys' slot
    recorded = {**keys, scripts.REPLAY_KEY: view.request(scripts.new_request_id())}
    try:
        return scripts.HYGIENE.eval(acmi.store, recorded, args, script=HYGIENE)
    except StoreCommandError as exc:
        error = script_error(exc)
        if error is exc:
            raise
        raise error from None


def _trim(
    acmi: Acmi,
    entity: EntityId,
    quarter: Quarter,
    doc: dict[str, Any],
    members: Sequence[tuple[bytes, bytes]],
) -> tuple[int, int]:
    """The document written and exactly ``members`` removed, in scripts of at most
    ``TRIM_BYTES`` of members and ``TRIM_MEMBERS`` members (the document with the first).
    (removed, differing)."""
    keys = {
        "timeline": acmi.keys.timeline(entity),
        "archive": acmi.keys.slot(entity, MEMORY_ARCHIVE),
    }
    removed = differ = 0
    chunks: list[list[tuple[bytes, bytes]]] = [[]]
    size = 0
    for member, score in members:
        if chunks[-1] and (size + len(member) > TRIM_BYTES or len(chunks[-1]) == TRIM_MEMBERS):
            chunks.append([])
            size = 0
        chunks[-1].append((member, score))
        size += len(member)
    for n, chunk in enumerate(chunks):
        pairs: list[Arg] = []
        for member, score in chunk:
            pairs += [member, score]
        args: dict[str, Arg | list[Arg]] = {
            "mode": "trim",
            "quarter": str(quarter) if n == 0 else "",
            "doc": dumps(doc) if n == 0 else "",
            "member_count": len(chunk),
            "members": pairs,
        }
        reply = run_script(acmi, keys, args)
        ok, count = reply["trimmed"], reply["count"]
        if ok == 1 and isinstance(count, int):
            removed += count
        elif isinstance(count, int):
            differ += count
    if removed and not differ and members:
        # the daily-note stamps (the bootstrap's index) below the newest trimmed event go
        # too. Not atomic with the trim, and need not be: the bootstrap reads only the
        # stamps of the days around now, and a stamp whose line is gone reads nothing
        newest = max(float(score) for _, score in members)
        stamps = acmi.keys.slot(entity, MEMORY_STAMPS)
        acmi.store.execute(("ZREMRANGEBYSCORE", stamps, "-inf", f"({newest!r}"))
    return removed, differ


def _stored_ts(event: Mapping[str, Any]) -> float:
    ts = event.get("ts")
    return float(ts) if isinstance(ts, int | float) and not isinstance(ts, bool) else 0.0


def _object_events(lines: Sequence[bytes]) -> list[dict[str, Any]]:
    """The newest ``DOC_EVENTS`` lines' events, oldest first."""
    out = []
    for line in lines[-DOC_EVENTS:]:
        decoded = decode_event(line)
        if not isinstance(decoded, str):
            out.append(decoded[1])
    out.sort(key=_stored_ts)
    return out


def archive_entity(
    acmi: Acmi,
    entity: str | EntityId,
    *,
    cutoff_ms: int,
    limit: int = MAX_EVENTS_PER_ENTITY,
    dest: Destination | None = None,
    summarizer: Summarizer | None = None,
    archived_through: int | None = None,
) -> ArchiveOutcome:
    """Archive ``entity``'s events older than ``cutoff_ms`` (module docstring): with
    ``dest``, the oldest ``limit`` of them go to the sink and, once verified, leave the
    timeline; without, the quarters after ``archived_through`` (ms, from the last run)
    get their documents and nothing is trimmed."""
    eid = EntityId.parse(entity)
    summarizer = summarizer or Extractive()
    if dest is None:
        return _document_only(acmi, eid, cutoff_ms, limit, summarizer, archived_through)
    out = ArchiveOutcome()
    timeline = acmi.keys.timeline(eid)
    reply = acmi.store.execute(
        ("ZRANGE", timeline, "-inf", f"({cutoff_ms}", "BYSCORE", "LIMIT", 0, limit, "WITHSCORES")
    )
    page = _pairs(reply)
    out.read = len(page)
    out.backlog = len(page) >= limit
    by_quarter: dict[Quarter, list[tuple[bytes, bytes]]] = {}
    for member, score in page:
        if _archivable(member, score) is None:
            out.kept += 1
            continue
        by_quarter.setdefault(quarter_of(float(score)), []).append((member, score))
    for quarter in sorted(by_quarter):
        members = by_quarter[quarter]
        key = object_key(dest.prefix, acmi.tenant, eid, quarter)
        try:
            existing = split_jsonl(dest.sink.get(key) or b"")
            have = set(existing)
            new = [m for m, _ in members if m not in have]
            lines = existing + new  # append-only: what an earlier run wrote stays in place
            body = jsonl(lines)
            sha = hashlib.sha256(body).hexdigest()
            if new:
                dest.sink.put(key, body, sha256=sha, count=len(lines))
                back = dest.sink.get(key)
            else:  # already there (a run that stopped before its trim): read just now
                back = jsonl(existing)
        except SinkError as exc:
            out.problems.append(f"{quarter}: {exc}: nothing trimmed")
            continue
        got = split_jsonl(back or b"")
        if back is None or len(got) != len(lines) or hashlib.sha256(back).hexdigest() != sha:
            out.problems.append(
                f"{quarter}: the object read back holds {len(got)} lines "
                f"(sha256 {hashlib.sha256(back or b'').hexdigest()[:12]}), expected "
                f"{len(lines)} ({sha[:12]}): nothing trimmed"
            )
            continue
        out.archived += len(members)
        out.objects.append(
            {"quarter": str(quarter), "key": key, "count": len(lines), "sha256": sha}
        )
        doc, failure = archive_document(
            eid,
            quarter,
            _object_events(lines),
            len(lines),
            summarizer,
            until_ms=min(quarter_end_ms(quarter), cutoff_ms),
            raw=f"{dest.url}/{key.removeprefix(dest.prefix).lstrip('/')} "
            f"({len(lines)} lines, sha256 {sha})",
        )
        if failure:
            out.llm_failures += 1
        removed, differ = _trim(acmi, eid, quarter, doc, members)
        out.documents.append(str(quarter))
        out.trimmed += removed
        if differ:
            out.backlog = True
            out.problems.append(
                f"{quarter}: {differ} members changed since they were read: nothing trimmed"
            )
    return out


def _document_only(
    acmi: Acmi,
    eid: EntityId,
    cutoff_ms: int,
    limit: int,
    summarizer: Summarizer,
    archived_through: int | None,
) -> ArchiveOutcome:
    """No sink: each quarter from ``archived_through`` up to the cutoff gets its document
    from Redis (its newest ``DOC_EVENTS``, with the count); nothing is trimmed."""
    out = ArchiveOutcome(archived_through=archived_through)
    timeline = acmi.keys.timeline(eid)
    key = acmi.keys.slot(eid, MEMORY_ARCHIVE)
    low = "-inf" if archived_through is None else str(archived_through)
    for _ in range(MAX_QUARTERS):
        first = _pairs(
            acmi.store.execute(
                ("ZRANGE", timeline, low, f"({cutoff_ms}", "BYSCORE", "LIMIT", 0, 1, "WITHSCORES")
            )
        )
        if not first:
            return out
        quarter = quarter_of(float(first[0][1]))
        start, upper = day_start_ms(quarter_start(quarter)), min(quarter_end_ms(quarter), cutoff_ms)
        newest, total = acmi.store.pipeline(
            [
                ("ZRANGE", timeline, f"({upper}", start, "BYSCORE", "REV", "LIMIT", 0, DOC_EVENTS),
                ("ZCOUNT", timeline, start, f"({upper}"),
            ]
        )
        events = []
        for member in reversed(newest if isinstance(newest, list) else []):
            decoded = decode_event(member)
            if not isinstance(decoded, str):
                events.append(decoded[1])
        doc, failure = archive_document(
            eid,
            quarter,
            events,
            total if isinstance(total, int) else len(events),
            summarizer,
            until_ms=upper,
        )
        if failure:
            out.llm_failures += 1
        acmi.store.execute(("HSET", key, str(quarter), dumps(doc)))
        out.read += len(events)
        out.documents.append(str(quarter))
        out.archived_through = upper
        low = str(upper)
        if out.read >= limit:
            break
    more = acmi.store.execute(("ZCOUNT", timeline, low, f"({cutoff_ms}"))
    out.backlog = isinstance(more, int) and more > 0
    return out


def archive_documents(acmi: Acmi, entity: str | EntityId) -> dict[str, dict[str, Any]]:
    """The entity's archive documents by quarter (what an export writes as
    ``memory/archive/YYYY-QN.md``): one HGETALL."""
    reply = acmi.store.execute(("HGETALL", acmi.keys.slot(EntityId.parse(entity), MEMORY_ARCHIVE)))
    items = reply if isinstance(reply, list) else []
    docs = {}
    for name, raw in zip(items[::2], items[1::2], strict=False):
        doc = load_object(raw)
        if isinstance(name, bytes) and doc is not None:
            docs[name.decode("utf-8", "replace")] = doc
    return dict(sorted(docs.items()))
