"""A model server on 127.0.0.1 that speaks both protocols rag uses (Ollama's /api and the
OpenAI-compatible /v1) and answers each chat request with a script: what to send, when, and
whether to go on sending forever. For the deadline, size and fuzz tests: a server that sends
keep-alives, empty deltas or endless reasoning, nothing at all, or one huge delta.

Every script ends by itself: a "forever" part stops after `LONGEST` seconds, when the client
hangs up, or when the server stops; the server's threads are daemons.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

LONGEST = 90.0  # seconds any reply of this server lasts at most


@dataclass
class Script:
    """One reply: the status and headers, then `parts` (delay in seconds, bytes) in order,
    then `forever` (the same) again and again until the client or the server stops."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    parts: list[tuple[float, bytes]] = field(default_factory=list)
    forever: tuple[float, bytes] | None = None


def sse(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def delta(**fields: Any) -> bytes:
    """An OpenAI stream event with one choice whose delta has `fields`."""
    return sse({"choices": [{"index": 0, "delta": fields, "finish_reason": None}]})


def ollama_part(content: str = "", thinking: str | None = None, done: bool = False) -> bytes:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if thinking is not None:
        message["thinking"] = thinking
    part: dict[str, Any] = {"model": "m", "created_at": "2026-01-01T00:00:00Z", "message": message,
                            "done": done}
    if done:
        part.update(done_reason="stop", prompt_eval_count=10, eval_count=10)
    return json.dumps(part).encode() + b"\n"


def openai_answer(text: str) -> Script:
    """A well-formed streamed answer of `text`."""
    return Script(headers={"Content-Type": "text/event-stream"}, parts=[
        (0, delta(content=text)),
        (0, sse({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})),
        (0, b"data: [DONE]\n\n")])


def ollama_answer(text: str) -> Script:
    return Script(headers={"Content-Type": "application/x-ndjson"},
                  parts=[(0, ollama_part(text)), (0, ollama_part("", done=True))])


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # (protocol "openai" | "ollama", streamed?, the request's body) -> the reply
    script: Callable[[str, bool, dict[str, Any]], Script]
    stopping: threading.Event
    requests: list[dict[str, Any]]
    open_replies: int
    lock: threading.Lock


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, *args: Any) -> None:
        pass

    def _json(self, obj: Any) -> None:
        body = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._json({"object": "list", "data": [{"id": "m", "object": "model"}]})
        elif self.path.startswith("/api/tags"):
            self._json({"models": [{"name": "m:latest", "model": "m:latest"}]})
        else:
            self._json({"version": "0.9.0"})

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        if self.path.startswith("/api/show"):
            self._json({"template": "{{ .Prompt }}", "model_info": {"llama.context_length": 8192},
                        "details": {"family": "llama"}})
            return
        protocol = "openai" if "/chat/completions" in self.path else "ollama"
        streamed = bool(body.get("stream", protocol == "ollama"))
        with self.server.lock:
            self.server.requests.append({"path": self.path, "body": body})
        self._play(self.server.script(protocol, streamed, body))

    def _wait(self, seconds: float) -> bool:
        """Wait `seconds`; True as soon as the server stops or the client hangs up (seen
        without writing: a closed connection reads as the end of the stream)."""
        ends = time.monotonic() + seconds
        while (left := ends - time.monotonic()) > 0:
            if self.server.stopping.is_set():
                return True
            poller = select.poll()  # not select(): a busy worker's descriptors pass 1024
            poller.register(self.connection, select.POLLIN)
            if poller.poll(int(min(left, 0.1) * 1000)):
                try:
                    if self.connection.recv(1, socket.MSG_PEEK) == b"":
                        return True
                except OSError:
                    return True
                time.sleep(min(left, 0.1))  # the client sent more: not an end
        return self.server.stopping.is_set()

    def _play(self, script: Script) -> None:
        server = self.server
        with server.lock:
            server.open_replies += 1
        try:
            self.send_response(script.status)
            for k, v in script.headers.items():
                self.send_header(k, v)
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.flush()
            ends = time.monotonic() + LONGEST

            def parts() -> Iterator[tuple[float, bytes]]:
                yield from script.parts
                while script.forever is not None and time.monotonic() < ends:
                    yield script.forever

            for wait, data in parts():
                if wait and self._wait(wait):
                    return
                if data:
                    self.wfile.write(data)
                    self.wfile.flush()
        except OSError:  # the client hung up: what a deadline does
            pass
        finally:
            with server.lock:
                server.open_replies -= 1


class HostileServer:
    """`with HostileServer(script) as srv:` srv.url (Ollama's host), srv.v1 (OpenAI's base)."""

    def __init__(self, script: Callable[[str, bool, dict[str, Any]], Script]) -> None:
        self._srv = _Server(("127.0.0.1", 0), _Handler)
        self._srv.script = script
        self._srv.stopping = threading.Event()
        self._srv.requests = []
        self._srv.open_replies = 0
        self._srv.lock = threading.Lock()
        self.url = f"http://127.0.0.1:{self._srv.server_address[1]}"
        self.v1 = self.url + "/v1"

    @property
    def script(self) -> Callable[[str, bool, dict[str, Any]], Script]:
        return self._srv.script

    @script.setter
    def script(self, value: Callable[[str, bool, dict[str, Any]], Script]) -> None:
        self._srv.script = value

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self._srv.requests

    def open_replies(self) -> int:
        """Replies still being sent (a client that gave up has closed its connection)."""
        with self._srv.lock:
            return self._srv.open_replies

    def __enter__(self) -> HostileServer:
        threading.Thread(target=self._srv.serve_forever, kwargs={"poll_interval": 0.1},
                         daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._srv.stopping.set()
        self._srv.shutdown()
        self._srv.server_close()
