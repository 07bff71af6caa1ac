"""Schemathesis over our own OpenAPI spec: no input, authenticated or not, gets a 5xx,
and every 4xx has a JSON error body."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from acmi_core import Acmi, Settings
from acmi_core.api.app import create_app
from acmi_core.api.context import ApiContext
from acmi_core.auth import apikeys
from acmi_core.store.memory import MemoryStore

pytestmark = pytest.mark.slow

ADMIN_KEY = "acmi_schemathesis_admin_key_000000000001"

_acmi = Acmi(MemoryStore(), Settings())
apikeys.ensure_admin_key(_acmi.store, ADMIN_KEY, tenant=_acmi.tenant, now_ms=0)
app = create_app(ApiContext(_acmi))
schema = schemathesis.openapi.from_asgi("/openapi.json", app)


def json_errors(ctx: Any, response: Any, case: Any) -> None:
    if 400 <= response.status_code < 500:
        body = response.json()
        assert isinstance(body, dict), body
        assert {"error", "message"} <= set(body), body


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_5xx_and_json_4xx(case: schemathesis.Case) -> None:
    case.headers = {**(case.headers or {}), "authorization": f"Bearer {ADMIN_KEY}"}
    response = case.call()
    case.validate_response(response, checks=[not_a_server_error])
    json_errors(None, response, case)


@schema.parametrize()
@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
def test_unauthenticated_is_401_json(case: schemathesis.Case) -> None:
    response = case.call()
    assert response.status_code in (400, 401, 404, 405, 413), response.text
    json_errors(None, response, case)
