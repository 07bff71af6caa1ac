"""What the CLI's agent-facing commands run on: the store itself or a deployed API.

A command calls one operation by its row's name, ``backend.call("<row>", **fields)``,
with the fields of the row's params model; both sides validate them through that model
and answer the same JSON-ready value (what ``--json`` prints): the row's core callable's
answer. :class:`LocalBackend` calls that callable on the client; the HTTP side
(``acmi_core/cli/remote.py``) makes the row's request with a key. So a new operation
needs no backend code: its row (params model, core callable, route) is enough, unless
its command's answer is not its core callable's (``ANSWERS`` below). Operator commands
(keys, sources, jobs, doctor, serve...) work on the store only (``store_only`` rows).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol

from acmi_core import Acmi

if TYPE_CHECKING:
    from acmi_core.operations import params as p


class Backend(Protocol):
    """One call per operation row, and the one operation that differs between sides."""

    label: str  # what the CLI shows on stderr as where it works

    def call(self, name: str, /, **fields: Any) -> Any:
        """The operation ``name`` (a row with a params model) given its params' fields:
        checked by the model (a failure names the field and the rule), then the core
        callable's answer, JSON-ready."""
        ...

    def cat(
        self,
        entities: Sequence[str],
        *,
        limit: int,
        since_ms: int | None,
        until_ms: int | None,
    ) -> list[dict[str, Any]]:
        """Several timelines merged newest first. Not a ``call``: its row's params are
        durations the MCP tool resolves on the server's clock, while the command resolves
        them here (``--since``/``--until``, this machine's clock) into a window; and the
        API has no multi-entity read, so the remote side reads each timeline and merges."""
        ...

    def close(self) -> None: ...


# The rows whose command answers other than its core callable does with the params'
# fields by name: the params choose between two calls (a replace or a merge), carry a
# value the callable takes in another form (a file tree, a profile with its title),
# or the answer is one field of what the callable returns (a bundle's text).
Answer = Callable[[Acmi, Any], Any]


def _profile_put(acmi: Acmi, q: p.ProfilePutParams) -> Any:
    profile = acmi.profile
    return profile.merge(q.entity, q.profile) if q.merge else profile.set(q.entity, q.profile)


def _signals_put(acmi: Acmi, q: p.SignalsPutParams) -> Any:
    if q.merge:
        acmi.signals.update(q.entity, q.signals)
        return acmi.signals.all(q.entity)
    return dict(acmi.signals.replace(q.entity, q.signals))


def _append(acmi: Acmi, q: p.EventsAppendParams) -> Any:
    # the row's callable is the route's (raw body, idempotency key): the client's append
    return acmi.timeline.append(q.entity, q.event).to_dict()


def deletes(q: p.DeleteParams) -> None:
    """The command deletes: a dry run (the MCP tool's default) is refused on both sides."""
    if q.dry_run:
        from acmi_core.base.errors import AcmiValidationError

        raise AcmiValidationError("dry_run", "deletes", "must be false: this call deletes")


def _delete(acmi: Acmi, q: p.DeleteParams) -> None:
    deletes(q)
    acmi.delete(q.entity)


def _bootstrap(acmi: Acmi, q: p.BootstrapReadParams) -> str:
    from acmi_core.operations import bind  # imported already by the call that got here

    return acmi.bootstrap(**bind.fields(q)).text  # the bundle's text, in its format


def _threads(acmi: Acmi, q: p.AgentsThreadsParams) -> Any:
    from acmi_core.base.errors import AcmiValidationError

    if q.action != "list":  # joining and leaving are their own rows
        raise AcmiValidationError("action", "enum", "is list here: add and remove are rows")
    return acmi.agents.active(q.agent)


def _work_create(acmi: Acmi, q: p.WorkCreateParams) -> Any:
    doc = dict(q.profile or {})
    if q.title is not None:
        doc["title"] = q.title
    return acmi.work.create(q.id, doc, owner=q.owner, status=q.status).to_dict()


def _memory_active(acmi: Acmi, q: p.MemoryActiveGetParams) -> Any:
    if q.text is not None:
        acmi.memory.set_active(q.entity, q.text)
    return acmi.memory.active(q.entity)


def _memory_export(acmi: Acmi, q: p.MemoryExportParams) -> dict[str, str]:
    from acmi_core.memory.tree import tree_texts

    return tree_texts(acmi.memory.export_snapshot(q.entity))


def _memory_import(acmi: Acmi, q: p.MemoryImportParams) -> Any:
    from acmi_core.memory.tree import parse_texts

    return acmi.memory.import_snapshot(q.entity, parse_texts(q.files), strict=q.strict)


def _workflow_lessons(acmi: Acmi, q: p.WorkflowsLessonsParams) -> Any:
    from acmi_core.coordination.workflows import workflow_id

    # the route's answer: the workflow beside its lessons (the core gives the list)
    found = acmi.workflows.lessons(workflow=q.workflow, agent=q.agent, limit=q.limit)
    return {"workflow": str(workflow_id(q.workflow)), "lessons": found}


ANSWERS: Final[dict[str, Answer]] = {
    "entities.profile.put": _profile_put,
    "entities.signals.put": _signals_put,
    "entities.events.append": _append,
    "entities.delete": _delete,
    "bootstrap.read": _bootstrap,
    "agents.threads": _threads,
    "work.create": _work_create,
    "memory.active.get": _memory_active,
    "memory.export": _memory_export,
    "memory.import": _memory_import,
    "workflows.lessons": _workflow_lessons,
}


class LocalBackend:
    """The store, through the client (the same configuration as ``create_acmi()``).

    The client's typed answers (TypedDicts) are handed on as the plain JSON objects the
    protocol prints (``dict(...)``: the HTTP backend's answers are decoded JSON)."""

    def __init__(self, acmi: Acmi, label: str) -> None:
        self.acmi, self.label = acmi, label

    def call(self, name: str, /, **fields: Any) -> Any:
        # imported at the first call: --help and the store-only commands need no table
        from acmi_core.operations import bind, operation

        row = operation(name)
        params = bind.validated(row, fields)
        answer = ANSWERS.get(name)
        if answer is not None:
            return answer(self.acmi, params)
        return bind.call_core(self.acmi, row, params)

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

    def close(self) -> None:
        self.acmi.store.close()
