"""Hybrid retrieval (`hybrid`: dense + BM25 fused by reciprocal rank, aggregated to papers),
its filters (`filters`) and fielded matching on the paper records (`metadata`)."""

from rag.retrieve.filters import Filters
from rag.retrieve.hybrid import DENSE_POOL, PaperHit, Retriever

__all__ = ["DENSE_POOL", "Filters", "PaperHit", "Retriever"]
