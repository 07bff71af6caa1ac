"""Wake slots and the wake tick (acmi_core.jobs.wake) on every backend, on a fake clock: the
slot as data (profile + due index, one step), bad input storing nothing, the tick waking
only the due agents (spawn + bundle in one request, wake-status, the next slot), once per
(agent, slot), silence with pending work escalated once, webhook delivery (signed,
retried, timed out, redirects and private addresses refused) through httpx.MockTransport,
the round trips per agent woken, and the O(changed) proof."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from acmi_core import Acmi, Settings
from acmi_core.auth.signatures import SignatureRejected, verify_signature
from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.keys import COORDINATION_THREAD
from acmi_core.coordination.wake import HOUR_MS, next_due, url_allowed
from acmi_core.jobs.deliver import (
    DELIVERERS,
    WEBHOOK_TIMEOUT_S,
    WebhookDeliverer,
    tenant_wake_secret,
)
from acmi_core.jobs.runner import JobRun, run_job
from acmi_core.jobs.wake import run
from tests.kit import START, FakeClock, fresh_tenant

MINUTE = 60_000
PUBLIC = ["93.184.216.34"]
DEPLOYMENT_SECRET = "the-deployment-wake-secret-0001"  # ACMI_WAKE_SECRET
SECRET = "wake-secret-0001"  # what the job hands the deliverer in the direct tests below
HOOK = {"type": "webhook", "url": "https://agent.example/wake"}
SIGNED = {**HOOK, "secret": SECRET}  # the target as the job gives it to the deliverer
WAKE_SETTINGS = Settings(
    wake_secret=DEPLOYMENT_SECRET,
    wake_allowed_urls="https://agent.example/",
    wake_allowed_buses="agents",
)


@pytest.fixture
def fleet(acmi: Acmi, clock: FakeClock) -> Acmi:
    """A tenant of its own (the due index is per tenant), at 10:00:00 UTC."""
    clock.now = START - START % HOUR_MS  # on the hour
    tenant = fresh_tenant(acmi, clock).tenant
    return Acmi(acmi.store, WAKE_SETTINGS, tenant=tenant, clock=clock)


def tick(acmi: Acmi, execution_id: str, **params: Any) -> dict[str, Any]:
    run_ = JobRun("wake", execution_id, acmi.clock(), params)
    return run_job(acmi, run_, run, clock=time.perf_counter)


def wake_events(acmi: Acmi) -> list[dict[str, Any]]:
    events = acmi.timeline.read(COORDINATION_THREAD)
    return [e.to_dict() for e in events if e.kind == "wake-status"]


Handler = Callable[[httpx.Request], httpx.Response]


class Hook:
    """A webhook receiver behind httpx.MockTransport: records requests, answers with
    the statuses given in turn (an exception instance is raised instead)."""

    def __init__(self, *answers: int | Exception) -> None:
        self.answers = list(answers) or [200]
        self.requests: list[httpx.Request] = []
        self.sleeps: list[float] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        headers = {"Location": "https://elsewhere.example/"} if 300 <= answer < 400 else {}
        return httpx.Response(answer, headers=headers)

    def deliverer(self, **kw: Any) -> WebhookDeliverer:
        options: dict[str, Any] = {
            "transport": httpx.MockTransport(self),
            "resolve": lambda host, port: PUBLIC,
            "sleep": self.sleeps.append,
        }
        options.update(kw)
        return WebhookDeliverer(**options)


@pytest.fixture
def hook(monkeypatch: pytest.MonkeyPatch) -> Iterator[Hook]:
    receiver = Hook()
    monkeypatch.setitem(DELIVERERS, "webhook", receiver.deliverer())
    yield receiver


# ---- the slot --------------------------------------------------------------------------


def test_next_due_is_the_first_slot_after() -> None:
    ten = 1_796_032_800_000  # 2026-11-30T10:00:00Z
    assert next_due(ten, 15, 1) == ten + 15 * MINUTE
    assert next_due(ten + 15 * MINUTE, 15, 1) == ten + HOUR_MS + 15 * MINUTE  # strictly after
    assert next_due(ten + 20 * MINUTE, 15, 1) == ten + HOUR_MS + 15 * MINUTE
    # every 6 hours: 00:15, 06:15, 12:15, 18:15 UTC
    assert next_due(ten, 15, 6) == ten + 2 * HOUR_MS + 15 * MINUTE
    assert next_due(ten, 0, 24) == ten + 14 * HOUR_MS  # midnight UTC


def test_set_stores_the_slot_and_the_due_time_in_one_step(fleet: Acmi, clock: FakeClock) -> None:
    fleet.profile.merge("agent:claude", {"model_id": "opus-4", "role": "reviewer"})
    slot = fleet.wake.set("claude", minute=15, every_hours=2, target=HOOK)
    assert slot == {
        "agent": "agent:claude",
        "minute": 15,
        "every_hours": 2,
        "target": HOOK,
        "next_due": clock.now + 15 * MINUTE,
    }
    profile = fleet.profile.get("agent:claude")
    assert profile is not None
    assert profile["wake"] == {"minute": 15, "every_hours": 2, "target": HOOK}
    assert profile["role"] == "reviewer"  # the rest of the profile kept
    assert fleet.wake.next("claude") == clock.now + 15 * MINUTE
    fleet.wake.clear("claude")
    assert fleet.wake.next("claude") is None
    assert "wake" not in (fleet.profile.get("agent:claude") or {})


def test_a_deleted_agent_leaves_the_wake_index(fleet: Acmi) -> None:
    """acmi.delete takes the agent out of the due-time index with its slots: no tick
    visits a deleted agent."""
    fleet.wake.set("claude", minute=15)
    assert fleet.wake.next("claude") is not None
    fleet.delete("agent:claude")
    assert fleet.wake.next("claude") is None
    assert fleet.store.execute(("ZSCORE", fleet.keys.wake_due(), "agent:claude")) is None


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"minute": 60}, "minute"),
        ({"minute": -1}, "minute"),
        ({"minute": True}, "minute"),
        ({"minute": 15, "every_hours": 5}, "every_hours"),
        ({"minute": 15, "target": {"type": "sms"}}, "target.type"),
        ({"minute": 15, "target": "https://x.example"}, "target"),
        ({"minute": 15, "target": {**HOOK, "url": "http://agent.example/"}}, "target.url"),
        ({"minute": 15, "target": {**HOOK, "url": "https://u:p@agent.example/"}}, "target.url"),
        (
            {"minute": 15, "target": {**HOOK, "secret_env": "OTHER_TENANTS_SECRET"}},
            "target.secret_env",
        ),
        ({"minute": 15, "target": {**HOOK, "url": "https://elsewhere.example/wake"}}, "target.url"),
        ({"minute": 15, "target": {**HOOK, "secret": "s3cret"}}, "target.secret"),
        ({"minute": 15, "target": {"type": "eventbridge", "bus": "a bus"}}, "target.bus"),
        ({"minute": 15, "target": {"type": "eventbridge", "bus": "elsewhere"}}, "target.bus"),
    ],
)
def test_bad_slots_are_refused_and_store_nothing(
    fleet: Acmi, kwargs: dict[str, Any], field: str
) -> None:
    with pytest.raises(AcmiValidationError) as err:
        fleet.wake.set("claude", **kwargs)
    assert err.value.field == field
    assert fleet.profile.get("agent:claude") is None
    assert fleet.wake.next("claude") is None


def test_the_secret_is_never_stored(fleet: Acmi) -> None:
    fleet.wake.set("claude", minute=15, target=HOOK)
    stored = fleet.store.execute(("GET", fleet.keys.profile(fleet_agent())))
    secret = tenant_wake_secret(DEPLOYMENT_SECRET, fleet.tenant)
    assert isinstance(stored, bytes) and secret.encode() not in stored
    assert DEPLOYMENT_SECRET.encode() not in stored


def fleet_agent() -> Any:
    from acmi_core.coordination.agents import agent_id

    return agent_id("claude")


# ---- the tick --------------------------------------------------------------------------


def test_the_tick_wakes_only_the_due_agents_once_per_slot(fleet: Acmi, clock: FakeClock) -> None:
    fleet.profile.merge("agent:claude", {"model_id": "opus-4"})
    fleet.wake.set("claude", minute=15)
    fleet.wake.set("gpt", minute=45)
    clock.now += 20 * MINUTE  # 10:20: claude (10:15) is due, gpt (10:45) is not
    first = tick(fleet, "e1")
    assert (first["woken"], first["recorded"], first["backlog"]) == (1, 1, 0)
    (wake,) = first["wakes"]
    due = clock.now - 5 * MINUTE
    assert wake == {
        "agent": "agent:claude",
        "due": due,
        "next_due": due + HOUR_MS,
        "delivery": "recorded: no target",
    }
    assert fleet.wake.next("claude") == due + HOUR_MS
    (spawn,) = fleet.agents.spawns("claude")
    assert spawn == {"ts": clock.now, "session_id": "wake-e1", "model_id": "opus-4"}
    (status,) = wake_events(fleet)
    assert status["correlationId"] == f"wake-agent:claude-{due}"
    assert status["payload"]["status"] == "waking"
    assert status["payload"]["next_due"] == due + HOUR_MS

    assert tick(fleet, "e2")["woken"] == 0  # claude moved on, gpt not due yet
    clock.now += 30 * MINUTE  # 10:50
    later = tick(fleet, "e3")
    assert [w["agent"] for w in later["wakes"]] == ["agent:gpt"]
    (gpt_spawn,) = fleet.agents.spawns("gpt")
    assert gpt_spawn["model_id"] == "unknown"


def test_a_duplicate_execution_id_does_nothing(fleet: Acmi, clock: FakeClock) -> None:
    fleet.wake.set("claude", minute=15)
    clock.now += 20 * MINUTE
    first = tick(fleet, "same")
    clock.now += HOUR_MS
    replay = tick(fleet, "same")
    assert replay["replayed"] is True and replay["woken"] == first["woken"] == 1
    assert len(fleet.agents.spawns("claude")) == 1


def test_a_slot_claimed_by_another_execution_is_not_woken_twice(
    fleet: Acmi, clock: FakeClock
) -> None:
    fleet.wake.set("claude", minute=15)
    due = fleet.wake.next("claude")
    assert due is not None
    clock.now += 20 * MINUTE
    assert tick(fleet, "e1")["woken"] == 1
    # an overlapping tick that read the due index before e1 moved claude on
    fleet.store.execute(("ZADD", fleet.keys.wake_due(), due, "agent:claude"))
    overlap = tick(fleet, "e2")
    assert (overlap["woken"], overlap["already"]) == (0, 1)
    assert len(fleet.agents.spawns("claude")) == 1
    assert len(wake_events(fleet)) == 1


def test_a_due_agent_without_a_readable_slot_is_dropped(fleet: Acmi, clock: FakeClock) -> None:
    fleet.wake.set("claude", minute=15)
    fleet.profile.merge("agent:claude", {"wake": "soon"})  # someone overwrote the slot
    fleet.store.execute(("ZADD", fleet.keys.wake_due(), clock.now, "user:ada"))
    clock.now += 20 * MINUTE
    result = tick(fleet, "e1")
    assert (result["woken"], result["dropped"]) == (0, 2)
    assert fleet.wake.next("claude") is None
    assert fleet.agents.spawns("claude") == []


def test_silence_with_pending_work_is_escalated_once(fleet: Acmi, clock: FakeClock) -> None:
    for name in ("quiet", "busy", "idle"):
        fleet.wake.set(name, minute=15)
    fleet.agents.heartbeat("quiet")
    fleet.agents.heartbeat("idle")
    fleet.hitl.create(
        "review", "approve PR 42", asked_by="user:ada", addressee="agent:quiet", correlation_id="q1"
    )
    fleet.work.create("w1", {"title": "ship it"}, owner="agent:busy")  # never heartbeated
    clock.now += 3 * HOUR_MS + 20 * MINUTE
    fleet.agents.heartbeat("busy")  # busy is alive: not escalated
    first = tick(fleet, "e1")
    assert (first["woken"], first["escalated"]) == (3, 1)
    escalations = [
        i for i in fleet.hitl.list(fleet.settings.operator).items if "silent" in i["summary"]
    ]
    assert [i["correlationId"] for i in escalations] == [
        f"silent-agent:quiet-{START - START % HOUR_MS}"
    ]
    clock.now += HOUR_MS  # the next slot: still silent, the same episode
    second = tick(fleet, "e2")
    assert (second["woken"], second["escalated"]) == (3, 0)
    assert [w.get("escalated") for w in second["wakes"] if w["agent"] == "agent:quiet"] == [True]
    assert len(fleet.hitl.list(fleet.settings.operator).items) == 1


def test_round_trips_per_agent_woken(fleet: Acmi, clock: FakeClock) -> None:
    for i in range(3):
        fleet.wake.set(f"a{i}", minute=15)
    clock.now += 20 * MINUTE
    result = tick(fleet, "e1")
    # due page + profiles (MGET) + 2 per agent (claim; spawn + bundle, the new session's
    # start in its daily note written by the same script: a UTC agent) + run_job's record
    assert (result["woken"], result["requests"]) == (3, 2 + 3 * 2 + 1)
    assert tick(fleet, "e2")["requests"] == 2  # nobody due: the page and the record


def _seed(acmi: Acmi, idle: int, now: int) -> None:
    """``idle`` agents with a slot that is not due (straight into the due index)."""
    commands: list[tuple[Any, ...]] = []
    for start in range(0, idle, 1000):
        members: list[Any] = []
        for i in range(start, min(idle, start + 1000)):
            members += [now + HOUR_MS + i, f"agent:idle{i}"]
        commands.append(("ZADD", acmi.keys.wake_due(), *members))
    acmi.store.pipeline(commands)


def test_a_tick_costs_the_due_agents_not_all_agents(acmi: Acmi, clock: FakeClock) -> None:
    costs = {}
    for idle in (100, 10_000):
        clock.now = START - START % HOUR_MS
        fleet = fresh_tenant(acmi, clock)
        _seed(fleet, idle, clock.now)
        for i in range(10):
            fleet.wake.set(f"busy{i}", minute=15)
        clock.now += 20 * MINUTE
        result = tick(fleet, "e1")
        assert result["woken"] == 10
        costs[idle] = (result["requests"], result["commands"])
    assert costs[100] == costs[10_000], costs


# ---- delivery --------------------------------------------------------------------------


def test_a_webhook_gets_the_signed_bundle(fleet: Acmi, clock: FakeClock, hook: Hook) -> None:
    fleet.signals.update("agent:claude", {"current_task": "PR 42"})
    fleet.wake.set("claude", minute=15, target=HOOK)
    clock.now += 20 * MINUTE
    result = tick(fleet, "e1")
    assert (result["delivered"], result["failed"]) == (1, 0)
    assert result["wakes"][0]["delivery"] == "delivered: HTTP 200"
    (request,) = hook.requests
    assert request.method == "POST" and str(request.url) == HOOK["url"]
    verify_signature(
        tenant_wake_secret(DEPLOYMENT_SECRET, fleet.tenant),
        request.content,
        request.headers["X-Acmi-Signature"],
        request.headers["X-Acmi-Timestamp"],
    )
    body = json.loads(request.content)
    assert body["agent"] == "agent:claude" and body["session_id"] == "wake-e1"
    assert body["format"] == "markdown" and "PR 42" in body["bundle"]
    assert body["tenant"] == fleet.tenant


def test_a_failed_delivery_is_posted_and_the_slot_still_moves(
    fleet: Acmi, clock: FakeClock, hook: Hook
) -> None:
    hook.answers = [503]
    fleet.wake.set("claude", minute=15, target=HOOK)
    clock.now += 20 * MINUTE
    result = tick(fleet, "e1")
    assert (result["delivered"], result["failed"]) == (0, 1)
    assert len(hook.requests) == 3  # bounded retries
    statuses = [e["payload"]["status"] for e in wake_events(fleet)]
    assert sorted(statuses) == ["failed", "waking"]
    (failed,) = [e for e in wake_events(fleet) if e["payload"]["status"] == "failed"]
    assert failed["payload"]["detail"] == "failed: HTTP 503"
    assert fleet.wake.next("claude") == clock.now - 5 * MINUTE + HOUR_MS  # at most once


BODY = b'{"agent":"agent:claude"}'


def test_retries_on_5xx_and_network_errors_then_succeeds() -> None:
    hook = Hook(500, httpx.ConnectError("refused"), 429, 200)
    result = hook.deliverer(attempts=4).deliver(SIGNED, BODY)
    assert (result.ok, result.attempts, result.status) == (True, 4, 200)
    assert hook.sleeps == [0.5, 1.0, 2.0]  # backoff between attempts


def test_retries_are_bounded() -> None:
    hook = Hook(502)
    result = hook.deliverer().deliver(SIGNED, BODY)
    assert (result.ok, result.attempts, result.detail) == (False, 3, "failed: HTTP 502")
    assert len(hook.requests) == 3


def test_a_timeout_is_retried_and_reported() -> None:
    hook = Hook(httpx.ReadTimeout("slow"))
    deliverer = hook.deliverer()
    result = deliverer.deliver(SIGNED, BODY)
    assert (result.ok, result.attempts) == (False, 3)
    assert result.detail == "network error: ReadTimeout"
    assert deliverer._http().timeout == httpx.Timeout(WEBHOOK_TIMEOUT_S)


def test_a_client_error_is_not_retried() -> None:
    hook = Hook(404)
    result = hook.deliverer().deliver(SIGNED, BODY)
    assert (result.ok, result.attempts, result.status) == (False, 1, 404)


def test_a_redirect_is_refused_not_followed() -> None:
    hook = Hook(302, 200)
    result = hook.deliverer().deliver(SIGNED, BODY)
    assert (result.ok, result.detail) == (False, "refused: redirect (HTTP 302)")
    assert [str(r.url) for r in hook.requests] == [HOOK["url"]]


@pytest.mark.parametrize(
    ("url", "addresses"),
    [
        ("https://agent.example/", ["10.0.0.5"]),
        ("https://agent.example/", ["93.184.216.34", "192.168.1.9"]),  # any private one
        ("https://agent.example/", ["169.254.169.254"]),  # the instance metadata service
        ("https://agent.example/", ["::1"]),
        ("https://agent.example/", ["::ffff:127.0.0.1"]),
        ("https://agent.example/", ["fd00::1"]),
        ("https://agent.example/", []),
    ],
)
def test_private_and_local_addresses_are_refused(url: str, addresses: list[str]) -> None:
    hook = Hook()
    result = hook.deliverer(resolve=lambda host, port: addresses).deliver(
        {**SIGNED, "url": url}, BODY
    )
    assert not result.ok and result.detail.startswith("refused:")
    assert hook.requests == []  # nothing was sent


def test_loopback_literals_are_refused_by_the_real_resolver() -> None:
    hook = Hook()
    deliverer = WebhookDeliverer(transport=httpx.MockTransport(hook))
    for url in ("https://127.0.0.1/wake", "https://[::1]/wake", "https://localhost/wake"):
        result = deliverer.deliver({**SIGNED, "url": url}, BODY)
        assert not result.ok and result.detail.startswith("refused:"), url
    assert hook.requests == []


def test_allow_private_is_for_tests() -> None:
    hook = Hook()
    result = hook.deliverer(allow_private=True, resolve=lambda h, p: ["127.0.0.1"]).deliver(
        {**SIGNED, "url": "https://127.0.0.1/wake"}, BODY
    )
    assert result.ok and len(hook.requests) == 1


def test_a_missing_secret_sends_nothing() -> None:
    hook = Hook()
    result = hook.deliverer().deliver(HOOK, BODY)  # the job gave no secret
    assert (result.ok, result.attempts) == (False, 0)
    assert result.detail.startswith("no secret:") and hook.requests == []


class Broken:
    def deliver(self, target: Any, body: bytes) -> Any:
        raise RuntimeError("bug in a deliverer")


def test_a_deliverer_that_raises_fails_that_wake_only(
    fleet: Acmi, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(DELIVERERS, "eventbridge", Broken())
    fleet.wake.set("claude", minute=15, target={"type": "eventbridge", "bus": "agents"})
    fleet.wake.set("gpt", minute=15)
    clock.now += 20 * MINUTE
    result = tick(fleet, "e1")
    assert (result["woken"], result["failed"], result["recorded"]) == (2, 1, 1)
    assert [w["delivery"] for w in result["wakes"]] == [
        "error: RuntimeError",
        "recorded: no target",
    ]


# ---- whose secret, which URL (issue 21, item 5) ------------------------------------------


def _stored_slot(acmi: Acmi, agent: str, target: dict[str, Any]) -> None:
    """A wake slot as a write key can write it: through the profile, not ``wake.set``."""
    acmi.profile.merge(agent, {"wake": {"minute": 15, "every_hours": 1, "target": target}})
    acmi.store.execute(("ZADD", acmi.keys.wake_due(), acmi.clock(), agent))


def test_each_tenant_is_signed_with_its_own_secret_whatever_its_target_names(
    fleet: Acmi, clock: FakeClock, hook: Hook
) -> None:
    """Before: tenant A's write key stored ``secret_env`` naming the variable of tenant B's
    secret, and B's receiver got A's wakes validly signed with B's secret. Now a tenant
    names no secret: each is signed with its own, derived from the deployment's."""
    other = Acmi(fleet.store, WAKE_SETTINGS, tenant=f"{fleet.tenant}-b", clock=clock)
    _stored_slot(fleet, "agent:claude", {**HOOK, "secret_env": "TENANT_B_WAKE_SECRET"})
    _stored_slot(other, "agent:claude", HOOK)
    clock.now += 20 * MINUTE
    assert tick(fleet, "a1")["delivered"] == 1
    assert tick(other, "b1")["delivered"] == 1
    first, second = hook.requests
    secret_a = tenant_wake_secret(DEPLOYMENT_SECRET, fleet.tenant)
    secret_b = tenant_wake_secret(DEPLOYMENT_SECRET, other.tenant)
    assert secret_a != secret_b
    for request, own, foreign in ((first, secret_a, secret_b), (second, secret_b, secret_a)):
        signature, stamp = request.headers["X-Acmi-Signature"], request.headers["X-Acmi-Timestamp"]
        verify_signature(own, request.content, signature, stamp)
        with pytest.raises(SignatureRejected):  # the other tenant's receiver refuses it
            verify_signature(foreign, request.content, signature, stamp)


