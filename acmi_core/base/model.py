"""Entity ids, signal keys, profiles and Comms v1.1 events: parsing and validation.

One module: these are the rules every write runs, in one order (ids, the JSON tree,
profiles, events), sharing the encoders (dumps, json_members) so that a value is
validated and encoded once; base's import contract keeps them on one layer.

Every rule here raises :class:`AcmiValidationError` naming the field and the rule, and
runs before anything is auto-filled or stored.
"""

from __future__ import annotations

import json
import json.encoder
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, Final

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictFloat,
    StrictInt,
    StrictStr,
)
from pydantic import ValidationError as PydanticValidationError

from acmi_core.base.errors import AcmiValidationError, PayloadTooLarge

CATEGORY_RE: Final = re.compile(r"[a-z][a-z0-9_-]*")
LOCAL_ID_RE: Final = re.compile(r"[A-Za-z0-9_.-]+")
MAX_ENTITY_LEN: Final = 256
MAX_SIGNAL_KEY_LEN: Final = 128
# Counted in UTF-16 code units, as the reference (JavaScript's String length) counts it:
# an emoji is 2, so nothing we accept is refused by the reference.
MAX_SUMMARY_LEN: Final = 500
# Year 9999 in ms: past it a "ts" is a unit mistake (µs, ns), not a time.
MAX_TS_MS: Final = 253_402_300_799_999
# A ts in [10^9, 10^11) is 1970-01-12..1973-03-03 as ms but 2001..5138 as seconds: a
# Unix time in seconds (e.g. 1745947200, 2025-04-29), stored as ms it sorts 55 years back.
# Refused on write (rule "seconds"); such a stored event reads as legacy ("ts: seconds").
SECONDS_TS_MIN: Final = 10**9
SECONDS_TS_END: Final = 10**11
SECONDS_TS_RULE: Final = "looks like seconds; ts is milliseconds since the epoch"
# Categories that would collide with ACMI's own key layout.
RESERVED_CATEGORIES: Final = frozenset({"tenant"})
TENANT_RE: Final = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
# JSON written through ACMI. Every write runs as one Redis script, and a script blocks all of
# Redis (every tenant) while it runs, so what one edit may cost is bounded:
MAX_JSON_DEPTH: Final = 64  # arrays and objects inside each other, in any value written
MAX_EDIT_FIELDS: Final = 1_000  # fields one object edit sets or deletes (merge, update)
# One stored profile or signals object, in UTF-8 bytes; apply.lua holds the same number
# and refuses an edit of a bigger object or one that would make it bigger.
MAX_OBJECT_BYTES: Final = 64 * 1024
# One event as stored, in UTF-8 bytes: the HTTP body cap's default, so what one surface may
# write every other may too, and a page (MAX_PAGE_BYTES) always holds several. Events
# another tool stored bigger still read (a page lists one over its cap under skipped).
MAX_EVENT_BYTES: Final = 256 * 1024


class ActorType(StrEnum):
    AGENT = "agent"
    HUMAN = "human"
    SYSTEM = "system"
    EXTERNAL = "external"


ACTOR_TYPE_BY_CATEGORY: Final = {"agent": ActorType.AGENT, "user": ActorType.HUMAN}
SPEAKER_TYPE_BY_SOURCE_PREFIX: Final = {
    "agent:": ActorType.AGENT,
    "user:": ActorType.HUMAN,
    "system:": ActorType.SYSTEM,
}


