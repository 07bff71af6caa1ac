"""Run by bench.throughput in a fresh interpreter (the handler reads its environment and
builds its app as a Lambda cold start does):

    python -m bench._ingest_worker N OUT_JSON

feeds ``functions.ingest.handler`` N API Gateway v2 events (events/ingest.n8n.json with a
different body each time, so each is a new delivery, not an idempotent replay) and writes
timings to OUT_JSON. The handler's log lines go to stdout; the caller discards them."""

from __future__ import annotations

import copy
import json
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from acmi_core import Acmi, Settings, open_store
from acmi_core.auth.apikeys import register
from bench._infra import ROOT, median, percentile

ADMIN_KEY = "acmi_local_example_admin_key_0001"
ENTITY = "ticket:zd-18342"


WARMUP = 20  # calls before the clock starts (the first one is timed on its own)

# events/ingest.n8n.json's shape, for checkouts without it
FALLBACK_EVENT: dict[str, Any] = {
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


class Context:
    function_name = "acmi-ingest"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:acmi-ingest"
    aws_request_id = "bench-0000"


Handler = Callable[[dict[str, Any], Context], dict[str, Any]]


def base_event() -> dict[str, Any]:
    path = ROOT / "events" / "ingest.n8n.json"
    if path.exists():
        event: dict[str, Any] = json.loads(path.read_text())
        return event
    return copy.deepcopy(FALLBACK_EVENT)


def variant(template: dict[str, Any], seq: int) -> dict[str, Any]:
    event = copy.deepcopy(template)
    body = json.loads(event["body"])
    body["seq"] = seq  # a new body: a new delivery (n8n bodies are their own idempotency key)
    event["body"] = json.dumps(body)
    event["headers"]["content-length"] = str(len(event["body"]))
    event["requestContext"]["requestId"] = f"bench-{seq}"
    return event


def drive(handler: Handler, events: list[dict[str, Any]]) -> dict[str, Any]:
    """The first call, WARMUP - 1 more untimed, then the rest timed one by one."""
    context, statuses = Context(), Counter[str]()
    first = time.perf_counter()
    status = handler(events[0], context)["statusCode"]
    first_s = time.perf_counter() - first
    statuses[str(status)] += 1
    for event in events[1:WARMUP]:
        statuses[str(handler(event, context)["statusCode"])] += 1
    latencies: list[float] = []
    begin = time.perf_counter()
    for event in events[WARMUP:]:
        t0 = time.perf_counter()
        status = handler(event, context)["statusCode"]
        latencies.append(time.perf_counter() - t0)
        statuses[str(status)] += 1
    elapsed = time.perf_counter() - begin
    return {
        "first_invocation_s": first_s,
        "elapsed_s": elapsed,
        "events_per_s": len(latencies) / elapsed,
        "p50_ms": median(latencies) * 1000,
        "p99_ms": percentile(latencies, 99) * 1000,
        "statuses": dict(statuses),
    }


def main() -> None:
    n, out = int(sys.argv[1]), Path(sys.argv[2])
    start = time.perf_counter()
    import functions.ingest as fn

    import_s = time.perf_counter() - start
    # The handler builds its app on its first call; it gets our store, so that we can
    # count what it kept (an embedded store lives only in this process).
    settings = Settings.from_env()
    acmi = Acmi(open_store(settings), settings)
    # The sample events' key, provisioned as an operator provisions one (a real store
    # refuses the public sample key as ACMI_API_KEY); not part of the timed invocations.
    register(
        acmi.store, ADMIN_KEY, tenant=settings.default_tenant, scope="admin", name="bench", now_ms=0
    )
    fn.handler.configure(store=acmi.store)
    template = base_event()
    entity = (template.get("queryStringParameters") or {}).get("entity", ENTITY)
    timings = drive(fn.handler, [variant(template, seq) for seq in range(n + WARMUP)])
    result = {
        "n": n,
        "store": acmi.store.name,
        "import_s": import_s,
        **timings,
        "stored": acmi.timeline.size(entity),
        "expected_stored": n + WARMUP,
    }
    out.write_text(json.dumps(result))


if __name__ == "__main__":
    main()
