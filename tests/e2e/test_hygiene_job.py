"""The hygiene function through its real handler (functions.hygiene) fed its events/
samples, archiving to S3 under moto (mock_aws): every event is in Redis or in S3, byte
for byte and once, before and after; the objects carry their count and SHA-256; no
bucket, or a bucket S3 refuses, trims nothing; the same execution id does nothing."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from acmi_core import Acmi, Settings
from acmi_core.base.model import EntityId
from acmi_core.entities.context import system_clock
from acmi_core.jobs import hygiene as hy
from acmi_core.jobs import quarterly
from acmi_core.jobs import sink as archive_sink
from acmi_core.jobs.runner import JobRun
from acmi_core.memory.service import MemoryAPI
from acmi_core.store.memory import MemoryStore
from functions.hygiene import S3Sink
from functions.hygiene import handler as hygiene_handler
from functions.runtime import LambdaFunction
from tests.kit import FakeLambdaContext, configured, load_event, run_fresh

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")

DAY = 24 * 3600 * 1000
ENV = {"ACMI_DEFAULT_TENANT": "default"}
SAMPLE = "hygiene.scheduled"
BUCKET = "acmi-archive-example"
# The bucket: a job parameter here; in the template, ACMI_ARCHIVE_URL (its ArchiveBucket).
ARCHIVE = {"archive": f"s3://{BUCKET}/acmi-archive"}
ENTITIES = ("agent:claude", "deal:acme-42")
# agent:claude has memory, so the job visits it; the deal (a webhook entity, timeline
# only) is never visited: its events stay live
WITH_MEMORY = "agent:claude"


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
def handler(store: MemoryStore) -> Iterator[LambdaFunction]:
    yield from configured(hygiene_handler, store, ENV)


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        client = boto3.client("s3")
        client.create_bucket(Bucket=BUCKET)
        # a sink whose client is built inside the mock (the module's is cached per process)
        monkeypatch.setitem(archive_sink.SINKS, "s3", lambda bucket: S3Sink(bucket, lambda: client))
        yield client


def scheduled_ms(event: dict[str, Any]) -> int:
    return JobRun.parse("hygiene", event, now_ms=0).scheduled_ms


def fill(store: MemoryStore, at_ms: int) -> set[bytes]:
    """100 events per entity over the 100 days before ``at_ms``, written a minute ago
    (past the job's settle margin); every stored member."""
    writer = Acmi(store, Settings(), clock=lambda: system_clock() - 60_000 - hy.SETTLE_MS)
    for entity in ENTITIES:
        writer.timeline.extend(
            entity,
            [
                {
                    "ts": at_ms - i * DAY,
                    "source": "user:mikey",
                    "kind": "decision" if i % 10 == 0 else "note",
                    "correlationId": f"{entity}-{i}",
                    "summary": f'day {i}: ünïcode and "quotes"',
                    "payload": {"i": i},
                }
                for i in range(100)
            ],
        )
    MemoryAPI(writer.context).remember(WITH_MEMORY, "archive the old quarters", layer="hot")
    return live(store)


def live(store: MemoryStore) -> set[bytes]:
    acmi = Acmi(store, Settings())
    out: set[bytes] = set()
    for entity in ENTITIES:
        reply = store.execute(("ZRANGE", acmi.keys.timeline(EntityId.parse(entity)), 0, -1))
        assert isinstance(reply, list)
        out |= {m for m in reply if isinstance(m, bytes) and b"memory-audit" not in m}
    return out


def archived(s3: Any) -> list[bytes]:
    lines: list[bytes] = []
    for item in s3.list_objects_v2(Bucket=BUCKET).get("Contents", []):
        body = s3.get_object(Bucket=BUCKET, Key=item["Key"])["Body"].read()
        lines += archive_sink.split_jsonl(body)
    return lines


def invoke(handler: LambdaFunction, event: dict[str, Any]) -> dict[str, Any]:
    result = handler(dict(event), FakeLambdaContext("acmi-hygiene"))
    assert isinstance(result, dict)
    return result


def test_the_handler_registers_s3_and_imports_no_sdk() -> None:
    assert archive_sink.SINKS["s3"] is S3Sink
    loaded = run_fresh(
        "import json, sys, functions.hygiene as h; "
        "print(json.dumps({'boto3': 'boto3' in sys.modules, 'name': h.handler.spec.name}))",
        {},
    )
    assert loaded == {"boto3": False, "name": "hygiene"}  # boto3 waits for the first archive


def test_the_sample_archives_to_s3_and_keeps_every_event(
    handler: LambdaFunction, store: MemoryStore, s3: Any
) -> None:
    event = {**load_event(SAMPLE), **ARCHIVE}
    at = scheduled_ms(event)
    before = fill(store, at)
    result = invoke(handler, event)
    assert result["job"] == "hygiene" and result["execution_id"] == event["execution_id"]
    assert result["problems"] == [] and result["archive"] == event["archive"]
    assert result["visited"] == 1 and result["archived_entities"] == 1
    older = {
        m
        for m in before
        if int(m.split(b'"ts":')[1].split(b",")[0]) < at - 30 * DAY
        and b'"correlationId":"agent:claude-' in m
    }
    assert (
        result["events_trimmed"] == result["events_archived"] == len(older) == 69
    )  # days 31-99 of the entity with memory

    lines = archived(s3)
    after = live(store)
    assert len(lines) == len(set(lines)) == len(older)  # each once
    assert set(lines) == older and not set(lines) & after  # byte for byte, not in both
    assert after | set(lines) == before  # nothing lost
    assert sum(len(m) for m in before) == sum(len(m) for m in after) + sum(len(x) for x in lines)

    # one object per entity and quarter, its count and SHA-256 as metadata (the upload's
    # ChecksumSHA256 is checked by S3 itself; moto 5 neither checks nor keeps it)
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"])
    assert keys[0].startswith("acmi-archive/default/agent:claude/2026-Q")
    assert all(k.endswith(".jsonl") for k in keys)
    head = s3.head_object(Bucket=BUCKET, Key=keys[0])
    body = s3.get_object(Bucket=BUCKET, Key=keys[0])["Body"].read()
    digest = hashlib.sha256(body).hexdigest()
    assert head["Metadata"] == {"acmi-count": str(body.count(b"\n")), "acmi-sha256": digest}

    # the quarter's archive documents, and the archived events read back for search
    acmi = Acmi(store, Settings())
    docs = quarterly.archive_documents(acmi, "agent:claude")
    assert docs and all("archive.summary" in d for d in docs.values())
    dest, _ = archive_sink.open_destination(event["archive"])
    assert dest is not None
    back = [e for q in docs for e in archive_sink.archived_events(acmi, dest, "agent:claude", q)]
    assert len(back) == 69 and all(e.correlationId.startswith("agent:claude-") for e in back)

    again = invoke(handler, event)
    assert again["replayed"] is True and archived(s3) == lines and live(store) == after


def test_the_sample_without_a_bucket_trims_nothing(
    handler: LambdaFunction, store: MemoryStore
) -> None:
    event = load_event(SAMPLE)
    before = fill(store, scheduled_ms(event))
    result = invoke(handler, event)
    assert result["archive"] is None and result["problems"] == []
    assert result["events_trimmed"] == 0 and result["documents"] >= 1
    assert live(store) == before


def test_a_bucket_s3_refuses_trims_nothing(
    handler: LambdaFunction, store: MemoryStore, s3: Any
) -> None:
    event = {**load_event(SAMPLE), "archive": "s3://no-such-bucket/x", "execution_id": "nb-1"}
    before = fill(store, scheduled_ms(event))
    result = invoke(handler, event)
    assert result["events_trimmed"] == 0 and live(store) == before
    assert any("S3 GetObject NoSuchBucket" in p for p in result["problems"])


def test_bad_parameters_are_refused_naming_the_field(handler: LambdaFunction) -> None:
    from acmi_core import AcmiValidationError

    with pytest.raises(AcmiValidationError, match="archive"):
        invoke(handler, {**load_event(SAMPLE), "archive": "bucket-without-scheme"})
