"""Bad input is a 4xx naming the field and the rule, never a 500: a lone surrogate in a
field name on every route (driven from the app's own OpenAPI document), a daily line
holding one, and the memory files an import cannot store (days outside the timestamps'
range, heartbeat JSON nested too deep or with an integer Python will not convert)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from acmi_core.api.app import ROUTER_MODULES
from tests.integration.test_operations import Served

# {"\udfff": 1} as the bytes a client sends: JSON may escape a lone surrogate, UTF-8 cannot
SURROGATE_NAME = b'{"\\udfff": 1}'


@pytest.fixture
def whole() -> Served:
    return Served("whole app", tuple(ROUTER_MODULES), True)


def _post(served: Served, path: str, body: bytes) -> tuple[int, dict[str, Any]]:
    answer = served.client.post(
        path, content=body, headers={**served.auth("write"), "content-type": "application/json"}
    )
    return answer.status_code, answer.json()


def test_a_lone_surrogate_in_a_field_name_is_a_4xx_on_every_route(whole: Served) -> None:
    """Each route of the document, with the key its row needs: the refusal of the unknown
    name echoes it as its escape (a UTF-8 body cannot hold the surrogate itself)."""
    named = 0
    for row, method, path, query in whole.operations():
        scope = "write" if row.access.value == "webhook" else row.access.value
        answer = whole.client.request(
            method,
            path,
            params=query,
            content=SURROGATE_NAME,
            headers={**whole.auth(scope), "content-type": "application/json"},
        )
        assert answer.status_code < 500, (row.name, answer.text)
        body = answer.json()
        if body.get("field") == "\\udfff":
            assert body["rule"] and "\\udfff" in body["message"], row.name
            named += 1
    assert named >= 18  # the routes that took a body with unknown names refused (and 500'd)


def test_remember_of_a_daily_line_with_a_lone_surrogate_is_a_400(whole: Served) -> None:
    status, body = _post(
        whole, "/v1/memory/agent:a/remember", b'{"text": "a \\udfff b", "layer": "daily"}'
    )
    assert (status, body["field"], body["rule"]) == (400, "text", "utf8")


HEARTBEAT = "memory/heartbeat-state.json"
REFUSED_FILES = {
    "last_day": (
        "memory/9999-12-31.md",
        "# 9999-12-31\n\n## Morning\n- [10:00] hi\n",
        "date_range",
    ),
    "first_day": (
        "memory/0001-01-01.md",
        "# 0001-01-01\n\n## Morning\n- [10:00] hi\n",
        "date_range",
    ),
    "epoch_day": ("memory/1970-01-01.md", "# 1970-01-01\n", "date_range"),
    "deep_array": (HEARTBEAT, "[" * 100_000 + "]" * 100_000, "max_depth"),
    "deep_object": (HEARTBEAT, '{"a": ' + '{"b": ' * 100 + "1" + "}" * 101, "max_depth"),
    "long_integer": (HEARTBEAT, '{"lastChecks": {"email": ' + "9" * 5000 + "}}", "number"),
}


@pytest.mark.parametrize("case", REFUSED_FILES, ids=str)
def test_an_import_refuses_a_file_it_cannot_store_naming_it(whole: Served, case: str) -> None:
    path, text, rule = REFUSED_FILES[case]
    status, body = _post(
        whole, "/v1/memory/agent:a/import", json.dumps({"files": {path: text}}).encode()
    )
    assert (status, body["field"], body["rule"]) == (400, path, rule), body
    assert whole.acmi.timeline.page("agent:a").events == []  # nothing stored


def test_an_import_keeps_the_days_and_depths_allowed(whole: Served) -> None:
    """The edges kept: the first and last days allowed, heartbeat JSON nested as deep as a
    stored value may be, and brackets inside its strings (not nesting)."""
    files = {
        "memory/1970-01-02.md": "# 1970-01-02\n\n## Morning\n- [00:00] first\n",
        "memory/9999-12-30.md": "# 9999-12-30\n\n## Evening\n- [23:59] last\n",
        HEARTBEAT: json.dumps({"a": "[" * 500, "deep": [[[[[[[[1]]]]]]]]}),
    }
    status, body = _post(whole, "/v1/memory/agent:a/import", json.dumps({"files": files}).encode())
    assert status == 200, body
    assert body["events_added"] > 0


def test_a_work_item_holding_a_value_as_deep_as_reads_take_is_served(whole: Served) -> None:
    """Another tool's 511-deep value in a work item's profile. Before: a 500 (the item's
    to_dict copied it recursively, past Python's recursion limit)."""
    value = "[" * 511 + "1" + "]" * 511
    whole.acmi.store.execute(("SET", "acmi:work:deep:profile", f'{{"title": "t", "k": {value}}}'))
    answer = whole.client.get("/v1/work/deep", headers=whole.auth("read"))
    assert answer.status_code == 200, answer.text
    assert json.dumps(answer.json()["profile"]["k"], separators=(",", ":")) == value
