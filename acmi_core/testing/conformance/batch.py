"""``batch``: queued writes applied together, all or nothing, in one round trip."""

from __future__ import annotations

from acmi_core.base.errors import AcmiValidationError, CorruptData
from acmi_core.base.model import EntityId, tenant_id_fill
from acmi_core.testing.conformance.harness import (
    Context,
    check,
    expect,
    expect_equal,
    expect_raises,
    expect_rejected,
)
from acmi_core.testing.conformance.helpers import (
    BASE_TS,
    cids,
    entity_keys,
    expect_empty,
    filled_profile,
    make_event,
)


@check("batch", "every queued op is visible after the batch")
def batch_all_visible(ctx: Context) -> None:
    acmi = ctx.acmi
    second = ctx.entity("agent")
    first = ctx.entity(beside=second)  # one atomic write: one bucket (bucket 0, the agent's)
    acmi.signals.set(second, "gone", 1)
    with acmi.batch() as batch:
        batch.profile.set(first, {"a": 1})
        batch.profile.merge(second, {"b": 2})
        batch.signals.set(first, "s", "one")
        batch.signals.update(second, {"t": 2, "u": [3]})
        batch.signals.delete(second, "gone")
        batch.timeline.append(first, make_event(1, ts=BASE_TS))
        batch.timeline.extend(second, [make_event(2, ts=BASE_TS), make_event(3, ts=BASE_TS + 1)])
        expect_equal(acmi.profile.get(first), None, "profile before the batch is applied")
    expect_equal(acmi.profile.get(first), filled_profile(acmi, first, {"a": 1}), "first profile")
    expect_equal(acmi.profile.get(second), filled_profile(acmi, second, {"b": 2}), "second profile")
    expect_equal(acmi.signals.all(first), {"s": "one"}, "first signals")
    expect_equal(acmi.signals.all(second), {"t": 2, "u": [3]}, "second signals")
    expect_equal(cids(acmi.timeline.read(first)), ["conf-c-1"], "first timeline")
    expect_equal(cids(acmi.timeline.read(second)), ["conf-c-2", "conf-c-3"], "second timeline")


