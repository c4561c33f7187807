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
