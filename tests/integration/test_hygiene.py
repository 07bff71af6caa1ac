"""The hygiene job's core on the three backends: the cold archive (sink upload, read-back
verification, then the trim) keeps every event, exactly once, through every crash point;
no sink or a bad read-back trims nothing; the job decides what is due from the
heartbeat-state and visits only what the indexes name."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from acmi_core import Acmi, AcmiValidationError
from acmi_core.base.keys import MEMORY_HEARTBEAT
from acmi_core.base.model import EntityId
from acmi_core.base.stored import decode_event, load_object
from acmi_core.jobs import hygiene as hy
from acmi_core.jobs import quarterly
from acmi_core.jobs import quarters as dates
from acmi_core.jobs import sink as archive_sink
from acmi_core.jobs.runner import JobRun, run_job
from acmi_core.memory.layers import Quarter
from acmi_core.memory.service import MemoryAPI
from acmi_core.memory.slots import archive_from_document
from tests.kit import START, FakeClock, fresh_tenant

DAY = 24 * 3600 * 1000
ENTITY = "agent:claude"
CUTOFF = START - 30 * DAY


class DictSink:
    """An object store in a dict, with the faults a test injects: ``fail_put`` (raises),
    ``crash_after_put`` (stored, then the process dies), ``corrupt`` (what is read back
    differs: a flipped byte), ``drop_line`` (read back one line short)."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.puts = 0
        self.fail_put = False
        self.crash_after_put = False
        self.corrupt = False
        self.drop_line = False

    def get(self, key: str) -> bytes | None:
        body = self.objects.get(key)
        if body is None:
            return None
        if self.corrupt:
            return body[:-2] + (b"X" if body[-2:-1] != b"X" else b"Y") + body[-1:]
        if self.drop_line:
            return b"".join(line + b"\n" for line in archive_sink.split_jsonl(body)[:-1])
        return body

    def put(self, key: str, body: bytes, *, sha256: str, count: int) -> None:
        if self.fail_put:
            raise archive_sink.SinkError("S3 PutObject InternalError")
        self.objects[key] = body
        self.puts += 1
        if self.crash_after_put:
            raise Crash("after put")

    def lines(self) -> list[bytes]:
        return [line for body in self.objects.values() for line in archive_sink.split_jsonl(body)]


class Crash(Exception):
    """The process dies here (Lambda timeout, OOM): nothing after it runs."""


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START + 60_000)


@pytest.fixture
def tenant(acmi: Acmi, clock: FakeClock) -> Acmi:
    return fresh_tenant(acmi, clock)


@pytest.fixture
def sink() -> Iterator[DictSink]:
    sink = DictSink()
    archive_sink.register_sink("mem", lambda location: sink)
    yield sink
    archive_sink.SINKS.pop("mem", None)


def dest(sink: DictSink) -> archive_sink.Destination:
    return archive_sink.Destination(sink, "archive", "mem://bucket/archive")


def fill(
    acmi: Acmi, n: int = 120, entity: str = ENTITY, days: int = 100, *, memory: bool = True
) -> list[bytes]:
    """``n`` events spread over the last ``days`` days (two quarters and more), and (with
    ``memory``) a hot-layer line, which is what makes the job visit the entity; the
    stored members."""
    events = [
        {
            "ts": START - (i * days * DAY) // n,
            "source": "user:mikey" if i % 3 else "agent:claude",
            "kind": "lesson" if i % 7 == 0 else "note",
            "correlationId": f"c-{i}",
            "summary": f"event {i} with ünïcode",
            **({"payload": {"n": i, "detail": "a\nb"}} if i % 4 == 0 else {}),
        }
        for i in range(n)
    ]
    for start in range(0, n, 50):
        acmi.timeline.extend(entity, events[start : start + 50])
    if memory:
        MemoryAPI(acmi.context).remember(entity, "archive the old quarters", layer="hot")
    return members(acmi, entity)


def heartbeat(acmi: Acmi, entity: str = ENTITY) -> dict[str, Any]:
    """The entity's heartbeat-state as the job keeps it (its memory:heartbeat slot)."""
    key = acmi.keys.slot(EntityId.parse(entity), MEMORY_HEARTBEAT)
    return {
        k.removeprefix("heartbeat."): v
        for k, v in (load_object(acmi.store.execute(("GET", key))) or {}).items()
    }


