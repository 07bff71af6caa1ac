"""`acmi serve` and the Lambda kit with ``ACMI_API_KEY``: a key keeps the scope it was
minted with, and serve mints an admin key only when the configured one is not one."""

from __future__ import annotations

import pytest

from acmi_core import Acmi, Settings
from acmi_core.auth import apikeys
from acmi_core.cli.local import SERVE_KEY_NAME, serve_keys
from acmi_core.store.memory import MemoryStore


@pytest.mark.parametrize("scope", ["read", "write"])
def test_a_configured_read_or_write_key_keeps_its_scope(
    scope: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store = MemoryStore()
    key, minted = apikeys.mint(store, tenant="default", scope=scope, name="agent", now_ms=1)
    serve_keys(Acmi(store, Settings(api_key=key)))
    looked_up = apikeys.lookup(store, key)
    # before: the read key came back an admin key
    assert looked_up == minted and looked_up.scope is apikeys.Scope(scope)
    # serve needs an admin key, so it minted one of its own and printed it once
    admins = [k for k in apikeys.list_keys(store) if k.scope is apikeys.Scope.ADMIN]
    assert [k.name for k in admins] == [SERVE_KEY_NAME]
    err = capsys.readouterr().err
    assert f"is a {scope} key of tenant 'default'" in err
    assert "admin key for tenant 'default' (shown once): acmi_" in err
    assert key not in err


def test_the_lambda_kit_policy_never_promotes_a_key() -> None:
    store = MemoryStore()
    key, minted = apikeys.mint(store, tenant="acme", scope="read", name="r", now_ms=1)
    assert apikeys.ensure_admin_key(store, key, tenant="default", now_ms=2) == minted
    assert (
        apikeys.register(store, key, tenant="default", scope="admin", name="again", now_ms=3)
        == minted
    )
    assert apikeys.lookup(store, key) == minted


def test_a_new_configured_key_is_the_admin_key_and_nothing_is_minted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    store = MemoryStore()
    key = "acmi_operator_chosen_key_0123456789"
    serve_keys(Acmi(store, Settings(api_key=key)))
    record = apikeys.lookup(store, key)
    assert record is not None and record.scope is apikeys.Scope.ADMIN
    assert [k.name for k in apikeys.list_keys(store)] == ["ACMI_API_KEY"]
    assert "# admin key: the value of ACMI_API_KEY" in capsys.readouterr().err
