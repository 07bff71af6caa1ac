"""``validation``: bad input is rejected with AcmiValidationError and stores nothing."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, Final

from acmi_core.client import Acmi
from acmi_core.testing.conformance.harness import (
    CheckFn,
    Context,
    check,
    expect,
    expect_equal,
    expect_rejected,
)
from acmi_core.testing.conformance.helpers import expect_empty, filled_profile, make_event

NOT_OBJECTS: Final[tuple[Any, ...]] = (None, [], [{"a": 1}], "a string", 42, True)


MALFORMED_IDS: Final = ("", "no-colon", ":missing-cat", "cat:", "Cat:Bad")


def _id_operations(acmi: Acmi, entity: Any) -> list[tuple[str, Callable[[], object]]]:
    """Every entity-taking operation, called with ``entity``."""
    return [
        ("profile.get", lambda: acmi.profile.get(entity)),
        ("profile.set", lambda: acmi.profile.set(entity, {"a": 1})),
        ("profile.merge", lambda: acmi.profile.merge(entity, {"a": 1})),
        ("profile.delete", lambda: acmi.profile.delete(entity)),
        ("signals.get", lambda: acmi.signals.get(entity, "k")),
        ("signals.set", lambda: acmi.signals.set(entity, "k", 1)),
        ("signals.all", lambda: acmi.signals.all(entity)),
        ("signals.delete", lambda: acmi.signals.delete(entity, "k")),
        ("timeline.append", lambda: acmi.timeline.append(entity, make_event())),
        ("timeline.read", lambda: acmi.timeline.read(entity)),
        ("timeline.size", lambda: acmi.timeline.size(entity)),
        ("get", lambda: acmi.get(entity)),
        ("delete", lambda: acmi.delete(entity)),
    ]


def _malformed_id_check(raw: str) -> CheckFn:
    def run(ctx: Context) -> None:
        for name, action in _id_operations(ctx.acmi, raw):
            expect_rejected(action, f"{name}({raw!r})")

    return run


for _raw_id in MALFORMED_IDS:
    check("validation", f"malformed entity id {_raw_id!r} is rejected", store=False)(
        _malformed_id_check(_raw_id)
    )


@check("validation", "non-string entity ids are rejected", store=False)
def validation_id_type(ctx: Context) -> None:
    for raw in (None, 42, b"user:x", ["user", "x"]):
        for name, action in _id_operations(ctx.acmi, raw):
            expect_rejected(action, f"{name}({raw!r})")


@check("validation", "entity ids of up to 256 characters are accepted")
def validation_id_256(ctx: Context) -> None:
    base = ctx.entity(name="long")
    entity = ctx.track(base + "a" * (256 - len(base)))
    expect_equal(len(entity), 256, "id length")
    ctx.acmi.profile.set(entity, {"a": 1})
    expect_equal(
        ctx.acmi.profile.get(entity), filled_profile(ctx.acmi, entity, {"a": 1}), "profile"
    )


@check("validation", "entity ids over 256 characters are rejected", store=False)
def validation_id_257(ctx: Context) -> None:
    base = ctx.entity(name="long")
    entity = base + "a" * (257 - len(base))
    for name, action in _id_operations(ctx.acmi, entity):
        expect_rejected(action, f"{name}(id of 257 characters)")


@check("validation", "ids with dots, dashes, underscores and capitals work")
def validation_id_charset(ctx: Context) -> None:
    acmi = ctx.acmi
    for category in ("deal", "work_item", "my-cat2"):
        entity = ctx.entity(category, "A.b_C-9")
        acmi.profile.set(entity, {"ok": True})
        acmi.signals.set(entity, "ok", True)
        acmi.timeline.append(entity, make_event())
        expect_equal(acmi.get(entity).profile, filled_profile(acmi, entity, {"ok": True}), entity)
        expect_equal(acmi.signals.all(entity), {"ok": True}, entity)
        expect_equal(acmi.timeline.size(entity), 1, entity)


REQUIRED_EVENT_FIELDS: Final = ("source", "kind", "correlationId", "summary")


def _missing_field_check(name: str) -> CheckFn:
    def run(ctx: Context) -> None:
        acmi, entity = ctx.acmi, ctx.entity()
        event = make_event()
        del event[name]
        exc = expect_rejected(lambda: acmi.timeline.append(entity, event), f"event without {name}")
        expect(name in str(exc.field), f"field {exc.field!r} does not name {name}")
        if name == "correlationId":
            legacy = {**event, "correlation_id": "c-1"}
            expect_rejected(
                lambda: acmi.timeline.append(entity, legacy), "snake_case correlation_id"
            )
        expect_equal(acmi.timeline.size(entity), 0, "timeline size after rejections")

    return run


for _field_name in REQUIRED_EVENT_FIELDS:
    check("validation", f"event missing {_field_name} is rejected")(
        _missing_field_check(_field_name)
    )


@check("validation", "event required fields must be non-empty strings")
def validation_event_field_types(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    for name in REQUIRED_EVENT_FIELDS:
        for bad in ("", None, 5, ["x"], {"x": 1}):
            event = make_event(**{name: bad})
            expect_rejected(partial(acmi.timeline.append, entity, event), f"{name}={bad!r}")
    expect_rejected(
        lambda: acmi.timeline.append(entity, make_event(parentCorrelationId=5)),
        "parentCorrelationId=5",
    )
    bad_event: Any = ["not", "an", "object"]
    expect_rejected(lambda: acmi.timeline.append(entity, bad_event), "an event that is a list")
    expect_equal(acmi.timeline.size(entity), 0, "timeline size after rejections")


@check("validation", "invalid ts is rejected: NaN, infinite, negative, not a number")
def validation_ts(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    for bad in (float("nan"), float("inf"), -1, "1700000000000", True, [1], 1e300):
        event = make_event(ts=bad)
        expect_rejected(partial(acmi.timeline.append, entity, event), f"ts={bad!r}")
    expect_equal(acmi.timeline.size(entity), 0, "timeline size after rejections")


@check("validation", "summary of 500 characters is accepted")
def validation_summary_500(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    acmi.timeline.append(entity, make_event(summary="s" * 500))
    (event,) = acmi.timeline.read(entity)
    expect_equal(event.summary, "s" * 500, "summary")


@check("validation", "summary over 500 characters is rejected")
def validation_summary_501(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    exc = expect_rejected(
        lambda: acmi.timeline.append(entity, make_event(summary="s" * 501)), "summary of 501"
    )
    expect("summary" in str(exc.field), f"field {exc.field!r} does not name summary")
    expect_equal(acmi.timeline.size(entity), 0, "timeline size after rejection")


@check("validation", "speaker_type outside agent|human|system|external is rejected")
def validation_speaker_type(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    for bad in ("robot", "Agent", "", 1):
        event = make_event(speaker_type=bad)
        expect_rejected(partial(acmi.timeline.append, entity, event), f"speaker_type={bad!r}")
    expect_equal(acmi.timeline.size(entity), 0, "timeline size after rejections")


@check("validation", "non-object profiles are rejected by set, nothing stored")
def validation_profile_set(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    for bad in NOT_OBJECTS:
        expect_rejected(partial(acmi.profile.set, entity, bad), f"profile.set({bad!r})")
    expect_equal(acmi.profile.get(entity), None, "profile after rejected sets")
    acmi.profile.set(entity, {"kept": True})
    for bad in NOT_OBJECTS:
        expect_rejected(partial(acmi.profile.set, entity, bad), f"profile.set({bad!r})")
    expect_equal(acmi.profile.get(entity), filled_profile(acmi, entity, {"kept": True}), "profile")


@check("validation", "non-object profiles are rejected by merge, nothing stored")
def validation_profile_merge(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    for bad in NOT_OBJECTS:
        expect_rejected(partial(acmi.profile.merge, entity, bad), f"profile.merge({bad!r})")
    expect_equal(acmi.profile.get(entity), None, "profile after rejected merges")
    acmi.profile.set(entity, {"kept": True})
    for bad in NOT_OBJECTS:
        expect_rejected(partial(acmi.profile.merge, entity, bad), f"profile.merge({bad!r})")
    expect_equal(acmi.profile.get(entity), filled_profile(acmi, entity, {"kept": True}), "profile")


@check("validation", "actor_type outside agent|human|system|external is rejected")
def validation_actor_type(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    for bad in ("robot", "Human", "", None, 1):
        doc = {"actor_type": bad}
        expect_rejected(partial(acmi.profile.set, entity, doc), f"set actor_type={bad!r}")
        expect_rejected(partial(acmi.profile.merge, entity, doc), f"merge actor_type={bad!r}")
    expect_equal(acmi.profile.get(entity), None, "profile after rejections")
    for good in ("agent", "human", "system", "external"):
        acmi.profile.merge(entity, {"actor_type": good})
        got = acmi.profile.get(entity) or {}
        expect_equal(got.get("actor_type"), good, f"actor_type={good!r}")


@check("validation", "invalid limit is rejected: 0, -1, True, '5', 1.5")
def validation_limit(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    acmi.timeline.append(entity, make_event())
    bads: tuple[Any, ...] = (0, -1, True, "5", 1.5)
    for bad in bads:
        expect_rejected(partial(acmi.timeline.read, entity, limit=bad), f"limit={bad!r}")


@check("validation", "NaN and Infinity are rejected in profile, signals and payload")
def validation_nan(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    for bad in (float("nan"), float("inf"), [float("-inf")], {"deep": float("nan")}):
        expect_rejected(partial(acmi.profile.set, entity, {"v": bad}), f"profile {bad!r}")
        expect_rejected(partial(acmi.profile.merge, entity, {"v": bad}), f"merge {bad!r}")
        expect_rejected(partial(acmi.signals.set, entity, "v", bad), f"signal {bad!r}")
        expect_rejected(
            partial(acmi.timeline.append, entity, make_event(payload=bad)), f"payload {bad!r}"
        )
    expect_empty(acmi, entity, "after rejected NaN writes")


def _rejections(ctx: Context) -> list[tuple[str, Callable[[], object]]]:
    """One of each kind of bad input, for the single-error-type check."""
    acmi, entity = ctx.acmi, ctx.entity()
    bad: Any = None
    bad_list: Any = []
    cases: list[tuple[str, Callable[[], object]]] = [
        (f"entity {raw!r}", partial(acmi.profile.get, raw)) for raw in MALFORMED_IDS
    ]
    for name in REQUIRED_EVENT_FIELDS:
        event = {k: v for k, v in make_event().items() if k != name}
        cases.append((f"event without {name}", partial(acmi.timeline.append, entity, event)))
    cases += [
        ("entity id of 257", lambda: acmi.profile.get("user:" + "a" * 252)),
        ("signal key ''", lambda: acmi.signals.set(entity, "", 1)),
        ("signal key of 129", lambda: acmi.signals.set(entity, "k" * 129, 1)),
        ("profile None", lambda: acmi.profile.set(entity, bad)),
        ("profile list", lambda: acmi.profile.merge(entity, bad_list)),
        ("actor_type", lambda: acmi.profile.set(entity, {"actor_type": "robot"})),
        ("summary of 501", lambda: acmi.timeline.append(entity, make_event(summary="s" * 501))),
        ("limit 0", lambda: acmi.timeline.read(entity, limit=0)),
        ("ts NaN", lambda: acmi.timeline.append(entity, make_event(ts=float("nan")))),
        ("signal NaN", lambda: acmi.signals.set(entity, "k", float("nan"))),
        ("speaker_type", lambda: acmi.timeline.append(entity, make_event(speaker_type="x"))),
        ("get events=-1", lambda: acmi.get(entity, events=-1)),
    ]
    return cases


@check("validation", "every rejection is one type: AcmiValidationError, a ValueError", store=False)
def validation_single_type(ctx: Context) -> None:
    for what, action in _rejections(ctx):
        expect_rejected(action, what)  # AcmiValidationError, a ValueError, with field and rule
