"""Hybrid ranking for memory search: BM25 over the lines of every layer (light stemming,
stop words dropped) fused with the cosine similarity of the lines' embeddings to the
query's. Pure: the caller reads the lines and the vectors (``memory/reads.py``).

Fusion is a weighted sum of the two scores, each normalised to [0, 1] over the lines
searched (BM25 by its best line, cosine from the provider's similarity floor to the best
line's), with the provider's weight on the embeddings (``embeddings.fusion_of``: each
provider declares both, ``VECTOR_WEIGHT`` and ``MIN_SIMILARITY`` where it does not):
``bench/semantic.py`` measured it against reciprocal rank fusion on the labelled set
(bench/RESULTS.md).

Two rules over the sum: a line holding every word of the query (as :func:`terms`) ranks
before any line that does not (a name, an identifier typed as it was written is found
first, whatever the embeddings say of other lines); and where the query names a heading
(every query word is in it: "lessons" and "## Lessons Learned"), a line under it that
holds none of the query's words is a semantic hit only when it is closer to the query
than its heading alone (``heading_similarity``). The heading line itself is the exact
hit that places the section; its lines are not all hits for the heading's sake, while
a query asking more than the heading still finds a line by its heading's help."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal

if TYPE_CHECKING:
    from acmi_core.memory.embeddings import Matrix

# BM25's usual constants: term saturation and length normalisation
K1: Final = 1.2
B: Final = 0.75
# the weight of the embeddings' side in the sum (the keyword side has 1 - this)
VECTOR_WEIGHT: Final = 0.8
# a line below this similarity is no semantic hit (a static model's unrelated lines sit
# mostly below 0.1; a provider may declare its own floor: e5's unrelated lines sit ~0.78)
MIN_SIMILARITY: Final = 0.1
RRF_K: Final = 60
Fusion = Literal["weighted", "rrf"]

_WORD: Final = re.compile(r"[a-z0-9]+")
_STOP: Final = (
    "a an and are as at be been but by can could did do does for from had has have how i"
    " if in into is it its me my of on or our should so than that the their them then"
    " there these they this to us was we were what when where which who whom why will"
    " with would you your"
)
STOP_WORDS: Final = frozenset(_STOP.split(" "))
_SUFFIXES: Final = (
    "ational", "ization", "fulness", "ousness", "iveness", "ements", "ations", "ation",
    "ments", "ement", "ities", "ingly", "ness", "ment", "ings", "ible", "able", "ally",
    "ity", "ies", "ing", "ers", "est", "ed", "er", "es", "ly", "s",
)  # fmt: skip


def stem(word: str) -> str:
    """A light suffix stripper (no dictionary): "migrating", "migration" and "migrated"
    share "migr"; words of four letters or fewer stay whole."""
    if len(word) <= 4:
        return word
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def terms(text: str) -> list[str]:
    """The stemmed words of ``text`` that BM25 counts (no stop words)."""
    return [stem(w) for w in _WORD.findall(text.casefold()) if w not in STOP_WORDS]


@dataclass(frozen=True)
class Ranked:
    """One line's place: its index in the caller's lines and its scores."""

    index: int
    score: float
    keyword: float  # BM25 normalised by the best line's
    similarity: float | None  # cosine to the query, None without embeddings


def bm25(lines: Sequence[Sequence[str]], query: Sequence[str]) -> list[float]:
    """Each line's BM25 score for ``query`` (both as :func:`terms`)."""
    n = len(lines)
    if not n or not query:
        return [0.0] * n
    average = sum(len(t) for t in lines) / n or 1.0
    wanted = set(query)
    df: Counter[str] = Counter()
    for line in lines:
        df.update(wanted.intersection(line))
    idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in wanted if df[t]}
    scores = []
    for line in lines:
        if not idf:
            scores.append(0.0)
            continue
        counts = Counter(t for t in line if t in idf)
        norm = K1 * (1 - B + B * len(line) / average)
        scores.append(sum(idf[t] * c * (K1 + 1) / (c + norm) for t, c in counts.items()))
    return scores


