"""The ingest operations the HTTP layer calls: events for one entity, and source webhooks.

Every delivery is one atomic step (one round trip): its events, their entities' index
entries and, when the delivery can be identified, its idempotency record. A retried
delivery finds the record and writes nothing.

A delivery is identified by, in order:

- the ``Idempotency-Key`` header (kept ``idempotency_ttl_s``, 7 days by default): one
  key space per tenant, for both routes. The record keeps a digest of the request
  (route, entity or source, the URL parameters below, the exact body); the same key
  with another request is refused (422, ``rule: reused``), never answered with another
  request's response;
- the sender's own delivery id (Pub/Sub's messageId for gmail, Slack's event_id, GitHub's
  X-GitHub-Delivery) with the source and the URL parameters (as long);
- otherwise the source, the URL parameters and the exact body
  (``derived_idempotency_ttl_s``, 6 hours by default), so that the same body sent for
  another entity or with another mapping is another delivery.

The URL parameters that count are those choosing the entity or the mapping: ``entity``,
``tenant`` and every ``map.*``; never the push ``token`` (a rotated token must not turn a
retry into a new delivery) nor parameters nobody reads.

The record holds the request digest, a nonce of the request that wrote it, and a minimal
response: the count and each stored event's entity, ts and correlationId, never the
event data (the entity may be deleted before a retry comes). A replay is answered with
that minimal response and ``Idempotent-Replayed: true``. A replay carrying this request's
own nonce is no replay: the store retried our script after losing its reply, and the
write it reports is this request's own.
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, cast

from acmi_core.base.errors import AcmiValidationError, CorruptData, IdempotencyKeyReused
from acmi_core.base.model import MAX_TS_MS, EntityId, dumps, encode_event
from acmi_core.client import Acmi
from acmi_core.ingest.config import SourceConfig
from acmi_core.ingest.results import IngestBody, StoredEvents
from acmi_core.ingest.sources import source_spec
from acmi_core.ingest.webhook import Delivery, WebhookBody, body_digest
from acmi_core.store.writes import Replayed, WritePlan

if TYPE_CHECKING:
    import httpx

    from acmi_core.guard.secrets import Finding
    from acmi_core.ingest.gmail_api import AccessTokens

log = logging.getLogger("acmi.ingest")

MAX_IDEMPOTENCY_KEY_LEN: Final = 255
# A webhook event dated later than now + this is stored at now (its own ts kept as
# ``sender_ts``): a sender's clock may run a little ahead, but a sender must not date an
# event in year 9999 and hold the newest-events window agents read from then on.
MAX_WEBHOOK_TS_SKEW_MS: Final = 5 * 60 * 1000
# A push's Gmail fetch stops starting requests after this long: the function's timeout
# is 10 s (template.yaml) and the events are still to be written. A fetch cut short
# stores what it read and the next push resumes from its cursor.
GMAIL_FETCH_DEADLINE_S: Final = 6.0
GMAIL_MAX_MESSAGES: Final = 50  # new messages stored per push, at most
DELIVERY_PARAMS: Final = frozenset({"entity", "tenant"})
MAPPING_PARAM_PREFIX: Final = "map."
# What a record (and so a replayed response) keeps of each stored event.
EVENT_ID_FIELDS: Final = ("entity", "ts", "correlationId")


@dataclass(frozen=True)
class IngestResult:
    body: IngestBody
    replayed: bool
    status: int = 201

    @property
    def count(self) -> int:
        # a key test, not .get: it tells mypy which of the two bodies this is
        return int(self.body["stored"]) if "stored" in self.body else 0


@dataclass(frozen=True)
class Idempotency:
    """One delivery's record: where its id came from, the record's key, the digest of
    the request it answers, and how long it is kept."""

    origin: Literal["header", "pubsub", "sender", "body"]
    key: str
    request: str
    ttl_s: int


class GmailFetch:
    """What fetching a Gmail mailbox's new messages needs, one per process (the Lambda
    kit): ``secret`` returns the text of the secret an ARN names (the core never talks to
    a secret store itself), ``client`` makes Google's requests, ``tokens`` caches access
    tokens between pushes. Given as ``new_client``, the client (httpx, the CA bundle) and
    the token cache are built on the first Gmail fetch: an ingest cold start without any
    Gmail credentials configured pays nothing for them."""

    def __init__(
        self,
        secret: Callable[[str], str],
        client: httpx.Client | None = None,
        tokens: AccessTokens | None = None,
        *,
        new_client: Callable[[], httpx.Client] | None = None,
    ) -> None:
        if client is None and new_client is None:
            raise ValueError("GmailFetch needs a client or new_client")
        self.secret = secret
        self._client, self._tokens, self._new_client = client, tokens, new_client
        self._lock = threading.Lock()

    @property
    def client(self) -> httpx.Client:
        with self._lock:
            if self._client is None:
                assert self._new_client is not None
                self._client = self._new_client()
            return self._client

    @property
    def tokens(self) -> AccessTokens:
        with self._lock:
            if self._tokens is None:
                from acmi_core.ingest.gmail_api import AccessTokens

                self._tokens = AccessTokens()
            return self._tokens


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def delivery_params(query: Mapping[str, str]) -> list[tuple[str, str]]:
    """The URL parameters that choose the entity or the mapping, in a canonical order."""
    return sorted(
        (name, value)
        for name, value in query.items()
        if name in DELIVERY_PARAMS or name.startswith(MAPPING_PARAM_PREFIX)
    )


def request_digest(route: str, target: str, params: list[tuple[str, str]], body_sha: str) -> str:
    """What a request asks for: its route, entity or source, URL parameters and body."""
    return _sha256(json.dumps([route, target, params, body_sha]))


def idempotency_from_header(acmi: Acmi, raw: str | None, request: str) -> Idempotency | None:
    if raw is None:
        return None
    if not 1 <= len(raw) <= MAX_IDEMPOTENCY_KEY_LEN:
        raise AcmiValidationError(
            "Idempotency-Key", "length", f"must be 1-{MAX_IDEMPOTENCY_KEY_LEN} characters"
        )
    key = acmi.keys.internal("idem", "key", _sha256(raw))
    return Idempotency("header", key, request, acmi.settings.idempotency_ttl_s)


def _minimal(response: Mapping[str, Any]) -> StoredEvents:
    """The count and each event's ids: what a record keeps and a replay answers."""
    events = response.get("events")
    return {
        "stored": response.get("stored", 0),
        "events": [
            {name: event[name] for name in EVENT_ID_FIELDS if name in event}
            for event in (events if isinstance(events, list) else [])
            if isinstance(event, dict)
        ],
    }


