"""create_acmi() picks its backend from the environment; Settings validate."""

from __future__ import annotations

import pytest

from acmi_core import AcmiValidationError, Settings, create_acmi
from acmi_core.store.redis import RedisStore
from acmi_core.store.shared import SharedLocalStore
from acmi_core.store.upstash import UpstashStore


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "UPSTASH_REDIS_REST_URL",
        "UPSTASH_REDIS_REST_TOKEN",
        "ACMI_REDIS_URL",
        "ACMI_DEFAULT_TENANT",
    ):
        monkeypatch.delenv(name, raising=False)


def test_no_configuration_gives_the_embedded_store() -> None:
    acmi = create_acmi()  # the shared data on disk (the session's ACMI_HOME), per call
    assert isinstance(acmi.store, SharedLocalStore)
    assert acmi.tenant == "default"


def test_redis_url_gives_redis(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACMI_REDIS_URL", "redis://127.0.0.1:1/0")
    assert isinstance(create_acmi().store, RedisStore)


def test_upstash_needs_url_and_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UPSTASH_REDIS_REST_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("ACMI_REDIS_URL", "redis://127.0.0.1:1/0")
    assert isinstance(create_acmi().store, RedisStore)  # no token: not Upstash
    monkeypatch.setenv("UPSTASH_REDIS_REST_TOKEN", "t0ken")
    store = create_acmi().store
    assert isinstance(store, UpstashStore)
    assert "t0ken" not in repr(Settings.from_env())


def test_default_tenant_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACMI_DEFAULT_TENANT", "fleet")
    assert create_acmi().tenant == "fleet"
    monkeypatch.setenv("ACMI_DEFAULT_TENANT", "Bad Tenant")
    with pytest.raises(AcmiValidationError) as err:
        create_acmi()
    assert err.value.field == "ACMI_DEFAULT_TENANT"


def test_numbers_from_env_are_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACMI_STORE_TIMEOUT_S", "soon")
    with pytest.raises(AcmiValidationError, match="ACMI_STORE_TIMEOUT_S"):
        Settings.from_env()
    monkeypatch.setenv("ACMI_STORE_TIMEOUT_S", "0")
    with pytest.raises(AcmiValidationError, match="> 0"):
        Settings.from_env()


def test_tenant_views_share_the_store() -> None:
    acmi = create_acmi()
    other = acmi.for_tenant("acme")
    assert other.store is acmi.store
    assert other.tenant == "acme"
    with pytest.raises(AcmiValidationError):
        acmi.for_tenant("not ok!")