@dataclass(frozen=True, order=True)
class EntityId:
    """``<category>:<id>``, e.g. ``user:mikey``."""

    category: str
    local_id: str

    def __str__(self) -> str:
        return f"{self.category}:{self.local_id}"

    @classmethod
    def parse(cls, raw: object, field: str = "entity") -> EntityId:
        if isinstance(raw, EntityId):
            return raw
        if type(raw) is str and cls is EntityId:
            # ids repeat (every operation parses one): an id once parsed is reused
            parsed = _PARSED_IDS.get(raw)
            if parsed is None:
                parsed = cls._parse(raw, field)
                if len(_PARSED_IDS) >= _PARSED_IDS_MAX:
                    _PARSED_IDS.clear()
                _PARSED_IDS[raw] = parsed
            return parsed
        return cls._parse(raw, field)

    @classmethod
    def parse_listed(cls, raw: object, field: str = "entity") -> EntityId:
        """An id as ``list`` may print it, for reads: ``parse``'s rule, except that the id
        after the first ':' may be any non-empty text without '/' (other writers' ids, e.g.
        the reference SDK's ``user:mikey@example.com``, are in the index and must read
        back; a '/' cannot be one segment of an HTTP path, so the CLI's list leaves such an
        id out, naming it). Writes keep ``parse``: a new id follows the rule."""
        try:
            return cls.parse(raw, field)
        except AcmiValidationError as exc:
            if exc.rule != "id_format":  # a category, length or type error stands
                raise
        assert isinstance(raw, str)  # parse got as far as the id
        category, _, local_id = raw.partition(":")
        if not local_id or "/" in local_id:
            raise AcmiValidationError(
                field, "id_format", "id after ':' must be non-empty, with no '/'"
            )
        return cls(category, local_id)

    @classmethod
    def _parse(cls, raw: object, field: str) -> EntityId:
        if not isinstance(raw, str):
            raise AcmiValidationError(field, "type", "must be a string '<category>:<id>'")
        if len(raw) > MAX_ENTITY_LEN:
            raise AcmiValidationError(
                field, "max_length", f"must be at most {MAX_ENTITY_LEN} characters"
            )
        category, sep, local_id = raw.partition(":")
        if not sep:
            raise AcmiValidationError(field, "format", "must be '<category>:<id>' (no ':' found)")
        return cls(check_category(category, field), _check_local_id(local_id, field))


# EntityId.parse's memo: only valid ids are kept (an error names the caller's field).
_PARSED_IDS: Final[dict[str, EntityId]] = {}
_PARSED_IDS_MAX: Final = 4096


def check_tenant(tenant: object, field: str = "tenant") -> str:
    if not isinstance(tenant, str) or not TENANT_RE.fullmatch(tenant):
        raise AcmiValidationError(
            field,
            "tenant_format",
            "must match [a-z0-9][a-z0-9_-]{0,63} (lowercase letters, digits, '_' or '-')",
        )
    return tenant


def check_category(category: object, field: str = "category") -> str:
    if not isinstance(category, str) or not CATEGORY_RE.fullmatch(category):
        raise AcmiValidationError(
            field,
            "category_format",
            "category must match [a-z][a-z0-9_-]* (start with a lowercase letter)",
        )
    if category in RESERVED_CATEGORIES:
        raise AcmiValidationError(
            field, "category_reserved", f"category {category!r} is reserved by the key layout"
        )
    return category


def _check_local_id(local_id: str, field: str) -> str:
    if not LOCAL_ID_RE.fullmatch(local_id):
        raise AcmiValidationError(
            field, "id_format", "id after ':' must match [A-Za-z0-9_.-]+ (non-empty, no ':')"
        )
    return local_id


def check_signal_key(key: object, field: str = "key") -> str:
    if not isinstance(key, str):
        raise AcmiValidationError(field, "type", "signal key must be a string")
    if not 1 <= len(key) <= MAX_SIGNAL_KEY_LEN:
        raise AcmiValidationError(
            field, "length", f"signal key must be 1-{MAX_SIGNAL_KEY_LEN} characters"
        )
    return key


# --- JSON -----------------------------------------------------------------------------------


def dumps(value: Any, field: str = "value") -> str:
    """Compact JSON, byte for byte what JSON.stringify writes for the same value (numbers
    included: see ``js_number``), so an event the reference and we both append is one
    ZSET member; NaN/Infinity rejected, and no deeper than MAX_JSON_DEPTH (json.dumps
    recurses: a deep value would crash it)."""
    return _dumps_checked(value, _check_tree(value, field), field)


def _dumps_checked(value: Any, floats: dict[str, int] | None, field: str) -> str:
    """``dumps`` of a value that passed ``_check_tree`` (which gave ``floats``)."""
    try:
        text = _encode(value)
    except ValueError:
        raise AcmiValidationError(field, "finite", "NaN and Infinity are not JSON") from None
    except TypeError as exc:
        raise AcmiValidationError(field, "json", f"is not JSON-serialisable ({exc})") from None
    if floats:
        text = _js_floats(text, floats)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate ("\udc00" in the JSON that came in)
            raise AcmiValidationError(
                field, "utf8", "contains a lone UTF-16 surrogate: not valid Unicode text"
            ) from None
    return text


# json.dumps with our options builds a JSONEncoder, then a C encoder, per call (~1 us, as
# much as encoding a small event): the C encoder is built once instead. No circular-check
# markers: callers pass values _check_tree accepted, and a cycle is refused there as too
# deep. The same C functions json.dumps uses, so the text is identical.
_encode_str: Final[Callable[[str], str]] = json.encoder.encode_basestring
_Encoder = Callable[[Any, int], Iterable[str]]


