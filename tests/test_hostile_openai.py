"""An OpenAI-compatible server that answers wrongly: a redirect, an empty body, token counts
that are no counts. Each is an error that names the server (exit 4 with --llm openai), never
an abstention or "a bug in rag", and `--json` stays JSON."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_rag

QUESTION = "What techniques reduce communication in distributed training?"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    mode = "redirect"


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._send(200, json.dumps({"data": [{"id": "m", "object": "model"}]}).encode(),
                   {"Content-Type": "application/json"})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        mode = self.server.mode
        if mode == "redirect":
            self._send(302, b"", {"Location": "http://127.0.0.1:9/elsewhere"})
        elif mode == "empty":
            self._send(200, b"", {"Content-Type": "text/event-stream"})
        else:
            usage = {"nan": "NaN", "list": "[1, 2]", "negative": '{"prompt_tokens": -5}',
                     "huge": '{"prompt_tokens": 1.5e300}'}[mode]
            chunk = '{"choices": [{"delta": {"content": "Gradient compression [1]."}, "finish_reason": null}]}'
            end = '{"choices": [{"delta": {}, "finish_reason": "stop"}], "usage": %s}' % (
                usage if mode != "nan" else '{"prompt_tokens": NaN}')
            body = f"data: {chunk}\n\ndata: {end}\n\ndata: [DONE]\n\n".encode()
            self._send(200, body, {"Content-Type": "text/event-stream"})


@pytest.fixture(scope="module")
def server() -> Iterator[_Server]:
    srv = _Server(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.mark.parametrize(("mode", "said"), [
    ("redirect", "redirected the request (HTTP 302"),
    ("empty", "sent no answer"),
    ("nan", "usage.prompt_tokens"),
    ("list", "`usage` as list"),
    ("negative", "usage.prompt_tokens"),
    ("huge", "usage.prompt_tokens"),
])
def test_a_wrong_reply_is_an_error_naming_the_server(seeded_settings: Any, server: _Server, tmp_path: Path,
                                                     mode: str, said: str) -> None:
    server.mode = mode
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    env = {"RAG_HOME": str(seeded_settings.home), "RAG_OPENAI_BASE_URL": url}
    done = run_rag("ask", "--llm", "openai", QUESTION, cwd=tmp_path, env=env)
    assert done.returncode == 4, done.stdout + done.stderr
    assert said in done.stderr and f"127.0.0.1:{server.server_address[1]}" in done.stderr
    assert "bug in rag" not in done.stderr and "do not answer" not in done.stdout
    as_json = run_rag("ask", "--json", QUESTION, cwd=tmp_path, env={**env, "RAG_LLM": "openai"})
    assert as_json.returncode == 4 and as_json.stdout.strip() == ""  # no half JSON either


def test_token_counts_and_context_lengths_are_checked() -> None:
    from rag.errors import LLMError
    from rag.llm.base import context_length, excerpt, token_count

    assert token_count(12, "h", "f") == 12 and token_count(None, "h", "f") is None
    for bad in (-5, float("nan"), 1.5e300, "12", True, 10**12):
        with pytest.raises(LLMError, match="`f` = "):
            token_count(bad, "http://h", "f")
    assert [context_length(v) for v in (8192, -1, True, 0, 10**12, "8192")] == [8192, None, None, None, None, None]
    assert excerpt("bad\x1b]0;title\x07 thing\x00") == "bad ]0;title thing"
