"""`rag serve` and `rag ask --export` under careless or hostile requests: malformed Host
headers, oversized bodies, OpenAI parameters rag cannot honour, script in Markdown content."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from rag.api.app import create_app
from rag.api.routes.openai import markdown_safe
from rag.errors import InputError
from rag.export import format_for_path, save


@pytest.fixture(scope="module")
def client(seeded_settings) -> Iterator[TestClient]:  # type: ignore[no-untyped-def]
    with TestClient(create_app(seeded_settings.model_copy(update={"llm": "none"}))) as c:
        yield c


@pytest.mark.parametrize("host", ["localhost:80@evil.com", "127.0.0.1:8000/evil", "localhost:http",
                                  "[::1]x", "evil.com#localhost", ""])
def test_malformed_host_headers_are_refused(client: TestClient, host: str) -> None:
    response = client.get("/health", headers={"Host": host})
    assert response.status_code == 400 and "is not served here" in response.json()["error"]


def test_two_host_headers_are_refused(client: TestClient) -> None:
    response = client.get("/health", headers=[("Host", "localhost"), ("Host", "evil.com")])
    assert response.status_code == 400
    assert client.get("/health", headers={"Host": "localhost:8000"}).status_code == 200


def test_an_oversized_body_is_a_json_413_with_or_without_content_length(client: TestClient) -> None:
    body = b'{"question": "' + b"x" * (2 * 1024 * 1024) + b'"}'
    sized = client.post("/ask", content=body, headers={"Content-Type": "application/json"})
    chunked = client.post("/ask", content=iter([body[:1000], body[1000:]]),
                          headers={"Content-Type": "application/json"})
    for response in (sized, chunked):
        assert response.status_code == 413
        assert response.headers["content-type"].startswith("application/json")
        assert response.json()["type"] == "PayloadTooLarge", response.text  # the same body either way
        assert response.json()["hint"] == "send a smaller request, or raise RAG_MAX_BODY_KB on the server"
    assert "RAG_MAX_BODY_KB" in sized.json()["hint"] + sized.json()["error"]


def test_a_stalled_body_is_a_typed_408(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ASGI app called directly: a test client sends the whole body at once."""
    import asyncio
    import json

    from rag.api import limits

    monkeypatch.setattr(limits, "BODY_STALL_S", 0.2)
    scope = {"type": "http", "method": "POST", "path": "/ask", "raw_path": b"/ask", "query_string": b"",
             "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json")],
             "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 5000), "scheme": "http",
             "http_version": "1.1", "root_path": "", "state": {}}
    sent: list[dict[str, object]] = []

    async def stalled() -> dict[str, object]:
        await asyncio.sleep(30)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    asyncio.run(client.app(scope, stalled, send))  # type: ignore[arg-type]
    assert sent[0]["status"] == 408
    body = json.loads(b"".join(m.get("body", b"") for m in sent[1:]))  # type: ignore[misc]
    assert body["type"] == "BodyTimeout" and "no request body bytes for 0 s" in body["error"]
    assert body["hint"] == "send the whole body without pausing"


def test_a_long_openai_conversation_is_trimmed_not_refused(client: TestClient) -> None:
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": "hi"} for i in range(9_999)]
    messages.append({"role": "user", "content": "What does Skrull speed up?"})
    response = client.post("/v1/chat/completions", json={"model": "rag-offline", "messages": messages})
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"]


@pytest.mark.parametrize("fmt", [{"type": "json_object"}, {"type": "json_schema", "json_schema": {}}, "json"])
def test_a_response_format_rag_cannot_honour_is_refused(client: TestClient, fmt: object) -> None:
    body = {"model": "rag-offline", "messages": [{"role": "user", "content": "What is Skrull?"}],
            "response_format": fmt}
    response = client.post("/v1/chat/completions", json=body)
    assert response.status_code == 400 and "response_format" in response.json()["error"]["message"]
    body["response_format"] = {"type": "text"}
    assert client.post("/v1/chat/completions", json=body).status_code == 200


def test_markdown_content_cannot_carry_html_or_script_links() -> None:
    text = ('It is <img src=x onerror=alert(1)> fast <script>alert(2)</script> '
            "[see](javascript:alert(3)) 3 < 5 and [1](https://arxiv.org).")
    safe = markdown_safe(text)
    assert not re.search(r"(?<!\\)<[a-z/]", safe) and "](javascript:" not in safe
    assert "\\<img" in safe and "\\</script>" in safe and "]\\(javascript:" in safe
    assert "3 < 5" in safe and "[1](https://arxiv.org)" in safe


def test_export_to_a_missing_folder_fails_before_answering(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        format_for_path(tmp_path / "nowhere" / "refs.bib")
    assert format_for_path(tmp_path / "refs.bib") == "bibtex"


def test_replacing_an_export_says_so(tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    target = tmp_path / "refs.bib"
    save(target, "first")
    assert "replaced" not in caplog.text
    save(target, "second")
    assert target.read_text() == "second" and f"replaced the earlier {target}" in caplog.text
    assert [p.name for p in tmp_path.iterdir()] == ["refs.bib"]  # no temporary file left
