"""What the CLI's agent-facing commands run on: the store itself or a deployed API.

Both sides answer with JSON-ready values (what ``--json`` prints), so a command is the
same code whichever is behind it. :class:`LocalBackend` calls the client; the HTTP
side (``acmi_core/cli/remote.py``) calls the API's routes with a key. Operator
commands (keys, sources, jobs, doctor, serve...) work on the store only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from acmi_core import Acmi


class Backend(Protocol):
    """The agent-facing operations, each the one call the API makes for it."""

    label: str  # what the CLI shows on stderr as where it works

    def profile_get(self, entity: str) -> dict[str, Any] | None: ...
    def profile_set(
        self, entity: str, doc: Mapping[str, Any], *, merge: bool
    ) -> dict[str, Any] | None: ...
    def signals_set(
        self, entity: str, values: Mapping[str, Any], *, merge: bool
    ) -> dict[str, Any]: ...
    def append(self, entity: str, event: Mapping[str, Any]) -> dict[str, Any]: ...
    def get(self, entity: str, events: int) -> dict[str, Any]: ...
    def list_page(self, category: str, cursor: str | None, limit: int) -> dict[str, Any]: ...
    def delete(self, entity: str) -> None: ...
    def cat(
        self,
        entities: Sequence[str],
        *,
        limit: int,
        since_ms: int | None,
        until_ms: int | None,
    ) -> list[dict[str, Any]]: ...
    def bootstrap(
        self,
        agent: str,
        *,
        format: str,
        scope: str,
        events: int,
        include: str | None,
        topic: str | None,
        max_tokens: int | None,
        spawn: Mapping[str, Any] | None,
    ) -> str: ...
    def spawn(
        self, agent: str, session_id: str, model_id: str, host: str | None
    ) -> dict[str, Any]: ...
    def active(self, agent: str) -> dict[str, Any]: ...
    def join(self, agent: str, thread: str, role: str) -> dict[str, Any]: ...
    def leave(self, agent: str, thread: str) -> None: ...
    def rollup_set(self, agent: str, summary: str) -> dict[str, Any]: ...
    def heartbeat(self, agent: str, status: str, note: str | None) -> dict[str, Any]: ...
    def work_create(
        self, id: str, profile: Mapping[str, Any], owner: str | None
    ) -> dict[str, Any]: ...
    def work_get(self, id: str, events: int) -> dict[str, Any]: ...
    def work_event(
        self, id: str, event: Mapping[str, Any], session_id: str | None
    ) -> dict[str, Any]: ...
    def work_signal(self, id: str, signals: Mapping[str, Any]) -> dict[str, Any]: ...
    def work_sessions(self, id: str, cursor: str | None, limit: int) -> dict[str, Any]: ...
    def work_list(
        self, owner: str | None, status: str | None, cursor: str | None, limit: int
    ) -> dict[str, Any]: ...
    def lock_claim(self, resource: str, owner: str, ttl_ms: int) -> dict[str, Any]: ...
    def lock_renew(self, resource: str, owner_token: str, ttl_ms: int) -> dict[str, Any]: ...
    def lock_release(self, resource: str, owner_token: str) -> dict[str, Any]: ...
    def lock_get(self, resource: str) -> dict[str, Any]: ...
    def hitl_create(
        self,
        topic: str,
        request: str,
        *,
        asked_by: str,
        urgency: str,
        addressee: str | None,
        correlation_id: str | None,
    ) -> dict[str, Any]: ...
    def hitl_list(
        self, addressee: str | None, state: str, cursor: str | None, limit: int
    ) -> dict[str, Any]: ...
    def hitl_resolve(self, correlation_id: str, resolution: str, by: str) -> dict[str, Any]: ...
    # the memory layers (acmi.memory; routes/memory.py): what an agent does with its memory
    def memory_status(self, entity: str) -> dict[str, Any]: ...
    def memory_review(self, entity: str) -> dict[str, Any]: ...
    def memory_search(self, entity: str, query: str, limit: int) -> dict[str, Any]: ...
    def memory_remember(
        self, entity: str, text: str, layer: str, section: str | None, topic: str | None
    ) -> dict[str, Any]: ...
    def memory_active(self, entity: str, text: str | None) -> dict[str, Any]: ...
    def memory_daily_summary(self, entity: str, date: str | None) -> dict[str, Any]: ...
    def memory_topic_create(self, entity: str, slug: str, name: str) -> dict[str, Any]: ...
    def memory_prune(self, entity: str, days: int) -> dict[str, Any]: ...
    def memory_handoff(self, entity: str, text: str) -> dict[str, Any]: ...
    def memory_take_handoff(self, entity: str) -> dict[str, Any] | None: ...
    def memory_debug(self, entity: str) -> dict[str, Any]: ...
    # the seed's file tree as {relative path: text}, as GET/POST /v1/memory/{e}/export|import
    def memory_export(self, entity: str) -> dict[str, str]: ...
    def memory_import(self, entity: str, files: dict[str, str], strict: bool) -> dict[str, Any]: ...
    def close(self) -> None: ...


class LocalBackend:
    """The store, through the client (the same configuration as ``create_acmi()``).

    The client's typed answers (TypedDicts) are handed on as the plain JSON objects the
    protocol prints (``dict(...)``: the HTTP backend's answers are decoded JSON)."""

    def __init__(self, acmi: Acmi, label: str) -> None:
        self.acmi, self.label = acmi, label

    def profile_get(self, entity: str) -> dict[str, Any] | None:
        return self.acmi.profile.get(entity)

    def profile_set(
        self, entity: str, doc: Mapping[str, Any], *, merge: bool
    ) -> dict[str, Any] | None:
        profile = self.acmi.profile
        return profile.merge(entity, doc) if merge else profile.set(entity, doc)

    def signals_set(self, entity: str, values: Mapping[str, Any], *, merge: bool) -> dict[str, Any]:
        if merge:
            self.acmi.signals.update(entity, values)
            return self.acmi.signals.all(entity)
        return dict(self.acmi.signals.replace(entity, values))

    def append(self, entity: str, event: Mapping[str, Any]) -> dict[str, Any]:
        return self.acmi.timeline.append(entity, event).to_dict()

    def get(self, entity: str, events: int) -> dict[str, Any]:
        return self.acmi.get(entity, events=events).to_dict()

    def list_page(self, category: str, cursor: str | None, limit: int) -> dict[str, Any]:
        page = self.acmi.list_page(category, cursor=cursor, limit=limit)
        return {"entities": page.entities, "next_cursor": page.next_cursor}

    def delete(self, entity: str) -> None:
        self.acmi.delete(entity)

    def cat(
        self,
        entities: Sequence[str],
        *,
        limit: int,
        since_ms: int | None,
        until_ms: int | None,
    ) -> list[dict[str, Any]]:
        merged = self.acmi.timeline.cat(entities, limit=limit, since_ms=since_ms, until_ms=until_ms)
        return [{"entity": entity, **event.to_dict()} for entity, event in merged]

    def bootstrap(
        self,
        agent: str,
        *,
        format: str,
        scope: str,
        events: int,
        include: str | None,
        topic: str | None,
        max_tokens: int | None,
        spawn: Mapping[str, Any] | None,
    ) -> str:
        bundle = self.acmi.bootstrap(
            agent,
            format=format,
            scope=scope,
            events=events,
            include=include,
            topic=topic,
            max_tokens=max_tokens,
            spawn=spawn,
        )
        return bundle.text

    def spawn(self, agent: str, session_id: str, model_id: str, host: str | None) -> dict[str, Any]:
        return dict(self.acmi.agents.spawn(agent, session_id, model_id, host))

    def active(self, agent: str) -> dict[str, Any]:
        return self.acmi.agents.active(agent)

    def join(self, agent: str, thread: str, role: str) -> dict[str, Any]:
        return dict(self.acmi.agents.join(agent, thread, role))

    def leave(self, agent: str, thread: str) -> None:
        self.acmi.agents.leave(agent, thread)

    def rollup_set(self, agent: str, summary: str) -> dict[str, Any]:
        return self.acmi.agents.set_rollup(agent, summary)

    def heartbeat(self, agent: str, status: str, note: str | None) -> dict[str, Any]:
        return dict(self.acmi.agents.heartbeat(agent, status, note))

    def work_create(self, id: str, profile: Mapping[str, Any], owner: str | None) -> dict[str, Any]:
        return dict(self.acmi.work.create(id, profile, owner=owner).to_dict())

    def work_get(self, id: str, events: int) -> dict[str, Any]:
        return dict(self.acmi.work.get(id, events).to_dict())

    def work_event(
        self, id: str, event: Mapping[str, Any], session_id: str | None
    ) -> dict[str, Any]:
        return self.acmi.work.event(id, event, session_id)

    def work_signal(self, id: str, signals: Mapping[str, Any]) -> dict[str, Any]:
        return self.acmi.work.signal(id, signals)

    def work_sessions(self, id: str, cursor: str | None, limit: int) -> dict[str, Any]:
        return dict(self.acmi.work.sessions_page(id, cursor=cursor, limit=limit).to_dict())

    def work_list(
        self, owner: str | None, status: str | None, cursor: str | None, limit: int
    ) -> dict[str, Any]:
        return dict(self.acmi.work.list(owner, status, cursor=cursor, limit=limit).to_dict())

    def lock_claim(self, resource: str, owner: str, ttl_ms: int) -> dict[str, Any]:
        return dict(self.acmi.locks.claim(resource, owner, ttl_ms).to_dict())

    def lock_renew(self, resource: str, owner_token: str, ttl_ms: int) -> dict[str, Any]:
        return dict(self.acmi.locks.renew(resource, owner_token, ttl_ms).to_dict())

    def lock_release(self, resource: str, owner_token: str) -> dict[str, Any]:
        return dict(self.acmi.locks.release(resource, owner_token).to_dict())

    def lock_get(self, resource: str) -> dict[str, Any]:
        return dict(self.acmi.locks.get(resource).to_dict())

    def hitl_create(
        self,
        topic: str,
        request: str,
        *,
        asked_by: str,
        urgency: str,
        addressee: str | None,
        correlation_id: str | None,
    ) -> dict[str, Any]:
        created = self.acmi.hitl.create(
            topic,
            request,
            asked_by=asked_by,
            urgency=urgency,
            addressee=addressee,
            correlation_id=correlation_id,
        )
        return {"item": created.item, "created": created.created}

    def hitl_list(
        self, addressee: str | None, state: str, cursor: str | None, limit: int
    ) -> dict[str, Any]:
        return dict(self.acmi.hitl.list(addressee, state, limit=limit, cursor=cursor).to_dict())

    def hitl_resolve(self, correlation_id: str, resolution: str, by: str) -> dict[str, Any]:
        return dict(self.acmi.hitl.resolve(correlation_id, resolution, by=by).to_dict())

    def memory_status(self, entity: str) -> dict[str, Any]:
        return self.acmi.memory.status(entity)

    def memory_review(self, entity: str) -> dict[str, Any]:
        return self.acmi.memory.review(entity)

    def memory_search(self, entity: str, query: str, limit: int) -> dict[str, Any]:
        return self.acmi.memory.search(entity, query, limit=limit)

    def memory_remember(
        self, entity: str, text: str, layer: str, section: str | None, topic: str | None
    ) -> dict[str, Any]:
        return self.acmi.memory.remember(entity, text, layer=layer, section=section, topic=topic)

    def memory_active(self, entity: str, text: str | None) -> dict[str, Any]:
        if text is not None:
            self.acmi.memory.set_active(entity, text)
        return self.acmi.memory.active(entity)

    def memory_daily_summary(self, entity: str, date: str | None) -> dict[str, Any]:
        return self.acmi.memory.daily_summary(entity, date)

    def memory_topic_create(self, entity: str, slug: str, name: str) -> dict[str, Any]:
        return self.acmi.memory.topic_create(entity, slug, name)

    def memory_prune(self, entity: str, days: int) -> dict[str, Any]:
        return self.acmi.memory.prune(entity, days)

    def memory_handoff(self, entity: str, text: str) -> dict[str, Any]:
        return self.acmi.memory.handoff(entity, text)

    def memory_take_handoff(self, entity: str) -> dict[str, Any] | None:
        return self.acmi.memory.take_handoff(entity)

    def memory_debug(self, entity: str) -> dict[str, Any]:
        return self.acmi.memory.debug(entity)

    def memory_export(self, entity: str) -> dict[str, str]:
        from acmi_core.memory.tree import tree_texts

        return tree_texts(self.acmi.memory.export_snapshot(entity))

    def memory_import(self, entity: str, files: dict[str, str], strict: bool) -> dict[str, Any]:
        from acmi_core.memory.tree import parse_texts

        return self.acmi.memory.import_snapshot(entity, parse_texts(files), strict=strict)

    def close(self) -> None:
        self.acmi.store.close()