def members(acmi: Acmi, entity: str = ENTITY) -> list[bytes]:
    reply = acmi.store.execute(("ZRANGE", acmi.keys.timeline(EntityId.parse(entity)), 0, -1))
    assert isinstance(reply, list)
    return [m for m in reply if isinstance(m, bytes)]


def assert_kept(before: list[bytes], acmi: Acmi, sink: DictSink, *, settled: bool) -> None:
    """Every event is in Redis or in the sink: none lost, none twice in the sink; once
    ``settled`` (a run completed), none in both."""
    live, archived = set(members(acmi)), sink.lines()
    assert len(archived) == len(set(archived)), "a line written twice"
    assert set(before) == live | set(archived)
    if settled:
        assert not live & set(archived)
        assert len(live) + len(archived) == len(before)


def archive(acmi: Acmi, sink: DictSink, **kwargs: Any) -> quarterly.ArchiveOutcome:
    return quarterly.archive_entity(acmi, ENTITY, cutoff_ms=CUTOFF, dest=dest(sink), **kwargs)


def older(before: list[bytes]) -> set[bytes]:
    out = set()
    for member in before:
        stored = decode_event(member)
        assert not isinstance(stored, str)
        if stored[0].ts < CUTOFF:
            out.add(member)
    return out


# --- the archive ----------------------------------------------------------------------------


def test_upload_verify_then_trim_keeps_every_event(tenant: Acmi, sink: DictSink) -> None:
    before = fill(tenant)
    out = archive(tenant, sink)
    assert out.problems == [] and not out.backlog
    gone = older(before)
    assert out.read == out.archived == out.trimmed == len(gone) > 0
    assert set(sink.lines()) == gone  # exactly the events older than the cutoff
    assert set(members(tenant)) == set(before) - gone
    assert_kept(before, tenant, sink, settled=True)
    # one object per quarter, under <prefix>/<tenant>/<entity>/<YYYY>-Q<N>.jsonl
    quarters = sorted(str(dates.quarter_of(decode_event(m)[0].ts)) for m in gone)  # type: ignore[union-attr]
    expected = {f"archive/{tenant.tenant}/{ENTITY}/{q}.jsonl" for q in quarters}
    assert set(sink.objects) == expected
    # the documents: the seed's archive template, one per quarter, readable as a file
    docs = quarterly.archive_documents(tenant, ENTITY)
    assert sorted(docs) == sorted(set(quarters)) == sorted(out.documents)
    for quarter, doc in docs.items():
        text = archive_from_document(Quarter.parse(quarter, "q"), doc).render()
        assert text.startswith(f"# Q{quarter[-1]} {quarter[:4]} Archive\n")
        assert "## Summary" in text and "## Lessons Carried Forward" in text
        assert "sha256" in text
    # search reach: the archived events read back, oldest first
    back = [
        e
        for q in sorted(set(quarters))
        for e in archive_sink.archived_events(tenant, dest(sink), ENTITY, q)
    ]
    assert [e.to_json().encode() for e in back] == sorted(
        gone,
        key=lambda m: decode_event(m)[0].ts,  # type: ignore[union-attr]
    )


def test_stored_bytes_are_the_lines_exactly(tenant: Acmi, sink: DictSink, raw: Any) -> None:
    """A member written by another tool (key order, spacing) is archived byte for byte."""
    key = tenant.keys.timeline(EntityId.parse(ENTITY))
    foreign = b'{ "summary":"x",  "ts": 1700000000000, "source":"user:a","kind":"note"}'
    raw.zadd(key, {foreign: 1700000000000})
    with_newline = b'{"ts": 1700000000001,\n"source":"user:a","summary":"y"}'
    raw.zadd(key, {with_newline: 1700000000001})
    out = archive(tenant, sink)
    assert foreign in sink.lines()
    assert out.kept == 1 and with_newline in members(tenant)  # not one line: kept in Redis


