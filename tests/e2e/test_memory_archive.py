"""Archive now (issue 13): `acmi memory archive` (the CLI's main(), which loads the S3 sink
module by name) and `POST /v1/memory/{entity}/archive` (the memory router, the sink the
memory function registers, ACMI_ARCHIVE_URL only) against S3 under moto (mock_aws): the
object written and verified, the timeline trimmed, every event in S3 or Redis exactly
once; then `memory search` finds a phrase that only an archived (trimmed) event holds. No
bucket: documents written, nothing trimmed. The lease, bad input, a read key, round trips."""

from __future__ import annotations

import datetime as dt
import importlib
import json
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from acmi_core import Acmi, Settings, create_acmi
from acmi_core.base.keys import MEMORY_ARCHIVE
from acmi_core.base.model import EntityId
from acmi_core.cli import main
from acmi_core.jobs import quarterly
from acmi_core.jobs import sink as archive_sink
from acmi_core.jobs.archive import archive_now, archived_reader
from acmi_core.memory.service import MemoryAPI
from acmi_core.memory.slots import entry_event
from acmi_core.store import open_store
from acmi_core.store.counting import CountingStore
from acmi_core.store.memory import MemoryStore
from acmi_core.testing.redis_server import RedisServer
from tests.kit import DB, FakeClock, RouteClient, assert_error, fresh_tenant, run_fresh

DAY = 24 * 3600 * 1000
BUCKET = "acmi-archive-test"
URL = f"s3://{BUCKET}/acmi-archive"
ENTITY = "agent:atlas"
# in one line of an old daily note; once trimmed, only the archived raw events hold it
PHRASE = "quokka handshake protocol"
NOW = 1_790_000_000_000  # 2026-09-21, the routes' fake clock


def timeline(now: int) -> list[dict[str, Any]]:
    """100 events, one a day back from ``now``, and two lines of the daily note 60 days
    old: the first holds PHRASE, the second (newer, same kind) is what an archive
    document quotes of that kind, so the phrase is in no document."""
    day = dt.datetime.fromtimestamp((now - 60 * DAY) / 1000, dt.UTC).date()
    note = [
        entry_event(day, at, text, source="user:mikey").to_dict()
        for at, text in (("09:00", f"we agreed the {PHRASE}"), ("10:00", "routine standup"))
    ]
    return note + [
        {
            "ts": now - i * DAY,
            "source": "user:mikey",
            "kind": "decision" if i % 10 == 0 else "note",
            "correlationId": f"c-{i}",
            "summary": f'day {i}: ünïcode and "quotes"',
            "payload": {"i": i},
        }
        for i in range(100)
    ]


def members(acmi: Acmi) -> list[bytes]:
    reply = acmi.store.execute(("ZRANGE", acmi.keys.timeline(EntityId.parse(ENTITY)), 0, -1))
    assert isinstance(reply, list)
    return [m for m in reply if isinstance(m, bytes)]


def archived_lines(s3: Any) -> list[bytes]:
    lines: list[bytes] = []
    for item in s3.list_objects_v2(Bucket=BUCKET).get("Contents", []):
        lines += archive_sink.split_jsonl(
            s3.get_object(Bucket=BUCKET, Key=item["Key"])["Body"].read()
        )
    return lines


def assert_each_once(before: list[bytes], live: list[bytes], cold: list[bytes]) -> None:
    """Every event in Redis or S3, byte for byte, exactly once."""
    assert len(live) + len(cold) == len(before)
    assert sorted(live + cold) == sorted(before)
    assert not set(live) & set(cold)


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A moto bucket, and no s3 sink registered: whoever uses one must load it (the CLI by
    name; the memory function by importing functions.sinks.s3), its client built inside
    the mock. The sink and module registry are put back afterwards."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delitem(archive_sink.SINKS, "s3", raising=False)
    for module in ("functions.sinks.s3", "functions.memory"):
        monkeypatch.delitem(sys.modules, module, raising=False)
    with mock_aws():
        client = boto3.client("s3")
        client.create_bucket(Bucket=BUCKET)
        yield client


