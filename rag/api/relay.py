"""The pipeline's event stream, relayed to an async response.

`Pipeline.stream` is synchronous and CPU-bound (embeddings, judge) or blocked on Ollama, so it
runs in the app's thread pool and hands each event to the event loop. When the client goes
away the worker stops at its next event and closes the stream, which ends the Ollama request.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Executor
from typing import Any, TypeVar

from starlette.requests import Request

from rag.answering import Pipeline
from rag.api.errors import ClientGone, describe, in_request_terms, is_openai, status_of
from rag.errors import RagError
from rag.schema import Answer, AskOptions, DoneEvent, Event, NoticeEvent

log = logging.getLogger("rag.api")

T = TypeVar("T")
_END = object()
DISCONNECT_POLL = 0.25  # seconds between looks at whether the client of a whole answer left


async def run_blocking(executor: Executor, fn: Callable[[], T]) -> T:
    return await asyncio.get_running_loop().run_in_executor(executor, fn)


async def answer(executor: Executor, pipeline: Pipeline, question: str, options: AskOptions,
                 request: Request, **kwargs: Any) -> Answer:
    """The finished answer; the work stops (and the model with it) if the client goes away
    before it is ready, instead of holding a worker for an answer nobody reads: looked for
    while the model is silent too, not only when an event comes."""
    gone = threading.Event()

    async def watch() -> None:
        while not await request.is_disconnected():
            await asyncio.sleep(DISCONNECT_POLL)
        gone.set()  # the pipeline's model calls end at once (rag.llm.guard.Deadline)

    watcher = asyncio.create_task(watch())
    try:
        async for ev in events(executor, pipeline, question, options, openai=is_openai(request),
                               gone=gone, **kwargs):
            if gone.is_set():
                raise ClientGone
            if isinstance(ev, DoneEvent):
                return ev.answer
    finally:
        watcher.cancel()
    raise AssertionError("the answer stream ended without its answer")  # pragma: no cover


async def events(executor: Executor, pipeline: Pipeline, question: str, options: AskOptions,
                 openai: bool = False, gone: threading.Event | None = None,
                 **kwargs: Any) -> AsyncIterator[Event]:
    """Pipeline.stream's events as they come, notices in the request's terms (of /v1 when
    `openai`); its exception, if any, is raised here. Leaving the loop early (the client went
    away) stops the work."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[Any] = asyncio.Queue()
    gone = gone or threading.Event()  # set: the client left (the pipeline stops its model calls)

    def put(item: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the event loop is closed: the server stops
            loop.call_soon_threadsafe(queue.put_nowait, item)

    def work() -> None:
        stream = pipeline.stream(question, options, cancelled=gone, **kwargs)
        try:
            for ev in stream:
                if gone.is_set():
                    break
                put(ev)
            put(_END)
        except BaseException as exc:  # handed to the request, which reports it
            put(exc)
        finally:
            stream.close()

    future = loop.run_in_executor(executor, work)
    try:
        while True:
            item = await queue.get()
            if item is _END:
                break
            if isinstance(item, BaseException):
                raise item
            if isinstance(item, NoticeEvent):  # "answering offline (... with --model)"
                item = NoticeEvent(in_request_terms(item.message, openai))
            elif isinstance(item, DoneEvent):
                item.answer.notices = [in_request_terms(n, openai) for n in item.answer.notices]
            yield item
        await future
    finally:
        gone.set()  # the worker stops at its next event; its future is left to finish


def sse(event: str, data: Any) -> bytes:
    """One server-sent event; the data is JSON on one line."""
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def error_data(exc: BaseException) -> dict[str, Any]:
    """The data of an `error` event: message, hint, error type and the HTTP status it maps to."""
    message, hint, type_ = describe(exc)
    if not isinstance(exc, RagError):
        log.error("error while streaming an answer", exc_info=exc)
    return {"message": message, "hint": hint, "type": type_, "status": status_of(exc)}


def incomplete_data(ans: Answer) -> dict[str, Any]:
    """An answer whose model stream broke off is reported as an error, with what came."""
    error = ans.error or {"message": "the answer stream broke off", "hint": ""}
    return {"message": error["message"], "hint": error["hint"], "type": "StreamBroken", "status": 503,
            "incomplete": True, "partial": ans.to_public()}
