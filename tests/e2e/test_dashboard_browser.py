"""The fleet dashboard in a real browser: Debian's headless Chromium driven by Selenium
through the system chromedriver (passed explicitly: Selenium Manager downloads nothing).

The app runs as ``acmi serve`` runs it (``serve_app`` over ``create_app``, store calls on
worker threads) on a free port over a real redis-server; two tenants are seeded. Logged in
with a read key the page shows its tenant only, escapes what users wrote, resolves a HITL
item with a write key (checked in the store) and shows a new coordination event without a
reload. ``ACMI_WRITE_SCREENSHOT=1`` rewrites ``docs/dashboard.png`` (the README's)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from acmi_core import Acmi, Settings
from acmi_core.api.app import create_app
from acmi_core.api.context import ApiContext
from acmi_core.auth.apikeys import mint
from acmi_core.base.keys import COORDINATION_THREAD
from acmi_core.cli.local import serve_app
from acmi_core.store.redis import RedisStore
from acmi_core.testing.redis_server import RedisServer
from tests.kit import ROOT, TEST_DBS, serving

DB = TEST_DBS["dashboard_browser"]
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
SCREENSHOT = ROOT / "docs" / "dashboard.png"
HOUR = 3600 * 1000
WAIT_S = 15  # the page polls every 2 s; a loaded machine may take a few rounds

if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
    pytest.skip(
        f"{CHROMIUM} or {CHROMEDRIVER} missing: apt-get install chromium chromium-driver"
        " (.ci/run installs them)",
        allow_module_level=True,
    )
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium (the dev extra) missing")
from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

pytestmark = pytest.mark.slow


def seed(acmi: Acmi, tag: str) -> None:
    """What a small fleet leaves behind; ``tag`` marks every id as this tenant's."""
    now = acmi.clock()
    acmi.agents.heartbeat(f"{tag}-builder", note="compiling the release")
    acmi.agents.heartbeat(f"{tag}-reviewer", note="reviewing PR 42")
    acmi.agents.heartbeat(f"{tag}-scout", now=now - 50 * HOUR)  # silent: STALLED
    acmi.locks.claim(f"deploy:{tag}-web", f"agent:{tag}-builder", 15 * 60_000)
    acmi.hitl.create("prod deploy", "approve the migration in PR 42", urgency="P0",
                     asked_by=f"agent:{tag}-builder", correlation_id=f"{tag}-deploy")  # fmt: skip
    acmi.hitl.create("budget", "raise the model budget to $40/day",
                     asked_by=f"agent:{tag}-reviewer", addressee="user:operator",
                     correlation_id=f"{tag}-budget")  # fmt: skip
    acmi.work.create(f"{tag}-release", {"name": "cut 1.4"}, owner=f"agent:{tag}-builder",
                     status="in_progress")  # fmt: skip
    acmi.work.create(f"{tag}-docs", {"name": "docs"}, owner=f"agent:{tag}-reviewer")
    acmi.work.create(f"{tag}-triage", {"name": "triage"}, status="done")
    for run, score in (("r1", 72), ("r2", 88)):
        acmi.workflows.execute("release", "build", f"agent:{tag}-builder", correlation_id=run)
        acmi.workflows.assess("release", "build", score, ["tests green"],
                              f"agent:{tag}-reviewer", correlation_id=run)  # fmt: skip
    acmi.workflows.improve("release", "build", f"{tag}: restore the wheel cache first",
                           f"agent:{tag}-reviewer")  # fmt: skip
    acmi.timeline.append(
        COORDINATION_THREAD,
        {"source": f"agent:{tag}-reviewer", "kind": "note", "correlationId": f"{tag}-x",
         "summary": f"{tag} <img src=x onerror=\"document.title='owned'\"> reviewed"},
    )  # fmt: skip


@pytest.fixture
def app_url(redis_server: RedisServer) -> Iterator[tuple[str, Acmi, dict[str, str]]]:
    redis_server.flush(DB)
    store = RedisStore.from_url(redis_server.url_for(DB))
    settings = Settings()
    acmi = Acmi(store, settings)
    keys = {
        name: mint(store, tenant=tenant, scope=scope, name=name, now_ms=acmi.clock())[0]
        for name, tenant, scope in (
            ("read", "acme", "read"),
            ("write", "acme", "write"),
            ("other", "globex", "read"),
        )
    }
    seed(acmi.for_tenant("acme"), "acme")
    seed(acmi.for_tenant("globex"), "globex")
    try:
        with serving(serve_app(acmi, create_app(ApiContext(acmi, offload=True)))) as url:
            yield url, acmi, keys
    finally:
        store.close()


@pytest.fixture
def browser() -> Iterator[Any]:
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1400,1000", "--hide-scrollbars"):  # fmt: skip
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def texts(driver: Any, css: str) -> list[str]:
    return [str(e.text) for e in driver.find_elements(By.CSS_SELECTOR, css)]


def wait_for(driver: Any, what: str, check: Any) -> None:
    # the page re-renders a list while it is read: an element gone stale is read again
    stale = (StaleElementReferenceException,)
    WebDriverWait(driver, WAIT_S, ignored_exceptions=stale).until(check, message=what)


def open_with(driver: Any, url: str, key: str) -> None:
    driver.get(f"{url}/dashboard")
    driver.find_element(By.ID, "key").send_keys(key)
    driver.find_element(By.CSS_SELECTOR, "#login button[type=submit]").click()
    wait_for(driver, "the agents' table", lambda d: texts(d, "#agents tbody tr[data-agent]"))


