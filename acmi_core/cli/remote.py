"""The CLI's agent-facing commands on a deployed API: :class:`HttpBackend`.

One module: it is one class, HttpBackend, and the table of the rows whose request it
builds otherwise than from the row alone (``REQUESTS``); every call shares one request,
error and key-handling path. tests/integration/test_cli_remote.py holds it to
LocalBackend row by row, and test_cli_rows.py reaches every command's row through both.

``HttpBackend.call(row, **fields)`` checks the fields with the row's params model (as
the store's side does), then makes the row's request (``send``: the row's method and
path, the path parameters checked as the core checks them, the rest as query or body),
answering exactly what :class:`~acmi_core.cli.backend.LocalBackend` answers for the
same store state (the route's extra keys, such as ``category`` or ``released``, are
dropped). The one operation that is not a call is ``cat``: the API has no multi-entity
read, so it reads each entity's timeline newest first (one request each; another only
when a page stops at the API's 1 MiB page cap) and merges them here as
``acmi.timeline.cat`` does.

Errors: an API error body (``{error, message, field, rule}``) becomes the AcmiError of
that ``code`` with the same message, field and rule, so the CLI prints and exits the
same way on both backends. What is not an ACMI answer (no JSON error body, a 5xx other
than a 503, a network failure, a timeout) is ``Unavailable`` naming the API's URL.

The key goes in ``Authorization: Bearer`` only: never in a URL, a message, a repr or a
log line. A plain ``http://`` URL is refused unless it is this machine (the key would
cross the network in clear). Writes are never retried: a lost answer may mean the
write happened.
"""

from __future__ import annotations

import heapq
import itertools
import json
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import quote, urlsplit

import httpx

from acmi_core.base.errors import (
    AcmiError,
    AcmiValidationError,
    NotFound,
    RateLimited,
    SecretDetected,
    Unavailable,
)
from acmi_core.base.model import EntityId, check_category, dumps
from acmi_core.base.pages import page_size
from acmi_core.cli.backend import deletes
from acmi_core.coordination.agents import agent_id
from acmi_core.coordination.hitl import check_cid
from acmi_core.coordination.locks import check_resource
from acmi_core.coordination.work import work_entity
from acmi_core.entities.api import MAX_CAT_ENTITIES, MAX_CAT_LIMIT
from acmi_core.operations import operation
from acmi_core.operations.model import Access

if TYPE_CHECKING:
    from acmi_core.operations import params as p

# Connect fails fast (a wrong host or port); a read may wait on a bootstrap or a page
# of 1,000 events. Always set: DESIGN.md section 8 (the reference's client had none).
DEFAULT_TIMEOUT: Final = httpx.Timeout(30.0, connect=5.0)
LOCAL_HOSTS: Final = frozenset({"localhost", "127.0.0.1", "::1"})
URL_FIELD: Final = "--api"
KEY_FIELD: Final = "key"
# An API key is a bearer token: printable ASCII, no spaces (it goes in a header as is).
_KEY_RE: Final = re.compile(r"[\x21-\x7e]+")
_NOTHING: Final = object()
_PATH_PARAM: Final = re.compile(r"\{(\w+)(?::\w+)?\}")


def _checked(check: Callable[[str], object]) -> Callable[[str], str]:
    """``check`` run for its error (the core's, before any request); the value kept."""

    def run(value: str) -> str:
        check(value)
        return value

    return run


# Each path parameter checked as the core checks it, before a request (the same error as
# the store's); entities, categories and correlation ids go as the core normalizes them.
PATH_CHECKS: Final[dict[str, Callable[[str], str]]] = {
    "entity": lambda value: str(EntityId.parse(value)),
    "category": check_category,
    "agent": _checked(agent_id),
    "id": _checked(work_entity),
    "resource": _checked(check_resource),
    "correlationId": check_cid,
}
# A read takes any id `list` prints (another tool's, e.g. user:mikey@example.com), as the
# core's reads do; a write keeps the id rule above.
READ_PATH_CHECKS: Final[dict[str, Callable[[str], str]]] = {
    **PATH_CHECKS,
    "entity": lambda value: str(EntityId.parse_listed(value)),
}


class _Secret:
    """The key, shown as ``<key>`` by anything that prints the backend's attributes."""

    __slots__ = ("value",)

    def __init__(self, value: str) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "<key>"