def _c_encoder() -> _Encoder | None:
    """The C encoder json.dumps would build, or None where it is missing or built
    otherwise (another interpreter, another signature): then json.dumps itself runs."""
    make: Callable[..., _Encoder] | None = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return None
    try:
        encoder = make(
            None, json.JSONEncoder().default, _encode_str, None, ":", ",", False, False, False
        )
        sample = {"a": [1, 2.5, "\u00e9\n", None, True], "b": {}}
        same = "".join(encoder(sample, 0)) == json.dumps(
            sample, ensure_ascii=False, separators=(",", ":"), allow_nan=False
        )
    except Exception:  # any surprise: the plain path
        return None
    return encoder if same else None


_C_ENCODER: Final = _c_encoder()


def _encode(value: Any) -> str:
    """json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)."""
    if _C_ENCODER is None:  # an interpreter without the C accelerator
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    if isinstance(value, str):  # as JSONEncoder.encode does
        return _encode_str(value)
    return "".join(_C_ENCODER(value, 0))


# A JSON string (kept whole, whatever it holds) or a number token with a fraction or an
# exponent, i.e. a float as json.dumps writes it (ints are digits only and already match).
_JSON_TOKEN: Final = re.compile(
    r'"[^"\\]*(?:\\.[^"\\]*)*"'  # a string, escapes included
    r"|(?<!\d)-?\d+(?:\.\d+(?:e[-+]\d+)?|e[-+]\d+)"  # a float: 1.5, 1e-07, 1.5e+16
)


def _js_token(match: re.Match[str]) -> str:
    token = match[0]
    return token if token[0] == '"' else js_number(float(token))


def _js_floats(text: str, floats: dict[str, int]) -> str:
    """``text`` (json.dumps output) with the float tokens ``floats`` counts (repr -> times
    in the value) written as JavaScript writes them.

    json.dumps writes floats with repr (its C encoder takes no float formatter). When each
    repr occurs in the text exactly as often as in the value, no string and no longer
    number holds it, so those occurrences alone are replaced (in one pass when a
    replacement holds another float's repr: 0.00001 holds 0.0); otherwise every token is
    scanned, strings kept whole."""
    if any(text.count(r) != n for r, n in floats.items()):
        return _JSON_TOKEN.sub(_js_token, text)
    table = {r: js for r in floats if (js := js_number(float(r))) != r}
    if any(r in js for r in table for js in table.values()):
        pattern = "|".join(re.escape(r) for r in sorted(table, key=len, reverse=True))
        return re.sub(pattern, lambda m: table[m[0]], text)
    for r, js in table.items():  # no replacement holds a repr: replacing in turn is safe
        text = text.replace(r, js)
    return text


def js_number(number: float) -> str:
    """A finite float as ECMAScript's Number::toString (so JSON.stringify) writes it.

    The digits are the shortest that round-trip (Python's repr gives exactly those); the
    notation follows ECMAScript: plain for 1e-7 < |x| < 1e21 (``0.00001``,
    ``10000000000000000``), else ``d.ddde+n`` / ``d.ddde-n`` (``1e-7``, ``1e+21``);
    integral values without ``.0``; -0 as ``0``."""
    text = float.__repr__(number)
    if "e" not in text:  # repr is plain for 1e-4 <= |x| < 1e16: JavaScript's too
        if text.endswith(".0"):
            text = text[:-2]
            return "0" if text == "-0" else text
        return text
    mantissa, _, exponent = text.partition("e")
    sign = ""
    if mantissa[0] == "-":
        sign, mantissa = "-", mantissa[1:]
    whole, _, fraction = mantissa.partition(".")  # repr writes one digit before the point
    digits = (whole + fraction).rstrip("0") or "0"
    k = len(digits)
    n = int(exponent) + len(whole)  # the value is 0.<digits> * 10**n
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return f"{sign}{digits[:n]}.{digits[n:]}"
    if -6 < n <= 0:
        return f"{sign}0.{'0' * -n}{digits}"
    point = f"{digits[0]}.{digits[1:]}" if k > 1 else digits
    return f"{sign}{point}e{'+' if n > 0 else '-'}{abs(n - 1)}"


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units, as JavaScript's String length counts it (a character
    beyond U+FFFF is 2; a lone surrogate is 1)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def check_json_tree(value: Any, field: str = "value") -> None:
    """Every object key is a string, and arrays and objects nest at most MAX_JSON_DEPTH
    deep (a value that contains itself never ends: it is refused as too deep).

    Iterative, so a 100,000-deep value is a validation error, not a RecursionError. The
    error names the top-level member the problem is under (``signals.k``)."""
    _check_tree(value, field)