def test_bounded_per_run_then_the_rest(tenant: Acmi, sink: DictSink) -> None:
    before = fill(tenant)
    total = len(older(before))
    runs = 0
    while True:
        out = archive(tenant, sink, limit=25)
        runs += 1
        assert out.read <= 25
        assert_kept(before, tenant, sink, settled=True)
        if not out.backlog:
            break
    assert runs == total // 25 + 1
    assert set(sink.lines()) == older(before)


def test_a_checksum_mismatch_trims_nothing(tenant: Acmi, sink: DictSink) -> None:
    before = fill(tenant)
    sink.corrupt = True
    out = archive(tenant, sink)
    assert out.trimmed == 0 and out.archived == 0
    assert all("nothing trimmed" in p for p in out.problems) and out.problems
    assert members(tenant) == before
    sink.corrupt = False
    again = archive(tenant, sink)  # the object holds them all now: trimmed, not re-put
    assert again.problems == [] and again.trimmed == len(older(before))
    assert_kept(before, tenant, sink, settled=True)


def test_a_short_read_back_trims_nothing(tenant: Acmi, sink: DictSink) -> None:
    before = fill(tenant)
    sink.drop_line = True
    out = archive(tenant, sink)
    assert out.trimmed == 0 and "lines" in out.problems[0]
    assert members(tenant) == before


def test_no_sink_writes_documents_and_trims_nothing(tenant: Acmi) -> None:
    before = fill(tenant)
    out = quarterly.archive_entity(tenant, ENTITY, cutoff_ms=CUTOFF, dest=None)
    assert out.trimmed == 0 and members(tenant) == before
    assert out.documents and out.archived_through is not None and not out.backlog
    docs = quarterly.archive_documents(tenant, ENTITY)
    assert sorted(docs) == out.documents
    # the next quarter's run goes on from where this one stopped, rewriting the partial one
    later = quarterly.archive_entity(
        tenant, ENTITY, cutoff_ms=START, dest=None, archived_through=out.archived_through
    )
    assert later.documents[0] == out.documents[-1] and members(tenant) == before
    metrics = quarterly.archive_documents(tenant, ENTITY)[later.documents[0]]["archive.metrics"]
    assert "Raw events" not in " ".join(metrics)


# --- crash points: every one leaves every event somewhere, once -----------------------------


def test_crash_when_the_upload_fails(tenant: Acmi, sink: DictSink) -> None:
    before = fill(tenant)
    sink.fail_put = True
    out = archive(tenant, sink)
    assert out.trimmed == 0 and members(tenant) == before and "InternalError" in out.problems[0]
    sink.fail_put = False
    assert archive(tenant, sink).trimmed == len(older(before))
    assert_kept(before, tenant, sink, settled=True)


def test_crash_between_upload_and_verify(tenant: Acmi, sink: DictSink) -> None:
    before = fill(tenant)
    sink.crash_after_put = True
    with pytest.raises(Crash):
        archive(tenant, sink)
    assert members(tenant) == before and sink.lines()  # uploaded, nothing trimmed
    sink.crash_after_put = False
    puts = sink.puts
    out = archive(tenant, sink)
    assert out.problems == []
    assert_kept(before, tenant, sink, settled=True)
    # the quarter uploaded before the crash had nothing new: not written again
    assert sink.puts == puts + len(sink.objects) - 1