def _error_classes() -> dict[str, type[AcmiError]]:
    """Every AcmiError subclass by its ``code`` (the ``error`` of an API error body)."""
    found: dict[str, type[AcmiError]] = {}
    todo: list[type[AcmiError]] = [AcmiError]
    while todo:
        cls = todo.pop()
        found.setdefault(cls.code, cls)
        todo.extend(cls.__subclasses__())
    return found


# Unknown codes (the API's own: internal_error, method_not_allowed, http_error) by status.
_BY_STATUS: Final[dict[int, str]] = {
    400: "validation_error",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    409: "conflict",
    413: "payload_too_large",
    422: "validation_error",
}


def check_api_url(url: str) -> str:
    """The API's base URL without a trailing slash (a stage path such as ``/prod`` kept).
    Refused: no http(s) scheme or host, credentials, a query or fragment, and plain
    ``http://`` to anything but this machine."""
    if not isinstance(url, str) or not url.strip():
        raise AcmiValidationError(URL_FIELD, "required", "must be the API's base URL")
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError as exc:
        raise AcmiValidationError(URL_FIELD, "url", f"is not a URL ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not host:
        raise AcmiValidationError(
            URL_FIELD, "url", "must be an http(s) URL with a host, e.g. https://api.example.com"
        )
    if parts.username is not None or parts.password is not None:
        # never echo it: the user part may be a secret
        raise AcmiValidationError(
            URL_FIELD, "no_credentials", "must not carry credentials; the key goes in ACMI_API_KEY"
        )
    if parts.query or parts.fragment:
        raise AcmiValidationError(
            URL_FIELD, "base_url", "must be the API's base URL, without a query or fragment"
        )
    if scheme == "http" and host.lower() not in LOCAL_HOSTS:
        raise AcmiValidationError(
            URL_FIELD,
            "https",
            f"must use https:// for {host}: plain http:// would send the API key in clear "
            "(http:// is accepted for localhost, 127.0.0.1 and ::1 only)",
        )
    return f"{scheme}://{parts.netloc.lower()}{parts.path.rstrip('/')}"


def _check_timeout(timeout: float | httpx.Timeout) -> httpx.Timeout:
    value = timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout)
    for name in ("connect", "read", "write", "pool"):
        seconds = getattr(value, name)
        if not isinstance(seconds, int | float) or not 0 < seconds < math.inf:
            raise AcmiValidationError(
                f"timeout.{name}", "positive", "must be a finite number of seconds > 0"
            )
    return value


def _segment(value: str) -> str:
    """One path segment, percent-encoded: ``/`` included, and dots where the segment is
    only dots (``.`` and ``..`` would otherwise be resolved away as dot segments)."""
    encoded = quote(value, safe="")
    return encoded.replace(".", "%2E") if encoded.strip(".") == "" else encoded


def _without(data: Mapping[str, Any], *names: str) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in names}


def _merge_ts(event: Mapping[str, Any]) -> float:
    """The ts a cat merge orders by: every event a timeline page serves has a usable one
    (members without are skipped); anything else sorts last rather than failing."""
    ts = event.get("ts")
    return float(ts) if isinstance(ts, int | float) and not isinstance(ts, bool) else -math.inf