def _check_tree(value: Any, field: str) -> dict[str, int] | None:
    """``check_json_tree``; returns the floats json.dumps writes other than JSON.stringify
    does (their repr -> how often), or None: one walk serves both, and a value without
    such a float (the usual event: ints and strings) pays nothing more.

    Only containers go on the stack, in the order a walk of every item would meet them,
    so the first problem found (and named) is the same; leaves are judged in place. The
    name of the top-level member a container is under is built only for an error."""
    floats: dict[str, int] | None = None
    if not isinstance(value, dict | list | tuple):
        return _count_float(value, floats)
    # (container, depth of the containers around it, the top-level member it is under:
    # its key or index, None for the value itself)
    stack: list[tuple[Any, int, str | int | None]] = [(value, 0, None)]
    while stack:
        item, depth, label = stack.pop()
        if depth == MAX_JSON_DEPTH:
            raise AcmiValidationError(
                _member(field, label),
                "max_depth",
                f"nests arrays and objects more than {MAX_JSON_DEPTH} levels deep",
            )
        top = depth == 0  # name the member a problem is under, not deeper parts
        depth += 1
        if isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str):
                    # json.dumps would turn {1: "a"} into {"1": "a"} silently (and
                    # {1: .., "1": ..} into duplicate keys): refuse instead
                    raise AcmiValidationError(
                        _member(field, label),
                        "object_keys",
                        f"object keys must be strings, got {key!r}",
                    )
                if type(child) in _LEAVES:
                    continue
                if isinstance(child, dict | list | tuple):
                    stack.append((child, depth, key if top else label))
                else:
                    floats = _count_float(child, floats)
        else:
            for index, child in enumerate(item):
                if type(child) in _LEAVES:
                    continue
                if isinstance(child, dict | list | tuple):
                    stack.append((child, depth, index if top else label))
                else:
                    floats = _count_float(child, floats)
    return floats


# Leaf types that need no look (exact types: a subclass takes the general path).
_LEAVES: Final = frozenset({str, int, bool, type(None)})


def _count_float(item: object, floats: dict[str, int] | None) -> dict[str, int] | None:
    if isinstance(item, float):
        text = float.__repr__(item)
        if "e" in text or text.endswith(".0"):  # else it is JavaScript's text too
            floats = floats or {}
            floats[text] = floats.get(text, 0) + 1
    return floats


def _member(field: str, label: str | int | None) -> str:
    """The name of the top-level member ``label`` of ``field`` (``signals.k``, ``x[3]``)."""
    if label is None:
        return field
    return f"{field}[{label}]" if isinstance(label, int) else f"{field}.{label}"


def check_json_object(doc: object, field: str) -> dict[str, Any]:
    """A JSON object that will be stored whole (a profile, the signals, a rollup): JSON,
    and at most MAX_OBJECT_BYTES once written (413 beyond, as for a body)."""
    json_object_text(doc, field)
    return doc  # type: ignore[return-value]  # json_object_text proved it is a dict


def json_object_text(doc: object, field: str) -> str:
    """``check_json_object``, returning the object's JSON text (``dumps``)."""
    if not isinstance(doc, dict):
        got = "null" if doc is None else type(doc).__name__
        raise AcmiValidationError(field, "object", f"must be a JSON object, got {got}")
    text = dumps(doc, field)  # proves it is JSON (no NaN, no sets, no objects)
    size = len(text) if text.isascii() else len(text.encode("utf-8"))
    if size > MAX_OBJECT_BYTES:
        raise PayloadTooLarge(
            field,
            "max_object_bytes",
            f"is {size} bytes as JSON; an object holds at most {MAX_OBJECT_BYTES} bytes",
        )
    return text


def json_members(doc: object, field: str) -> list[tuple[str, str]]:
    """``check_json_object``, and each top-level member as (name, its value's JSON text):
    what an object edit (a merge, a signals update) sends. One walk of the object, one
    encoding of each value, and the object's size summed from the parts (the encoder
    writes ``{"name":value,...}``). Anything unusual (a float JavaScript writes
    otherwise, a value that is not JSON, a lone surrogate, a size over the limit) takes
    the plain path: the same checks in the same order, so the same error."""
    if isinstance(doc, dict) and not _check_tree(doc, field):
        members = _fast_members(doc)
        if members is not None:
            return members
    check_json_object(doc, field)  # raises what the plain path meets, if anything
    assert isinstance(doc, dict)
    return [(name, dumps(value, f"{field}.{name}")) for name, value in doc.items()]