def test_crash_between_verify_and_trim(
    tenant: Acmi, sink: DictSink, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = fill(tenant)

    def crash(*args: Any) -> Any:
        raise Crash("before the trim")

    with monkeypatch.context() as patch:
        patch.setattr(quarterly, "_trim", crash)
        with pytest.raises(Crash):
            archive(tenant, sink)
    assert members(tenant) == before
    assert_kept(before, tenant, sink, settled=False)
    puts = sink.puts
    assert archive(tenant, sink).trimmed == len(older(before))
    # the quarter verified before the crash was complete: not written again
    assert sink.puts == puts + len(sink.objects) - 1
    assert_kept(before, tenant, sink, settled=True)


def test_crash_between_two_trim_scripts(
    tenant: Acmi, sink: DictSink, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = fill(tenant)
    real: Callable[..., Any] = quarterly.run_script
    calls = {"n": 0}

    def second_dies(*args: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:
            raise Crash("between trims")
        return real(*args)

    with monkeypatch.context() as patch:
        patch.setattr(quarterly, "TRIM_BYTES", 1_000)  # several scripts per quarter
        patch.setattr(quarterly, "run_script", second_dies)
        with pytest.raises(Crash):
            archive(tenant, sink)
    trimmed_once = len(before) - len(members(tenant))
    assert 0 < trimmed_once < len(older(before))
    assert_kept(before, tenant, sink, settled=False)
    out = archive(tenant, sink)
    assert out.trimmed == len(older(before)) - trimmed_once
    assert_kept(before, tenant, sink, settled=True)


def test_a_member_gone_since_the_read_stops_the_trim(tenant: Acmi, sink: DictSink) -> None:
    """Another writer removes one of the members between the read and the trim: the
    script sees it and removes nothing of that batch; the next run finishes."""
    before = fill(tenant)
    victim = sorted(older(before))[0]
    real_put = sink.put

    def put_then_delete(key: str, body: bytes, *, sha256: str, count: int) -> None:
        real_put(key, body, sha256=sha256, count=count)
        if victim in archive_sink.split_jsonl(body):
            tenant.store.execute(("ZREM", tenant.keys.timeline(EntityId.parse(ENTITY)), victim))

    sink.put = put_then_delete  # type: ignore[method-assign]
    out = archive(tenant, sink)
    assert out.backlog and any("changed since" in p for p in out.problems)
    sink.put = real_put  # type: ignore[method-assign]
    out = archive(tenant, sink)
    assert out.problems == []
    assert_kept(before, tenant, sink, settled=True)


# --- the job --------------------------------------------------------------------------------


def job(acmi: Acmi, execution_id: str, at: int = START, **params: Any) -> dict[str, Any]:
    params.setdefault("archive", "mem://bucket/archive")
    acmi.clock.now += 10_000  # type: ignore[attr-defined]  # past the settle margin
    run = JobRun("hygiene", execution_id, at, params)
    return run_job(acmi, run, hy.run, clock=time.perf_counter)


def test_the_job_reviews_audits_and_archives_what_is_due(tenant: Acmi, sink: DictSink) -> None:
    before = fill(tenant)
    first = job(tenant, "run-1")
    assert first["problems"] == [] and first["visited"] == 1
    assert first["audited"] == 1 and first["archived_entities"] == 1
    assert first["reviewed"] + first["review_pending"] == 1
    assert first["events_trimmed"] == len(older(before))
    beat = heartbeat(tenant)
    assert tenant.signals.all(ENTITY) == {}  # the bookkeeping is the memory's own
    assert beat["last_archive"] == beat["last_audit"] == "2026-09-21"
    assert beat["next_scheduled"]["quarterly_archive"] == "2026-09-30"
    assert beat["next_scheduled"]["monthly_audit"] == "2026-10-01"
    assert beat["next_scheduled"]["weekly_review"] == "2026-09-28"
    audits = [e for e in tenant.timeline.read(ENTITY) if e.kind == "memory-audit"]
    assert len(audits) == 1 and audits[0].correlationId == "memory-audit-2026-09-21"
    # the same execution: answered from its record
    assert job(tenant, "run-1")["replayed"] is True
    # the next day nothing is due: the entity is not even read
    tenant.clock.now += DAY  # type: ignore[attr-defined]
    quiet = job(tenant, "run-2", START + DAY)
    # (one of them retention's: the coordination thread's ends and a HITL step, one pipeline)
    assert quiet["visited"] == 0 and quiet["requests"] <= 8
    # the audit's event is new since the change watermark: a retry of run-1's audit is
    # stored once anyway (same bytes)
    again = job(tenant, "run-3", START, force=True, tasks=["audit"])
    assert again["audited"] == 1
    assert len([e for e in tenant.timeline.read(ENTITY) if e.kind == "memory-audit"]) == 1


def test_a_quarter_later_the_archive_is_due_again(tenant: Acmi, sink: DictSink) -> None:
    before = fill(tenant)
    job(tenant, "q-1")
    tenant.clock.now += 10 * DAY  # type: ignore[attr-defined]
    later = job(tenant, "q-2", START + 10 * DAY)  # 2026-10-01: past 09-30
    assert later["archived_entities"] == 1 and later["events_trimmed"] > 0
    audits = {m for m in members(tenant) if b"memory-audit" in m}
    assert_kept(sorted(set(before) | audits), tenant, sink, settled=True)


def test_without_a_sink_the_job_trims_nothing(tenant: Acmi) -> None:
    before = fill(tenant)
    result = job(tenant, "nosink", archive=None)
    assert result["archive"] is None and result["documents"] >= 2
    assert result["events_trimmed"] == 0
    assert set(before) <= set(members(tenant))


def test_an_unknown_scheme_is_documents_only(tenant: Acmi) -> None:
    before = fill(tenant)
    result = job(tenant, "gcs", archive="gs://bucket/x")
    assert any("no archive sink" in n for n in result["notes"])
    assert result["events_trimmed"] == 0 and set(before) <= set(members(tenant))


def test_a_held_lease_leaves_the_archive_to_the_next_run(tenant: Acmi, sink: DictSink) -> None:
    before = fill(tenant)
    tenant.store.execute(("SET", tenant.keys.hygiene_lease(), "someone-else", "PX", 60_000))
    held = job(tenant, "lease-1")
    assert held["archived_entities"] == 0 and any("lease" in n for n in held["notes"])
    assert set(before) <= set(members(tenant))
    tenant.store.execute(("DEL", tenant.keys.hygiene_lease()))
    tenant.clock.now += 1000  # type: ignore[attr-defined]
    freed = job(tenant, "lease-2", START + 1000)  # the entity is due again right after
    assert freed["archived_entities"] == 1 and freed["events_trimmed"] >= len(older(before))
    audits = {m for m in members(tenant) if b"memory-audit" in m}
    assert_kept(sorted(set(before) | audits), tenant, sink, settled=True)
    assert tenant.store.execute(("GET", tenant.keys.hygiene_lease())) is None  # released


def test_a_deleted_entity_leaves_the_index(tenant: Acmi) -> None:
    fill(tenant, 5)
    assert job(tenant, "before", archive=None)["visited"] == 1
    tenant.delete(ENTITY)  # takes it out of the due index too
    assert hy.entities_due(tenant, START + 400 * DAY) == []
    tenant.clock.now += 8 * DAY  # type: ignore[attr-defined]
    result = job(tenant, "after", START + 8 * DAY, archive=None)  # its weekly review was due
    assert result["visited"] == 0
    assert heartbeat(tenant) == {} and members(tenant) == []
    assert hy.entities_due(tenant, START + 400 * DAY) == []


def test_an_entity_another_tool_deleted_is_dropped_from_the_index(tenant: Acmi) -> None:
    """Keys removed by another tool (no acmi.delete): the job finds nothing to keep and
    drops the entity from its due index instead of writing it back to life."""
    fill(tenant, 5)
    assert job(tenant, "before", archive=None)["visited"] == 1
    eid = EntityId.parse(ENTITY)
    tenant.store.execute(("DEL", *tenant.keys.all_slots(eid)))
    tenant.clock.now += 8 * DAY  # type: ignore[attr-defined]
    result = job(tenant, "after", START + 8 * DAY, archive=None)  # its weekly review is due
    assert result["dropped"] == 1 and result["visited"] == 0
    assert heartbeat(tenant) == {} and members(tenant) == []
    assert hy.entities_due(tenant, START + 400 * DAY) == []


def test_idle_entities_cost_nothing(tenant: Acmi) -> None:
    """A run's requests are the same over 2,000 idle entities (scheduled later, changed
    before the watermark) as over 20."""

    def cost(idle: int) -> int:
        acmi = fresh_tenant(tenant, FakeClock(START + 60_000))
        due, changed = acmi.keys.hygiene_due(), acmi.keys.memory_index()
        for start in range(0, idle, 500):
            names = [f"deal:idle-{i}" for i in range(start, min(idle, start + 500))]
            acmi.store.execute(["ZADD", due, *[x for n in names for x in (START + 5 * DAY, n)]])
            acmi.store.execute(["ZADD", changed, *[x for n in names for x in (1, n)]])
        acmi.store.execute(("SET", acmi.keys.job_state("hygiene"), '{"watermark": 2}'))
        for i in range(3):
            MemoryAPI(acmi.context).remember(f"agent:active-{i}", "x", layer="warm")
        acmi.clock.now += 60_000  # type: ignore[attr-defined]
        result = job(acmi, "scale", START + 60_000, archive=None)
        assert result["visited"] == 3
        return int(result["requests"])

    assert cost(2_000) == cost(20)


def test_bad_parameters_name_the_field(tenant: Acmi) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"archive": "not a url"}, "archive"),
        ({"archive": 5}, "archive"),
        ({"retention_days": 0}, "retention_days"),
        ({"events": 10_001}, "events"),
        ({"max": True}, "max"),
        ({"tasks": ["sweep"]}, "tasks"),
        ({"force": "yes"}, "force"),
        ({"budget_s": 0}, "budget_s"),
        ({"summarizer": "??"}, "summarizer"),
    ]
    for params, name in cases:
        with pytest.raises(AcmiValidationError) as err:
            hy.parse_params(params, tenant.settings)
        assert err.value.field == name


