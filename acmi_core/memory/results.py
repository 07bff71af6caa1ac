"""What the memory commands answer (``MemoryAPI``): one TypedDict per answer, so the
answer is still the plain dict whose JSON is the contract while mypy checks every key the
commands write and every key a surface reads. ``Json`` marks a value read back from stored
JSON as it is (heartbeat-state's fields: any JSON a tool or a seed tree wrote)."""

# No `from __future__ import annotations`: on Python 3.11 a TypedDict's NotRequired
# written as a string is taken for a required key at run time.
from typing import Literal, NotRequired, TypedDict

from pydantic import JsonValue

from acmi_core.memory.layers import Layer

Json = JsonValue


class BudgetCheck(TypedDict):
    """One file measured against its layer's budget (``BudgetReport.to_dict``)."""

    path: str | None
    layer: Layer
    lines: int
    bytes: int
    tokens: int
    max_lines: int | None
    max_bytes: int | None
    over: list[str]
    fix: str | None


class LayerBudget(TypedDict):
    max_lines: int
    max_bytes: int
    per: Literal["file"]


class LayerStatus(TypedDict):
    files: int
    lines: int
    bytes: int
    tokens: int
    budget: LayerBudget | None
    verdict: Literal["ok", "over"]
    over: list[str | None]
    fix: str | None


class Staleness(TypedDict):
    date: Json  # the stored value as it is; a date only when it is a string
    days_ago: int | None


# "from" is a keyword: the functional form names it. "from": heartbeat-state's
# next_scheduled, or the seed's rhythm.
Due = TypedDict("Due", {"date": str, "overdue": bool, "from": Literal["heartbeat-state", "rhythm"]})


class MemoryStatus(TypedDict):
    entity: str
    today: str
    files: list[BudgetCheck]
    layers: dict[str, LayerStatus]
    daily_notes_in_window: int
    timeline_events: int
    staleness: dict[str, Staleness]
    next_maintenance: dict[str, Due]
    handoff_pending: bool
    heartbeat_state: dict[str, Json]


class ActiveRead(TypedDict):
    entity: str
    path: Literal["ACTIVE-CONTEXT.md"]
    text: str | None
    sections: dict[str, Json]
    budget: BudgetCheck | None


class ActiveSet(TypedDict):
    entity: str
    path: Literal["ACTIVE-CONTEXT.md"]
    budget: BudgetCheck


class SearchHit(TypedDict):
    layer: str
    path: str
    line: int
    text: str
    score: float
    # hybrid: the BM25 score normalised by the best line's, and the cosine to the query
    keyword: NotRequired[float]
    similarity: NotRequired[float]


class SemanticInfo(TypedDict):
    """What a hybrid search embedded: the provider, lines found in the vector index, lines
    embedded at search (the index lacked them), and why it ranked by words alone."""

    provider: str
    indexed: int
    embedded: int
    error: NotRequired[str]
    deferred: NotRequired[int]  # lines the index lacks, past the search's time budget
    hint: NotRequired[str]  # ACMI_EMBEDDINGS unset and no model installed: what to install


class MemorySearch(TypedDict):
    entity: str
    query: str
    order: list[str]
    hits: list[SearchHit]
    total: int
    truncated: bool
    mode: NotRequired[str]  # hybrid | keyword (absent: keyword, as before the modes)
    semantic: NotRequired[SemanticInfo]
    archived_unread: NotRequired[list[str]]  # quarters the sink could not read, when any
    # Never the core's: the API and the CLI add why no sink was read (a URL was given but
    # no sink could be built). Declared here, since a TypedDict with it is no unpacking of
    # one without it, for mypy.
    notes: NotRequired[list[str]]


class GotLine(TypedDict):
    line: int
    text: str


class MemoryGot(TypedDict):
    entity: str
    path: str
    layer: Layer | Literal["heartbeat"]
    from_line: int
    to_line: int  # the last line answered (from_line - 1 when none)
    total_lines: int
    lines: list[GotLine]
    text: str
    more: bool  # lines after to_line exist
    truncated: bool  # a daily note read from a window cut at its event cap


class ForgetAudit(TypedDict):
    ts: int
    correlationId: str
    kind: str


