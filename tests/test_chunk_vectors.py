"""Chunk vectors pooled from sentence vectors (RAG_CHUNK_VECTORS=sentences): the model reads
each title and sentence once at ingest, and a chunk's vector is the length-weighted mean of
the vectors of what it holds (rag.embed.pooling)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rag.embed.pooling import TITLE_WEIGHT, chunk_weights
from tests.conftest import SEEDS


@pytest.fixture(scope="module")
def retriever(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """seeds/ in an index of pooled chunk vectors."""
    from rag.config import Settings
    from rag.ingest import ingest
    from rag.retrieve import Retriever

    home: Path = tmp_path_factory.mktemp("pooled") / ".rag"
    settings = Settings(home=home, seeds=SEEDS, llm="none", chunk_vectors="sentences")
    report = ingest([SEEDS], settings, show_progress=False)
    assert report.chunks == 110 and report.sentences == 453
    return Retriever(settings)


def test_each_sentence_finds_the_chunk_that_holds_it(retriever) -> None:  # type: ignore[no-untyped-def]
    """Dense search alone, every sentence of 60+ characters of a seeds/ paper with several
    chunks as the query: its nearest chunk is its own paper's, and one that holds it. Measured
    (379 sentences, int8 model): pooled vectors 356 own paper, 344 the holding chunk; the model
    reading each chunk (RAG_CHUNK_VECTORS=model) 348 and 319. Pooling over the wrong sentences
    or onto the wrong chunk falls far below."""
    snap = retriever.snapshot()
    store = retriever.store
    checked = own_paper = holding = 0
    for pid in snap.papers:
        chunks = [c for c, p in snap.chunk_paper.items() if p == pid]
        if len(chunks) < 2:
            continue
        sents, vecs = store.sentences([pid])[pid]
        for sent, vec in zip(sents, vecs, strict=True):
            if len(sent) < 60:
                continue
            checked += 1
            best = store.query_ids(vec, 1)[0][0]
            own_paper += snap.chunk_paper[best] == pid
            holding += snap.chunk_paper[best] == pid and sent in snap.chunk_text[best]
    assert checked >= 300
    assert own_paper / checked >= 0.93 and holding / checked >= 0.88, (checked, own_paper, holding)


def test_weights_are_the_characters_each_part_gives_a_chunk() -> None:
    abstract = "First sentence here. Second one is longer than that. Third."
    sents = ["First sentence here.", "Second one is longer than that.", "Third."]
    chunks = ["First sentence here. Second one is longer than that.",
              "Second one is longer than that. Third."]
    w = chunk_weights(abstract, "A title", chunks, sents)
    assert w is not None
    assert w[:, 0].tolist() == [7 * TITLE_WEIGHT] * 2  # the title with every chunk, as "title. chunk" is read
    assert w[0, 1:].tolist() == [20, 31, 0] and w[1, 1:].tolist() == [0, 31, 6]


def test_a_chunk_not_found_in_the_abstract_leaves_its_paper_to_the_model() -> None:
    """A splitter that changed the text (whitespace, say) gives no weights: ingest then has
    the model read that paper's chunks as before, instead of pooling the wrong sentences."""
    abstract = "One.  Two."
    assert chunk_weights(abstract, None, ["One. Two."], ["One.", "Two."]) is None
    w = chunk_weights(abstract, None, ["One.  Two."], ["One.", "Two."])
    assert w is not None and w[0, 0] == 0 and np.all(w[0, 1:] == [4, 4])