def _fast_members(doc: dict[str, Any]) -> list[tuple[str, str]] | None:
    """The members of a tree-checked object without JavaScript-only floats, or None when
    one is not JSON or the whole would be over MAX_OBJECT_BYTES."""
    try:
        members = [(name, _encode(value)) for name, value in doc.items()]
        size = len(members) + 1 if members else 2  # braces and commas
        for name, text in members:
            key = _encode_str(name)
            size += len(key) if key.isascii() else len(key.encode("utf-8"))
            size += 1 + (len(text) if text.isascii() else len(text.encode("utf-8")))
    except (ValueError, TypeError):  # NaN, not JSON, a lone surrogate (UnicodeEncodeError)
        return None
    return members if size <= MAX_OBJECT_BYTES else None


def check_edit_fields(count: int, field: str) -> None:
    """One object edit (a merge, a signals update) sets or deletes at most MAX_EDIT_FIELDS
    fields."""
    if count > MAX_EDIT_FIELDS:
        raise AcmiValidationError(
            field,
            "max_fields",
            f"one edit sets or deletes at most {MAX_EDIT_FIELDS} fields, got {count}",
        )


# --- profiles -------------------------------------------------------------------------------


def check_profile(doc: object, field: str = "profile") -> dict[str, Any]:
    """A profile is a JSON object; actor_type and tenant_id, when given, follow their rules."""
    profile = check_json_object(doc, field)
    _check_profile_fields(profile, field)
    return profile


def profile_members(doc: object, field: str = "profile") -> list[tuple[str, str]]:
    """``check_profile``, and its members as ``json_members`` gives them."""
    members = json_members(doc, field)
    assert isinstance(doc, dict)
    _check_profile_fields(doc, field)
    return members


def _check_profile_fields(profile: dict[str, Any], field: str) -> None:
    if "actor_type" in profile:
        _check_actor_type(profile["actor_type"], f"{field}.actor_type")
    if "tenant_id" in profile and not isinstance(profile["tenant_id"], str):
        raise AcmiValidationError(f"{field}.tenant_id", "type", "must be a string")


def _check_actor_type(value: object, field: str) -> None:
    allowed = [a.value for a in ActorType]
    if value not in allowed:
        raise AcmiValidationError(field, "enum", f"must be one of {', '.join(allowed)}")


# The reference SDK fills every profile's and event's missing tenant_id with "madez"
# (src/client.ts autoFillTenantId, SPEC §12.1), whatever its key layout. Our default
# tenant, named "default" unless configured, lives in that same unprefixed layout, so it
# fills the same value: an event both write is then one member. Any other tenant (a
# configured default one too) fills its own name.
REFERENCE_TENANT_ID: Final = "madez"
SHIPPED_DEFAULT_TENANT: Final = "default"  # Settings.default_tenant's default


def tenant_id_fill(tenant: str) -> str:
    """The ``tenant_id`` auto-filled for ``tenant``'s writes."""
    return REFERENCE_TENANT_ID if tenant == SHIPPED_DEFAULT_TENANT else tenant


def profile_defaults(entity: EntityId, tenant: str) -> dict[str, str]:
    """Auto-filled profile fields; applied only where the stored doc has no value."""
    defaults = {"tenant_id": tenant_id_fill(tenant)}
    actor_type = ACTOR_TYPE_BY_CATEGORY.get(entity.category)
    if actor_type is not None:
        defaults = {"actor_type": actor_type.value, **defaults}
    return defaults


# --- events ---------------------------------------------------------------------------------

EVENT_FIELD_ORDER: Final = (
    "ts",
    "source",
    "kind",
    "correlationId",
    "summary",
    "parentCorrelationId",
    "payload",
    "speaker_type",
    "tenant_id",
)


SUMMARY_TOO_LONG: Final = (
    f"must be at most {MAX_SUMMARY_LEN} UTF-16 code units, as JavaScript counts them "
    "(a character beyond U+FFFF, e.g. an emoji, counts 2)"
)


def summary_too_long(summary: str) -> bool:
    """Over MAX_SUMMARY_LEN UTF-16 code units. Checked by parse_event and the read path
    rather than by an Event validator: a Python validator would cost every event read
    ~1 us, and the model's own bound (500 code points) is never tighter."""
    # a code point is at most 2 units: short text needs no counting
    return len(summary) > MAX_SUMMARY_LEN // 2 and utf16_len(summary) > MAX_SUMMARY_LEN


# The bounds sit inside each arm of the union, where pydantic checks them in Rust; bounds
# on the union as a whole run as two Python validators per event (a third of a read's
# validation). Same rule: an int or a float in [0, MAX_TS_MS].
EventTs = (
    Annotated[StrictInt, Field(ge=0, le=MAX_TS_MS)]
    | Annotated[StrictFloat, Field(ge=0, le=MAX_TS_MS)]
)


