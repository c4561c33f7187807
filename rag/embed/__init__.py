"""The embedding model, all-MiniLM-L6-v2: onnxruntime on the CPU (`onnx`), sentence-transformers
on a CUDA GPU for ingest where one is there (`gpu`, imported only then)."""

from typing import Any

from rag.embed.onnx import (
    DIM,
    MAX_TOKENS,
    MODEL_NAME,
    Embedder,
    get_embedder,
    model_path,
    preload,
    preload_from_env,
    prepared,
    tokenizer_path,
)


def model_for(settings: Any) -> Embedder:
    """The model as the settings ask for it (what the question path uses)."""
    return get_embedder(settings.model_cache, settings.embed_threads, precision=settings.embed_precision)


def preload_for(settings: Any) -> None:
    """Start loading that same model in a thread (`preload`): the same arguments as
    `model_for`, so the model loaded is the one the question then uses."""
    preload(settings.model_cache, settings.embed_threads, precision=settings.embed_precision)


__all__ = [
    "DIM",
    "MAX_TOKENS",
    "MODEL_NAME",
    "Embedder",
    "get_embedder",
    "model_for",
    "model_path",
    "preload",
    "preload_for",
    "preload_from_env",
    "prepared",
    "tokenizer_path",
]
