"""`python -m rag.embed CACHE_DIR`: write the embedding model's ONNX export (scripts/setup)."""

from rag.embed.onnx import main

main()
