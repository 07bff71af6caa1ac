"""Delivering a wake bundle to its target.

Webhook delivery (:class:`WebhookDeliverer`): POST of the JSON body with ``X-Acmi-Timestamp``
(unix seconds) and ``X-Acmi-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<body>">``
(the same scheme ACMI's own ingest verifies), ``WEBHOOK_TIMEOUT_S`` per attempt, at most
``WEBHOOK_ATTEMPTS`` attempts with backoff on 5xx, 429 and network errors (never on other
4xx), redirects refused, and hosts that resolve to a private, loopback, link-local,
multicast, reserved or unspecified address refused (``allow_private`` for tests). The
address check resolves the name before the request; a DNS answer that changes between the
check and the connection (rebinding) is not caught.

Which bus an EventBridge wake may be put on (:func:`eventbridge_target`, run by the wake
job before each one): one of the operator's ``ACMI_WAKE_ALLOWED_BUSES``, ``{tenant}`` in an
entry read as the wake's tenant, so ``acmi-wake-{tenant}`` keeps each tenant on its own bus.

Who may be sent what (:func:`webhook_target`, run by the wake job before each webhook):
the URL must be within the operator's ``ACMI_WAKE_ALLOWED_URLS`` (a write key can put any
``wake`` in a profile, so the allow-list is checked here as well as when a slot is set),
and the body is signed with the tenant's own secret, :func:`tenant_wake_secret`:
HMAC-SHA256 keyed by the deployment's ``ACMI_WAKE_SECRET`` over ``acmi-wake-v1:<tenant>``,
64 hex digits. A tenant never names it (the ``secret_env`` of older targets is ignored),
so a receiver that checks with its own tenant's secret refuses every other tenant's wake.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol
from urllib.parse import urlsplit

from acmi_core.base.settings import Settings, wake_buses, wake_url_prefixes
from acmi_core.coordination.wake import bus_allowed, url_allowed

if TYPE_CHECKING:
    import httpx


WEBHOOK_TIMEOUT_S: Final = 5.0
WEBHOOK_ATTEMPTS: Final = 3
WEBHOOK_BACKOFF_S: Final = 0.5  # doubled each retry


# ---- delivery ---------------------------------------------------------------------------


@dataclass(frozen=True)
class DeliveryResult:
    ok: bool
    detail: str  # what happened, for the job's result and the wake-status event
    attempts: int = 1
    status: int | None = None  # the HTTP status, when there was one


class Deliverer(Protocol):
    """Delivers one wake: ``target`` is the stored target, ``body`` the JSON bytes."""

    def deliver(self, target: Mapping[str, Any], body: bytes) -> DeliveryResult: ...


def _public(address: str) -> bool:
    import ipaddress  # only a tick that delivers a webhook pays for it

    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not (
        ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
    )


def resolve_host(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (the system resolver)."""
    import socket

    infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    return sorted({str(info[4][0]) for info in infos})


WAKE_SECRET_CONTEXT: Final = b"acmi-wake-v1:"


def tenant_wake_secret(deployment_secret: str, tenant: str) -> str:
    """The secret ``tenant``'s wake webhooks are signed with (module docstring)."""
    message = WAKE_SECRET_CONTEXT + tenant.encode("utf-8")
    return hmac.new(deployment_secret.encode("utf-8"), message, hashlib.sha256).hexdigest()


def webhook_target(
    settings: Settings, tenant: str, target: Mapping[str, Any]
) -> tuple[dict[str, Any] | None, str | None]:
    """What :class:`WebhookDeliverer` is given for ``tenant``'s stored webhook target:
    its URL and the tenant's signing secret; or None and why it is not delivered."""
    url = str(target.get("url", ""))
    if not url_allowed(url, wake_url_prefixes(settings.wake_allowed_urls)):
        host = urlsplit(url).hostname or url[:80]
        return None, f"refused: {host} is not within ACMI_WAKE_ALLOWED_URLS"
    if not settings.wake_secret:
        return None, "no secret: ACMI_WAKE_SECRET is not set (each tenant's is derived from it)"
    return {
        "type": "webhook",
        "url": url,
        "secret": tenant_wake_secret(settings.wake_secret, tenant),
    }, None


