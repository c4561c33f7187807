"""Chunk vectors pooled from the sentence pass (RAG_CHUNK_VECTORS=sentences): the model reads
each title and sentence once at ingest, and a chunk's vector is the mean of the token states
of what it holds, corrected by a fitted vector (rag.embed.pooling)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rag.embed.pooling import chunk_weights, params
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
    # "As of Oct. 2022, ..." is one sentence; "workload.We present Tutel" two (a lost space)
    assert report.chunks == 110 and report.sentences == 460
    return Retriever(settings)


def test_each_sentence_finds_the_chunk_that_holds_it(retriever) -> None:  # type: ignore[no-untyped-def]
    """Dense search alone, every sentence of 60+ characters of a seeds/ paper with several
    chunks as the query: its nearest chunk is its own paper's, and one that holds it. Measured
    (379 sentences, int8 model): pooled vectors 359 own paper, 351 the holding chunk; the model
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


def test_weights_are_the_share_of_each_sentence_a_chunk_holds() -> None:
    abstract = "First sentence here. Second one is longer than that. Third."
    sents = ["First sentence here.", "Second one is longer than that.", "Third."]
    chunks = ["First sentence here. Second one is longer than that.",
              "Second one is longer than that. Third."]
    w = chunk_weights(abstract, "A title", chunks, sents)
    assert w is not None
    assert w[:, 0].tolist() == [params()[0]] * 2  # the title with every chunk, as "title. chunk" is read
    assert w[0, 1:].tolist() == [1, 1, 0] and w[1, 1:].tolist() == [0, 1, 1]
    half = chunk_weights(abstract, None, ["First sentence here. Second one", "one is longer than that. Third."],
                         sents)
    assert half is not None and half[0, 0] == 0
    assert np.allclose(half[0, 1:], [1, 10 / 31, 0]) and np.allclose(half[1, 1:], [0, 24 / 31, 1])


def test_a_chunk_not_found_in_the_abstract_leaves_its_paper_to_the_model() -> None:
    """A splitter that changed the text (whitespace, say) gives no weights: ingest then has
    the model read that paper's chunks as before, instead of pooling the wrong sentences."""
    abstract = "One.  Two."
    assert chunk_weights(abstract, None, ["One. Two."], ["One.", "Two."]) is None
    w = chunk_weights(abstract, None, ["One.  Two."], ["One.", "Two."])
    assert w is not None and w[0, 0] == 0 and np.all(w[0, 1:] == [1, 1])


def test_a_pooled_vector_is_the_mean_of_its_parts_tokens() -> None:
    """The token sums the embedder gives reproduce its own vectors: a text cut in two and
    pooled back (no correction) lands next to the model's vector of the whole text (the two
    halves only lose attention across the cut, and the [CLS]/[SEP] states), and far nearer
    to it than to another text's."""
    from rag.config import Settings
    from rag.embed import get_embedder
    from rag.embed.pooling import pooled

    emb = get_embedder(Settings().model_cache)
    whole = ("We present a pipeline-parallel training system for long sequences. It splits each "
             "sequence across devices and overlaps communication with computation.")
    first, second = whole.split(". ", 1)
    vecs, sums, counts = emb.embed_sums([first + ".", second, whole, "Protein folding in yeast cells."])
    assert counts[:2].sum() == counts[2]  # the two halves hold the whole's content tokens
    both = pooled(np.array([[1.0, 1.0]], dtype=np.float32), sums[:2], counts[:2], bias=np.zeros(384, np.float32))
    near, far = float(both[0] @ vecs[2]), float(both[0] @ vecs[3])
    assert near >= 0.85 and near > far + 0.5, (near, far)  # measured 0.868
    alone = pooled(np.array([[1.0]], dtype=np.float32), sums[2:3], counts[2:3], bias=np.zeros(384, np.float32))
    assert float(alone[0] @ vecs[2]) >= 0.98  # without [CLS] and [SEP], nearly the model's own
