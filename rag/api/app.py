"""The FastAPI app: `create_app` wires the routers (rag.api.routes: answers, papers, service,
the OpenAI-compatible /v1) and the chat page; every answer comes from the one shared
rag.answering.Pipeline, loaded once at start-up and run in a thread pool."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rag import __version__
from rag.answering import Pipeline
from rag.api import errors
from rag.api.limits import RequestGuards
from rag.api.relay import run_blocking
from rag.api.routes import answers, openai, papers, service
from rag.config import Settings
from rag.errors import InputError, RagError
from rag.mcp.http import mount as mount_mcp
from rag.retrieve import Retriever

WEB_DIR = Path(__file__).resolve().parent.parent / "web"
# Threads for pipeline work: enough to overlap Ollama waits, few enough not to thrash the CPU.
WORKERS = min(32, max(8, 4 * (os.cpu_count() or 2)))
LIGHT_WORKERS = 4
# Citation exports: their own small pool, so that many large exports queue there and never
# take the light pool's threads from /health and single lookups.
EXPORT_WORKERS = 2

# The page and its files: no inline script, no plugins, talk only to this server.
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


# -- start-up -------------------------------------------------------------------------------


def load_pipeline(settings: Settings, say: Any = None, empty_ok: bool = False) -> Pipeline:
    """Open the index (ingesting settings.seeds into an empty default one; `empty_ok`: a named
    one may be new or empty), load the models, warm up."""
    from rag.embed import preload_for
    from rag.ingest import open_index

    preload_for(settings)
    store = open_index(settings, say=say, show_progress=False, empty_ok=empty_ok)
    if store.settings.index != settings.index:  # the demo index (rag.ingest.open_index)
        settings = settings.model_copy(update={"index": store.settings.index})
    pipeline = Pipeline(settings, Retriever(settings, store=store))
    pipeline.retriever.snapshot()  # chunk texts and the BM25 index
    pipeline.retriever.embed_query("warm up")  # the ONNX session
    return pipeline


def _cors_origins(settings: Settings) -> list[str]:
    return [o.strip() for o in (settings.cors_origins or "").split(",") if o.strip()]


# -- the app ----------------------------------------------------------------------------------


class _PageHeaders:
    """Security headers on the chat page and its static files."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path != "/" and not path.startswith("/static/"):
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [(k.lower().encode(), v.encode()) for k, v in PAGE_HEADERS.items()]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def create_app(settings: Settings, pipeline: Pipeline | None = None) -> FastAPI:
    """The HTTP service over the index named in settings. The pipeline is loaded at start-up
    (lifespan), ingesting settings.seeds first when the index is empty, unless given."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        executor = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="rag-api")
        light = ThreadPoolExecutor(max_workers=LIGHT_WORKERS, thread_name_prefix="rag-api-light")
        exports = ThreadPoolExecutor(max_workers=EXPORT_WORKERS, thread_name_prefix="rag-api-export")
        app.state.executor, app.state.light_executor = executor, light
        app.state.export_executor = exports
        try:
            if app.state.pipeline is None:
                app.state.pipeline = await run_blocking(executor, lambda: load_pipeline(settings))
            async with mcp_running():  # /mcp serves once the pipeline is loaded
                yield
        finally:
            executor.shutdown(wait=False, cancel_futures=True)
            light.shutdown(wait=False, cancel_futures=True)
            exports.shutdown(wait=False, cancel_futures=True)
            app.state.pipeline.close()

    app = FastAPI(
        title="rag",
        version=__version__,
        summary="Cited answers over research-paper abstracts, offline.",
        description=(
            "Every answer cites the abstracts it uses as [n] markers and checks each sentence "
            "against them. When the server sets RAG_API_KEY, every endpoint except /health and "
            "the chat page needs `Authorization: Bearer <key>`."
        ),
        lifespan=lifespan,
        docs_url=None, redoc_url=None,  # FastAPI's load Swagger UI from a CDN: see _local_docs
    )
    app.state.settings = settings
    app.state.pipeline = pipeline
    errors.install(app)
    app.add_middleware(_PageHeaders)
    app.add_middleware(RequestGuards, settings=settings)  # Host, body size, key before body, stall
    origins = _cors_origins(settings)
    if origins:
        # Any header a page of an allowed origin asks for: the openai JS SDK sends its own
        # X-Stainless-* headers (a new one every few releases), and a preflight that refused
        # one blocked every request of that page. The origin is what is trusted, not headers.
        # A browser MCP client reads its session id from Mcp-Session-Id (hidden unless exposed)
        # and ends the session with DELETE /mcp.
        app.add_middleware(
            CORSMiddleware, allow_origins=origins, allow_methods=["GET", "POST", "DELETE", "OPTIONS"],
            allow_headers=["*"], expose_headers=["Mcp-Session-Id"], max_age=600,
        )
    for module in (answers, papers, service, openai):
        app.include_router(module.router)
    mcp_running = mount_mcp(app, settings)  # /mcp: rag's MCP tools over streamable HTTP

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(WEB_DIR / "index.html", media_type="text/html; charset=utf-8")

    app.mount("/static", StaticFiles(directory=WEB_DIR), name="static")
    _local_docs(app)
    return app


def _local_docs(app: FastAPI) -> None:
    """/docs with Swagger UI's files from the swagger-ui-bundle package: works offline."""
    from fastapi.openapi.docs import get_swagger_ui_html
    from fastapi.responses import HTMLResponse
    from swagger_ui_bundle import swagger_ui_path

    app.mount("/docs-assets", StaticFiles(directory=swagger_ui_path), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="/openapi.json", title="rag API",
            swagger_js_url="/docs-assets/swagger-ui-bundle.js",
            swagger_css_url="/docs-assets/swagger-ui.css",
            swagger_favicon_url="/docs-assets/favicon-32x32.png")


def serve(settings: Settings, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Load the index and models, then serve the app with uvicorn (Ctrl-C stops it)."""
    import uvicorn

    from rag.logs import log_config

    log = logging.getLogger("rag.api")
    if host not in ("127.0.0.1", "localhost", "::1") and not settings.api_key:
        log.warning("serving on %s without RAG_API_KEY: anyone who can reach it can use it", host)
    _check_port(host, port)  # before the models load: fail in a second, not after ten
    pipeline = load_pipeline(settings, log.info)
    log.info("rag %s: index '%s' (%d papers); chat page at http://%s:%d/ , API docs at /docs",
             __version__, pipeline.settings.index, pipeline.corpus_size(), host, port)
    app = create_app(settings, pipeline=pipeline)
    # uvicorn's loggers get rag's configuration (the level `rag -v/-q` and RAG_LOG_LEVEL set).
    level = logging.getLevelName(logging.getLogger("rag").getEffectiveLevel())
    try:
        uvicorn.run(app, host=host, port=port, log_config=log_config(level), log_level=level.lower(),
                    timeout_graceful_shutdown=5, timeout_keep_alive=5, limit_concurrency=256)
    except SystemExit as exc:  # uvicorn exits 1/3 when it cannot start; say so as rag does
        if exc.code not in (0, None):
            raise RagError(f"the server on {host}:{port} could not start",
                           "see uvicorn's message above") from None


def _check_port(host: str, port: int) -> None:
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise InputError(f"cannot resolve the host {host!r}: {exc}", "use an IP address such as 127.0.0.1") from None
    family, _, _, _, address = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            raise InputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}",
                             "pick another port with --port, or stop what is using it") from None
