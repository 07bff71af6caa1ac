"""Example 06: a Vapi voice agent's server URL. During a call, the assistant's
`get_status_report` tool reads the project's `status_report` signal (example 03 writes it)
and speaks it; every server message (tool calls, status updates, the end-of-call report)
goes to ACMI's `vapi` webhook source, which writes the call on the caller's timeline
(`vapi-customer:<number>`, or VAPI_ENTITY) and on the call's own (`vapi-call:<id>`).

    export ACMI_API_URL=http://127.0.0.1:8000 ACMI_API_KEY=<write key> VAPI_SECRET=<secret>
    python examples/06_vapi.py          # listens on 127.0.0.1:8787 (VAPI_PORT)

In Vapi, set the assistant's Server URL to where this listens (a tunnel, or your host) with
an X-Vapi-Secret custom credential holding VAPI_SECRET, its server messages to
end-of-call-report, status-update and tool-calls, and add a function tool
`get_status_report` with an `entity` string argument. Without tools, Vapi can post straight
to `<ApiUrl>v1/ingest/vapi`, with a Bearer Token credential holding an ACMI write key, or
`?token=<push token>` (`acmi sources set vapi --push-token`).
"""

from __future__ import annotations

import hmac
import json
import os
import sys
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx


def acmi_client() -> httpx.Client:
    url = os.environ.get("ACMI_API_URL", "http://127.0.0.1:8000").rstrip("/")
    key = os.environ["ACMI_API_KEY"]
    return httpx.Client(base_url=url, headers={"authorization": f"Bearer {key}"}, timeout=10)


def status_report(acmi: httpx.Client, entity: str) -> str:
    """What the assistant says when asked how ``entity`` is doing."""
    # The caller's model chose ``entity``: quoted, it stays one path segment.
    path = urllib.parse.quote(entity, safe=":")
    found = acmi.get(f"/v1/entities/{path}/signals/status_report")
    if found.status_code in (400, 404):  # no report yet, or not an entity id
        return f"I have no status report for {entity} yet."
    found.raise_for_status()
    value = found.json()["value"]
    summary = value.get("summary") if isinstance(value, dict) else value
    return str(summary)


def handle(acmi: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    """One server message in, Vapi's expected answer out (``results`` for tool calls)."""
    message = body.get("message") or {}
    answer: dict[str, Any] = {}
    if message.get("type") == "tool-calls":
        results = []
        for call in message.get("toolCallList") or []:
            function = call.get("function") or {}
            arguments = function.get("arguments") or {}
            if isinstance(arguments, str):  # some models send the arguments as JSON text
                arguments = json.loads(arguments or "{}")
            if function.get("name") == "get_status_report":
                result = status_report(acmi, str(arguments.get("entity", "")))
            else:
                result = f"unknown tool {function.get('name')!r}"
            results.append({"toolCallId": call.get("id"), "result": result})
        answer = {"results": results}
    if message.get("type") in ("tool-calls", "status-update", "end-of-call-report"):
        entity = os.environ.get("VAPI_ENTITY")
        # The raw message as Vapi sent it: ACMI's vapi source maps it, and stores a
        # message Vapi delivers twice once.
        acmi.post(
            "/v1/ingest/vapi", params={"entity": entity} if entity else None, json=body
        ).raise_for_status()
    return answer


def make_server(acmi: httpx.Client, port: int) -> ThreadingHTTPServer:
    secret = os.environ.get("VAPI_SECRET", "")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            given = self.headers.get("x-vapi-secret", "")
            if secret and not hmac.compare_digest(given.encode(), secret.encode()):
                self.send_error(401, "bad X-Vapi-Secret")
                return
            body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
            data = json.dumps(handle(acmi, body)).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return ThreadingHTTPServer(("127.0.0.1", port), Handler)


def main() -> int:
    server = make_server(acmi_client(), int(os.environ.get("VAPI_PORT", "8787")))
    print(f"Vapi server URL handler on http://127.0.0.1:{server.server_address[1]}")
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