def _bound_ts(event: dict[str, Any], now: int) -> dict[str, Any]:
    """A webhook event dated past now + skew, at now, with the sender's ts beside it
    (top level: a payload need not be an object, and the sender's data stays as sent).
    Values that are no time at all are left for validation to name."""
    ts = event.get("ts")
    if isinstance(ts, bool) or not isinstance(ts, int | float):
        return event
    if now + MAX_WEBHOOK_TS_SKEW_MS < ts <= MAX_TS_MS:
        return {**event, "ts": now, "sender_ts": ts}
    return event


REDACTED_FIELD: Final = "acmi_redacted"


def _guarded(acmi: Acmi, event: dict[str, Any], field: str) -> dict[str, Any]:
    """A webhook's event as the ingest policy stores it (``ACMI_INGEST_SECRET_POLICY``):
    under ``redact`` (the default) each secret becomes ``[REDACTED:<rule>]`` and the event
    lists what was redacted under ``acmi_redacted`` (``[{path, rule}]``, paths from the
    event's root, never a value), so nothing a sender sent is lost and no secret is kept;
    under ``reject`` a 422 naming the path, as for a direct write."""
    from acmi_core.guard.prefilter import provably_clean

    if provably_clean(event):
        return event
    from acmi_core.guard.secrets import guard, redact, ts_aside

    if acmi.settings.ingest_secret_policy_for(acmi.tenant) == "reject":
        checked: dict[str, Any] = ts_aside(event, lambda e: guard(e, "reject", path=field))
        return checked
    found: list[Finding] = []  # what the redaction of the event, ts aside, found

    def redacting(value: dict[str, Any]) -> dict[str, Any]:
        clean, findings = redact(value, path="$")
        found.extend(findings)
        return cast(dict[str, Any], clean)

    clean = ts_aside(event, redacting)
    findings = found
    if not findings:
        return event
    seen: dict[tuple[str, str], None] = {}
    for finding in findings:
        seen.setdefault((finding.path.removeprefix("$.").removeprefix("$"), finding.rule))
    redacted: dict[str, Any] = dict(clean)
    redacted[REDACTED_FIELD] = [{"path": path, "rule": rule} for path, rule in seen]
    return redacted