def test_quarter_and_schedule_dates() -> None:
    import datetime as dt

    assert dates.next_quarterly(dt.date(2026, 1, 15)) == dt.date(2026, 3, 31)
    assert dates.next_quarterly(dt.date(2026, 3, 31)) == dt.date(2026, 6, 30)
    assert dates.next_quarterly(dt.date(2026, 12, 31)) == dt.date(2027, 3, 31)
    assert dates.next_monthly(dt.date(2026, 12, 5)) == dt.date(2027, 1, 1)
    assert dates.quarter_end_ms(Quarter(2026, 4)) == dates.day_start_ms(dt.date(2027, 1, 1))
    assert archive_sink.object_key("", "t", EntityId.parse("agent:x"), Quarter(2026, 1)) == (
        "t/agent:x/2026-Q1.jsonl"
    )


def test_a_failing_review_never_blocks_the_archive(
    tenant: Acmi, sink: DictSink, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = fill(tenant)

    def over_budget(acmi: Acmi, entity: EntityId, now_ms: int) -> tuple[str, Any]:
        raise AcmiValidationError("warm", "budget", "MEMORY.md is over 500 lines")

    monkeypatch.setattr(hy, "review", over_budget)
    result = job(tenant, "review-fails")
    assert any("review: warm: MEMORY.md is over" in p for p in result["problems"])
    assert result["events_trimmed"] == len(older(before))


def test_an_entity_without_memory_is_never_visited_nor_written(tenant: Acmi) -> None:
    """Issue 21 item 1: a webhook entity (no memory, only timeline changes) is not
    visited, so it gets no heartbeat.* signals, no memory slot and no audit event (today's
    job visited every changed entity and wrote eight heartbeat.* signals into each)."""
    before = fill(tenant, 10, entity="deal:acme-42", memory=False)
    tenant.signals.set("inbox:sales", "unread", 3)
    result = job(tenant, "plain", archive=None, force=True)
    assert result["visited"] == 0 and result["audited"] == 0
    assert tenant.signals.all("deal:acme-42") == {} and heartbeat(tenant, "deal:acme-42") == {}
    assert tenant.signals.all("inbox:sales") == {"unread": 3}
    assert members(tenant, "deal:acme-42") == before
    assert hy.entities_due(tenant, "+inf") == []


def test_an_entity_with_memory_keeps_its_bookkeeping_in_the_memory_slot(tenant: Acmi) -> None:
    fill(tenant, 10, entity="agent:w")
    tenant.signals.replace("agent:w", {"mood": "ok"})
    result = job(tenant, "beat", archive=None, tasks=["audit"])
    assert result["visited"] == 1 and result["audited"] == 1
    beat = heartbeat(tenant, "agent:w")
    assert beat["last_audit"] == "2026-09-21" and beat["memory_md_lines"] == 0
    assert tenant.signals.all("agent:w") == {"mood": "ok"}