# --- the command ------------------------------------------------------------------------------


@pytest.fixture
def cli_env(redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> Acmi:
    """The CLI's environment on the cli database, and a client of a tenant of its own."""
    for name in ("UPSTASH_REDIS_REST_URL", "UPSTASH_REDIS_REST_TOKEN", "ACMI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("ACMI_ARCHIVE_URL", raising=False)
    monkeypatch.setenv("ACMI_REDIS_URL", redis_server.url_for(DB["cli"]))
    settings = Settings.from_env()
    return create_acmi(open_store(settings), settings, tenant=f"t-{uuid.uuid4().hex[:12]}")


def cli(capsys: pytest.CaptureFixture[str], acmi: Acmi, *argv: str) -> tuple[int, Any, str]:
    code = main(["--tenant", acmi.tenant, "memory", *argv])
    out, err = capsys.readouterr()
    return code, json.loads(out) if out.strip().startswith("{") else out, err


def test_cli_archives_to_s3_and_search_reaches_the_trimmed_event(
    s3: Any, cli_env: Acmi, capsys: pytest.CaptureFixture[str]
) -> None:
    acmi = cli_env
    acmi.timeline.extend(ENTITY, timeline(acmi.clock()))
    before = members(acmi)
    code, found, err = cli(capsys, acmi, "search", ENTITY, PHRASE, "--archive", URL)
    assert code == 0, err
    assert [h["layer"] for h in found["hits"][:1]] == ["daily"]  # live: in its daily note

    code, done, err = cli(capsys, acmi, "archive", ENTITY, "--archive", URL)
    assert code == 0, err
    assert "functions.sinks.s3" in sys.modules and "s3" in archive_sink.SINKS  # loaded by name
    assert done["archive"] == URL and not done["problems"]
    assert done["read"] == done["archived"] == done["trimmed"] >= 71
    assert done["why"].startswith("trimmed once each object was read back and verified")
    assert done["documents"] == [o["quarter"] for o in done["objects"]]
    for obj in done["objects"]:
        assert obj["key"] == f"acmi-archive/{acmi.tenant}/{ENTITY}/{obj['quarter']}.jsonl"
        head = s3.head_object(Bucket=BUCKET, Key=obj["key"])
        assert head["Metadata"] == {"acmi-count": str(obj["count"]), "acmi-sha256": obj["sha256"]}
    live, cold = members(acmi), archived_lines(s3)
    assert_each_once(before, live, cold)
    assert all(json.loads(m)["ts"] >= done["cutoff_ms"] for m in live)

    # the phrase is now only in S3: search finds it there, ranked as the archived layer
    code, found, err = cli(capsys, acmi, "search", ENTITY, *PHRASE.split(), "--archive", URL)
    assert code == 0, err
    hit = found["hits"][0]
    assert hit["layer"] == "archived" and hit["score"] == 1.0 and PHRASE in hit["text"]
    assert hit["path"].startswith("memory/archive/") and hit["path"].endswith(".jsonl")
    assert found["order"][-2:] == ["cold", "archived"]
    code, without, _ = cli(capsys, acmi, "search", ENTITY, *PHRASE.split())
    assert code == 0 and all(PHRASE not in h["text"] for h in without["hits"])

    # again: nothing older left, nothing written twice
    code, again, _ = cli(capsys, acmi, "archive", ENTITY, "--archive", URL)
    assert code == 0 and again["read"] == 0 and again["why"].startswith("no events older")
    assert_each_once(before, members(acmi), archived_lines(s3))


def test_cli_without_a_bucket_writes_documents_and_trims_nothing(
    cli_env: Acmi, capsys: pytest.CaptureFixture[str]
) -> None:
    acmi = cli_env
    acmi.timeline.extend(ENTITY, timeline(acmi.clock()))
    before = members(acmi)
    code, done, err = cli(capsys, acmi, "archive", ENTITY, "--retention-days", "45")
    assert code == 0, err
    assert done["archive"] is None and done["trimmed"] == 0 and done["objects"] == []
    assert done["documents"] and "nothing trimmed" in done["why"]
    assert members(acmi) == before
    docs = quarterly.archive_documents(acmi, ENTITY)
    assert sorted(docs) == done["documents"]
    # the documents' quarters have no raw object: search reads no sink for them
    assert "archived" not in {
        h["layer"] for h in MemoryAPI(acmi.context).search(ENTITY, "day")["hits"]
    }

    code, _, err = cli(capsys, acmi, "archive", ENTITY, "--retention-days", "0")
    assert code == 2 and "error: retention_days:" in err
    code, _, err = cli(capsys, acmi, "archive", ENTITY, "--archive", "not a url")
    assert code == 2 and "error: archive:" in err


def test_the_cli_loads_the_s3_sink_by_name_only_for_an_s3_url(redis_server: RedisServer) -> None:
    """No static import of functions/: without an archive URL none is loaded; with an s3
    one, functions.sinks.s3 is (and boto3 only once an object is read or written)."""
    loaded = run_fresh(
        "import json, sys, contextlib, io\n"
        "from acmi_core.cli import main\n"
        "def mods():\n"
        "    return sorted(m for m in sys.modules if m.startswith(('functions', 'boto3')))\n"
        "seen = {}\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    seen['none'] = (main(['memory', 'archive', 'agent:nobody']), mods())\n"
        "    seen['s3'] = (main(['memory', 'archive', 'agent:nobody', '--archive',"
        " 's3://b/p']), mods())\n"
        "print(json.dumps(seen))",
        {"ACMI_REDIS_URL": redis_server.url_for(DB["cli"])},
    )
    assert loaded == {
        "none": [0, []],
        "s3": [0, ["functions", "functions.sinks", "functions.sinks.s3"]],
    }


# --- the route --------------------------------------------------------------------------------


@pytest.fixture
def http(acmi: Acmi) -> Iterator[RouteClient]:
    """The memory router on every backend, the deployment's ACMI_ARCHIVE_URL set."""
    tenant = fresh_tenant(acmi, FakeClock(NOW))
    settings = acmi.settings.replace(archive_url=URL)
    yield RouteClient(
        Acmi(tenant.store, settings, tenant=tenant.tenant, clock=tenant.clock), "memory"
    )


def test_route_archives_to_the_deployments_bucket(s3: Any, http: RouteClient) -> None:
    memory_function = importlib.import_module("functions.memory")  # registers the sink
    assert archive_sink.SINKS["s3"] is sys.modules["functions.sinks.s3"].S3Sink
    assert memory_function.handler.spec.name == "memory"
    acmi = http.acmi
    acmi.timeline.extend(ENTITY, timeline(NOW))
    before = members(acmi)
    base = f"/v1/memory/{ENTITY}"

    # the caller never chooses where data goes; bad values name the field
    assert_error(http.call("POST", f"{base}/archive", {"archive": "s3://evil/x"}), 400, "archive")
    assert_error(http.call("POST", f"{base}/archive", {"retention_days": 0}), 400, "retention_days")
    assert_error(http.call("POST", f"{base}/archive", {"max_events": "9"}), 400, "max_events")
    assert http.call("POST", f"{base}/archive", {}, scope="read").status_code == 403
    # the hygiene job's lease held: 409, nothing archived
    acmi.store.execute(("SET", acmi.keys.hygiene_lease(), "exec-1", "PX", 60_000))
    assert_error(http.call("POST", f"{base}/archive"), 409, "entity")
    acmi.store.execute(("DEL", acmi.keys.hygiene_lease()))
    assert members(acmi) == before

    response = http.call("POST", f"{base}/archive", {"retention_days": 30, "max_events": 50})
    assert response.status_code == 200, response.text
    done = response.json()
    assert done["archive"] == URL and done["read"] == done["trimmed"] == 50
    assert done["backlog"] is True and "run again" in done["why"]
    done = http.call("POST", f"{base}/archive").json()
    assert done["trimmed"] == 21 and done["backlog"] is False  # days 31..99 + 2 lines
    assert acmi.store.execute(("GET", acmi.keys.hygiene_lease())) is None  # released
    live, cold = members(acmi), archived_lines(s3)
    assert_each_once(before, live, cold)
    assert len(live) == 31  # days 0..30: day 30 is the cutoff itself, not older

    found = http.call("GET", f"{base}/search?q={PHRASE}", scope="read").json()
    assert found["hits"][0]["layer"] == "archived" and PHRASE in found["hits"][0]["text"]
    query = f"q={PHRASE}&archived=false&mode=keyword"
    skipped = http.call("GET", f"{base}/search?{query}", scope="read").json()
    assert skipped["hits"] == []


def test_route_without_a_bucket_trims_nothing(acmi: Acmi) -> None:
    http = RouteClient(fresh_tenant(acmi, FakeClock(NOW)), "memory")  # no ACMI_ARCHIVE_URL
    http.acmi.timeline.extend(ENTITY, timeline(NOW))
    before = members(http.acmi)
    done = http.call("POST", f"/v1/memory/{ENTITY}/archive").json()
    assert done["trimmed"] == 0 and done["documents"] and done["archive"] is None
    assert members(http.acmi) == before
    key = http.acmi.keys.slot(EntityId.parse(ENTITY), MEMORY_ARCHIVE)
    assert http.acmi.store.execute(("HLEN", key)) == len(done["documents"])


# --- round trips ------------------------------------------------------------------------------


class CountingSink:
    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.requests = 0

    def get(self, key: str) -> bytes | None:
        self.requests += 1
        return self.objects.get(key)

    def put(self, key: str, body: bytes, *, sha256: str, count: int) -> None:
        self.requests += 1
        self.objects[key] = body


def test_round_trips() -> None:
    store = CountingStore(MemoryStore())
    acmi = Acmi(store, Settings(), clock=FakeClock(NOW))
    acmi.timeline.extend(ENTITY, timeline(NOW))  # days 30..99: 2 quarters
    sink = CountingSink()
    dest = archive_sink.Destination(sink, "acmi-archive", "mem://b/acmi-archive")
    store.reset()
    done = archive_now(acmi, ENTITY, dest=dest)
    quarters = len(done["objects"])
    assert quarters == 2 and done["trimmed"] == 71
    # lease + oldest page + a trim per quarter (+ the stamps' ZREMRANGE) + release
    assert store.requests == 1 + 1 + 2 * quarters + 1
    assert sink.requests == 3 * quarters  # GET, PUT, GET each
    store.reset()
    sink.requests = 0
    found = MemoryAPI(acmi.context).search(ENTITY, PHRASE, archived=archived_reader(acmi, dest))
    assert found["hits"][0]["layer"] == "archived"
    # one pipeline (no topics linked: no second read), the vector index (hybrid), one
    # sink GET per quarter
    assert store.requests == 1 + 1 and sink.requests == quarters


def test_round_trips_without_a_sink() -> None:
    store = CountingStore(MemoryStore())
    acmi = Acmi(store, Settings(), clock=FakeClock(NOW))
    acmi.timeline.extend(ENTITY, timeline(NOW))
    store.reset()
    done = archive_now(acmi, ENTITY)
    quarters = len(done["documents"])
    assert quarters == 2 and done["trimmed"] == 0
    # heartbeat + 3 per quarter (first event, its window, the document) + backlog + the
    # archived_through signal
    assert store.requests == 1 + 3 * quarters + 1 + 1
    store.reset()
    again = archive_now(acmi, ENTITY)  # documented through the cutoff already
    assert again["documents"] == [] and store.requests == 2  # heartbeat, first event: none
