"""The remote embedding providers of memory search: ``bedrock:<model-id>`` (Titan text
embeddings v2, registered by functions/memory.py) on a real boto3 client under botocore's
Stubber, and ``openai:<model>`` against a fake OpenAI-compatible server on 127.0.0.1.
Each writes its vectors with the line, finds a paraphrase through them, and a provider
that fails leaves the line stored (unindexed) and the search keyword-only, saying why."""

from __future__ import annotations

import io
import json
import sys
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber

from acmi_core import Acmi, Settings
from acmi_core.base.keys import MEMORY_VECTORS
from acmi_core.base.model import EntityId
from acmi_core.memory.embeddings import digest, embedder_for
from acmi_core.store.memory import MemoryStore
from functions.memory import DIMENSIONS, bedrock_client

MODEL = "amazon.titan-embed-text-v2:0"
OWNER = "agent:atlas"
LINE = "Priya heads the finance squad and signs off every invoice run"
OTHER = "The office plants are watered on Fridays"
QUERY = "who approves billing"


def fake_vector(text: str) -> list[float]:
    """What the fake providers answer: the bundled model's own vector (so a paraphrase
    lands near its line), padded to the asked dimensions."""
    local = embedder_for(Settings(embeddings="wordllama"))
    assert local is not None
    return [float(x) for x in local.embed([text])[0]]


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Iterator[Any]:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "eu-west-1",
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
        "AWS_EC2_METADATA_DISABLED": "true",
    }.items():
        monkeypatch.setenv(name, value)
    bedrock_client.cache_clear()
    yield bedrock_client()
    bedrock_client.cache_clear()


# the heading a remembered line is embedded after (MEMORY.md's default section)
LESSONS = "Lessons Learned"


def titan(stub: Stubber, text: str) -> None:
    body = json.dumps({"embedding": fake_vector(text), "inputTextTokenCount": 9}).encode()
    stub.add_response(
        "invoke_model",
        {"body": StreamingBody(io.BytesIO(body), len(body)), "contentType": "application/json"},
        {
            "modelId": MODEL,
            "body": json.dumps({"inputText": text, "dimensions": DIMENSIONS, "normalize": True}),
            "contentType": "application/json",
            "accept": "application/json",
        },
    )


def vectors(acmi: Acmi) -> dict[bytes, bytes]:
    reply = acmi.store.execute(("HGETALL", acmi.keys.slot(EntityId.parse(OWNER), MEMORY_VECTORS)))
    assert isinstance(reply, list)
    return dict(zip(reply[::2], reply[1::2], strict=True))


def test_bedrock_titan_embeds_at_write_and_search(client: Any) -> None:
    acmi = Acmi(MemoryStore(), Settings(embeddings=f"bedrock:{MODEL}"))
    with Stubber(client) as stub:
        # a line is embedded after its section's heading (MEMORY.md's Lessons Learned)
        titan(stub, f"{LESSONS}: {OTHER}")
        acmi.memory.remember(OWNER, OTHER)
        titan(stub, f"{LESSONS}: {LINE}")
        acmi.memory.remember(OWNER, LINE)
        titan(stub, QUERY)  # the search embeds the query only: both lines are indexed
        found = acmi.memory.search(OWNER, QUERY, limit=1)
        stub.assert_no_pending_responses()
    assert digest(f"bedrock:{MODEL}", f"{LESSONS}: {LINE}").encode() in vectors(acmi)
    assert found["semantic"] == {"provider": f"bedrock:{MODEL}", "indexed": 2, "embedded": 0}
    assert found["hits"][0]["text"] == f"- {LINE}"


def test_a_bedrock_failure_stores_the_line_and_searches_by_words(client: Any) -> None:
    acmi = Acmi(MemoryStore(), Settings(embeddings=f"bedrock:{MODEL}"))
    line = f"{LINE} ({uuid.uuid4().hex})"  # a line no earlier test embedded (a warm cache)
    with Stubber(client) as stub:
        stub.add_client_error("invoke_model", "ThrottlingException", http_status_code=429)
        acmi.memory.remember(OWNER, line)
        stub.add_client_error("invoke_model", "AccessDeniedException", http_status_code=403)
        found = acmi.memory.search(OWNER, "invoice")
    assert vectors(acmi) == {}
    assert found["semantic"]["error"] == f"bedrock:{MODEL}: Bedrock AccessDeniedException"
    assert [h["text"] for h in found["hits"]] == [f"- {line}"]


class _OpenAI(BaseHTTPRequestHandler):
    calls: list[dict[str, Any]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).calls.append({"path": self.path, "auth": self.headers["Authorization"], **body})
        data = [{"index": i, "embedding": fake_vector(t)} for i, t in enumerate(body["input"])]
        answer = json.dumps({"data": list(reversed(data)), "model": body["model"]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def openai_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _OpenAI)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _OpenAI.calls = []
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_openai_compatible_embeddings(openai_url: str) -> None:
    model = f"bge-small-{uuid.uuid4().hex[:6]}"  # a fresh embedder: built once a process
    settings = Settings(
        embeddings=f"openai:{model}", embeddings_base_url=openai_url, openai_api_key="sk-test"
    )
    acmi = Acmi(MemoryStore(), settings)
    acmi.memory.remember(OWNER, OTHER)
    acmi.memory.remember(OWNER, LINE)
    found = acmi.memory.search(OWNER, QUERY, limit=1)
    assert found["hits"][0]["text"] == f"- {LINE}"
    assert found["semantic"]["provider"] == f"openai:{model}"
    assert digest(f"openai:{model}", f"{LESSONS}: {LINE}").encode() in vectors(acmi)
    calls = _OpenAI.calls
    assert [c["path"] for c in calls] == ["/v1/embeddings"] * 3
    assert calls[-1]["input"] == [QUERY] and calls[0]["auth"] == "Bearer sk-test"
    field = digest(f"openai:{model}", f"{LESSONS}: {LINE}").encode()
    stored = np.frombuffer(vectors(acmi)[field], np.uint8)
    assert len(stored) == 256


def test_an_unreachable_openai_server_leaves_keyword_search() -> None:
    settings = Settings(embeddings="openai:none-such", embeddings_base_url="http://127.0.0.1:9/v1")
    acmi = Acmi(MemoryStore(), settings)
    line = f"{LINE} ({uuid.uuid4().hex})"
    acmi.memory.remember(OWNER, line)
    found = acmi.memory.search(OWNER, "invoice")
    assert vectors(acmi) == {}
    assert found["semantic"]["error"] == "openai:none-such: ConnectError"
    assert [h["text"] for h in found["hits"]] == [f"- {line}"]


@pytest.mark.parametrize("provider", [f"bedrock:{MODEL}", "openai:any", "wordllama"])
def test_without_numpy_a_line_is_stored_and_searched_by_its_words(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A core install (no numpy; the memory Lambda's artifact ships it) with embeddings chosen:
    remember stores the line unindexed, search ranks by BM25 and names what is missing."""
    monkeypatch.setitem(sys.modules, "numpy", None)  # `import numpy` raises, as uninstalled
    acmi = Acmi(MemoryStore(), Settings(embeddings=provider))
    line = f"{LINE} ({uuid.uuid4().hex})"
    acmi.memory.remember(OWNER, line)
    found = acmi.memory.search(OWNER, "invoice")
    assert vectors(acmi) == {}
    assert found["semantic"]["error"] == (
        f"{provider}: numpy is not installed (pip install 'acmi[semantic]')"
    )
    assert [h["text"] for h in found["hits"]] == [f"- {line}"]
