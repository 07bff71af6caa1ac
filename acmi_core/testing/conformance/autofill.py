"""``autofill`` (ACMI SPEC v1.3): actor_type, speaker_type and tenant_id."""

from __future__ import annotations

from acmi_core.base.model import tenant_id_fill
from acmi_core.testing.conformance.harness import Context, check, expect_equal
from acmi_core.testing.conformance.helpers import BASE_TS, make_event


@check("autofill", "explicit actor_type and tenant_id on a profile are kept")
def autofill_profile_explicit(ctx: Context) -> None:
    entity = ctx.entity("user")
    doc = {"actor_type": "system", "tenant_id": "other"}
    ctx.acmi.profile.set(entity, doc)
    expect_equal(ctx.acmi.profile.get(entity), doc, "profile with explicit values")


@check("autofill", "speaker_type from the source prefix: agent:, user:, system:")
def autofill_speaker_type(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    cases = {"agent:bot": "agent", "user:mikey": "human", "system:cron": "system"}
    for n, source in enumerate(cases):
        stored = acmi.timeline.append(entity, make_event(n, ts=BASE_TS + n, source=source))
        expect_equal(stored.to_dict().get("speaker_type"), cases[source], f"append ({source})")
    got = [e.to_dict().get("speaker_type") for e in acmi.timeline.read(entity)]
    expect_equal(got, list(cases.values()), "speaker_type read back")


@check("autofill", "tenant_id on an event is auto-filled with the client's tenant")
def autofill_event_tenant(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    stored = acmi.timeline.append(entity, make_event())
    expect_equal(
        stored.to_dict().get("tenant_id"), tenant_id_fill(acmi.tenant), "tenant_id (append result)"
    )
    (event,) = acmi.timeline.read(entity)
    expect_equal(event.to_dict().get("tenant_id"), tenant_id_fill(acmi.tenant), "tenant_id (read)")


@check("autofill", "explicit speaker_type and tenant_id on an event are kept")
def autofill_event_explicit(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    event = make_event(source="agent:bot", speaker_type="external", tenant_id="other")
    acmi.timeline.append(entity, event)
    (read,) = acmi.timeline.read(entity)
    expect_equal(read.to_dict().get("speaker_type"), "external", "explicit speaker_type")
    expect_equal(read.to_dict().get("tenant_id"), "other", "explicit tenant_id")


@check("autofill", "merge never overwrites a stored explicit actor_type or tenant_id")
def autofill_merge_keeps(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity("user")
    acmi.profile.set(entity, {"actor_type": "system", "tenant_id": "other"})
    merged = acmi.profile.merge(entity, {"x": 1})
    expected = {"actor_type": "system", "tenant_id": "other", "x": 1}
    expect_equal(merged, expected, "merge return value")
    expect_equal(acmi.profile.get(entity), expected, "profile after merge")


@check("autofill", "explicit actor_type or tenant_id in a merge does overwrite")
def autofill_merge_explicit(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity("user")
    acmi.profile.set(entity, {"a": 1})
    acmi.profile.merge(entity, {"actor_type": "external", "tenant_id": "other"})
    expected = {"a": 1, "actor_type": "external", "tenant_id": "other"}
    expect_equal(acmi.profile.get(entity), expected, "profile after an explicit merge")
