"""The MCP tools at /mcp of a real `rag serve` (streamable HTTP), behind RAG_API_KEY."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest

from tests.mcp_client import connect
from tests.rag_server import RagServer, serving

KEY = "mcp-test-key"
QUESTION = "How much faster is Skrull than DeepSpeed?"


@pytest.fixture(scope="module")
def server(seeded_settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RagServer]:  # type: ignore[no-untyped-def]
    with serving(seeded_settings.home, tmp_path_factory.mktemp("mcp-http"), {"RAG_API_KEY": KEY}) as srv:
        yield srv


@asynccontextmanager
async def transport(url: str, key: str | None) -> AsyncIterator[Any]:
    """The SDK's streamable HTTP transport, sending the key as a bearer token."""
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with create_mcp_http_client(headers=headers) as http, \
            streamable_http_client(f"{url}/mcp", http_client=http) as streams:
        yield streams


@pytest.mark.parametrize("key", [None, "wrong-key"])
def test_refused_without_the_key(server: RagServer, key: str | None) -> None:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    resp = httpx.post(f"{server.url}/mcp", headers={**headers, "Accept": "application/json, text/event-stream"},
                      json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert resp.status_code == 401 and "API key" in resp.json()["error"]
    with pytest.raises(Exception), connect(transport(server.url, key)) as session:  # noqa: B017 (the SDK's own)
        session.tools()


def test_served_with_the_key(server: RagServer) -> None:
    with connect(transport(server.url, KEY)) as session:
        assert {t.name for t in session.tools()} >= {"ask", "search_papers", "find_source"}
        answer = session.ok("ask", question=QUESTION)
        assert "3.76x" in answer["answer"] and answer["references"][0]["label"] == "Skrull"
        assert "no paper" in session.error("get_paper", paper_id="nosuch-0000")
        assert session.ok("get_paper", paper_id="arXiv:2311.10418")["label"] == "DynaPipe"


def test_ten_concurrent_clients_are_all_answered(server: RagServer) -> None:
    from mcp import Client

    answers: list[str] = []

    async def one() -> None:
        async with Client(transport(server.url, KEY)) as client:
            result = await client.call_tool("ask", {"question": QUESTION})
            assert not result.is_error
            answers.append(result.structured_content["answer"])

    async def all_of_them() -> None:
        async with anyio.create_task_group() as tg:
            for _ in range(10):
                tg.start_soon(one)

    anyio.run(all_of_them)
    assert len(answers) == 10 and all("3.76x" in a for a in answers)


def test_a_client_leaving_mid_call_leaves_the_server_answering(server: RagServer) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def leave_mid_call() -> None:
        sent = anyio.Event()

        async def on_request(request: Any) -> None:
            if b'"tools/call"' in request.content:
                sent.set()

        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {KEY}"},
                                      event_hooks={"request": [on_request]}) as http, \
                Client(streamable_http_client(f"{server.url}/mcp", http_client=http)) as client, \
                anyio.create_task_group() as tg:
            tg.start_soon(client.call_tool, "ask", {"question": QUESTION})
            await sent.wait()  # the call has gone out: leave without its answer
            tg.cancel_scope.cancel()

    anyio.run(leave_mid_call)
    with connect(transport(server.url, KEY)) as session:
        assert session.ok("list_papers")["total"] == 60
        assert "3.76x" in session.ok("ask", question=QUESTION)["answer"]
    assert httpx.get(f"{server.url}/health").json()["papers"] == 60


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def limited(seeded_settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RagServer]:  # type: ignore[no-untyped-def]
    """A `rag serve` without a key, keeping at most 3 MCP sessions, each closed after 2 s
    without a request."""
    env = {"RAG_MCP_MAX_SESSIONS": "3", "RAG_MCP_SESSION_IDLE_S": "2"}
    with serving(seeded_settings.home, tmp_path_factory.mktemp("mcp-limited"), env) as srv:
        yield srv


def open_session(url: str) -> httpx.Response:
    return httpx.post(f"{url}/mcp", json=INITIALIZE, headers=MCP_HEADERS, timeout=30)


def test_sessions_are_capped_and_closed_when_idle(limited: RagServer) -> None:
    """1,000 sessions a client never closed held 41 MB for good: they end when idle now, and
    no more than RAG_MCP_MAX_SESSIONS are open at once."""
    import time

    opened = [open_session(limited.url) for _ in range(3)]
    assert [r.status_code for r in opened] == [200] * 3
    ids = [r.headers["mcp-session-id"] for r in opened]
    refused = open_session(limited.url)
    assert refused.status_code == 503 and "Too many open sessions" in refused.text
    deadline = time.monotonic() + 60
    while (again := open_session(limited.url)).status_code == 503:  # room once they are idle
        assert time.monotonic() < deadline, "no session closed within 60 s"
        time.sleep(0.5)
    assert again.status_code == 200
    for sid in ids:  # a closed session's client is told to start a new one
        gone = httpx.post(f"{limited.url}/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "ping"},
                          headers={**MCP_HEADERS, "Mcp-Session-Id": sid}, timeout=30)
        assert gone.status_code == 404, gone.text
    assert httpx.get(f"{limited.url}/health").json()["papers"] == 60


@pytest.mark.parametrize(("origin", "status"), [
    ("http://evil.example", 403), ("https://127.0.0.1.evil.example", 403), ("null", 403),
    ("http://localhost:5173", 404), ("http://127.0.0.1", 404), (None, 404)])
def test_mcp_answers_pages_of_this_machine_only(limited: RagServer, origin: str | None, status: int) -> None:
    """Without a key, a page on any site could use /mcp of a server on the user's machine;
    the MCP specification asks servers to validate Origin. (404: past the check, the SDK
    knows no session "nosuch".)"""
    headers = {**MCP_HEADERS, "Mcp-Session-Id": "nosuch", **({"Origin": origin} if origin else {})}
    resp = httpx.post(f"{limited.url}/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "ping"},
                      headers=headers, timeout=30)
    assert resp.status_code == status, resp.text
    if status == 403:
        assert resp.json()["error"] == f"Origin {origin!r} may not use /mcp"
        assert "RAG_CORS_ORIGINS" in resp.json()["hint"]
