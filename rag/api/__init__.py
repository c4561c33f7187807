"""The HTTP service: `create_app(settings)` builds the FastAPI app, `serve(settings, host=,
port=)` runs it with uvicorn (what `rag serve` calls)."""

from rag.api.app import create_app, load_pipeline, serve

__all__ = ["create_app", "load_pipeline", "serve"]
