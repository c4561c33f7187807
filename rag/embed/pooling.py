"""Chunk vectors pooled from the vectors of the title and sentences they are made of, so that
ingest runs the model over each token once (rag.ingest, RAG_CHUNK_VECTORS=sentences)."""

from __future__ import annotations

import numpy as np

# The title's weight, as a multiple of its characters: the model reading "title. chunk" lets
# every token see the title, worth more than its share of characters. Fitted by
# scripts/fit_pooling.py on dense retrieval of seeds/ and PubMedQA (fit questions), reported
# on SciFact, which the choice never saw (figures in evals/README.md).
TITLE_WEIGHT = 3


def _spans(text: str, parts: list[str]) -> list[tuple[int, int]] | None:
    """Where each part (in order, possibly overlapping) starts and ends in text; None if one
    is not found as it is."""
    out, at = [], 0
    for part in parts:
        start = text.find(part, at)
        if start < 0:
            start = text.find(part)
            if start < 0:
                return None
        out.append((start, start + len(part)))
        at = start + 1
    return out


def chunk_weights(abstract: str, title: str | None, chunks: list[str], sentences: list[str]
                  ) -> np.ndarray | None:
    """Per chunk, the weight of the title (column 0) and of each sentence (the columns after)
    in its vector: the characters each shares with "title. chunk text" (the title's times
    TITLE_WEIGHT), the text the model
    would read for the chunk (rag.ingest.embed_text). Mean pooling, the model's own last
    step, weighs every token alike, so the length-weighted mean of the parts' vectors stands
    in for the vector of their concatenation (the parts only lose attention across sentence
    ends). No library computes
    this, hence by hand; None when a chunk or sentence is not found verbatim in the abstract
    (then the chunks are embedded by the model)."""
    sent_spans = _spans(abstract, sentences)
    chunk_spans = _spans(abstract, chunks)
    if sent_spans is None or chunk_spans is None:
        return None
    w = np.zeros((len(chunks), 1 + len(sentences)), dtype=np.float32)
    w[:, 0] = TITLE_WEIGHT * len(title or "")
    starts = np.array([a for a, _ in sent_spans])
    ends = np.array([b for _, b in sent_spans])
    for i, (a, b) in enumerate(chunk_spans):
        w[i, 1:] = np.clip(np.minimum(ends, b) - np.maximum(starts, a), 0, None)
        if not w[i, 1:].any():
            return None
    return w


def pooled(weights: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """Unit vectors of the weighted means (rows of weights over rows of vectors)."""
    out = weights @ vectors
    return out / np.clip(np.linalg.norm(out, axis=1, keepdims=True), 1e-12, None)  # type: ignore[no-any-return]
