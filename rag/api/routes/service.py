"""GET /health: the index, the models and Ollama (never needs the API key)."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter

from rag import __version__
from rag.api import relay
from rag.api.deps import LightExecutorDep, PipelineDep, SettingsDep
from rag.api.models import HealthPublic
from rag.errors import ModelNotFound, RagError
from rag.llm import Ollama
from rag.llm.openai import OpenAICompatible

log = logging.getLogger("rag.api")
router = APIRouter(tags=["service"])
HEALTH_OLLAMA_TIMEOUT = 2.0


@router.get("/health", response_model=HealthPublic,
            summary="Index, models and Ollama status (never needs the API key)")
async def health(pipeline: PipelineDep, light: LightExecutorDep, settings: SettingsDep) -> Any:
    def probe() -> dict[str, Any]:
        index_error = None
        try:
            snap = pipeline.retriever.snapshot()
            index = {"papers": len(snap.papers), "chunks": len(snap.chunk_ids)}
        except RagError as exc:  # the index broke under the server: /health still answers
            log.error("health: %s (hint: %s)", exc.message, exc.hint)
            index, index_error = {"papers": 0, "chunks": 0}, f"{exc.message} ({exc.hint})"
        ollama = _status(lambda: Ollama(settings.ollama_host, settings.model, HEALTH_OLLAMA_TIMEOUT),
                         settings.ollama_host, settings.model)
        openai = _status(lambda: OpenAICompatible.from_settings(
            settings.model_copy(update={"llm_timeout": HEALTH_OLLAMA_TIMEOUT})),
            settings.openai_base_url, settings.model) if settings.openai_base_url else None
        return {
            "status": "error" if index_error else "ok", "index_error": index_error,
            "version": __version__, "index": settings.index, **index,
            "embedding_model": getattr(pipeline.retriever.embedder, "name", "unknown"),
            "llm": settings.llm, "ollama": ollama, "openai": openai,
            "auth_required": bool(settings.api_key),
        }

    return await relay.run_blocking(light, probe)


def _status(connect: Any, host: str | None, model: str) -> dict[str, Any]:
    """A model server's state for /health: reachable, the model there, or why not."""
    out: dict[str, Any] = {"host": host, "model": model, "reachable": False,
                           "model_present": False, "error": None}
    client = None
    try:
        client = connect()
        out["model"] = client.check()["model"]
        out.update(reachable=True, model_present=True)
    except Exception as exc:  # /health reports the server's state, never fails on it
        out["reachable"] = isinstance(exc, ModelNotFound)
        out["error"] = exc.message if isinstance(exc, RagError) else str(exc)
    finally:
        if client is not None:
            client.close()
    return out