@check("batch", "apply() without a with-block applies once")
def batch_apply(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    batch = acmi.batch()
    batch.signals.set(entity, "a", 1)
    batch.profile.delete(entity)
    batch.apply()
    expect_equal(acmi.signals.all(entity), {"a": 1}, "signals after apply()")
    expect_rejected(batch.apply, "applying a batch twice")


@check("batch", "auto-fill applies inside a batch")
def batch_autofill(ctx: Context) -> None:
    acmi, agent = ctx.acmi, ctx.entity("agent")
    user = ctx.entity("user", beside=agent)
    before = acmi.clock()
    with acmi.batch() as batch:
        batch.profile.set(user, {"name": "u"})
        batch.profile.merge(agent, {"name": "a"})
        batch.timeline.append(user, make_event(1, source="user:someone"))
    after = acmi.clock()
    expect_equal(acmi.profile.get(user), filled_profile(acmi, user, {"name": "u"}), "user profile")
    expect_equal(
        acmi.profile.get(agent), filled_profile(acmi, agent, {"name": "a"}), "agent profile"
    )
    (event,) = acmi.timeline.read(user)
    expect(before <= event.ts <= after, f"batch ts {event.ts} not within [{before}, {after}]")
    expect_equal(event.to_dict().get("speaker_type"), "human", "speaker_type")
    expect_equal(event.to_dict().get("tenant_id"), tenant_id_fill(acmi.tenant), "event tenant_id")


@check("batch", "later ops in a batch see earlier ones")
def batch_sequential(ctx: Context) -> None:
    acmi, first, second = ctx.acmi, ctx.entity(), ctx.entity()
    with acmi.batch() as batch:
        batch.profile.set(first, {"a": 1})
        batch.profile.merge(first, {"b": 2})
        batch.signals.set(first, "x", 1)
        batch.signals.delete(first, "x")
        batch.signals.set(first, "y", 2)
        batch.profile.set(second, {"gone": True})
        batch.profile.delete(second)
    expect_equal(
        acmi.profile.get(first), filled_profile(acmi, first, {"a": 1, "b": 2}), "set+merge"
    )
    expect_equal(acmi.signals.all(first), {"y": 2}, "set, delete, set")
    expect_equal(acmi.profile.get(second), None, "set then delete")


@check("batch", "all or nothing: an op on a wrong-type key fails the whole batch")
def batch_atomic_wrong_type(ctx: Context) -> None:
    acmi, first, second = ctx.acmi, ctx.entity(ctx.category), ctx.entity()
    timeline_key = acmi.keys.timeline(EntityId.parse(second))
    acmi.store.execute(("SET", timeline_key, "x"))
    batch = acmi.batch()
    batch.profile.set(first, {"a": 1})
    batch.timeline.append(second, make_event())
    expect_raises(CorruptData, batch.apply, "batch with an append onto a STRING key")
    expect_equal(acmi.profile.get(first), None, "the batch's first op (profile.set)")
    expect_equal(acmi.list(ctx.category), [], "index entries written by the failed batch")
    expect_equal(acmi.store.execute(("GET", timeline_key)), b"x", "the wrong-type key")
    expect_raises(
        CorruptData, lambda: acmi.timeline.append(second, make_event()), "append onto a STRING"
    )


@check("batch", "all or nothing: an op on a corrupt stored object fails the whole batch")
def batch_atomic_corrupt_object(ctx: Context) -> None:
    acmi, first, second = ctx.acmi, ctx.entity(), ctx.entity()
    _, signals_key, _ = entity_keys(acmi, second)
    acmi.store.execute(("SET", signals_key, "[1,2]"))
    batch = acmi.batch()
    batch.signals.set(first, "a", 1)
    batch.signals.set(second, "b", 2)
    expect_raises(CorruptData, batch.apply, "batch with a signal set onto a JSON array")
    expect_equal(acmi.signals.all(first), {}, "the batch's first op (signals.set)")
    expect_equal(acmi.store.execute(("GET", signals_key)), b"[1,2]", "the corrupt key")


@check("batch", "a batch whose block raises stores nothing")
def batch_block_raises(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()

    class BoomError(Exception):
        pass

    def run() -> None:
        with acmi.batch() as batch:
            batch.profile.set(entity, {"a": 1})
            batch.signals.set(entity, "s", 1)
            batch.timeline.append(entity, make_event())
            raise BoomError

    expect_raises(BoomError, run, "the block's exception")
    expect_empty(acmi, entity, "after a block that raised")


@check("batch", "an invalid op is rejected as queued and the batch stores nothing")
def batch_invalid_op(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()

    def run() -> None:
        with acmi.batch() as batch:
            batch.profile.set(entity, {"a": 1})
            batch.signals.set(entity, "s", 1)
            batch.timeline.append(entity, {"source": "agent:x"})

    expect_rejected(run, "queuing an event without kind/correlationId/summary")
    expect_empty(acmi, entity, "after a batch with an invalid op")


@check("batch", "entities of different buckets: one atomic write or refused, never split")
def batch_across_buckets(ctx: Context) -> None:
    acmi = ctx.acmi
    keys = acmi.keys
    first = ctx.entity()
    # an entity of another bucket when the tenant has several (ACMI_CLUSTER_BUCKETS)
    second = next(
        e
        for e in (f"user:conf-{ctx.token}-other-{n}" for n in range(1000))
        if keys.buckets == 1 or keys.bucket_of(e) != keys.bucket_of(first)
    )
    ctx.track(second)
    batch = acmi.batch()
    batch.signals.set(first, "a", 1)
    if keys.buckets == 1:  # one slot per tenant: the batch is one script run
        batch.signals.set(second, "b", 2)
        batch.apply()
        expect_equal(acmi.signals.all(second), {"b": 2}, "the second entity's signals")
        expect_equal(acmi.signals.all(first), {"a": 1}, "the first entity's signals")
        return
    error = expect_raises(
        AcmiValidationError, lambda: batch.signals.set(second, "b", 2), "a batch over buckets"
    )
    expect_equal((error.field, error.rule), ("entity", "one_bucket"), "the refusal")
    expect(first in str(error) and second in str(error), f"names both entities: {error}")
    batch.apply()  # what was queued before the refusal still applies, in its bucket
    expect_equal(acmi.signals.all(second), {}, "nothing stored for the refused entity")
    expect_equal(acmi.signals.all(first), {"a": 1}, "the first entity's signals")
    page = expect_raises(
        AcmiValidationError, lambda: acmi.timeline.cat([first, second]), "cat over buckets"
    )
    expect_equal((page.field, page.rule), ("entities[1]", "one_bucket"), "the cat refusal")
