"""One deadline per answer, held by a timer whatever the server sends, and a bound on what is
read from a server: every model call of both backends runs through `guarded`.

Written by hand: httpx's timeouts bound each read, never a whole reply, so a server that
sends keep-alive comments, empty deltas or endless reasoning every few seconds is never timed
out, and a reply of one 50 MB line is read whole before anything sees it. Here the server is
read in a thread of its own while the caller waits on a queue with the deadline as its
timeout: the caller is back at the deadline (or when the client leaves) even if the read is
blocked, and the socket is shut down so that the read ends and the server stops writing.
"""

from __future__ import annotations

import contextlib
import math
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from rag.errors import LLMError

T = TypeVar("T")

# What one reply of a server may hold on the wire: an answer of 4,096 tokens as server-sent
# events is about 1 MB, a long reasoning model's about 10 MB. More is a server that ignores
# max_tokens (or a hostile one), refused before it costs memory or the time to split it.
MAX_REPLY_BYTES = 32 * 1024 * 1024
_POLL = 0.1  # seconds between looks at the deadline and the client while the server is silent
_END = object()


class Deadline:
    """When an answer's model calls must end (monotonic seconds), or when `cancelled` is set
    (the client went away). `seconds` None: no deadline, only the cancel."""

    def __init__(self, seconds: float | None = None, cancelled: threading.Event | None = None) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds if seconds is not None else math.inf
        self.cancelled = cancelled or threading.Event()

    def left(self) -> float:
        return self.at - time.monotonic()

    def passed(self) -> bool:
        return self.cancelled.is_set() or time.monotonic() >= self.at


class DeadlinePassed(LLMError):
    """The answer's deadline passed (or its client left) while a model call was under way."""

    def __init__(self, server: str, deadline: Deadline) -> None:
        why = "the client went away" if deadline.cancelled.is_set() else \
            f"the answer's deadline of {deadline.seconds:g} s (RAG_ANSWER_TIMEOUT) passed"
        super().__init__(f"{why} while the server at {server} was still answering",
                         "raise RAG_ANSWER_TIMEOUT, use a smaller model, or use --llm none")
        self.client_left = deadline.cancelled.is_set()


class ReplyTooLarge(LLMError):
    def __init__(self, server: str, limit: int) -> None:
        super().__init__(f"the server at {server} sent more than {limit // (1024 * 1024)} MB for one "
                         "reply and was cut off", "check the server's settings (max_tokens) and log")


class _Call:
    """One guarded call: the sockets it opened (shut down to end a blocked read) and whether
    it was given up."""

    def __init__(self) -> None:
        self.sockets: list[socket.socket] = []
        self.given_up = threading.Event()
        self.lock = threading.Lock()

    def opened(self, sock: Any) -> None:
        if not isinstance(sock, socket.socket):
            return
        with self.lock:
            self.sockets.append(sock)
            late = self.given_up.is_set()
        if late:
            _shut(sock)

    def give_up(self) -> None:
        self.given_up.set()
        with self.lock:
            sockets = list(self.sockets)
        for sock in sockets:
            _shut(sock)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # already closed
        sock.shutdown(socket.SHUT_RDWR)  # wakes a recv blocked in another thread (close does not)


_current = threading.local()  # the _Call of the thread reading a server


def guarded(read: Callable[[], Iterable[T]], deadline: Deadline | None, server: str) -> Iterator[T]:
    """The items `read()` yields, read in a thread of its own; raises DeadlinePassed as soon as
    the deadline passes or the client leaves, even while the server sends nothing. Closing
    this iterator ends the read (its sockets are shut down)."""
    deadline = deadline or Deadline()
    call = _Call()
    items: queue.Queue[Any] = queue.Queue(maxsize=64)  # the reader waits for a slow consumer

    def put(item: Any) -> bool:
        while not call.given_up.is_set():
            try:
                items.put(item, timeout=_POLL)
                return True
            except queue.Full:
                continue
        return False

    def work() -> None:
        _current.call = call
        try:
            for item in read():
                if not put(item):
                    return
            put(_END)
        except BaseException as exc:  # handed to the caller, which raises it
            put(exc)
        finally:
            _current.call = None

    threading.Thread(target=work, name="rag-model-read", daemon=True).start()
    try:
        while True:
            if deadline.passed():
                raise DeadlinePassed(server, deadline)
            try:
                item = items.get(timeout=max(0.0, min(_POLL, deadline.left())))
            except queue.Empty:
                continue
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        call.give_up()


def one(read: Callable[[], T], deadline: Deadline | None, server: str) -> T:
    """The value of `read()` (a request without a stream), under the same guard."""
    for value in guarded(lambda: [read()], deadline, server):
        return value
    raise LLMError(f"the server at {server} sent no reply", "check the server's log")  # pragma: no cover


def _trace(name: str, info: dict[str, Any]) -> None:
    """httpcore's trace hook: the socket of each connection a guarded call opens."""
    call = getattr(_current, "call", None)
    if call is not None and name == "connection.connect_tcp.complete":
        stream = info.get("return_value")
        call.opened(stream.get_extra_info("socket") if stream is not None else None)