def named_headings(query: str, headings: Iterable[str | None]) -> set[str]:
    """The ``headings`` that hold every word of ``query`` (as :func:`terms`): the ones
    :func:`rank` compares a line against (a search embeds only these)."""
    wanted = set(terms(query))
    if not wanted:
        return set()
    return {h for h in set(headings) if h is not None and wanted.issubset(terms(h))}


def rank(
    texts: Sequence[str],
    query: str,
    similarity: Sequence[float] | None,
    *,
    fusion: Fusion = "weighted",
    vector_weight: float = VECTOR_WEIGHT,
    min_similarity: float = MIN_SIMILARITY,
    headings: Sequence[str | None] | None = None,
    heading_similarity: Sequence[float | None] | None = None,
    exact_first: bool = True,
) -> list[Ranked]:
    """The lines that match ``query`` by words or meaning, best first: those holding
    every query term, then the rest, each by score. ``similarity``: each line's cosine
    to the query (None: keyword only); ``vector_weight`` and ``min_similarity``: the
    provider's own (``embeddings.fusion_of``); ``headings``: each line's heading as it
    was embedded with it and ``heading_similarity`` that heading's own cosine to the
    query (None for a line embedded without one); ``exact_first``
    False: by score alone (the ranking before, for the bench's comparison)."""
    lines = [terms(t) for t in texts]
    wanted = set(terms(query))
    keyword = bm25(lines, terms(query))
    top = max(keyword, default=0.0) or 1.0
    norm_k = [k / top for k in keyword]
    # 0: the line holds every query term (lexical exact match wins), 1: it does not
    tier = [0 if exact_first and wanted and wanted.issubset(line) else 1 for line in lines]
    if similarity is None:
        out = [Ranked(i, k, k, None) for i, k in enumerate(norm_k) if k > 0]
        return sorted(out, key=lambda r: (tier[r.index], -r.score, r.index))
    sims = list(similarity)
    if headings is not None and heading_similarity is not None:
        named = named_headings(query, headings)
        # under a heading the query names, with none of its words and no closer to it
        # than the heading alone: the heading matched, not the line
        pairs = zip(headings, heading_similarity, strict=True)
        for i, (head, h) in enumerate(pairs):
            if head in named and h is not None and norm_k[i] == 0 and sims[i] <= h:
                sims[i] = min(sims[i], min_similarity)
    best = max(sims, default=0.0)
    span = best - min_similarity
    norm_v = [max(0.0, (s - min_similarity) / span) if span > 0 else 0.0 for s in sims]
    keep = [i for i in range(len(texts)) if norm_k[i] > 0 or norm_v[i] > 0]
    if fusion == "rrf":
        by_k = sorted((i for i in keep if norm_k[i] > 0), key=lambda i: -norm_k[i])
        by_v = sorted((i for i in keep if norm_v[i] > 0), key=lambda i: -norm_v[i])
        fused = dict.fromkeys(keep, 0.0)
        for place, i in enumerate(by_k):
            fused[i] += (1 - vector_weight) / (RRF_K + place + 1)
        for place, i in enumerate(by_v):
            fused[i] += vector_weight / (RRF_K + place + 1)
        peak = max(fused.values(), default=0.0) or 1.0
        scores = {i: f / peak for i, f in fused.items()}
    else:
        scores = {i: (1 - vector_weight) * norm_k[i] + vector_weight * norm_v[i] for i in keep}
    out = [Ranked(i, scores[i], norm_k[i], float(similarity[i])) for i in keep]
    return sorted(out, key=lambda r: (tier[r.index], -r.score, r.index))


def cosines(lines: Matrix, query: Matrix) -> list[float]:
    """Each unit row of ``lines`` against the unit ``query`` row."""
    if not len(lines):
        return []
    return [float(x) for x in lines @ query[0]]


__all__ = [
    "MIN_SIMILARITY",
    "VECTOR_WEIGHT",
    "Fusion",
    "Ranked",
    "bm25",
    "cosines",
    "named_headings",
    "rank",
    "stem",
    "terms",
]
