"""Run by bench.throughput in a fresh interpreter (the handler module builds its app from the
environment at import, as a Lambda cold start does):

    python -m bench._ingest_worker N OUT_JSON

feeds ``functions.ingest.handler`` N API Gateway v2 events (events/ingest.n8n.json with a
different body each time, so each is a new delivery, not an idempotent replay) and writes
timings to OUT_JSON. The handler's log lines go to stdout; the caller discards them."""

from __future__ import annotations

import copy
import json
import sys
import time
from pathlib import Path
from typing import Any

from bench._infra import ROOT, median, percentile

ADMIN_KEY = "acmi_local_example_admin_key_0001"
ENTITY = "ticket:zd-18342"


class Context:
    function_name = "acmi-ingest"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:acmi-ingest"
    aws_request_id = "bench-0000"


def base_event() -> dict[str, Any]:
    """events/ingest.n8n.json when present, else an equivalent API Gateway v2 event."""
    path = ROOT / "events" / "ingest.n8n.json"
    if path.exists():
        event: dict[str, Any] = json.loads(path.read_text())
        return event
    return {
        "version": "2.0",
        "routeKey": "POST /v1/ingest/{source}",
        "rawPath": "/v1/ingest/n8n",
        "rawQueryString": f"entity={ENTITY.replace(':', '%3A')}",
        "headers": {
            "authorization": f"Bearer {ADMIN_KEY}",
            "content-type": "application/json",
            "host": "bench.execute-api.us-east-1.amazonaws.com",
            "user-agent": "axios/1.8.3",
        },
        "queryStringParameters": {"entity": ENTITY},
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "bench",
            "domainName": "bench.execute-api.us-east-1.amazonaws.com",
            "domainPrefix": "bench",
            "http": {
                "method": "POST",
                "path": "/v1/ingest/n8n",
                "protocol": "HTTP/1.1",
                "sourceIp": "127.0.0.1",
                "userAgent": "axios/1.8.3",
            },
            "requestId": "bench",
            "routeKey": "POST /v1/ingest/{source}",
            "stage": "$default",
            "time": "29/Nov/2026:18:42:07 +0000",
            "timeEpoch": 1795977727311,
        },
        "pathParameters": {"source": "n8n"},
        "body": json.dumps({"event": "ticket.created", "id": "ZD-18342", "subject": "bench"}),
        "isBase64Encoded": False,
    }


def variant(template: dict[str, Any], seq: int) -> dict[str, Any]:
    event = copy.deepcopy(template)
    body = json.loads(event["body"])
    body["seq"] = seq  # a new body: a new delivery (n8n bodies are their own idempotency key)
    event["body"] = json.dumps(body)
    event["headers"]["content-length"] = str(len(event["body"]))
    event["requestContext"]["requestId"] = f"bench-{seq}"
    return event


def main() -> None:
    n, out = int(sys.argv[1]), Path(sys.argv[2])
    start = time.perf_counter()
    import functions.ingest as fn

    import_s = time.perf_counter() - start
    template = base_event()
    entity = (template.get("queryStringParameters") or {}).get("entity", ENTITY)
    events = [variant(template, seq) for seq in range(n + 20)]
    context = Context()
    first = time.perf_counter()
    status = fn.handler(events[0], context)["statusCode"]
    first_s = time.perf_counter() - first
    statuses = {status: 1}
    for event in events[1:20]:  # warm-up, untimed
        s = fn.handler(event, context)["statusCode"]
        statuses[s] = statuses.get(s, 0) + 1
    latencies: list[float] = []
    begin = time.perf_counter()
    for event in events[20:]:
        t0 = time.perf_counter()
        s = fn.handler(event, context)["statusCode"]
        latencies.append(time.perf_counter() - t0)
        statuses[s] = statuses.get(s, 0) + 1
    elapsed = time.perf_counter() - begin
    stored = fn.app.state.acmi.acmi.timeline.size(entity)
    out.write_text(
        json.dumps(
            {
                "n": n,
                "store": fn.app.state.acmi.acmi.store.name,
                "import_s": import_s,
                "first_invocation_s": first_s,
                "elapsed_s": elapsed,
                "events_per_s": n / elapsed,
                "p50_ms": median(latencies) * 1000,
                "p99_ms": percentile(latencies, 99) * 1000,
                "statuses": {str(k): v for k, v in statuses.items()},
                "stored": stored,
                "expected_stored": n + 20,
            }
        )
    )


if __name__ == "__main__":
    main()