class Forgot(TypedDict):
    entity: str
    path: str
    layer: Layer | Literal["heartbeat"]
    line: int
    text: str  # the line forgotten (the caller's own; the audit event never holds it)
    forgotten: Literal[True]
    audit: ForgetAudit


class Remembered(TypedDict):
    entity: str
    layer: Layer
    section: str
    path: str | None
    stored: Literal[True]
    budget: BudgetCheck
    # the layer already held the line: nothing was written (a second remember of a line,
    # or a retry of the first)
    already_held: bool


class TopicCreated(TypedDict):
    entity: str
    topic: str
    created: bool
    path: str
    text: str


class Handoff(TypedDict):
    entity: str
    text: str
    ts: int


class StoredHandoff(TypedDict):
    """The pending handoff as stored (``{text, ts}``)."""

    text: str
    ts: int


class Moved(TypedDict):
    section: str
    item: str


class VectorsPruned(TypedDict):
    """What a prune of the vector index did (``memory/vectors.py``)."""

    entity: str
    provider: str
    scanned: int  # vectors looked at
    dropped: int  # stale vectors deleted
    chunks: int  # sweep scripts run (one HSCAN step of the index each)
    more: bool  # stopped at a cap (pages or chunks): the next run goes on
    busy: NotRequired[bool]  # a vector was written meanwhile (or another run moved the
    # pass): the next run begins a new pass
    skipped: NotRequired[str]  # why nothing was pruned
    pages: NotRequired[int]  # timeline pages read and marked (PAGE_EVENTS events each)
    marked: NotRequired[int]  # needed digests added to the pass


class Pruned(TypedDict):
    entity: str
    moved: list[Moved]
    written: bool
    vectors: NotRequired[VectorsPruned]  # the stale vectors deleted after the move


class Reviewed(TypedDict):
    entity: str
    since: str
    promoted: list[str]
    moved: list[Moved]
    next_review: str
    written: bool
    truncated: bool


class DailySummary(TypedDict):
    entity: str
    date: str
    path: str
    summary: str
    entries: list[str]
    decisions: list[str]
    lessons: list[str]
    takeaways: list[str]
    tomorrow: list[str]
    text: str
    budget: BudgetCheck


class Missing(TypedDict):
    piece: str
    fix: str


class HotWarmConflict(TypedDict):
    about: str
    hot: str
    warm: str
    rule: Literal["current_state"]
    wins: str
    fix: str


class FactLine(TypedDict):
    layer: str
    path: str
    line: int
    text: str


class Evidence(TypedDict):
    path: str
    line: str


class RuleConflict(TypedDict):
    """Two layers stating one subject differently, the seed's rule that decides it (§8)."""

    about: str
    lines: list[FactLine]
    rule: str
    wins: str
    evidence: list[Evidence]
    evidence_rule: str
    fix: str


class Where(TypedDict):
    layer: str
    path: str
    line: int


class Duplicate(TypedDict):
    text: str
    where: list[Where]
    fix: str


class Stale(TypedDict):
    item: str
    why: str
    fix: str


class MemoryDebug(TypedDict):
    entity: str
    ok: bool
    missing: list[Missing]
    conflicts: list[HotWarmConflict]
    stale: list[Stale]
    over_budget: list[BudgetCheck]
    rule_conflicts: list[RuleConflict]  # the seed's four rules over keyed facts (§8)
    duplicates: list[Duplicate]  # a line held in more than one layer


class Imported(TypedDict):
    entity: str
    files: int
    ignored: list[str]
    over_budget: list[BudgetCheck]
    writes: int
    events_added: int
    events_removed: int
    events_unchanged: int
    signals_written: int
    profile_written: int
    topics_written: int
    archives_written: int
    files_written: list[str]
    startup_written: int  # startup files (SOUL.md, USER.md, AGENTS.md) written


# --- what a surface builds around an answer (the core returns the answer alone) -----------


class HandoffTaken(TypedDict):
    """``POST .../handoff/take``: the taken handoff, wrapped (null when none)."""

    handoff: StoredHandoff | None


class HandoffTakenTool(HandoffTaken):
    """The ``memory_handoff`` tool's take: the entity beside the taken handoff."""

    entity: str


class Exported(TypedDict):
    """``GET .../export`` and the ``memory_export`` tool: the tree as path -> text (the core
    answers a ``MemorySnapshot``)."""

    entity: str
    files: dict[str, str]