def store_deliveries(
    acmi: Acmi,
    deliveries: list[Delivery],
    idempotency: Idempotency | None,
    *,
    bound_future_ts: bool = False,
    also_set: tuple[str, str] | None = None,
    webhook: bool = False,
) -> IngestResult:
    """Validate every event, then store all of them (or, on a replay, none) in one step.
    ``also_set``: (key, JSON text) written in the same step (a Gmail history cursor), so a
    replay writes it no more than the events. ``webhook``: a sender's delivery, guarded by
    the ingest policy (:func:`_guarded`), not the direct writes' one."""
    plan = WritePlan()
    now = acmi.clock()
    stored: list[dict[str, Any]] = []
    for index, delivery in enumerate(deliveries):
        field = f"events[{index}]"
        entity = EntityId.parse(delivery.entity, f"{field}.entity")
        raw_event = _bound_ts(delivery.event, now) if bound_future_ts else delivery.event
        # every source, Gmail messages included, after mapping and before validation
        raw_event = (
            _guarded(acmi, raw_event, field) if webhook else acmi.guard_event(raw_event, field)
        )
        # validated and encoded in one walk: the stored text is not built a second time
        event, text = encode_event(raw_event, now_ms=now, tenant=acmi.tenant, field=field)
        plan.entity_bucket(acmi.keys, str(entity), f"{field}.entity")  # one run: one bucket
        acmi.timeline.stage(plan, entity, [event], [text])
        stored.append({"entity": str(entity), **event.to_dict()})
    body: StoredEvents = {"stored": len(stored), "events": stored}
    if also_set is not None:
        plan.set(*also_set)  # staged before the record: the record's ONCE guards it too
    if idempotency is None:
        plan.apply(acmi.store)
        return IngestResult(body, replayed=False)
    nonce = secrets.token_hex(16)
    record = {"request": idempotency.request, "nonce": nonce, **_minimal(body)}
    # the record goes in the run's slot: its entities' bucket (the same on a retry)
    key = acmi.keys.at(plan.bucket).moved(idempotency.key)
    plan.once(key, idempotency.ttl_s * 1000, dumps(record))
    try:
        plan.apply(acmi.store)
    except Replayed as replay:
        return _replayed(replay.previous, idempotency, nonce, body)
    return IngestResult(body, replayed=False)


def _replayed(
    previous: bytes, idempotency: Idempotency, nonce: str, body: StoredEvents
) -> IngestResult:
    try:
        record = json.loads(previous)
    except ValueError:
        record = None
    if not isinstance(record, dict):
        raise CorruptData(
            f"{idempotency.key}: idempotency record is not a JSON object", field=idempotency.key
        )
    if record.get("nonce") == nonce:
        # Our own write: the store ran the script, lost the reply and ran it again.
        return IngestResult(body, replayed=False)
    if idempotency.origin == "header" and record.get("request") != idempotency.request:
        raise IdempotencyKeyReused(
            "was already used with a different request (another body, entity or URL): "
            "send a new key for each new request"
        )
    return IngestResult(_minimal(record), replayed=True)


def append_events(
    acmi: Acmi,
    entity: str,
    raw_body: bytes,
    body: Any,
    *,
    idempotency_key: str | None,
    max_events: int,
) -> IngestResult:
    """POST /v1/entities/{entity}/events: one event or a list of up to ``max_events``.
    Their ts are stored as sent: an API-key writer may rewrite the entity anyway."""
    EntityId.parse(entity)
    items = body if isinstance(body, list) else [body]
    if not items:
        raise AcmiValidationError("body", "non_empty", "give one event or a list of events")
    if len(items) > max_events:
        raise AcmiValidationError("body", "max_items", f"at most {max_events} events per request")
    deliveries = [Delivery(entity, item) for item in items]
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise AcmiValidationError(f"events[{index}]", "object", "must be a JSON object")
    request = request_digest("events", entity, [], body_digest(raw_body))
    idempotency = idempotency_from_header(acmi, idempotency_key, request)
    return store_deliveries(acmi, deliveries, idempotency)


