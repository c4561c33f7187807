"""Chunk vectors pooled from what the model computes for the title and sentences, so that
ingest runs the model over each token once (rag.ingest, RAG_CHUNK_VECTORS=sentences).

The model's own last step is mean pooling over a text's token states, so the vector of
"title. chunk text" is close to the mean of the states of the title's and the chunk's
sentences' tokens, each computed in a pass of its own: what they lose is attention across
sentence ends. A chunk's vector here is that mean, over the content tokens of each part (the
special [CLS] and [SEP] tokens each pass adds are left out), each sentence counted by the
share of its characters the chunk holds, plus a fixed correction vector fitted to bring such
means closest to the vectors of the model reading the chunks. No library computes this, hence
by hand. scripts/fit_pooling.py fits the title's weight and the correction on seeds/ and
PubMedQA and reports on SciFact, which the fit never sees (figures in pooling.json and in
docs/speed.md)."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

PARAMS = Path(__file__).with_name("pooling.json")


@lru_cache(maxsize=1)
def _fitted() -> dict[str, Any]:
    return json.loads(PARAMS.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


@lru_cache(maxsize=1)
def params() -> tuple[float, np.ndarray]:
    """The fitted title weight and correction vector (pooling.json, written by
    scripts/fit_pooling.py --write), read once (ingest asks per paper)."""
    bias = np.asarray(_fitted()["bias"], dtype=np.float32)
    bias.flags.writeable = False
    return float(_fitted()["title_weight"]), bias


def recipe() -> str:
    """What an index of pooled chunk vectors records of how they were made (its fingerprint):
    a refit makes other vectors, so another index."""
    return str(_fitted()["recipe"])


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


def chunk_weights(abstract: str, title: str | None, chunks: list[str], sentences: list[str],
                  title_weight: float | None = None) -> np.ndarray | None:
    """Per chunk, the weight of the title (column 0) and of each sentence (the columns after)
    in its vector: the share of each sentence's characters the chunk holds, and the title's
    weight (every chunk is read as "title. chunk text", rag.ingest.embed_text). None when a
    chunk or sentence is not found verbatim in the abstract (then the chunks are embedded by
    the model)."""
    sent_spans = _spans(abstract, sentences)
    chunk_spans = _spans(abstract, chunks)
    if sent_spans is None or chunk_spans is None:
        return None
    w = np.zeros((len(chunks), 1 + len(sentences)), dtype=np.float32)
    if title:
        w[:, 0] = params()[0] if title_weight is None else title_weight
    starts = np.array([a for a, _ in sent_spans])
    ends = np.array([b for _, b in sent_spans])
    lengths = np.clip(ends - starts, 1, None)
    for i, (a, b) in enumerate(chunk_spans):
        w[i, 1:] = np.clip(np.minimum(ends, b) - np.maximum(starts, a), 0, None) / lengths
        if not w[i, 1:].any():
            return None
    return w


def pooled(weights: np.ndarray, sums: np.ndarray, counts: np.ndarray,
           bias: np.ndarray | None = None) -> np.ndarray:
    """One unit vector per row of weights: the weighted mean of the parts' content-token
    states (part j's states add up to sums[j] over counts[j] tokens), made a unit vector, plus
    the correction vector (pooling.json's unless given), made one again."""
    out = unit((weights @ sums) / np.clip(weights @ counts, 1e-9, None)[:, None])
    return unit(out + (params()[1] if bias is None else bias))


def unit(x: np.ndarray) -> np.ndarray:
    """Rows of x scaled to unit length."""
    return x / np.clip(np.linalg.norm(x, axis=1, keepdims=True), 1e-12, None)  # type: ignore[no-any-return]