def test_the_page_shows_its_tenant_only_resolves_and_updates_without_reload(
    app_url: tuple[str, Acmi, dict[str, str]], browser: Any
) -> None:
    url, acmi, keys = app_url
    open_with(browser, url, keys["read"])
    assert "key=" not in browser.current_url and keys["read"] not in browser.current_url
    body = browser.find_element(By.TAG_NAME, "body").text
    assert "tenant acme" in body
    assert "globex" not in body  # not one id, summary or lesson of the other tenant

    agents = {
        row.get_attribute("data-agent"): row.text
        for row in browser.find_elements(By.CSS_SELECTOR, "#agents tbody tr[data-agent]")
    }
    assert set(agents) == {"agent:acme-builder", "agent:acme-reviewer", "agent:acme-scout"}
    assert "STALLED" in agents["agent:acme-scout"] and "d ago" in agents["agent:acme-scout"]
    assert "STALLED" not in agents["agent:acme-builder"]
    assert "compiling the release" in agents["agent:acme-builder"]
    (lock,) = texts(browser, "#locks tbody tr[data-resource]")
    assert "deploy:acme-web" in lock and "agent:acme-builder" in lock and "in 1" in lock
    work = texts(browser, "#work tbody tr[data-work]")
    assert [w.split()[:3] for w in work] == [
        ["agent:acme-builder", "acme-release", "in_progress"],
        ["agent:acme-reviewer", "acme-docs", "open"],
        ["(unowned)", "acme-triage", "done"],
    ]
    (scores,) = texts(browser, "#workflows tbody tr")
    assert scores.split() == ["workflow:release", "build", "2", "80", "88"]
    assert texts(browser, "#lessons li") == [
        "workflow:release · build · acme: restore the wheel cache first"
    ]
    # what a user wrote is text: the markup shows as typed and ran nothing
    assert any("<img src=x onerror=" in e for e in texts(browser, "#events li"))
    assert not browser.find_elements(By.CSS_SELECTOR, "#events img")
    assert browser.title == "ACMI fleet dashboard"
    assert "acme-deploy" in browser.page_source and keys["read"] not in browser.page_source

    if os.environ.get("ACMI_WRITE_SCREENSHOT") == "1":
        SCREENSHOT.parent.mkdir(exist_ok=True)
        browser.save_screenshot(str(SCREENSHOT))

    # a read key cannot resolve: the page says why and the item stays open
    hitl = {
        r.get_attribute("data-cid"): r
        for r in browser.find_elements(By.CSS_SELECTOR, "#hitl tbody tr")
    }
    assert set(hitl) == {"acme-deploy", "acme-budget"}
    browser.find_element(By.ID, "write-key").send_keys(keys["read"])
    row = hitl["acme-deploy"]
    row.find_element(By.CSS_SELECTOR, "input.resolution").send_keys("approved, ship it")
    row.find_element(By.CSS_SELECTOR, "button").click()
    wait_for(
        browser,
        "the refusal",
        lambda d: "could not resolve" in d.find_element(By.ID, "hitl-message").text,
    )
    tenant = acmi.for_tenant("acme")
    assert {i["correlationId"] for i in tenant.dashboard.read()["hitl"]} == {
        "acme-deploy",
        "acme-budget",
    }

    # the typed resolution survives the page's refreshes (the row is kept, not rebuilt)
    shown = browser.find_element(By.ID, "updated").text
    wait_for(browser, "a refresh", lambda d: d.find_element(By.ID, "updated").text != shown)
    row = browser.find_element(By.CSS_SELECTOR, "#hitl tbody tr[data-cid='acme-deploy']")
    assert row.find_element(By.CSS_SELECTOR, "input.resolution").get_attribute("value") == (
        "approved, ship it"
    )
    # with the write key it resolves: gone from the page, closed in the store
    field = browser.find_element(By.ID, "write-key")
    field.clear()
    field.send_keys(keys["write"])
    row.find_element(By.CSS_SELECTOR, "button").click()
    wait_for(
        browser,
        "the item gone",
        lambda d: not d.find_elements(By.CSS_SELECTOR, "#hitl tr[data-cid='acme-deploy']"),
    )
    assert browser.find_element(By.ID, "hitl-message").text == "resolved acme-deploy"
    closed = tenant.hitl.list(state="closed").to_dict()["items"]
    (item,) = [i for i in closed if i["correlationId"] == "acme-deploy"]
    resolution = item["payload"]["resolution"]
    assert (resolution["by"], resolution["text"]) == ("user:operator", "approved, ship it")
    other = acmi.for_tenant("globex").dashboard.read()["hitl"]
    assert {i["correlationId"] for i in other} == {"globex-deploy", "globex-budget"}  # untouched

    # a new event shows up by polling, without a reload
    marker = browser.execute_script("window.__same_page = 1; return window.__same_page")
    assert marker == 1
    deployed = {"source": "agent:acme-builder", "kind": "deploy", "correlationId": "acme-y",
                "summary": "web deployed to prod"}  # fmt: skip
    tenant.timeline.append(COORDINATION_THREAD, deployed)
    wait_for(
        browser,
        "the new event",
        lambda d: any("web deployed to prod" in e for e in texts(d, "#events li")),
    )
    assert browser.execute_script("return window.__same_page") == 1  # the same page, not reloaded

    # logging out leaves nothing of this tenant in the page; the other tenant's key sees its own
    browser.find_element(By.ID, "logout").click()
    assert browser.find_element(By.ID, "login").is_displayed()
    assert "acme" not in browser.find_element(By.TAG_NAME, "body").get_attribute("textContent")
    open_with(browser, url, keys["other"])
    body = browser.find_element(By.TAG_NAME, "body").text
    assert "tenant globex" in body and "acme" not in body
    assert {
        r.get_attribute("data-cid")
        for r in browser.find_elements(By.CSS_SELECTOR, "#hitl tbody tr")
    } == {
        "globex-deploy",
        "globex-budget",
    }
