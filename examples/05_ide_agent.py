"""Example 05: an IDE agent works through a plan under a lock, or defers to whoever holds it.

It reads the project's `plan` signal (`{"resource": "...", "steps": ["...", ...]}`),
claims the plan's resource (a lease with a fencing token), runs each step (here: records
it; your agent edits code), heartbeats and renews the lease between steps, and releases it.
If another agent holds the lease the claim answers 409 (rule `held`): the agent defers and
does nothing; the claim itself posted `coord-defer` to `thread:agent-coordination`.

    export ACMI_API_URL=http://127.0.0.1:8000 ACMI_API_KEY=<key>
    acmi signal project website --merge \
      '{"plan": {"resource": "work:website-pricing", "steps": ["copy", "deploy"]}}'
    python examples/05_ide_agent.py project:website
"""

from __future__ import annotations

import os
import sys

import httpx

AGENT = os.environ.get("ACMI_AGENT", "ide")
TTL_MS = 120_000  # a step longer than this would need a renew inside it


def acmi_client() -> httpx.Client:
    url = os.environ.get("ACMI_API_URL", "http://127.0.0.1:8000").rstrip("/")
    key = os.environ["ACMI_API_KEY"]
    return httpx.Client(base_url=url, headers={"authorization": f"Bearer {key}"}, timeout=30)


def execute(step: str, fence: int) -> str:
    """Your agent's work for one step. ``fence`` goes to whatever the step changes, so a
    holder that outlived its lease can be refused there."""
    return f"done: {step} (fence {fence})"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    project = args[0] if args else "project:website"
    acmi = acmi_client()
    found = acmi.get(f"/v1/entities/{project}/signals/plan")
    if found.status_code == 404:
        print(f"{project} has no plan signal", file=sys.stderr)
        return 1
    found.raise_for_status()
    plan = found.json()["value"]
    resource, steps = plan["resource"], list(plan["steps"])
    owner = f"agent:{AGENT}"

    claim = acmi.post(f"/v1/locks/{resource}/claim", json={"owner": owner, "ttl_ms": TTL_MS})
    if claim.status_code == 409:  # held by another agent: defer, touch nothing
        print(f"deferring: {claim.json()['message']}")
        acmi.post(f"/v1/agents/{AGENT}/heartbeat", json={"status": "IDLE", "note": "deferred"})
        return 0
    claim.raise_for_status()
    lease = claim.json()
    token, fence = lease["owner_token"], lease["fence"]
    try:
        for number, step in enumerate(steps, 1):
            result = execute(step, fence)
            acmi.post(
                f"/v1/entities/{project}/events",
                json={
                    "source": owner,
                    "kind": "step-done",
                    "correlationId": f"{resource}-f{fence}-s{number}",
                    "summary": result[:500],
                    "step": step,
                    "fence": fence,
                },
            ).raise_for_status()
            acmi.post(
                f"/v1/agents/{AGENT}/heartbeat",
                json={"status": "ACTIVE", "note": f"{resource}: step {number}/{len(steps)}"},
            ).raise_for_status()
            acmi.post(
                f"/v1/locks/{resource}/renew", json={"owner_token": token, "ttl_ms": TTL_MS}
            ).raise_for_status()
    finally:  # released even when a step fails, so the next agent need not wait the TTL
        acmi.post(f"/v1/locks/{resource}/release", json={"owner_token": token})
    acmi.post(f"/v1/agents/{AGENT}/heartbeat", json={"status": "IDLE"}).raise_for_status()
    print(f"{resource}: {len(steps)} steps done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