class Event(BaseModel):
    """A Comms v1.1 event. Unknown fields are kept (the reference drops them: a bug).

    An event read back from the store may be *legacy*: written by another tool (the
    reference CLI's ``event``, its MCP server) without following every rule. Its
    ``legacy`` says what it breaks (``("kind: required", "correlationId: required")``);
    it is empty for every event that passes validation, so for every event we write."""

    model_config = ConfigDict(extra="allow", frozen=True, allow_inf_nan=False)

    ts: EventTs
    source: StrictStr = Field(min_length=1)
    kind: StrictStr = Field(min_length=1)
    correlationId: StrictStr = Field(min_length=1)
    summary: StrictStr = Field(min_length=1, max_length=MAX_SUMMARY_LEN)
    parentCorrelationId: StrictStr | None = None
    payload: Any = None
    speaker_type: ActorType | None = None
    tenant_id: StrictStr | None = None

    @property
    def legacy(self) -> tuple[str, ...]:
        """What a stored legacy event breaks, as ``"<field>: <rule>"`` in the rule names
        validation uses; ``()`` for a valid event. A property, not a field: never
        serialised, and a stored field named ``legacy`` stays an ordinary unknown field
        (in ``model_extra`` and ``to_dict()``)."""
        return ()

    def to_dict(self) -> dict[str, Any]:
        """The event as stored: fields in a fixed order, unset optionals absent."""
        return _in_field_order(self.model_dump(mode="json", exclude_unset=True))

    def to_json(self) -> str:
        return dumps(self.to_dict(), "event")


def _in_field_order(data: dict[str, Any], *, tenant_first: bool = False) -> dict[str, Any]:
    order = _TENANT_FIRST_ORDER if tenant_first else EVENT_FIELD_ORDER
    ordered: dict[str, Any] = {n: data.pop(n) for n in order if n in data}
    ordered.update(data)  # unknown fields keep their order, after the known ones
    return ordered


# The reference SDK writes an explicit tenant_id before the speaker_type it fills (it
# fills after copying the given fields: src/client.ts timeline.append); in every other
# case speaker_type comes first. Ours writes the same text, so the same event is one member.
_TENANT_FIRST_ORDER: Final = (*EVENT_FIELD_ORDER[:-2], "tenant_id", "speaker_type")


class TenantFirstEvent(Event):
    """An event given its tenant_id but not its speaker_type, which was filled: stored
    (``to_dict``, ``to_json``) with tenant_id before speaker_type, as the reference SDK
    stores it. Built by ``encode_event`` only; a subclass, so other events carry no flag.
    Never validated (``model_construct``): its schema is built on its first dump, not at
    import (``defer_build``), so a cold start that never meets one pays nothing for it."""

    model_config = ConfigDict(defer_build=True)

    def to_dict(self) -> dict[str, Any]:
        return _in_field_order(self.model_dump(mode="json", exclude_unset=True), tenant_first=True)


class LegacyEvent(Event):
    """A stored event another writer left that breaks a rule (built by
    ``event_from_stored``, never validated into being). Its attributes hold what they
    can: a required string it lacks (or holds as another type) reads as ``""``, an
    optional one as None; ``to_dict()`` gives every stored field verbatim. A subclass, so
    valid events carry no private state (their validation stays as fast). Its schema is
    built when the first one is (``defer_build``): a write path never reads one."""

    model_config = ConfigDict(defer_build=True)

    _legacy: tuple[str, ...] = PrivateAttr(default=())
    _stored: dict[str, Any] = PrivateAttr(default_factory=dict)

    @property
    def legacy(self) -> tuple[str, ...]:
        return self._legacy

    def to_dict(self) -> dict[str, Any]:
        return _in_field_order(_copy_tree(self._stored))


_RULE_BY_PYDANTIC_TYPE = {
    "missing": "required",
    "string_too_short": "non_empty",
    "string_too_long": "max_length",
    "string_type": "type",
    "int_type": "type",
    "float_type": "type",
    "bool_type": "type",
    "dict_type": "type",
    "list_type": "type",
    "int_parsing": "type",
    "float_parsing": "type",
    "bool_parsing": "type",
    "finite_number": "finite",
    "greater_than": "range",
    "greater_than_equal": "range",
    "less_than": "range",
    "less_than_equal": "range",
    "string_pattern_mismatch": "pattern",
    "enum": "enum",
    "literal_error": "enum",
}


