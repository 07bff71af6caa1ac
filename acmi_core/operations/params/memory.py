"""The wake bundle's and the memory layers' params."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from acmi_core.operations.params.base import BUNDLE_EVENTS, PRUNE_DAYS, Params, bounded

SCOPE_DOC = (
    "main (everything; takes the handoff with a spawn) | group (hot memory and today, "
    "nothing private) | subagent (task context, one topic, hot memory)"
)
INCLUDE_DOC = "level-3 memory to load, comma-separated: topics, yesterday, archive"
TOPIC_DOC = "the one topic file to load: <slug> or topic:<slug> (main, subagent)"

# What the core checks, shown in the OpenAPI document.
MemoryEntity = Annotated[
    str, bounded(description="the memory's owner, e.g. agent:atlas", maxLength=256)
]


class BootstrapReadParams(Params):
    """An agent's wake bundle as text (markdown, or format=json). scope: main | group |
    subagent; include: topics,yesterday,archive; topic: one topic file; events: 0-200;
    max_tokens/max_bytes: a budget. spawn {session_id, model_id} logs a session start (a
    write; a main bundle then takes the handoff)."""

    agent: str = bounded(description="claude or agent:claude", maxLength=256)
    scope: str = Field("main", description=SCOPE_DOC)
    format: str = Field("markdown", description="json | markdown")
    events: int = bounded(BUNDLE_EVENTS, description="newest events, 0-200", minimum=0, maximum=200)
    # checked here: the core took any length (HTTP refused past 100)
    include: str | None = Field(None, max_length=100, description=INCLUDE_DOC)
    topic: str | None = bounded(None, description=TOPIC_DOC, maxLength=134)
    max_tokens: int | None = Field(None, description="budget in estimated tokens")
    max_bytes: int | None = Field(None, description="budget in bytes")
    spawn: dict[str, Any] | None = Field(
        None, description="the session to log: {session_id, model_id, host}"
    )

    def writes(self) -> bool:
        return self.spawn is not None


class MemoryRememberParams(Params):
    """Remember a line in an entity's memory: layer warm (MEMORY.md), hot
    (ACTIVE-CONTEXT.md), daily (today's note) or topic (topic: slug); section optional;
    ttl (30m, 24h, 7d; not daily): reads stop showing the line after that. A line the
    layer already holds is not stored again (already_held)."""

    entity: MemoryEntity
    text: str
    layer: str = "warm"
    section: str | None = None
    topic: str | None = None
    ttl: str | None = None


class MemorySearchParams(Params):
    """Search an entity's memory layers by words and meaning (mode hybrid: BM25 fused
    with embeddings; keyword: the lines holding the query's terms), fast layers first:
    {hits: [{layer, path, line, text, score}], ...}."""

    entity: MemoryEntity
    query: str
    limit: int = 20
    mode: str = Field("hybrid", description="hybrid | keyword", max_length=16)


class MemoryGetParams(Params):
    """Lines of one memory file by its path (ACTIVE-CONTEXT.md, MEMORY.md,
    memory/YYYY-MM-DD.md, memory/topics/<slug>.md, memory/archive/YYYY-QN.md,
    memory/heartbeat-state.json) and range from_line..to_line (1-based, inclusive, at most
    500 lines), numbered as memory_search numbers its hits: {lines: [{line, text}], ...}."""

    entity: MemoryEntity
    path: str = bounded(description="the file's path in the seed's tree", maxLength=256)
    from_line: int = bounded(1, description="the first line, from 1", minimum=1)
    to_line: int | None = bounded(
        None, description="the last line (default: from_line + 499)", minimum=1
    )


class MemoryForgetParams(Params):
    """Forget one memory line: line (numbered as memory_get and memory_search number it)
    of path (ACTIVE-CONTEXT.md, MEMORY.md, memory/YYYY-MM-DD.md, memory/topics/<slug>.md),
    or the first line holding text exactly; both: that line, only if it holds that text.
    Recorded on the entity's timeline as an audit event (path, line, layer; never the
    text)."""

    entity: MemoryEntity
    path: str = bounded(description="the file's path in the seed's tree", maxLength=256)
    line: int | None = bounded(None, description="the line's number, from 1", minimum=1)
    text: str | None = Field(None, description="the line's text, exactly")


class MemoryStatusParams(Params):
    """An entity's memory status: layers, budgets, handoff_pending."""

    entity: MemoryEntity


class MemoryActiveGetParams(Params):
    """The hot layer: {entity, path, text: ACTIVE-CONTEXT.md or null, sections, budget};
    with text, replace ACTIVE-CONTEXT.md first (needs a write key)."""

    entity: MemoryEntity
    text: str | None = None

    def writes(self) -> bool:
        return self.text is not None


class MemoryReviewParams(Params):
    """The weekly review: promote the last 7 days' lessons and decisions to MEMORY.md and
    prune the hot layer."""

    entity: MemoryEntity


class MemoryPruneParams(Params):
    """Prune the hot layer: completed tasks, items older than days (0-365) and yesterday's
    decisions move to today's note. Idempotent."""

    entity: MemoryEntity
    days: int = bounded(
        PRUNE_DAYS, description="how old a dated item may be", minimum=0, maximum=365
    )


class MemoryDailySummaryParams(Params):
    """A day's note (date YYYY-MM-DD, default today in the entity's tz): entries,
    decisions, lessons, takeaways, open tasks for tomorrow, the text."""

    entity: MemoryEntity
    date: str | None = bounded(None, description="YYYY-MM-DD", maxLength=10)


class MemoryTopicsCreateParams(Params):
    """Create the topic:<slug> file from the seed's template, linked from MEMORY.md."""

    entity: MemoryEntity
    slug: str = bounded(description="[A-Za-z0-9_.-]{1,128}", maxLength=128)
    name: str = bounded(description="one line")


class MemoryDebugParams(Params):
    """Missing pieces, hot-vs-warm conflicts and stale items: {ok, problems, ...}."""

    entity: MemoryEntity


class MemoryExportParams(Params):
    """The seed's file tree of an entity's memory: {entity, files: {path: text}}."""

    entity: MemoryEntity


class MemoryImportParams(Params):
    """Import a seed file tree ({path: text}; strict: refuse files over budget) into an
    entity's memory. Idempotent: a second import writes nothing."""

    entity: MemoryEntity
    files: dict[str, str]
    strict: bool = False


class MemoryHandoffParams(Params):
    """With text, or the HANDOFF template's parts (done, in_progress, next_steps,
    decisions, gotchas: lists of lines): leave a handoff (HANDOFF.md) for the next
    session; returns it. Without: take the pending handoff (read and cleared at once):
    {entity, handoff or null}."""

    entity: MemoryEntity
    text: str | None = None
    done: list[str] | None = None
    in_progress: list[str] | None = None
    next_steps: list[str] | None = None
    decisions: list[str] | None = None
    gotchas: list[str] | None = None


class BootstrapSpawnParams(BootstrapReadParams):
    """Log a spawn and read the wake bundle in the same step."""

    format: str = "json"


class MemoryActivePutParams(Params):
    """Replace an entity's ACTIVE-CONTEXT.md."""

    entity: MemoryEntity
    text: str


class MemoryHandoffTakeParams(Params):
    """Read and clear an entity's pending handoff (null when none)."""

    entity: MemoryEntity


class MemoryArchiveParams(Params):
    """Archive an entity's events older than the retention now."""

    entity: MemoryEntity
    retention_days: int | None = None
    max_events: int | None = None
