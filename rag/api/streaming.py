"""Running the (blocking) pipeline off the event loop, and streaming its tokens.

`Pipeline.answer` is synchronous and CPU-bound (embeddings, judge) or blocked on Ollama, so
it runs in the app's thread pool; its `on_token`/`on_notice` callbacks hand events to the
event loop with `call_soon_threadsafe`. When the client goes away, the next callback raises
`_Cancelled` inside the worker, which ends the pipeline run (and its Ollama request) early.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import threading
from collections.abc import AsyncGenerator, Callable
from concurrent.futures import Executor
from typing import Any, TypeVar

from rag.answer import Answer, Pipeline
from rag.api.errors import describe, status_of
from rag.errors import RagError

log = logging.getLogger("rag.api")

T = TypeVar("T")

# The marker syntax of rag.citations: [1], [1, 2], [ 3 ].
_GROUP = re.compile(r"\[(\s*\d+(?:\s*,\s*\d+)*\s*)\]")
_OPEN_MARKER = re.compile(r"\[[\d,\s]*$")
_MAX_MARKER = 40  # a "[" further back than this cannot start a marker any more


class _Cancelled(Exception):
    """Raised inside the worker thread when nobody is listening any more."""


async def run_blocking(executor: Executor, fn: Callable[[], T]) -> T:
    return await asyncio.get_running_loop().run_in_executor(executor, fn)


class MarkerRenumberer:
    """Renumbers citation markers by order of first use while text streams in.

    The final answer numbers its sources 1..m in order of first use (rag.citations); doing the
    same on the fly makes the streamed text read like the final one. A marker split across
    tokens ("[", "2]") is held back until it closes.
    """

    def __init__(self) -> None:
        self.order: dict[int, int] = {}
        self._held = ""

    def feed(self, token: str) -> str:
        text = self._held + token
        cut = len(text)
        m = _OPEN_MARKER.search(text)
        if m and len(text) - m.start() <= _MAX_MARKER:
            cut = m.start()
        self._held = text[cut:]
        return self._renumber(text[:cut])

    def flush(self) -> str:
        text, self._held = self._held, ""
        return self._renumber(text)

    def _renumber(self, text: str) -> str:
        def fix(m: re.Match[str]) -> str:
            nums = [int(n) for n in m.group(1).split(",")]
            for n in nums:
                self.order.setdefault(n, len(self.order) + 1)
            return "[" + ", ".join(str(x) for x in sorted({self.order[n] for n in nums})) + "]"

        return _GROUP.sub(fix, text)


def norm(s: str) -> str:
    """Text up to the whitespace rag.citations.clean_markers normalises."""
    return re.sub(r"\s+", " ", re.sub(r"[ \t]+([.,;:!?])", r"\1", s)).strip()


def same_text(a: str, b: str) -> bool:
    return norm(a) == norm(b)


def added_lines(streamed: str, final: str) -> list[str] | None:
    """The lines the final answer adds to what was streamed (such as the count a list answer
    starts with), or None when it also changed or dropped streamed text."""
    have = {norm(line) for line in streamed.splitlines() if norm(line)}
    kept = {norm(line) for line in final.splitlines() if norm(line)}
    if not have <= kept:
        return None
    return [line for line in final.splitlines() if norm(line) and norm(line) not in have]


def sse(event: str, data: Any) -> bytes:
    """One server-sent event; the data is JSON on one line."""
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


async def answer_events(
    executor: Executor, pipeline: Pipeline, question: str, options: dict[str, Any],
    *, stream_tokens: bool = True,
) -> AsyncGenerator[tuple[str, Any], None]:
    """Run pipeline.answer in the pool; yield ("token", str), ("notice", str), then exactly one
    of ("answer", Answer) or ("exception", BaseException)."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
    gone = threading.Event()

    def put(kind: str, data: Any) -> None:
        if gone.is_set():
            raise _Cancelled
        try:
            loop.call_soon_threadsafe(queue.put_nowait, (kind, data))
        except RuntimeError:  # the event loop is closed: the server is stopping
            gone.set()
            raise _Cancelled from None

    def work() -> None:
        try:
            ans: Answer = pipeline.answer(
                question, **options,
                on_token=(lambda t: put("token", t)) if stream_tokens else None,
                on_notice=lambda t: put("notice", t),
            )
            put("answer", ans)
        except _Cancelled:
            pass
        except Exception as exc:  # handed to the request, which reports it
            with contextlib.suppress(_Cancelled):
                put("exception", exc)

    future = loop.run_in_executor(executor, work)
    try:
        while True:
            kind, data = await queue.get()
            yield kind, data
            if kind in ("answer", "exception"):
                break
        await future
    finally:
        gone.set()  # the worker stops at its next token; its future is left to finish


def error_event(exc: BaseException) -> dict[str, Any]:
    """The data of an `error` event: message, hint, error type and the HTTP status it maps to."""
    message, hint, type_ = describe(exc)
    if not isinstance(exc, RagError):
        log.error("error while streaming an answer", exc_info=exc)
    return {"message": message, "hint": hint, "type": type_, "status": status_of(exc)}


def incomplete_event(ans: Answer, result: dict[str, Any]) -> dict[str, Any]:
    """An answer whose model stream broke off is reported as an error, with what came."""
    error = ans.error or {"message": "the answer stream broke off", "hint": ""}
    return {"message": error["message"], "hint": error["hint"], "type": "StreamBroken", "status": 503,
            "incomplete": True, "partial": result}