class HttpBackend:
    """The Backend protocol over a deployed ACMI HTTP API (``Authorization: Bearer``).

    ``url``: the API's base URL, with or without a trailing slash or a stage path
    (``https://x.execute-api.eu-west-1.amazonaws.com/prod``). ``timeout``: seconds for
    every phase, or an ``httpx.Timeout`` with each phase set. ``transport``: an httpx
    transport to use instead of the network (tests)."""

    def __init__(
        self,
        url: str,
        key: str,
        *,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = check_api_url(url)
        if not isinstance(key, str) or not _KEY_RE.fullmatch(key):
            raise AcmiValidationError(
                KEY_FIELD, "format", "the API key must be printable ASCII without spaces"
            )
        self.label = f"api {self.url}"
        self._key = _Secret(key)
        self._client = httpx.Client(
            headers={"Authorization": f"Bearer {key}", "Accept": "application/json"},
            timeout=_check_timeout(timeout),
            # retries=0: a connection is never retried behind the caller's back, and no
            # request is resent (a lost answer to a write may mean it was stored)
            transport=transport if transport is not None else httpx.HTTPTransport(retries=0),
            follow_redirects=False,  # a redirect could carry the key to another host
        )

    def __repr__(self) -> str:
        return f"HttpBackend({self.url!r})"

    # --- the wire ----------------------------------------------------------------------------

    def _request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = _NOTHING,
        field: str = "body",
    ) -> httpx.Response:
        """One request; an error answer raised as its AcmiError."""
        content: bytes | None = None
        headers: dict[str, str] = {}
        if body is not _NOTHING:
            # the core's encoder: a value it would refuse is refused here the same way
            content = dumps(body, field).encode("utf-8")
            headers["Content-Type"] = "application/json"
        query = {
            name: ("true" if value is True else "false" if value is False else str(value))
            for name, value in (params or {}).items()
            if value is not None
        }
        try:
            response = self._client.request(
                method, self.url + path, params=query, content=content, headers=headers
            )
        except httpx.TimeoutException as exc:
            raise Unavailable(
                f"api: {self.url} did not answer in time ({type(exc).__name__}); the request "
                "may or may not have been carried out",
                field=URL_FIELD,
                rule="timeout",
            ) from None
        except httpx.HTTPError as exc:
            raise Unavailable(
                f"api: cannot reach {self.url} ({type(exc).__name__}: {self._scrub(str(exc))})",
                field=URL_FIELD,
                rule="reachable",
            ) from None
        if response.status_code >= 300:
            raise self._error(method, path, response)
        return response

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self._request(method, path, **kwargs)
        try:
            return json.loads(response.content)
        except ValueError:
            raise self._not_acmi(response) from None

    def _object(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        data = self._json(method, path, **kwargs)
        if not isinstance(data, dict):
            raise Unavailable(
                f"api: {self.url} answered {method} {path} with JSON that is not an object",
                field=URL_FIELD,
                rule="acmi_api",
            )
        return data

    def _scrub(self, text: str) -> str:
        """``text`` with the key taken out, wherever it came from."""
        return text.replace(self._key.value, "<key>")

    def _not_acmi(self, response: httpx.Response) -> Unavailable:
        return Unavailable(
            f"api: {self.url} did not answer as an ACMI API (HTTP {response.status_code}, "
            f"{response.headers.get('content-type') or 'no content type'}): is --api the "
            "API's base URL?",
            field=URL_FIELD,
            rule="acmi_api",
        )

    def _error(self, method: str, path: str, response: httpx.Response) -> AcmiError:
        status = response.status_code
        try:
            body = json.loads(response.content)
        except ValueError:
            body = None
        retry_after = _retry_after(response)
        if not isinstance(body, dict) or not isinstance(body.get("error"), str):
            # a gateway's or proxy's own answer: 401/403 keep their meaning
            if status in (401, 403):
                code = _BY_STATUS[status]
                cls = _ERRORS[code]
                return cls(f"authorization: the API at {self.url} refused the key (HTTP {status})")
            if status == 429:
                return Unavailable(
                    f"api: {self.url} is throttling requests; retry after {retry_after:g} s",
                    retry_after=retry_after,
                    field=URL_FIELD,
                    rule="throttled",
                )
            if 300 <= status < 400:
                return Unavailable(
                    f"api: {self.url} answered with a redirect (HTTP {status}); give the URL "
                    "it redirects to as --api",
                    field=URL_FIELD,
                    rule="no_redirect",
                )
            return self._not_acmi(response)
        code = body["error"]
        message = self._scrub(str(body.get("message") or code))
        field = str(body.get("field") or "request")
        rule = str(body.get("rule") or code)
        if status >= 500 and status != 503:
            # a server failure: the body says nothing inner, and retrying may help
            return Unavailable(
                f"api: {self.url} failed on {method} {path} (HTTP {status}, {code}): {message}",
                retry_after=retry_after,
                field=URL_FIELD,
                rule="server_error",
            )
        if code == "not_found" and rule == "route_exists":
            return NotFound(
                f"api: {self.url} has no route {method} {path}: is --api the API's base URL "
                "(with its stage path)?",
                field=URL_FIELD,
                rule="route_exists",
            )
        cls = _ERRORS.get(code) or _ERRORS.get(_BY_STATUS.get(status, ""), AcmiError)
        if status == 503 and not issubclass(cls, Unavailable):
            cls = Unavailable
        elif status == 429 and not issubclass(cls, (RateLimited, Unavailable)):
            cls = RateLimited  # a 429 is always "later", whatever its code says
        # Built without the subclass's __init__ (whose signatures differ and which would
        # prefix the field again): the message, field and rule exactly as the API said.
        error = cls.__new__(cls)
        AcmiError.__init__(error, message, field=field, rule=rule)
        if isinstance(error, (Unavailable, RateLimited)):
            error.retry_after = retry_after
        if isinstance(error, SecretDetected):
            error.findings = ()  # the findings are not on the wire; field and rule name the first
        return error

    # --- one call per operation row --------------------------------------------------------

    def _route(self, name: str, values: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]]:
        """The row's method, its path with each path parameter taken from ``values``
        (checked as the core checks it, then percent-encoded as one segment), and the
        values left for the query or the body."""
        row = operation(name)
        if row.method is None or row.path is None:
            raise ValueError(f"operation {name!r} has no HTTP route")
        rest = dict(values)
        checks = READ_PATH_CHECKS if row.access is Access.READ else PATH_CHECKS

        def segment(match: re.Match[str]) -> str:
            param = match.group(1)
            return _segment(checks.get(param, str)(rest.pop(param)))

        return row.method, _PATH_PARAM.sub(segment, row.path), rest

    def send(
        self, name: str, /, *, body: Any = _NOTHING, field: str = "body", **values: Any
    ) -> dict[str, Any]:
        """The operation ``name`` (a row of the table) as one request: ``values`` fill its
        path parameters, the rest go in the query (GET, DELETE) or, without ``body``, make
        the JSON body (None left out); the answer is its JSON object."""
        method, path, rest = self._route(name, values)
        if method in ("GET", "DELETE"):
            return self._object(method, path, params=rest)
        if body is _NOTHING:
            body = {k: v for k, v in rest.items() if v is not None}
        return self._object(method, path, body=body, field=field)

    def call(self, name: str, /, **fields: Any) -> Any:
        """The operation ``name`` given its params' fields, checked by the row's params
        model as on the store, then its request (``REQUESTS``, else the row's route with
        the fields as they are): the answer the store's side gives."""
        from acmi_core.operations import bind

        params = bind.validated(operation(name), fields)
        request = REQUESTS.get(name)
        if request is not None:
            return request(self, params)
        return self.send(name, **bind.fields(params))

    # --- the operation that is not a call ----------------------------------------------------

    def cat(
        self,
        entities: Sequence[str],
        *,
        limit: int,
        since_ms: int | None,
        until_ms: int | None,
    ) -> list[dict[str, Any]]:
        # The client's checks, in its order, before any request: the same errors.
        eids = list(dict.fromkeys(EntityId.parse_listed(e) for e in entities))
        if not 1 <= len(eids) <= MAX_CAT_ENTITIES:
            raise AcmiValidationError(
                "entities", "count", f"must name 1-{MAX_CAT_ENTITIES} distinct entities"
            )
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_CAT_LIMIT:
            raise AcmiValidationError("limit", "range", f"must be an integer 1-{MAX_CAT_LIMIT}")
        streams = [self._newest(eid, limit, since_ms, until_ms) for eid in eids]
        # equal ts: the order given (heapq.merge is stable across its inputs)
        merged = heapq.merge(*streams, key=lambda pair: -_merge_ts(pair[1]))
        return [{"entity": entity, **event} for entity, event in itertools.islice(merged, limit)]

    def _newest(
        self, eid: EntityId, limit: int, since_ms: int | None, until_ms: int | None
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """Up to ``limit`` (entity, event) of one timeline, newest first, a page at a time as the
        merge takes them: a page past the API's byte cap is asked for only when the
        merge reaches the end of the one before (not every timeline's ``limit``)."""
        cursor: str | None = None
        left = limit
        while left > 0:
            page = self.send(
                "entities.timeline",
                entity=str(eid),
                reverse=True,
                limit=left,
                since_ms=since_ms,
                until_ms=until_ms,
                cursor=cursor,
            )
            events = [e for e in page.get("events") or () if isinstance(e, dict)][:left]
            yield from ((str(eid), event) for event in events)
            left -= len(events)
            cursor = page.get("next_cursor")
            if not isinstance(cursor, str):
                return

    def unexpected(self, what: str) -> Unavailable:
        """An answer without what the route always carries."""
        return Unavailable(f"api: {self.url} answered {what}", field=URL_FIELD, rule="acmi_api")

    def close(self) -> None:
        self._client.close()


# --- the rows whose request is not their route with the fields as they are --------------
# Each makes the request the route takes from the validated params (a body that is the
# document itself, a field the route names otherwise, a page size checked first) and
# answers what the store's side answers (the route's extra keys, such as ``category`` or
# ``released``, dropped; a wrapped answer unwrapped).

Request = Callable[[HttpBackend, Any], Any]


def _profile_get(b: HttpBackend, q: p.ProfileGetParams) -> Any:
    try:
        return b.send("entities.profile.get", entity=q.entity)
    except NotFound as exc:
        if exc.field == "profile":  # the route's "has no profile", not a wrong URL
            return None
        raise


def _profile_put(b: HttpBackend, q: p.ProfilePutParams) -> Any:
    name = "entities.profile.patch" if q.merge else "entities.profile.put"
    return b.send(name, entity=q.entity, body=dict(q.profile), field="profile")


def _profile_patch(b: HttpBackend, q: p.ProfilePatchParams) -> Any:
    return b.send("entities.profile.patch", entity=q.entity, body=dict(q.partial), field="profile")


def _signals_put(b: HttpBackend, q: p.SignalsPutParams) -> Any:
    name = "entities.signals.patch" if q.merge else "entities.signals.put"
    return b.send(name, entity=q.entity, body=dict(q.signals), field="signals")


def _signal_put(b: HttpBackend, q: p.SignalPutParams) -> Any:
    # the body is the value itself; the ttl goes in the query
    method, path, _ = b._route("entities.signal.put", {"entity": q.entity, "key": q.key})
    answer = b._object(method, path, params={"ttl": q.ttl}, body=q.value, field="value")
    return answer.get("value")


def _append(b: HttpBackend, q: p.EventsAppendParams) -> Any:
    answer = b.send("entities.events.append", entity=q.entity, body=dict(q.event), field="event")
    stored = answer.get("events")
    if not isinstance(stored, list) or len(stored) != 1 or not isinstance(stored[0], dict):
        raise b.unexpected("an append without the stored event")
    # The route adds the entity to each stored event; an event's own "entity" field
    # (kept as an unknown field) is the one it shows, so it stays.
    return stored[0] if "entity" in q.event else _without(stored[0], "entity")


def _list(b: HttpBackend, q: p.ListParams) -> Any:
    page = b.send("entities.list", category=q.category, cursor=q.cursor, limit=page_size(q.limit))
    return {"entities": page.get("entities"), "next_cursor": page.get("next_cursor")}


def _delete(b: HttpBackend, q: p.DeleteParams) -> None:
    deletes(q)
    b.send("entities.delete", entity=q.entity)


def _bootstrap(b: HttpBackend, q: p.BootstrapReadParams) -> str:
    options = {
        "format": q.format,
        "scope": q.scope,
        "events": q.events,
        "include": q.include,
        "topic": q.topic,
        "max_tokens": q.max_tokens,
        "max_bytes": q.max_bytes,
    }
    if q.spawn is None:
        method, path, query = b._route("bootstrap.read", {"agent": q.agent, **options})
        response = b._request(method, path, params=query)
    else:
        method, path, _ = b._route("bootstrap.spawn", {"agent": q.agent})
        body = {"spawn": q.spawn, **{k: v for k, v in options.items() if v is not None}}
        response = b._request(method, path, body=body)
    return response.content.decode("utf-8", "replace")


def _threads(b: HttpBackend, q: p.AgentsThreadsParams) -> Any:
    if q.action != "list":  # joining and leaving are their own rows
        raise AcmiValidationError("action", "enum", "is list here: add and remove are rows")
    threads = b.send("agents.threads", agent=q.agent).get("threads")
    return threads if isinstance(threads, dict) else {}


def _join(b: HttpBackend, q: p.AgentsJoinParams) -> Any:
    return _without(b.send("agents.join", agent=q.agent, thread=q.thread, role=q.role), "thread")


def _leave(b: HttpBackend, q: p.AgentsLeaveParams) -> None:
    b.send("agents.leave", agent=q.agent, thread=q.thread)


def _work_create(b: HttpBackend, q: p.WorkCreateParams) -> Any:
    doc = dict(q.profile or {})
    if q.title is not None:
        doc["title"] = q.title
    return b.send("work.create", id=q.id, profile=doc, owner=q.owner, status=q.status)


def _work_event(b: HttpBackend, q: p.WorkEventParams) -> Any:
    body = dict(q.event)
    if q.session_id is not None:
        stated = body.get("session_id")
        if stated is not None and stated != q.session_id:
            # the route reads the session from the body: say what the client says
            raise AcmiValidationError(
                "event.session_id", "matches", "differs from the session_id given"
            )
        body["session_id"] = q.session_id
    return b.send("work.event", id=q.id, body=body, field="event")


def _work_signals(b: HttpBackend, q: p.WorkSignalsParams) -> Any:
    stored = b.send("work.signals", id=q.id, body=dict(q.signals), field="signals").get("signals")
    return stored if isinstance(stored, dict) else {}


def _work_sessions(b: HttpBackend, q: p.WorkSessionsParams) -> Any:
    page = b.send("work.sessions", id=q.id, cursor=q.cursor, limit=page_size(q.limit))
    return _without(page, "id")


def _work_list(b: HttpBackend, q: p.WorkListParams) -> Any:
    if q.status not in ("open", None):
        # the client's rule (the route spells "any status" as status=any instead)
        raise AcmiValidationError("status", "enum", "must be 'open' or None (any status)")
    return b.send(
        "work.list",
        owner=q.owner,
        status=q.status or "any",
        cursor=q.cursor,
        limit=page_size(q.limit),
    )


def _lock_release(b: HttpBackend, q: p.LocksReleaseParams) -> Any:
    released = b.send("locks.release", resource=q.resource, owner_token=q.owner_token)
    return _without(released, "released")


def _hitl_create(b: HttpBackend, q: p.HitlCreateParams) -> Any:
    body: dict[str, Any] = {"topic": q.topic, "request": q.request, "asked_by": q.asked_by}
    body["urgency"] = q.urgency
    body |= {"addressee": q.addressee, "correlationId": q.correlation_id}
    return b.send("hitl.create", body={k: v for k, v in body.items() if v is not None})


def _hitl_list(b: HttpBackend, q: p.HitlListParams) -> Any:
    return b.send(
        "hitl.list",
        addressee=q.addressee,
        state=q.state,
        cursor=q.cursor,
        limit=page_size(q.limit),
    )


def _hitl_resolve(b: HttpBackend, q: p.HitlResolveParams) -> Any:
    return b.send("hitl.resolve", correlationId=q.correlation_id, resolution=q.resolution, by=q.by)


def _memory_search(b: HttpBackend, q: p.MemorySearchParams) -> Any:
    # archived: the API's own archive (its ACMI_ARCHIVE_URL), as the store's default
    return b.send(
        "memory.search", entity=q.entity, q=q.query, limit=q.limit, archived=True, mode=q.mode
    )


def _memory_active(b: HttpBackend, q: p.MemoryActiveGetParams) -> Any:
    if q.text is not None:
        b.send("memory.active.put", entity=q.entity, text=q.text)
    return b.send("memory.active.get", entity=q.entity)


def _take_handoff(b: HttpBackend, q: p.MemoryHandoffTakeParams) -> Any:
    taken = b.send("memory.handoff.take", entity=q.entity).get("handoff")
    return taken if isinstance(taken, dict) else None


def _memory_export(b: HttpBackend, q: p.MemoryExportParams) -> Any:
    files = b.send("memory.export", entity=q.entity).get("files")
    if not isinstance(files, dict) or not all(isinstance(t, str) for t in files.values()):
        raise b.unexpected("an export without its files")
    return files


REQUESTS: Final[dict[str, Request]] = {
    "entities.profile.get": _profile_get,
    "entities.profile.put": _profile_put,
    "entities.profile.patch": _profile_patch,
    "entities.signals.put": _signals_put,
    "entities.signal.put": _signal_put,
    "entities.events.append": _append,
    "entities.list": _list,
    "entities.delete": _delete,
    "bootstrap.read": _bootstrap,
    "agents.threads": _threads,
    "agents.join": _join,
    "agents.leave": _leave,
    "work.create": _work_create,
    "work.event": _work_event,
    "work.signals": _work_signals,
    "work.sessions": _work_sessions,
    "work.list": _work_list,
    "locks.release": _lock_release,
    "hitl.create": _hitl_create,
    "hitl.list": _hitl_list,
    "hitl.resolve": _hitl_resolve,
    "memory.search": _memory_search,
    "memory.active.get": _memory_active,
    "memory.handoff.take": _take_handoff,
    "memory.export": _memory_export,
}


_ERRORS: Final = _error_classes()


def _retry_after(response: httpx.Response) -> float:
    """Retry-After in seconds (1 when absent or not a number of seconds)."""
    try:
        seconds = float(response.headers.get("retry-after", "1"))
    except ValueError:
        return 1.0
    return seconds if 0 < seconds < math.inf else 1.0
