"""The work events/ samples chained through the real handler: create, then an event with
a session, then get (test_handlers feeds each to a fresh store, where the item does not
exist yet and event/get are 404s)."""

from __future__ import annotations

from tests.e2e.test_handlers import Harness, harness, json_body

__all__ = ["harness"]  # the fixture, used by name below


def test_work_samples_create_post_and_read_back(harness: Harness) -> None:
    created = harness.invoke("work.create")
    assert created["statusCode"] == 201, created.get("body")
    item = json_body(created)
    assert (item["id"], item["owner"], item["status"]) == ("acmi-launch", "agent:bentley", "open")
    assert item["profile"]["owner"] == "bentley"  # kept as the reference writes it
    again = harness.invoke("work.create")
    assert again["statusCode"] == 409 and json_body(again)["field"] == "id"
    posted = harness.invoke("work.event")
    assert posted["statusCode"] == 201, posted.get("body")
    assert json_body(posted)["session_id"] == "sess-2026-11-29-bentley-01"
    got = harness.invoke("work.get")
    assert got["statusCode"] == 200, got.get("body")
    body = json_body(got)
    assert body["sessions"] == ["sess-2026-11-29-bentley-01"]
    assert [e["correlationId"] for e in body["timeline"]] == ["acmi-launch-2026-11-29-1"]
    assert body["timeline"][0]["payload"]["next"] == ["README quickstart"]
    assert harness.acmi.work.ids("bentley") == ["acmi-launch"]