def pydantic_rule(error_type: str) -> str:
    """Our rule name for a pydantic error type (the API, the MCP tools and event
    validation speak one vocabulary: ``range``, ``type``, ``required``...); a type we do
    not map keeps its own name."""
    return _RULE_BY_PYDANTIC_TYPE.get(error_type, error_type)


def parse_event(raw: object, *, now_ms: int, tenant: str, field: str = "event") -> Event:
    """Validate a dict or Event, then auto-fill ts, speaker_type and tenant_id.

    Explicit values always win over auto-fill.
    """
    return encode_event(raw, now_ms=now_ms, tenant=tenant, field=field)[0]


# (prefix, speaker_type): an enum's .value is a property lookup, paid per event otherwise
_SPEAKER_BY_PREFIX: Final = tuple((p, a.value) for p, a in SPEAKER_TYPE_BY_SOURCE_PREFIX.items())


def encode_event(
    raw: object, *, now_ms: int, tenant: str, field: str = "event"
) -> tuple[Event, str]:
    """``parse_event``, and the event's stored JSON text (exactly ``event.to_json()``),
    built from the same one walk of the value that validates it: a write encodes each
    event once."""
    if isinstance(raw, Event):
        data: dict[str, Any] = raw.to_dict()
    elif isinstance(raw, dict):
        data = dict(raw)
    else:
        raise AcmiValidationError(field, "object", "event must be a JSON object")
    if "correlationId" not in data and "correlation_id" in data:
        raise AcmiValidationError(
            f"{field}.correlationId",
            "camel_case",
            "is required; Comms v1.1 uses camelCase correlationId, not correlation_id",
        )
    if "ts" not in data or data["ts"] is None:
        data["ts"] = now_ms
    else:
        _check_ts(data["ts"], f"{field}.ts")
    tenant_first = False
    if "speaker_type" not in data:
        source = data.get("source")
        if isinstance(source, str):
            for prefix, speaker in _SPEAKER_BY_PREFIX:
                if source.startswith(prefix):
                    data["speaker_type"] = speaker
                    tenant_first = "tenant_id" in data
                    break
    if "tenant_id" not in data:
        data["tenant_id"] = tenant_id_fill(tenant)
    summary = data.get("summary")
    if isinstance(summary, str) and summary_too_long(summary):
        raise AcmiValidationError(f"{field}.summary", "max_length", SUMMARY_TOO_LONG)
    floats = _check_tree(data, field)  # before pydantic walks a payload of any depth
    try:
        event: Event = Event.__pydantic_validator__.validate_python(data)  # model_validate
    except PydanticValidationError as exc:
        raise _validation_error(exc, field) from None
    # Unknown fields and payload must be JSON too (no NaN anywhere). The text is written
    # in field order, which is what model_dump gives for a validated event (to_json).
    try:
        text = _dumps_checked(_in_field_order(dict(data), tenant_first=tenant_first), floats, field)
    except AcmiValidationError:
        dumps(data, field)  # the error a check in the caller's key order meets first
        raise
    size = len(text) if text.isascii() else len(text.encode("utf-8"))
    if size > MAX_EVENT_BYTES:
        raise PayloadTooLarge(
            field,
            "max_event_bytes",
            f"is {size} bytes as JSON; an event holds at most {MAX_EVENT_BYTES} bytes",
        )
    if tenant_first:
        values = {**event.__dict__, **(event.__pydantic_extra__ or {})}
        event = TenantFirstEvent.model_construct(event.model_fields_set, **values)
    return event, text


def seconds_like(ts: float) -> bool:
    """A ts that can only be seconds (``SECONDS_TS_MIN`` <= ts < ``SECONDS_TS_END``)."""
    return SECONDS_TS_MIN <= ts < SECONDS_TS_END


def _check_ts(ts: object, field: str) -> None:
    if isinstance(ts, bool) or not isinstance(ts, int | float):
        raise AcmiValidationError(field, "type", "must be a number (milliseconds since epoch)")
    if not math.isfinite(ts) or not 0 <= ts <= MAX_TS_MS:
        raise AcmiValidationError(
            field, "range", f"must be a finite time in milliseconds between 0 and {MAX_TS_MS}"
        )
    if seconds_like(ts):
        raise AcmiValidationError(
            field,
            "seconds",
            f"{SECONDS_TS_RULE} ({SECONDS_TS_MIN} <= ts < {SECONDS_TS_END} is 1970-1973 "
            "as ms: multiply seconds by 1000)",
        )