def test_a_target_outside_the_allow_list_is_not_delivered(
    fleet: Acmi, clock: FakeClock, hook: Hook
) -> None:
    """A profile write can put any URL in ``wake``: the tick checks it again."""
    _stored_slot(fleet, "agent:claude", {"type": "webhook", "url": "https://evil.example/x"})
    clock.now += 20 * MINUTE
    result = tick(fleet, "e1")
    assert (result["delivered"], result["failed"]) == (0, 1)
    detail = result["wakes"][0]["delivery"]
    assert detail == "refused: evil.example is not within ACMI_WAKE_ALLOWED_URLS"
    assert hook.requests == []


def test_without_a_deployment_secret_nothing_is_sent(
    fleet: Acmi, clock: FakeClock, hook: Hook
) -> None:
    unsigned = Acmi(
        fleet.store,
        WAKE_SETTINGS.replace(wake_secret=None),
        tenant=fleet.tenant,
        clock=clock,
    )
    unsigned.wake.set("claude", minute=15, target=HOOK)
    clock.now += 20 * MINUTE
    result = tick(unsigned, "e1")
    assert result["failed"] == 1 and hook.requests == []
    assert result["wakes"][0]["delivery"].startswith("no secret: ACMI_WAKE_SECRET is not set")


def test_no_allow_list_no_webhook_target(fleet: Acmi, clock: FakeClock) -> None:
    bare = Acmi(fleet.store, Settings(), tenant=fleet.tenant, clock=clock)
    with pytest.raises(AcmiValidationError) as err:
        bare.wake.set("claude", minute=15, target=HOOK)
    assert (err.value.field, err.value.rule) == ("target.url", "allowed_url")
    assert bare.profile.get("agent:claude") is None


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("https://agent.example/wake", True),
        ("https://AGENT.example/hooks/claude", True),
        ("https://agent.example:443/hooks", True),
        ("https://agent.example.evil.com/hooks", False),  # another host
        ("https://agent.example:8443/hooks", False),  # another port
        ("http://agent.example/hooks", False),
        ("https://agent.example/hooks/../admin", False),
        ("https://agent.example/hooks/%2e%2e/admin", False),
        ("https://hooks.example/acme", True),
        ("https://hooks.example/acme/x", True),
        ("https://hooks.example/acmeevil", False),  # the prefix's path is whole segments
        ("https://hooks.example/other", False),
    ],
)
def test_the_allow_list(url: str, allowed: bool) -> None:
    prefixes = ("https://agent.example", "https://hooks.example/acme/")
    assert url_allowed(url, prefixes) is allowed
