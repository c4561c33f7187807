"""The model servers rag answers through: Ollama (rag.llm.ollama) and OpenAI-compatible
servers (rag.llm.openai), behind one interface (rag.llm.base.ModelClient)."""

from __future__ import annotations

from typing import Any

from rag.errors import InputError
from rag.llm.base import (
    ModelClient,
    StreamBroken,
    StreamEnd,
    ThinkFilter,
    Thinking,
    Token,
    excerpt,
    is_html,
    opens_think_in_prompt,
)

__all__ = ["ModelClient", "Ollama", "StreamBroken", "StreamEnd", "ThinkFilter", "Thinking",
           "Token", "connect", "excerpt", "is_html", "opens_think_in_prompt", "server_kind"]


def __getattr__(name: str) -> Any:
    """`Ollama` imported on first use: an offline answer imports no HTTP client (httpx)."""
    if name == "Ollama":
        from rag.llm.ollama import Ollama

        return Ollama
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def server_kind(settings: Any, mode: str) -> str:
    """Which server a mode means: "openai" or "ollama" (auto: the OpenAI-compatible server
    when RAG_OPENAI_BASE_URL names one, else Ollama)."""
    if mode == "openai" or (mode == "auto" and settings.openai_base_url):
        return "openai"
    return "ollama"


def connect(settings: Any, mode: str, model: str | None = None) -> ModelClient:
    """A client for the server `mode` means, for `model` (None: the configured one)."""
    if server_kind(settings, mode) == "openai":
        if not settings.openai_base_url:
            raise InputError("--llm openai needs the server's address, and RAG_OPENAI_BASE_URL is not set",
                             "set RAG_OPENAI_BASE_URL, e.g. http://127.0.0.1:8080/v1 (llama.cpp), "
                             "http://127.0.0.1:1234/v1 (LM Studio), http://127.0.0.1:8000/v1 (vLLM)")
        from rag.llm.openai import OpenAICompatible

        return OpenAICompatible.from_settings(settings, model)
    from rag.llm.ollama import Ollama

    return Ollama.from_settings(settings, model)