def _validation_error(exc: PydanticValidationError, field: str) -> AcmiValidationError:
    err = exc.errors()[0]
    loc = ".".join(str(part) for part in err["loc"])
    path = f"{field}.{loc}" if loc else field
    rule = pydantic_rule(err["type"])
    msg = err["msg"]
    if err["type"] == "missing":
        msg = "is required (Comms v1.1)"
    return AcmiValidationError(path, rule, msg)


def event_from_member(member: bytes) -> Event | str:
    """Parse one stored timeline member. Returns the event (perhaps legacy), or why it
    was skipped. Tolerant on purpose: data written by other tools must never break a read.
    """
    try:
        data = json.loads(member.decode("utf-8"))
    except UnicodeDecodeError:
        return "not UTF-8"
    except ValueError:
        return "not JSON"
    except RecursionError:
        return "nested too deep"
    if not isinstance(data, dict):
        return "not a JSON object"
    return event_from_stored(data)


# Attributes a legacy event gets for a field it lacks or holds with the wrong type: never
# a valid value (writes need non-empty strings), so a reader can tell.
_ABSENT: Final[dict[str, Any]] = {"source": "", "kind": "", "correlationId": "", "summary": ""}
_STR_FIELDS: Final = frozenset(
    {"source", "kind", "correlationId", "summary", "parentCorrelationId", "tenant_id"}
)


def _usable_ts(ts: object) -> bool:
    if isinstance(ts, bool):
        return False
    return isinstance(ts, int) or (isinstance(ts, float) and math.isfinite(ts))


def _copy_tree(data: dict[str, Any]) -> dict[str, Any]:
    """A copy of stored JSON, containers included; iterative, as a stored value may nest
    deeper than copy.deepcopy's recursion reaches."""
    top: dict[str, Any] = dict(data)
    stack: list[dict[str, Any] | list[Any]] = [top]
    while stack:
        container = stack.pop()
        if isinstance(container, dict):
            for name, child in container.items():
                if isinstance(child, dict | list):
                    container[name] = fresh = type(child)(child)
                    stack.append(fresh)
        else:
            for index, child in enumerate(container):
                if isinstance(child, dict | list):
                    container[index] = fresh = type(child)(child)
                    stack.append(fresh)
    return top


def event_from_stored(data: dict[str, Any]) -> Event | str:
    """A stored event as the reference's readers show it: a valid event; or, when it has a
    usable ``ts`` (a finite number), a legacy event flagged with every rule it breaks
    (the reference MCP server's spawn and quota records have no ``source`` or
    ``summary``, its other tools a ``message`` instead: the bootstrap and ``cat`` show
    them, so every read does); else why it is skipped (``"ts: required"``)."""
    try:
        valid: Event = Event.__pydantic_validator__.validate_python(data)  # model_validate
    except PydanticValidationError as exc:
        errors = exc.errors()
    else:  # the common case first: a valid event costs one validation
        if not seconds_like(valid.ts) and (
            len(valid.summary) <= MAX_SUMMARY_LEN // 2 or not summary_too_long(valid.summary)
        ):
            return valid
        errors = []
    if "ts" not in data:
        return "ts: required"
    if not _usable_ts(data["ts"]):
        return "ts: type"
    summary = data.get("summary")
    too_long = isinstance(summary, str) and summary_too_long(summary)
    broken: dict[str, str] = {"summary": "max_length"} if too_long else {}
    for err in errors:
        name = str(err["loc"][0]) if err["loc"] else "event"
        broken.setdefault(name, _RULE_BY_PYDANTIC_TYPE.get(err["type"], err["type"]))
    if "ts" in broken:  # usable (checked above): so out of range; a union reports twice
        broken["ts"] = "range"
    elif seconds_like(data["ts"]):  # read as stored, never dropped: flagged
        broken["ts"] = "seconds"
    if "correlationId" in broken and "correlationId" not in data and "correlation_id" in data:
        broken["correlationId"] = "camel_case"
    values: dict[str, Any] = {}
    for name, value in data.items():
        # an out-of-range value of the right type (ts, a long summary) is kept as the
        # attribute; any other broken one only in to_dict()
        fits = name == "ts" or (name in _STR_FIELDS and isinstance(value, str))
        if name in broken and not fits:
            continue
        values[name] = ActorType(value) if name == "speaker_type" and value else value
    present = {n for n in Event.model_fields if n in values}
    event = LegacyEvent.model_construct(present, **{**_ABSENT, **values})
    order = {name: i for i, name in enumerate(EVENT_FIELD_ORDER)}
    event._legacy = tuple(
        f"{name}: {rule}"
        for name, rule in sorted(broken.items(), key=lambda kv: order.get(kv[0], len(order)))
    )
    event._stored = data
    return event
