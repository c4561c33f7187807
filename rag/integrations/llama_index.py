"""rag's index as a LlamaIndex retriever, and rag's embedder as a LlamaIndex embedding.

    from llama_index.core.query_engine import CitationQueryEngine
    from rag.integrations.llama_index import RagRetriever

    engine = CitationQueryEngine.from_args(retriever=RagRetriever(k=5), llm=my_llm)

RagRetriever runs rag's own search (hybrid BM25 + embeddings over the chunks, one hit per
paper) and returns one node per paper: its abstract, with the paper's record as metadata.
Nothing on the `rag ask` path imports this module (llama_index takes seconds to import).
"""

from __future__ import annotations

from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import (
    NodeRelationship,
    NodeWithScore,
    QueryBundle,
    RelatedNodeInfo,
    TextNode,
)
from pydantic import PrivateAttr

from rag.config import Settings, get_settings
from rag.corpus.paper import Paper
from rag.embed import MODEL_NAME, Embedder
from rag.retrieve import Retriever

# What the model need not read (identifiers), and what says nothing about the topic (the
# embedding would only blur with it).
LLM_EXCLUDED = ["label", "arxiv_id", "doi"]
EMBED_EXCLUDED = ["label", "authors", "year", "venue", "arxiv_id", "doi"]


def paper_node(paper: Paper) -> TextNode:
    """One paper as a LlamaIndex node: id is the paper id, text is the abstract; its source
    document (`ref_doc_id`, kept by nodes a query engine splits from it) is the paper too."""
    metadata = {"title": paper.title or "", "label": paper.label,
                "authors": ", ".join(paper.authors), "year": paper.year, "venue": paper.venue,
                "arxiv_id": paper.arxiv_id, "doi": paper.doi}
    return TextNode(id_=paper.paper_id, text=paper.abstract, metadata=metadata,
                    excluded_llm_metadata_keys=list(LLM_EXCLUDED),
                    excluded_embed_metadata_keys=list(EMBED_EXCLUDED),
                    relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=paper.paper_id)})


class RagRetriever(BaseRetriever):
    """The k best papers for a query, as nodes scored by their best chunk's cosine similarity."""

    def __init__(self, settings: Settings | None = None, k: int = 10,
                 retriever: Retriever | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.settings = settings or get_settings()
        self.k = k
        self.retriever = retriever or Retriever(self.settings)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        hits = self.retriever.search(query_bundle.query_str, self.k)
        return [NodeWithScore(node=paper_node(h.paper), score=h.relevance) for h in hits]


class RagEmbedding(BaseEmbedding):
    """rag's embedding model (MiniLM, ONNX, normalised vectors) for LlamaIndex indexes."""

    _embedder: Embedder = PrivateAttr()

    def __init__(self, settings: Settings | None = None, embedder: Embedder | None = None,
                 **kwargs: Any) -> None:
        kwargs.setdefault("model_name", MODEL_NAME)
        super().__init__(**kwargs)
        if embedder is None:
            from rag.embed import get_embedder

            s = settings or get_settings()
            embedder = get_embedder(s.model_cache, s.embed_threads, precision=s.embed_precision)
        self._embedder = embedder

    @classmethod
    def class_name(cls) -> str:
        return "RagEmbedding"

    def _get_query_embedding(self, query: str) -> list[float]:
        return [float(x) for x in self._embedder.embed([query])[0]]

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_query_embedding(text)

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return [[float(x) for x in v] for v in self._embedder.embed(texts)]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)
