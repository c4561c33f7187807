"""The embedding model, all-MiniLM-L6-v2: onnxruntime on the CPU (`onnx`), sentence-transformers
on a CUDA GPU for ingest where one is there (`gpu`, imported only then)."""

from rag.embed.onnx import (
    DIM,
    MAX_TOKENS,
    MODEL_NAME,
    Embedder,
    get_embedder,
    model_path,
    preload,
    prepared,
    tokenizer_path,
)

__all__ = [
    "DIM",
    "MAX_TOKENS",
    "MODEL_NAME",
    "Embedder",
    "get_embedder",
    "model_path",
    "preload",
    "prepared",
    "tokenizer_path",
]
