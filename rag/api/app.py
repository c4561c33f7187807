"""The FastAPI app: /ask, /chat (SSE), /search, /papers, /health, the chat page, and the
OpenAI-compatible /v1 endpoints (rag.api.openai_compat). Every answer comes from the one
shared rag.answer.Pipeline, loaded once at start-up and run in a thread pool."""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import sys
from collections.abc import AsyncGenerator, AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Query, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import FileResponse, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rag import __version__
from rag.answer import MAX_QUESTION, Pipeline
from rag.api import errors
from rag.api.errors import ERROR_RESPONSES, NotFound, Unauthorized, field_error, split_conversation
from rag.api.models import (
    MAX_K,
    AnswerPublic,
    AskRequest,
    ChatRequest,
    ErrorPublic,
    HealthPublic,
    PaperListPublic,
    PaperPublic,
    SearchResultsPublic,
)
from rag.api.streaming import (
    MarkerRenumberer,
    answer_events,
    error_event,
    incomplete_event,
    run_blocking,
    sse,
)
from rag.config import Settings
from rag.errors import InputError, RagError
from rag.retrieve import Filters, Retriever

log = logging.getLogger("rag.api")

WEB_DIR = Path(__file__).resolve().parent.parent / "web"
# Threads for pipeline work: enough to overlap Ollama waits, few enough not to thrash the CPU.
WORKERS = min(32, max(8, 4 * (os.cpu_count() or 2)))
LIGHT_WORKERS = 4
HEALTH_OLLAMA_TIMEOUT = 2.0

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


def load_pipeline(settings: Settings, say: Any = None) -> Pipeline:
    """Open the index (ingesting settings.seeds into an empty one), load the models, warm up."""
    from rag.ingest import ensure_seeded
    from rag.store import Store

    store = Store(settings)
    ensure_seeded(settings, store, say=say, show_progress=False)
    pipeline = Pipeline(settings, Retriever(settings, store=store))
    pipeline.retriever.snapshot()  # chunk texts and the BM25 index
    pipeline.retriever.embed_query("warm up")  # the ONNX session
    return pipeline


def _cors_origins(settings: Settings) -> list[str]:
    return [o.strip() for o in (settings.cors_origins or "").split(",") if o.strip()]


# -- auth -----------------------------------------------------------------------------------

_bearer = HTTPBearer(auto_error=False, description="The server's RAG_API_KEY (only when it sets one).")