def ingest_webhook(
    acmi: Acmi,
    source: str,
    raw_body: bytes,
    body: Any,
    *,
    query: Mapping[str, str],
    idempotency_key: str | None,
    config: SourceConfig | None,
    headers: Mapping[str, str] | None = None,
    gmail: GmailFetch | None = None,
) -> IngestResult:
    """POST /v1/ingest/{source}: map the sender's body to events and store them once,
    each dated at most now + MAX_WEBHOOK_TS_SKEW_MS. A handshake (Slack's
    url_verification) is answered with a 200 and stores nothing.

    A gmail source whose config names a credentials secret, when ``gmail`` is given (the
    Lambda; ``acmi serve`` gives none), also stores one event per message added since
    the mailbox's stored history id, and moves that id, in the same step."""
    spec = source_spec(source)
    settings = acmi.settings
    sha = body_digest(raw_body)
    # the headers its mapper reads (GitHub's): most sources read none, nothing is decoded
    wanted = {name.lower() for name in spec.headers}
    given = {name.lower(): value for name, value in (headers or {}).items()} if wanted else {}
    mapped = spec.mapper(
        WebhookBody(
            source=source,
            body=body,
            body_sha=sha,
            max_items=settings.max_batch_events,
            entity=query.get("entity") or None,
            default_entity=config.entity if config else None,
            query=query,
            configured_mapping=config.mapping if config else None,
            headers={name: value for name, value in given.items() if name in wanted},
        )
    )
    if mapped.answer is not None:
        return IngestResult(mapped.answer, replayed=False, status=200)
    params = delivery_params(query)
    request = request_digest("ingest", source, params, sha)
    idempotency = idempotency_from_header(acmi, idempotency_key, request)
    if idempotency is None and spec.idempotency != "body" and mapped.sender_id:
        # Pub/Sub redelivers a message with the same messageId (and may add a
        # deliveryAttempt to the body), Slack retries an event with its event_id, GitHub
        # redelivers with its delivery id: the id, not the body, names the delivery.
        digest = _sha256(json.dumps([source, params, mapped.sender_id]))
        key = acmi.keys.internal("idem", "ingest", source, spec.idempotency, digest)
        idempotency = Idempotency(spec.idempotency, key, request, settings.idempotency_ttl_s)
    if idempotency is None:
        # n8n and Make send one request per item and share execution ids across a run:
        # only the exact body (for this entity and mapping) identifies a delivery.
        key = acmi.keys.internal("idem", "ingest", source, "body", request)
        idempotency = Idempotency("body", key, request, settings.derived_idempotency_ttl_s)
    deliveries = mapped.deliveries
    cursor: tuple[str, str] | None = None
    if gmail is not None and config is not None and config.gmail_credentials_secret:
        deliveries, cursor = _with_gmail_messages(
            acmi, source, deliveries, gmail, config.gmail_credentials_secret
        )
    return store_deliveries(
        acmi, deliveries, idempotency, bound_future_ts=True, also_set=cursor, webhook=True
    )


def _with_gmail_messages(
    acmi: Acmi, source: str, deliveries: list[Delivery], gmail: GmailFetch, secret_arn: str
) -> tuple[list[Delivery], tuple[str, str] | None]:
    """The notification plus one event per new message, and the cursor to store. Google
    failing for now (``GmailUnavailable``) propagates: a 503, nothing stored, Pub/Sub
    redelivers. Google refusing (credentials, request) stores the notification alone with
    ``payload.fetch_error`` and leaves the cursor, so the next push retries from it."""
    from acmi_core.ingest import gmail_api, gmail_history

    notification = deliveries[0]
    payload = notification.event["payload"]
    email = str(payload["emailAddress"])
    # in the notification's entity's bucket, where the events it brings are written
    cursor_key = acmi.keys.of(notification.entity).gmail_history(source, email)
    start = _stored_history_id(acmi.store.execute(("GET", cursor_key)), cursor_key)
    try:
        creds = gmail_api.GmailCredentials.from_secret(gmail.secret(secret_arn))
        changes = gmail_history.fetch_changes(
            gmail.client,
            creds,
            email,
            start,
            tokens=gmail.tokens,
            # with the notification, no more events than a batch may hold
            max_messages=max(1, min(GMAIL_MAX_MESSAGES, acmi.settings.max_batch_events - 1)),
            deadline_s=GMAIL_FETCH_DEADLINE_S,
        )
    except gmail_api.GmailUnavailable:
        raise
    except gmail_api.GmailApiError as exc:  # GmailAuthError included
        # Safe to log: these messages name the request and Google's error code, never a
        # token, secret or body (gmail_api's rule).
        log.warning(
            "gmail fetch refused (%s) for source %s of tenant %s: %s",
            exc.code,
            source,
            acmi.tenant,
            exc.message,
        )
        failed = {**payload, "fetch_error": exc.code}
        return [Delivery(notification.entity, {**notification.event, "payload": failed})], None
    messages = gmail_history.message_events(
        changes,
        source=source,
        mailbox_entity=notification.entity,
        parent_correlation_id=str(notification.event["correlationId"]),
    )
    cursor = dumps({"historyId": changes.last_history_id})
    return [notification, *messages], (cursor_key, cursor)


def _stored_history_id(raw: object, key: str) -> str | None:
    """The stored cursor; None (fetch the last day, then store a good one) for none or
    one that cannot be read: refusing would stall the mailbox until someone repairs it."""
    if raw is None:
        return None
    try:
        data = json.loads(raw) if isinstance(raw, bytes) else None
    except ValueError:
        data = None
    history_id = data.get("historyId") if isinstance(data, dict) else None
    if (
        isinstance(history_id, str)
        and history_id.isascii()
        and history_id.isdigit()
        and len(history_id) <= 20
    ):
        return history_id
    log.warning("%s: unreadable Gmail history cursor, fetching the last day instead", key)
    return None