def eventbridge_target(
    settings: Settings, tenant: str, target: Mapping[str, Any]
) -> tuple[dict[str, Any] | None, str | None]:
    """``tenant``'s stored EventBridge target if its bus is still among the operator's
    ``ACMI_WAKE_ALLOWED_BUSES`` (a write key can put any ``wake`` in a profile), or None
    and why it is not delivered."""
    bus = str(target.get("bus", ""))
    if not bus_allowed(bus, wake_buses(settings.wake_allowed_buses), tenant):
        return None, f"refused: bus {bus[:80]} is not within ACMI_WAKE_ALLOWED_BUSES"
    return {"type": "eventbridge", "bus": bus}, None


def sign(secret: str, body: bytes, timestamp_s: int) -> dict[str, str]:
    """The signature headers of a webhook delivery (module docstring)."""
    stamp = str(int(timestamp_s))
    digest = hmac.new(secret.encode("utf-8"), stamp.encode("ascii") + b"." + body, hashlib.sha256)
    return {"X-Acmi-Timestamp": stamp, "X-Acmi-Signature": f"sha256={digest.hexdigest()}"}


class WebhookDeliverer:
    """HTTPS webhooks (module docstring), given :func:`webhook_target`'s target (the URL
    and the tenant's secret). ``transport``: an httpx transport (tests pass
    ``httpx.MockTransport``); ``resolve``: host, port -> addresses."""

    def __init__(
        self,
        *,
        timeout_s: float = WEBHOOK_TIMEOUT_S,
        attempts: int = WEBHOOK_ATTEMPTS,
        backoff_s: float = WEBHOOK_BACKOFF_S,
        allow_private: bool = False,
        resolve: Callable[[str, int], list[str]] = resolve_host,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        now_s: Callable[[], float] = time.time,
    ) -> None:
        self.timeout_s, self.attempts, self.backoff_s = timeout_s, attempts, backoff_s
        self.allow_private = allow_private
        self._resolve, self._transport = resolve, transport
        self._sleep, self._now_s = sleep, now_s
        self._client: httpx.Client | None = None

    def _http(self) -> httpx.Client:
        if self._client is None:  # built on the first delivery: a tick without one pays nothing
            import httpx

            self._client = httpx.Client(
                timeout=self.timeout_s, follow_redirects=False, transport=self._transport
            )
        return self._client

    def _refused(self, url: str) -> str | None:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if parts.scheme != "https":
            return "refused: not an https:// URL"
        if self.allow_private:
            return None
        try:
            addresses = self._resolve(host, parts.port or 443)
        except (OSError, UnicodeError) as exc:
            return f"refused: {host} does not resolve ({type(exc).__name__})"
        if not addresses:
            return f"refused: {host} does not resolve"
        for address in addresses:
            try:
                public = _public(address)
            except ValueError:
                return f"refused: {host} resolves to {address!r}, not an address"
            if not public:
                return f"refused: {host} resolves to a private or local address ({address})"
        return None

    def deliver(self, target: Mapping[str, Any], body: bytes) -> DeliveryResult:
        import httpx

        url = str(target.get("url", ""))
        refused = self._refused(url)
        if refused:
            return DeliveryResult(False, refused, attempts=0)
        secret = target.get("secret")
        if not isinstance(secret, str) or not secret:
            return DeliveryResult(False, "no secret: the tenant's signing secret was not given", 0)
        detail, status = "", None
        for attempt in range(1, self.attempts + 1):
            if attempt > 1:
                self._sleep(self.backoff_s * 2 ** (attempt - 2))
            headers = {
                "Content-Type": "application/json",
                "User-Agent": "acmi-wake",
                **sign(secret, body, int(self._now_s())),
            }
            try:
                response = self._http().post(url, content=body, headers=headers)
            except httpx.HTTPError as exc:  # timeouts and network errors: retried
                detail, status = f"network error: {type(exc).__name__}", None
                continue
            status = response.status_code
            if 200 <= status < 300:
                return DeliveryResult(True, f"delivered: HTTP {status}", attempt, status)
            if 300 <= status < 400:
                return DeliveryResult(False, f"refused: redirect (HTTP {status})", attempt, status)
            detail = f"failed: HTTP {status}"
            if status < 500 and status != 429:
                return DeliveryResult(False, detail, attempt, status)
        return DeliveryResult(False, detail, self.attempts, status)


# Deliverers by target type. The wake handler module (functions/wake.py) registers the
# EventBridge one; `acmi jobs run wake` without it records such wakes as undelivered.
DELIVERERS: dict[str, Deliverer] = {"webhook": WebhookDeliverer()}


def register_deliverer(kind: str, deliverer: Deliverer) -> None:
    DELIVERERS[kind] = deliverer


# ---- the tick ---------------------------------------------------------------------------