async def require_key(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    key = request.app.state.settings.api_key
    if not key:
        return
    given = credentials.credentials if credentials else ""
    if not secrets.compare_digest(given.encode(), key.encode()):
        raise Unauthorized()


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _lone_surrogate(value: Any, loc: tuple[str | int, ...]) -> tuple[str | int, ...] | None:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return loc
    elif isinstance(value, dict):
        for k, v in value.items():
            if found := _lone_surrogate(v, (*loc, k)):
                return found
    elif isinstance(value, list):
        for i, v in enumerate(value):
            if found := _lone_surrogate(v, (*loc, i)):
                return found
    return None


async def valid_unicode(request: Request) -> None:
    """JSON can spell half of a UTF-16 pair ("\\ud83d"), which is no text: the fields typed as
    a union of a string and something else let it through to the tokenizer, which raised a
    TypeError (a 500). It is bad input: a 422 naming the field."""
    if request.method != "POST":
        return
    body = await request.body()  # FastAPI has read it already; this is its cached copy
    if not _SURROGATE_ESCAPE.search(body):
        return
    try:
        data = json.loads(body)
    except ValueError:
        return  # not JSON: the body's own validation says so
    loc = _lone_surrogate(data, ("body",))
    if loc:
        raise field_error(loc, "the text holds a lone UTF-16 surrogate, which is not valid Unicode",
                          "string_unicode")


def _pipeline(request: Request) -> Pipeline:
    return request.app.state.pipeline  # type: ignore[no-any-return]


def _executor(request: Request) -> ThreadPoolExecutor:
    """The pool for answering and searching (CPU-bound, or waiting on Ollama)."""
    return request.app.state.executor  # type: ignore[no-any-return]


def _light(request: Request) -> ThreadPoolExecutor:
    """A separate small pool for quick lookups, so /health answers even under load."""
    return request.app.state.light_executor  # type: ignore[no-any-return]


# -- helpers ----------------------------------------------------------------------------------


def answer_options(body: AskRequest | ChatRequest) -> dict[str, Any]:
    venue, year, source = body.filter_values()
    return {"k": body.k, "llm": body.llm, "model": body.model, "strict": body.strict,
            "filters": Filters.parse(venue, year, source)}


async def chat_stream(first: tuple[str, Any],
                      events: AsyncGenerator[tuple[str, Any], None]) -> AsyncIterator[bytes]:
    """token events as they come, then one final event (or one error event)."""
    renumber = MarkerRenumberer()

    async def all_events() -> AsyncIterator[tuple[str, Any]]:
        yield first
        async for ev in events:
            yield ev

    try:
        async for kind, data in all_events():
            if kind == "token":
                text = renumber.feed(data)
                if text:
                    yield sse("token", {"text": text})
            elif kind == "notice":
                yield sse("notice", {"message": data})
            elif kind == "answer":
                rest = renumber.flush()
                if rest:
                    yield sse("token", {"text": rest})
                result = data.to_json()
                if data.incomplete:
                    yield sse("error", incomplete_event(data, result))
                else:
                    yield sse("final", result)
            elif kind == "exception":
                yield sse("error", error_event(data))
    finally:
        await events.aclose()


SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


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
        app.state.executor, app.state.light_executor = executor, light
        try:
            if app.state.pipeline is None:
                app.state.pipeline = await run_blocking(executor, lambda: load_pipeline(settings))
            yield
        finally:
            executor.shutdown(wait=False, cancel_futures=True)
            light.shutdown(wait=False, cancel_futures=True)

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
    )
    app.state.settings = settings
    app.state.pipeline = pipeline
    errors.install(app)
    app.add_middleware(_PageHeaders)
    origins = _cors_origins(settings)
    if origins:
        app.add_middleware(
            CORSMiddleware, allow_origins=origins, allow_methods=["GET", "POST", "OPTIONS"],
            allow_headers=["Authorization", "Content-Type"], max_age=600,
        )

    api = APIRouter(dependencies=[Depends(require_key), Depends(valid_unicode)],
                    responses=ERROR_RESPONSES)

    @api.post("/ask", response_model=AnswerPublic, tags=["answers"],
              summary="Answer a question (the object `rag ask --json` prints)")
    async def ask(body: AskRequest, request: Request) -> Any:
        pipeline, options = _pipeline(request), answer_options(body)
        ans = await run_blocking(_executor(request), lambda: pipeline.answer(body.question, **options))
        return ans.to_json()

    @api.post(
        "/chat", response_model=AnswerPublic, tags=["answers"],
        summary="Multi-turn chat; with stream=true, server-sent events",
        description=(
            "The last message is the question; earlier turns condense a follow-up into a "
            "stand-alone question. With `stream: true` the response is `text/event-stream`: "
            "`token` events `{\"text\"}` as the answer is written (citation markers already "
            "numbered as in the final answer), `notice` events `{\"message\"}`, then exactly one "
            "`final` event carrying the whole answer object (as without streaming) or one "
            "`error` event `{\"message\", \"hint\", \"type\", \"status\"}` (with `incomplete` and "
            "`partial` when the model's stream broke off). Errors found before anything was "
            "sent are ordinary JSON error responses."
        ),
        responses={200: {"content": {"text/event-stream": {}},
                         "description": "The answer object, or its event stream."}},
    )
    async def chat(body: ChatRequest, request: Request) -> Any:
        question, history = split_conversation([(m.role, m.content) for m in body.messages])
        pipeline, options = _pipeline(request), {**answer_options(body), "history": history}
        if not body.stream:
            ans = await run_blocking(_executor(request), lambda: pipeline.answer(question, **options))
            return ans.to_json()
        events = answer_events(_executor(request), pipeline, question, options,
                               stream_tokens=not body.strict)
        first = await events.__anext__()
        if first[0] == "exception":
            await events.aclose()
            raise first[1]
        return StreamingResponse(chat_stream(first, events), media_type="text/event-stream",
                                 headers=SSE_HEADERS)

    @api.get("/search", response_model=SearchResultsPublic, tags=["papers"],
             summary="Rank papers for a query (the object `rag search --json` prints)")
    async def search(
        request: Request,
        q: Annotated[str, Query(min_length=1, max_length=MAX_QUESTION, description="The query.")],
        k: Annotated[int, Query(ge=1, le=MAX_K, description="How many papers.")] = 10,
        venue: Annotated[str | None, Query(max_length=200)] = None,
        year: Annotated[str | None, Query(max_length=20, description="2023, 2022-2023, ...")] = None,
        source: Annotated[str | None, Query(max_length=500)] = None,
    ) -> Any:
        from rag.cli import search_json

        filters = Filters.parse(venue, year, source)
        retriever = _pipeline(request).retriever
        hits = await run_blocking(_executor(request), lambda: retriever.search(q, k, filters))
        return search_json(q, settings.index, hits)

    @api.get("/papers", response_model=PaperListPublic, tags=["papers"],
             summary="Every paper in the index (the object `rag papers --json` prints)")
    async def papers(request: Request) -> Any:
        retriever = _pipeline(request).retriever
        listed = await run_blocking(_light(request), retriever.papers)
        return {"papers": [p.to_dict() for p in listed]}

    @api.get("/papers/{paper_id:path}", response_model=PaperPublic, tags=["papers"],
             summary="One paper with all its fields",
             responses={404: {"model": ErrorPublic, "description": "No such paper."}})
    async def paper(paper_id: str, request: Request) -> Any:
        retriever = _pipeline(request).retriever
        found = await run_blocking(_light(request), lambda: retriever.paper(paper_id))
        if found is None:
            raise NotFound(f"no paper with id {paper_id!r} in the index '{settings.index}'",
                           "list the ids with GET /papers, or find papers with GET /search?q=...")
        return found.to_dict()

    @app.get("/health", response_model=HealthPublic, tags=["service"],
             summary="Index, models and Ollama status (never needs the API key)")
    async def health(request: Request) -> Any:
        pipeline = _pipeline(request)

        def probe() -> dict[str, Any]:
            from rag.llm import Ollama

            try:
                snap = pipeline.retriever.snapshot()
                index = {"papers": len(snap.papers), "chunks": len(snap.chunk_ids)}
            except RagError as exc:  # the index broke under the server: /health still answers
                log.error("health: %s (hint: %s)", exc.message, exc.hint)
                index = {"papers": 0, "chunks": 0}
            ollama: dict[str, Any] = {"host": settings.ollama_host, "model": settings.model,
                                      "reachable": False, "model_present": False, "error": None}
            client = None
            try:
                client = Ollama(settings.ollama_host, settings.model, HEALTH_OLLAMA_TIMEOUT)
                client.check()
                ollama.update(reachable=True, model_present=True)
            except Exception as exc:  # /health reports Ollama's state, never fails on it
                from rag.errors import ModelNotFound

                ollama["reachable"] = isinstance(exc, ModelNotFound)
                ollama["error"] = exc.message if isinstance(exc, RagError) else str(exc)
            finally:
                if client is not None:
                    client.close()
            return {
                "status": "ok", "version": __version__, "index": settings.index,
                **index,
                "embedding_model": getattr(pipeline.retriever.embedder, "name", "unknown"),
                "llm": settings.llm, "ollama": ollama, "auth_required": bool(settings.api_key),
            }

        return await run_blocking(_light(request), probe)

    from rag.api.openai_compat import router as openai_router

    app.include_router(api)
    app.include_router(openai_router, dependencies=[Depends(require_key), Depends(valid_unicode)])

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(WEB_DIR / "index.html", media_type="text/html; charset=utf-8")

    app.mount("/static", StaticFiles(directory=WEB_DIR), name="static")
    return app


def serve(settings: Settings, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Load the index and models, then serve the app with uvicorn (Ctrl-C stops it)."""
    import uvicorn

    def say(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    if host not in ("127.0.0.1", "localhost", "::1") and not settings.api_key:
        say(f"warning: serving on {host} without RAG_API_KEY: anyone who can reach it can use it")
    _check_port(host, port)  # before the models load: fail in a second, not after ten
    pipeline = load_pipeline(settings, say)
    say(f"rag {__version__}: index '{settings.index}' ({pipeline.corpus_size()} papers); "
        f"chat page at http://{host}:{port}/ , API docs at /docs")
    app = create_app(settings, pipeline=pipeline)
    try:
        uvicorn.run(app, host=host, port=port, log_level="info", timeout_graceful_shutdown=5)
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
