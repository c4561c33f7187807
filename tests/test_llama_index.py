"""rag inside LlamaIndex: a retriever (one node per paper) and an embedding, run by LlamaIndex's
own query engines with its mock LLM, over the real index of seeds/."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

Q = "which systems target long-sequence training?"


@pytest.fixture(scope="module")
def rag_retriever(seeded_settings: Any) -> Any:
    from rag.integrations.llama_index import RagRetriever

    return RagRetriever(seeded_settings, k=4)


def test_the_retriever_gives_one_node_per_paper(rag_retriever: Any, retriever: Any) -> None:
    nodes = rag_retriever.retrieve(Q)
    assert len(nodes) == 4 and len({n.node.id_ for n in nodes}) == 4
    papers = {p.paper_id: p for p in retriever.papers()}
    for n in nodes:
        paper = papers[n.node.id_]
        assert n.node.text == paper.abstract and 0 < n.score <= 1
        assert n.node.metadata["title"] == (paper.title or "") and n.node.metadata["label"] == paper.label
        assert set(n.node.metadata) == {"title", "label", "authors", "year", "venue", "arxiv_id", "doi"}
    assert "Skrull" in {n.node.metadata["label"] for n in nodes}


def test_a_retriever_query_engine_runs_over_it(rag_retriever: Any) -> None:
    from llama_index.core.llms import MockLLM
    from llama_index.core.query_engine import RetrieverQueryEngine
    from llama_index.core.schema import MetadataMode

    engine = RetrieverQueryEngine.from_args(rag_retriever, llm=MockLLM())
    response = engine.query(Q)
    assert [n.node.id_ for n in response.source_nodes] == [n.node.id_ for n in rag_retriever.retrieve(Q)]
    # the LLM reads titles and abstracts, not identifiers
    node = response.source_nodes[0].node
    shown = node.get_content(metadata_mode=MetadataMode.LLM)
    assert node.metadata["title"] in shown and node.text in shown
    assert "arxiv_id" not in shown and "doi" not in shown and "label" not in shown
    assert node.text[:60] in str(response)  # MockLLM answers with its prompt


def test_a_citation_query_engine_numbers_the_papers(rag_retriever: Any) -> None:
    from llama_index.core.llms import MockLLM
    from llama_index.core.query_engine import CitationQueryEngine

    engine = CitationQueryEngine(rag_retriever, llm=MockLLM())
    response = engine.query(Q)
    texts = [n.node.get_content() for n in response.source_nodes]
    assert texts and texts[0].startswith("Source 1:") and "Source 1:" in str(response)
    # each numbered source leads back to its paper
    papers = {n.node.id_: n.node.metadata["title"] for n in rag_retriever.retrieve(Q)}
    for n in response.source_nodes:
        assert n.node.ref_doc_id in papers and n.node.metadata["title"] == papers[n.node.ref_doc_id]


def test_the_embedding_is_rags_embedder(seeded_settings: Any, retriever: Any) -> None:
    import numpy as np
    from llama_index.core import VectorStoreIndex

    from rag.integrations.llama_index import RagEmbedding, paper_node

    embedding = RagEmbedding(embedder=retriever.embedder)
    vec = embedding.get_query_embedding("long-sequence training")
    assert np.allclose(vec, retriever.embed_query("long-sequence training"), atol=1e-6)
    papers = retriever.papers()[:12]
    index = VectorStoreIndex([paper_node(p) for p in papers], embed_model=embedding)
    skrull = next(p for p in papers if p.label == "Skrull") if any(p.label == "Skrull" for p in papers) else papers[0]
    top = index.as_retriever(similarity_top_k=1).retrieve(skrull.abstract)
    assert top[0].node.id_ == skrull.paper_id


def test_nothing_on_the_ask_path_imports_llama_index() -> None:
    code = ("import sys, rag.cli, rag.answering.pipeline, rag.api.app; "
            "print(sorted(m for m in sys.modules if m.startswith('llama_index')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_llama_index_reads_the_chunk_collection_as_nodes_of_their_papers(
        seeded_settings: Any, retriever: Any) -> None:
    from llama_index.core import VectorStoreIndex
    from llama_index.core.vector_stores.utils import metadata_dict_to_node
    from llama_index.vector_stores.chroma import ChromaVectorStore

    from rag.integrations.llama_index import RagEmbedding
    from rag.store import Store

    store = Store(seeded_settings)
    try:
        page = store.collection.get(include=["metadatas", "documents"])
        # the paper record is stored once per paper, on its first chunk
        assert sum("paper" in m for m in page["metadatas"]) == len(retriever.papers())
        for cid, meta, doc in zip(page["ids"], page["metadatas"], page["documents"], strict=True):
            node = metadata_dict_to_node(meta, doc)  # raises "Node content not found" if legacy
            assert node.id_ == cid and node.ref_doc_id == meta["paper_id"] == meta["doc_id"]
        vector_store = ChromaVectorStore(chroma_collection=store.client.get_collection(store.name))
        index = VectorStoreIndex.from_vector_store(
            vector_store, embed_model=RagEmbedding(embedder=retriever.embedder))
        hits = index.as_retriever(similarity_top_k=3).retrieve("long-sequence training with sequence parallelism")
        papers = {p.paper_id: p for p in retriever.papers()}
        assert len(hits) == 3
        for hit in hits:
            assert hit.node.ref_doc_id in papers
            assert hit.node.metadata["title"] == (papers[hit.node.ref_doc_id].title or "")
    finally:
        store.close()
