"""The HTTP API in-process (FastAPI's TestClient) over the real seeded index, offline answerer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from rag.api import create_app
from tests.conftest import run_rag

FACT_Q = "How much faster is Skrull than DeepSpeed?"
KEY = "s3cret-key"


@pytest.fixture(scope="module")
def client(seeded_settings) -> Iterator[TestClient]:  # type: ignore[no-untyped-def]
    with TestClient(create_app(seeded_settings)) as c:
        yield c


@pytest.fixture(scope="module")
def keyed(seeded_settings, client) -> Iterator[TestClient]:  # type: ignore[no-untyped-def]
    """An app that requires a bearer token, sharing the loaded pipeline."""
    settings = seeded_settings.model_copy(update={"api_key": KEY})
    with TestClient(create_app(settings, pipeline=client.app.state.pipeline)) as c:
        yield c


def sse(text: str) -> list[tuple[str, Any]]:
    events = []
    for block in text.strip().split("\n\n"):
        lines = block.split("\n")
        kind = next(ln[6:].strip() for ln in lines if ln.startswith("event:"))
        data = "\n".join(ln[5:].lstrip() for ln in lines if ln.startswith("data:"))
        events.append((kind, json.loads(data)))
    return events


def same_shape(a: Any, b: Any) -> bool:
    """Same keys all the way down (values may differ)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_shape(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return all(same_shape(x, y) for x, y in zip(a, b, strict=False))
    return True


# -- /health, /papers ----------------------------------------------------------------------


def test_health(client: TestClient, seeded_settings) -> None:  # type: ignore[no-untyped-def]
    body = client.get("/health").json()
    assert body["status"] == "ok" and body["index"] == seeded_settings.index
    assert body["papers"] == 60 and body["chunks"] >= 60
    assert body["embedding_model"] == "all-MiniLM-L6-v2" and body["version"]
    # conftest points OLLAMA_HOST at a closed port: reported, never a failure
    assert body["ollama"]["reachable"] is False and body["ollama"]["model_present"] is False
    assert "not running" in body["ollama"]["error"]
    assert body["auth_required"] is False


def test_papers_and_one_paper(client: TestClient) -> None:
    papers = client.get("/papers").json()["papers"]
    assert len(papers) == 60 and len({p["paper_id"] for p in papers}) == 60
    first = papers[0]
    got = client.get(f"/papers/{first['paper_id']}")
    assert got.status_code == 200 and got.json() == first


def test_venues_are_listed_with_their_counts_without_the_papers(client: TestClient) -> None:
    papers = client.get("/papers").json()["papers"]
    resp = client.get("/venues")
    assert resp.status_code == 200
    venues = resp.json()["venues"]
    assert venues == sorted(venues, key=lambda v: v["venue"])
    assert {v["venue"]: v["papers"] for v in venues} == {
        name: sum(p["venue"] == name for p in papers) for name in {p["venue"] for p in papers if p["venue"]}}
    assert not any(p["abstract"][:60] in resp.text for p in papers)  # the venues, not the papers


def test_unknown_paper_is_a_clear_404(client: TestClient) -> None:
    resp = client.get("/papers/no-such-paper")
    assert resp.status_code == 404
    body = resp.json()
    assert "no-such-paper" in body["error"] and "/papers" in body["hint"] and body["type"] == "NotFound"


# -- /ask and /search agree with the CLI ----------------------------------------------------------


def test_ask_returns_what_rag_ask_json_prints(client: TestClient, seeded_settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    resp = client.post("/ask", json={"question": FACT_Q, "llm": "none"})
    assert resp.status_code == 200
    api = resp.json()
    cli = run_rag("ask", "--json", "--llm", "none", FACT_Q, cwd=tmp_path,
                  env={"RAG_HOME": str(seeded_settings.home)})
    assert cli.returncode == 0, cli.stderr
    local = json.loads(cli.stdout)
    assert list(api) == list(local) and same_shape(api, local)
    api.pop("timings_ms"), local.pop("timings_ms")
    assert api == local
    assert "3.76x" in api["answer"] and api["answerer"] == "extractive"


def test_search_equals_rag_search_json(client: TestClient, seeded_settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    q = "dynamic data scheduling for long-context fine-tuning"
    api = client.get("/search", params={"q": q, "k": 5}).json()
    cli = run_rag("search", "--json", "-k", "5", q, cwd=tmp_path,
                  env={"RAG_HOME": str(seeded_settings.home)})
    assert cli.returncode == 0, cli.stderr
    assert api == json.loads(cli.stdout)
    assert api["results"][0]["label"] == "Skrull"


def test_search_filters(client: TestClient) -> None:
    hits = client.get("/search", params={"q": "training", "k": 50, "year": "2023"}).json()["results"]
    assert hits and all(h["year"] == 2023 for h in hits)
    resp = client.get("/search", params={"q": "training", "year": "soon"})
    assert resp.status_code == 400
    assert "year" in resp.json()["error"] and resp.json()["type"] == "InputError"


def test_an_authors_papers_through_every_endpoint(client: TestClient) -> None:
    hits = client.get("/search", params={"q": "training", "author": "Gale"}).json()["results"]
    assert [h["title"].split(":")[0] for h in hits] == ["MegaBlocks"]
    ans = client.post("/ask", json={"question": "What is MegaBlocks?",
                                    "filters": {"author": "Trevor Gale"}}).json()
    assert ans["citations"] and {c["title"].split(":")[0] for c in ans["citations"]} == {"MegaBlocks"}
    resp = client.post("/v1/chat/completions", json={
        "model": "rag-offline", "author": "Nobody Atall",
        "messages": [{"role": "user", "content": "Which papers study mixture of experts?"}]})
    assert "No papers match the filters: author Nobody Atall" in resp.json()["choices"][0]["message"]["content"]


def test_ask_with_filters_in_either_place(client: TestClient) -> None:
    flat = client.post("/ask", json={"question": FACT_Q, "year": "1990"}).json()
    nested = client.post("/ask", json={"question": FACT_Q, "filters": {"year": "1990"}}).json()
    assert flat["abstained"] and nested["abstained"]


# -- /chat ----------------------------------------------------------------------------------------


def test_chat_without_streaming_is_the_ask_object(client: TestClient) -> None:
    chat = client.post("/chat", json={"messages": [{"role": "user", "content": FACT_Q}]}).json()
    ask = client.post("/ask", json={"question": FACT_Q}).json()
    chat.pop("timings_ms"), ask.pop("timings_ms")
    assert chat == ask


def test_chat_stream_sends_tokens_then_one_final_event(client: TestClient) -> None:
    with client.stream("POST", "/chat", json={
            "messages": [{"role": "user", "content": FACT_Q}], "stream": True}) as resp:
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("text/event-stream")
        events = sse(resp.read().decode())
    kinds = [k for k, _ in events]
    assert kinds[0] == "sentence" and kinds[-1] == "final" and kinds.count("final") == 1
    final = events[-1][1]
    assert "".join(d["text"] for k, d in events if k == "token") == final["answer"]
    assert final["citations"] and final["sentences"] and final["answerer"] == "extractive"


def test_chat_follow_up_is_condensed(client: TestClient) -> None:
    body = client.post("/chat", json={"messages": [
        {"role": "user", "content": "What is Skrull?"},
        {"role": "assistant", "content": "Skrull is a data scheduler [1]."},
        {"role": "user", "content": "How much faster is it than DeepSpeed?"},
    ]}).json()
    assert "Skrull" in body["standalone_question"] and "3.76x" in body["answer"]


def test_llm_failures_are_503_with_a_hint(client: TestClient) -> None:
    # Ollama is not running (conftest): with llm=ollama that is an error, not a fallback.
    for path, body in [("/ask", {"question": FACT_Q, "llm": "ollama"}),
                       ("/chat", {"messages": [{"role": "user", "content": FACT_Q}],
                                  "llm": "ollama", "stream": True})]:
        resp = client.post(path, json=body)
        assert resp.status_code == 503, path
        err = resp.json()
        assert "not running" in err["error"] and "ollama serve" in err["hint"]
        assert err["type"] == "LLMUnavailable"
        # what an HTTP client does about it: no command-line option
        assert 'send "llm": "none"' in err["hint"] and "--llm" not in err["hint"], err["hint"]
    resp = client.post("/v1/chat/completions", json={"model": "rag:llama3.2", "messages": [
        {"role": "user", "content": FACT_Q}]})
    assert resp.status_code == 503
    assert 'use the model "rag-offline"' in resp.json()["error"]["hint"] and "--" not in resp.json()["error"]["hint"]


def test_auto_falls_back_offline_with_a_notice(client: TestClient) -> None:
    body = client.post("/ask", json={"question": FACT_Q, "llm": "auto"}).json()
    assert body["answerer"] == "extractive" and any("not running" in n for n in body["notices"])


def test_a_blank_question_is_the_empty_questions_422_everywhere(client: TestClient) -> None:
    for resp, field in ((client.post("/ask", json={"question": "   "}), "question"),
                        (client.get("/search", params={"q": " "}), "q"),
                        (client.post("/chat", json={"messages": [{"role": "user", "content": " "}]}),
                         "messages.0.content")):
        assert resp.status_code == 422 and resp.json()["fields"] == [field], resp.text
        assert "is empty" in resp.json()["error"] and "1..2000 characters" in resp.json()["hint"]


# -- limits: 422 naming the field -----------------------------------------------------------------

MSG = {"role": "user", "content": "hi"}
LIMITS = [
    ("post", "/ask", {"question": "x" * 2001}, "question"),
    ("post", "/ask", {"question": ""}, "question"),
    ("post", "/ask", {}, "question"),
    ("post", "/ask", {"question": "hi", "k": 0}, "k"),
    ("post", "/ask", {"question": "hi", "k": 51}, "k"),
    ("post", "/ask", {"question": "hi", "llm": "gpt"}, "llm"),
    ("post", "/ask", {"question": "hi", "colour": "red"}, "colour"),
    ("post", "/chat", {"messages": [MSG] * 51}, "messages"),
    ("post", "/chat", {"messages": []}, "messages"),
    ("post", "/chat", {"messages": [{"role": "user", "content": "x" * 2001}]}, "messages.0.content"),
    ("post", "/chat", {"messages": [MSG, {"role": "assistant", "content": "a"}]}, "messages.1.role"),
    ("post", "/chat", {"messages": [{"role": "robot", "content": "a"}]}, "messages.0.role"),
    ("post", "/chat", {"messages": [MSG], "k": 100}, "k"),
    ("get", "/search", {"k": 3}, "q"),
    ("get", "/search", {"q": "x" * 2001}, "q"),
    ("get", "/search", {"q": "x", "k": 51}, "k"),
    ("get", "/search", {"q": "x", "k": 0}, "k"),
    ("post", "/ask", {"question": "   "}, "question"),
    ("get", "/search", {"q": "  "}, "q"),
    ("post", "/ask", {"question": "hi", "year": True}, "year"),  # not the year 1
]


@pytest.mark.parametrize(("method", "path", "payload", "field"), LIMITS,
                         ids=[f"{p}-{f}-{i}" for i, (_, p, _, f) in enumerate(LIMITS)])
def test_limits_are_422_naming_the_field(client: TestClient, method: str, path: str,
                                         payload: dict[str, Any], field: str) -> None:
    resp = client.get(path, params=payload) if method == "get" else client.post(path, json=payload)
    assert resp.status_code == 422
    body = resp.json()
    assert field in body["fields"], body
    assert field.split(".")[0] in body["error"] and body["hint"]
    assert all("loc" in d and "msg" in d for d in body["detail"])
    assert all(set(d) == {"loc", "msg", "type"} for d in body["detail"])
    assert "x" * 100 not in resp.text  # no echo of a 2,000-character input


@pytest.mark.parametrize(("method", "path", "payload", "field", "hint"), [
    ("get", "/papers", {"format": "pdf"}, "format", "format is one of 'json', 'bibtex', 'ris' or 'csl-json'"),
    ("post", "/ask", {"question": "hi", "filters": {"yaer": 2023}}, "filters.yaer",
     "the fields of filters are: venue, year, source, category, author"),
    ("post", "/ask", {"question": "hi", "colour": "red"}, "colour", "the fields are: k, llm, model,"),
    ("post", "/ask", {"question": "hi", "k": 0}, "k", "k is a whole number from 1 to 50"),
    ("post", "/ask", {"question": "hi", "llm": "gpt"}, "llm", "llm is one of 'auto', 'ollama', 'openai' or 'none'"),
    ("post", "/ask", {"question": "hi", "year": True}, "year", "year is a year or a range"),
    # an empty filter was taken for none, silently
    ("post", "/ask", {"question": "hi", "venue": ""}, "venue", "leave it out to keep every paper"),
    ("post", "/ask", {"question": "hi", "filters": {"source": " "}}, "filters.source", "leave it out"),
    ("post", "/chat", {"messages": [MSG], "category": ""}, "category", "leave it out to keep every paper"),
    ("post", "/ask", {"question": "hi", "year": " "}, "year", "year is a year or a range"),
    ("get", "/search", {"q": "moe", "venue": " "}, "venue", "leave it out to keep every paper"),
    ("get", "/search", {"q": "moe", "year": ""}, "year", "year is a year or a range"),
    ("post", "/ask", {"question": "hi", "author": ""}, "author", "author is a surname or full name"),
    ("post", "/v1/chat/completions", {"model": "rag", "messages": [MSG], "venue": ""}, "venue",
     "leave it out to keep every paper"),
    ("post", "/chat", {"messages": [MSG] * 51}, "messages", "1..50 messages"),
    ("post", "/chat", {"messages": [{"role": "robot", "content": "a"}]}, "messages.0.role",
     "role is user, assistant or system"),
    ("post", "/v1/chat/completions", {"model": "rag", "messages": [MSG] * 60 + [
        {"role": "user", "content": ""}]}, "messages.60.content", "a question is 1..2000 characters"),
    # a field that takes one of two types was named as two fields that do not exist (year.str,
    # year.int), with no hint
    ("post", "/ask", {"question": "hi", "year": [2023]}, "year", "year is a year or a range"),
    ("post", "/v1/chat/completions", {"model": "rag", "messages": [{"role": "user", "content": 5}]},
     "messages.0.content", 'content is text or a list of parts [{"type": "text", "text": "..."}]'),
    ("post", "/ask", {"question": "hi", "str": 1}, "str", "the fields are: k, llm, model,"),
    # these said only "see ... at /docs"
    ("post", "/v1/chat/completions", {"model": 4, "messages": [MSG]}, "model",
     "model is 'rag', 'rag-offline' or 'rag:<ollama model>'"),
    ("post", "/ask", {"question": "hi", "model": 4}, "model", "model is the name of an Ollama model"),
    ("post", "/v1/chat/completions", {"model": "rag", "messages": ["hi"]}, "messages.0",
     'each message is an object {"role": "user", "content": "..."}'),
    ("post", "/chat", {"messages": [MSG], "stream": "maybe"}, "stream", "stream is true or false"),
    ("post", "/v1/chat/completions", {"model": "rag", "messages": [MSG], "stream_options": {
        "include_usage": "maybe"}}, "stream_options.include_usage", "stream_options.include_usage is true or false"),
])
def test_a_422_hint_says_what_to_do_about_its_field(client: TestClient, method: str, path: str,
                                                    payload: dict[str, Any], field: str, hint: str) -> None:
    resp = client.get(path, params=payload) if method == "get" else client.post(path, json=payload)
    body = resp.json()["error"] if path.startswith("/v1") else resp.json()
    assert resp.status_code == (400 if path.startswith("/v1") else 422)
    assert body["fields"] == [field] and hint in body["hint"], body
    assert body.get("param", field) == field  # /v1: OpenAI's param names it too
    assert "50 messages" not in body["hint"] or path == "/chat"  # /v1 trims, it has no such limit


@pytest.mark.parametrize(("content", "headers", "says", "hint"), [
    (b'{"question": "hi",}', {"Content-Type": "application/json"},
     "the body is not valid JSON: Expecting property name enclosed in double quotes: line 1 column 19 (char 18)",
     "send one JSON object"),
    (b'{"question":\n  "hi"\n  "k": 3}', {"Content-Type": "application/json"},
     "the body is not valid JSON: Expecting ',' delimiter: line 3 column 3", "send one JSON object"),
    (b'{"question": "caf\xe9?"}', {"Content-Type": "application/json"},
     "the body is not valid JSON: it is not UTF-8 text (byte 0xe9 at position 17)", "encoded as UTF-8"),
    (b"[" * 100_000 + b"]" * 100_000, {"Content-Type": "application/json"},
     "the body nests arrays or objects too deep to be read as JSON", "send one JSON object"),
    (b'{"question": "What does DynaPipe optimise?"}', {"Content-Type": "text/plain"},
     "it needs the header `Content-Type: application/json` (it came as 'text/plain')", "send one JSON object"),
    (b'{"question": "What does DynaPipe optimise?"}', {},
     "it needs the header `Content-Type: application/json` (it came without one)", "send one JSON object"),
])
def test_a_body_that_is_no_json_object_says_why(client: TestClient, content: bytes, headers: dict[str, str],
                                                says: str, hint: str) -> None:
    resp = client.post("/ask", content=content, headers=headers)
    assert resp.status_code == 400 and resp.json()["type"] == "InvalidJSON", resp.text
    assert says in resp.json()["error"] and hint in resp.json()["hint"], resp.json()
    assert "fields" not in resp.json()  # no character offset posing as a field
    v1 = client.post("/v1/chat/completions", content=content, headers=headers)
    assert v1.status_code == 400 and v1.json()["error"]["type"] == "invalid_request_error"
    assert says in v1.json()["error"]["message"] and v1.json()["error"]["param"] is None


def test_an_unknown_paper_is_404_by_path_and_by_id(client: TestClient) -> None:
    for resp in (client.get("/papers/nope"), client.get("/papers", params={"id": "nope"}),
                 client.get("/papers", params={"id": "nope", "format": "bibtex"})):
        assert resp.status_code == 404 and resp.json()["type"] == "NotFound"
        assert "'nope'" in resp.json()["error"] and "GET /papers" in resp.json()["hint"]
        assert "`rag" not in resp.json()["hint"]


def test_a_wrong_method_under_v1_is_the_clients_error(client: TestClient) -> None:
    resp = client.get("/v1/chat/completions")
    assert resp.status_code == 405 and resp.json()["error"]["type"] == "invalid_request_error"


def test_openai_long_conversations_are_answered_and_bad_requests_are_400(client: TestClient) -> None:
    turns = [MSG, {"role": "assistant", "content": "Skrull is fast [1]."}] * 40 + [MSG]
    resp = client.post("/v1/chat/completions", json={"model": "rag-offline", "messages": turns})
    assert resp.status_code == 200 and "3.76" in resp.json()["choices"][0]["message"]["content"]
    resp = client.post("/v1/chat/completions", json={"model": "rag", "messages": []})
    assert resp.status_code == 400  # as OpenAI answers a malformed request
    assert resp.json()["error"]["fields"] == ["messages"]
    assert resp.json()["error"]["param"] == "messages"
    assert resp.json()["error"]["type"] == "invalid_request_error"


# -- auth, CORS, errors ---------------------------------------------------------------------------


def test_bearer_token_is_required_when_set(keyed: TestClient) -> None:
    protected = [("get", "/papers", None), ("get", "/papers/x", None),
                 ("get", "/search?q=x", None), ("post", "/ask", {"question": FACT_Q}),
                 ("post", "/chat", {"messages": [MSG]}), ("get", "/v1/models", None),
                 ("post", "/v1/chat/completions", {"model": "rag", "messages": [MSG]})]
    for method, path, body in protected:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}):
            resp = keyed.request(method, path, json=body, headers=headers)
            assert resp.status_code == 401, (path, headers)
            assert resp.headers["www-authenticate"] == "Bearer"
            err = resp.json()["error"]
            assert "API key" in (err["message"] if path.startswith("/v1") else err)
    ok = {"Authorization": f"Bearer {KEY}"}
    assert keyed.get("/papers", headers=ok).status_code == 200
    assert keyed.post("/ask", json={"question": FACT_Q}, headers=ok).status_code == 200
    # /health and the page need no key
    assert keyed.get("/health").json()["auth_required"] is True
    assert keyed.get("/").status_code == 200 and keyed.get("/static/app.js").status_code == 200


def test_cors_origins_from_settings(seeded_settings, client: TestClient) -> None:  # type: ignore[no-untyped-def]
    settings = seeded_settings.model_copy(update={"cors_origins": "http://a.example, http://b.example"})
    preflight = {"Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "authorization,content-type"}
    with TestClient(create_app(settings, pipeline=client.app.state.pipeline)) as c:
        ok = c.options("/ask", headers={"Origin": "http://b.example", **preflight})
        assert ok.status_code == 200
        assert ok.headers["access-control-allow-origin"] == "http://b.example"
        bad = c.options("/ask", headers={"Origin": "http://evil.example", **preflight})
        assert "access-control-allow-origin" not in bad.headers
    # none configured: no CORS headers at all
    resp = client.get("/health", headers={"Origin": "http://a.example"})
    assert "access-control-allow-origin" not in resp.headers


def test_a_browser_page_using_the_openai_js_sdk_passes_the_cors_preflight(seeded_settings, client: TestClient) -> None:  # type: ignore[no-untyped-def]
    # what the openai package for JavaScript sends from a page (dangerouslyAllowBrowser)
    sdk_headers = ("authorization,content-type,x-stainless-arch,x-stainless-lang,x-stainless-os,"
                   "x-stainless-package-version,x-stainless-retry-count,x-stainless-runtime,"
                   "x-stainless-runtime-version,x-stainless-timeout")
    origin = "http://localhost:3000"
    settings = seeded_settings.model_copy(update={"cors_origins": origin})
    with TestClient(create_app(settings, pipeline=client.app.state.pipeline)) as c:
        preflight = c.options("/v1/chat/completions", headers={
            "Origin": origin, "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": sdk_headers})
        assert preflight.status_code == 200, preflight.text
        allowed = {h.strip() for h in preflight.headers["access-control-allow-headers"].lower().split(",")}
        assert set(sdk_headers.split(",")) <= allowed
        resp = c.post("/v1/chat/completions", headers={"Origin": origin, "X-Stainless-Lang": "js"},
                      json={"model": "rag-offline", "messages": [{"role": "user", "content": FACT_Q}]})
        assert resp.status_code == 200 and resp.headers["access-control-allow-origin"] == origin


def test_a_browser_mcp_client_reads_its_session_id_and_ends_the_session(seeded_settings, client: TestClient) -> None:  # type: ignore[no-untyped-def]
    # what the MCP SDK's streamable HTTP transport does from a page (the MCP Inspector's
    # direct connection): the session id comes in a response header, which a page reads only
    # when CORS exposes it, and the session ends with DELETE
    origin = "http://localhost:6274"
    settings = seeded_settings.model_copy(update={"cors_origins": origin})
    mcp = {"Origin": origin, "Accept": "application/json, text/event-stream"}
    with TestClient(create_app(settings, pipeline=client.app.state.pipeline)) as c:
        resp = c.post("/mcp", headers=mcp, json={
            "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "page", "version": "1"}}})
        assert resp.status_code == 200 and resp.headers["access-control-allow-origin"] == origin
        exposed = {h.strip() for h in resp.headers["access-control-expose-headers"].lower().split(",")}
        assert "mcp-session-id" in exposed and resp.headers["mcp-session-id"]
        preflight = c.options("/mcp", headers={"Origin": origin, "Access-Control-Request-Method": "DELETE",
                                               "Access-Control-Request-Headers": "mcp-session-id"})
        assert preflight.status_code == 200, preflight.text
        assert "DELETE" in preflight.headers["access-control-allow-methods"]
        ended = c.delete("/mcp", headers={**mcp, "Mcp-Session-Id": resp.headers["mcp-session-id"]})
        assert ended.status_code == 200 and ended.headers["access-control-allow-origin"] == origin


def test_unexpected_errors_are_json_500s(seeded_settings, client: TestClient) -> None:  # type: ignore[no-untyped-def]
    from rag.errors import IndexStoreError

    origin = "http://localhost:3000"
    settings = seeded_settings.model_copy(update={"cors_origins": origin})
    app = create_app(settings, pipeline=client.app.state.pipeline)

    def index_broken() -> None:
        raise IndexStoreError("the index is locked", "wait for the ingest")

    def bug() -> None:
        raise ZeroDivisionError("division by zero")

    app.add_api_route("/test-index-error", index_broken)
    app.add_api_route("/test-bug", bug)
    with TestClient(app, raise_server_exceptions=False) as c:
        resp = c.get("/test-index-error")
        assert resp.status_code == 500
        assert resp.json() == {"error": "the index is locked", "hint": "wait for the ingest",
                               "type": "IndexStoreError"}
        resp = c.get("/test-bug")
        assert resp.status_code == 500 and "Traceback" not in resp.text
        assert "ZeroDivisionError" in resp.json()["error"] and resp.json()["hint"]
        # a page of an allowed origin can read either 500 (not a CORS failure)
        for path in ("/test-index-error", "/test-bug"):
            resp = c.get(path, headers={"Origin": origin})
            assert resp.status_code == 500 and resp.headers["access-control-allow-origin"] == origin
        resp = c.get("/no/such/endpoint")
        assert resp.status_code == 404 and resp.json()["hint"]


# -- OpenAPI, OpenAI-compatible, page -------------------------------------------------------------


def test_openapi_documents_public_response_models(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    expected = {("/ask", "post"): "AnswerPublic", ("/chat", "post"): "AnswerPublic",
                ("/search", "get"): "SearchResultsPublic", ("/papers", "get"): "PaperListPublic",
                ("/papers/{paper_id}", "get"): "PaperPublic", ("/health", "get"): "HealthPublic",
                ("/v1/chat/completions", "post"): "ChatCompletionPublic",
                ("/v1/models", "get"): "ModelListPublic"}
    for (path, method), model in expected.items():
        op = spec["paths"][path][method]
        ref = op["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
        assert ref.endswith("/" + model), (path, ref)
        assert all(not name.endswith("Public") or name in spec["components"]["schemas"]
                   for name in [model])
    assert "text/event-stream" in spec["paths"]["/chat"]["post"]["responses"]["200"]["content"]
    assert spec["paths"]["/ask"]["post"]["responses"]["422"]["content"]["application/json"][
        "schema"]["$ref"].endswith("/ValidationErrorPublic")
    assert "HTTPBearer" in spec["components"]["securitySchemes"]


def test_openai_references_stay_apart_in_a_client_that_renders_markdown(client: TestClient) -> None:
    # Open WebUI and LibreChat render the message as Markdown, where lines one newline apart
    # run together into one paragraph: "[1] Skrull ... [2] DeepSpeed-Ulysses ..." on one line.
    body = client.post("/v1/chat/completions", json={
        "model": "rag-offline",
        "messages": [{"role": "user", "content": "Which systems target training on long sequences?"}]}).json()
    content, refs = body["choices"][0]["message"]["content"], body["references"]
    paragraphs = content.split("\n\n")
    assert len(refs) >= 2
    for ref in refs:
        assert sum(p.startswith(f"[{ref['n']}] ") and "\n" not in p for p in paragraphs) == 1


def test_openai_chat_completion_in_process(client: TestClient) -> None:
    body = client.post("/v1/chat/completions", json={
        "model": "rag-offline", "temperature": 0.2,
        "messages": [{"role": "system", "content": "Be brief."},
                     {"role": "user", "content": [{"type": "text", "text": FACT_Q}]}]}).json()
    assert body["object"] == "chat.completion"
    content = body["choices"][0]["message"]["content"]
    assert "3.76x" in content and "\n\nReferences\n\n[1] " in content
    assert body["references"][0]["n"] == 1 and body["rag"]["answerer"] == "extractive"
    with client.stream("POST", "/v1/chat/completions", json={
            "model": "rag-offline", "stream": True,
            "messages": [{"role": "user", "content": FACT_Q}]}) as resp:
        lines = [ln for ln in resp.read().decode().split("\n") if ln.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(ln[6:]) for ln in lines[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop" and chunks[-1]["references"]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert text == content
    models = [m["id"] for m in client.get("/v1/models").json()["data"]]
    assert models[:2] == ["rag", "rag-offline"] and "rag:llama3.2" in models
    resp = client.post("/v1/chat/completions", json={"model": "gpt-4", "messages": [MSG]})
    assert resp.status_code == 404 and resp.json()["error"]["code"] == "model_not_found"


def test_a_long_openai_conversation_of_long_answers_is_trimmed_not_refused(client: TestClient) -> None:
    # 60 turns of 4,000-character answers (240,000 characters, a quarter of the body limit)
    # were a 400 "the messages are at most 200000 characters together" on every next question
    answer = "Skrull schedules long-SFT data [1]. " * 110
    turns = [{"role": "user", "content": "What is Skrull?"}, {"role": "assistant", "content": answer}] * 60
    resp = client.post("/v1/chat/completions", json={"model": "rag-offline", "messages": [
        {"role": "system", "content": "Be brief."}, *turns, {"role": "user", "content": FACT_Q}]})
    assert resp.status_code == 200, resp.text
    assert "3.76x" in resp.json()["choices"][0]["message"]["content"]
    # what it answers from is still bounded: the last turns and the system messages
    huge = [{"role": "system", "content": "x" * 19_000}] * 11
    resp = client.post("/v1/chat/completions", json={"model": "rag-offline", "messages": [
        *huge, {"role": "user", "content": FACT_Q}]})
    assert resp.status_code == 400 and "characters together" in resp.json()["error"]["message"]
    assert "all of them at most 200,000 together" in resp.json()["error"]["hint"]


def test_an_old_overlong_message_does_not_refuse_every_later_question(client: TestClient) -> None:
    # a paper pasted early in a chat (30,000 characters) stays in the conversation the client
    # sends: each later question was a 400 "messages.0.content: a message is at most 20000
    # characters", though the turns answered from are only the last ones
    pasted = {"role": "user", "content": "Here is a paper. " * 1800}
    turns = [{"role": "user", "content": "What is Skrull?"},
             {"role": "assistant", "content": "Skrull schedules long-SFT data [1]."}] * 15
    resp = client.post("/v1/chat/completions", json={"model": "rag-offline", "messages": [
        pasted, *turns, {"role": "user", "content": FACT_Q}]})
    assert resp.status_code == 200, resp.text
    # among the turns answered from, it is still refused, naming the message
    resp = client.post("/v1/chat/completions", json={"model": "rag-offline", "messages": [
        pasted, {"role": "assistant", "content": "Noted."}, {"role": "user", "content": FACT_Q}]})
    assert resp.status_code == 400 and resp.json()["error"]["param"] == "messages.0.content"
    assert "at most 20000 characters" in resp.json()["error"]["message"]


@pytest.mark.parametrize(("method", "path"), [("post", "/chat/completions"), ("get", "/models"),
                                            ("post", "/v1/v1/chat/completions")])
def test_an_openai_client_without_v1_in_its_base_url_is_told_so(client: TestClient, method: str,
                                                                 path: str) -> None:
    # the most common misconfiguration of an OpenAI client (base URL http://127.0.0.1:8000) got
    # only "no such endpoint: /chat/completions; the endpoints are listed at /docs"
    resp = client.request(method.upper(), path, json={"model": "rag", "messages": [MSG]})
    assert resp.status_code == 404
    body = resp.json()["error"] if path.startswith("/v1/") else resp.json()
    assert "base URL is http://testserver/v1 (with /v1 once)" in body["hint"], body


def test_a_question_of_only_an_image_says_that_only_text_is_read(client: TestClient) -> None:
    # it said "the question is empty", though the user had sent something
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    resp = client.post("/v1/chat/completions", json={"model": "rag-offline", "messages": [
        {"role": "user", "content": [image]}]})
    assert resp.status_code == 400 and resp.json()["error"]["param"] == "messages.0.content"
    assert "only content parts of type 'text'" in resp.json()["error"]["message"]
    # an image beside text: the text is answered
    resp = client.post("/v1/chat/completions", json={"model": "rag-offline", "messages": [
        {"role": "user", "content": [{"type": "text", "text": FACT_Q}, image]}]})
    assert resp.status_code == 200 and "3.76x" in resp.json()["choices"][0]["message"]["content"]


def test_openai_fields_sent_as_null_are_left_out(client: TestClient) -> None:
    # OpenAI's request types every optional field "or null"; clients that serialise an unset
    # field as null (stream included) got a 400 "stream: Input should be a valid boolean"
    nulls = dict.fromkeys(("stream", "stream_options", "n", "temperature", "max_tokens",
                           "max_completion_tokens", "stop", "user", "seed", "tools",
                           "tool_choice", "response_format", "logprobs"))
    resp = client.post("/v1/chat/completions", json={
        "model": "rag-offline", "messages": [{"role": "user", "content": FACT_Q}], **nulls})
    assert resp.status_code == 200, resp.text
    assert resp.json()["object"] == "chat.completion"
    assert "3.76x" in resp.json()["choices"][0]["message"]["content"]


def test_the_page_and_its_files(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert '<script src="/static/app.js"' in page.text
    js = client.get("/static/app.js")
    assert js.status_code == 200 and "javascript" in js.headers["content-type"]
    code = "\n".join(ln for ln in js.text.splitlines() if not ln.lstrip().startswith("//"))
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in code
    assert client.get("/static/style.css").status_code == 200


def test_health_reports_a_missing_model(client: TestClient, seeded_settings, ollama_server) -> None:  # type: ignore[no-untyped-def]
    settings = seeded_settings.model_copy(update={"ollama_host": ollama_server.url})
    with TestClient(create_app(settings, pipeline=client.app.state.pipeline)) as c:
        ok = c.get("/health").json()["ollama"]
        assert ok["reachable"] and ok["model_present"] and ok["error"] is None
        ollama_server.models = ["mistral:latest"]
        missing = c.get("/health").json()["ollama"]
        assert missing["reachable"] and not missing["model_present"]
        assert "llama3.2" in missing["error"]
        models = [m["id"] for m in c.get("/v1/models").json()["data"]]
        assert models == ["rag", "rag-offline", "rag:llama3.2", "rag:mistral:latest"]
        # an embedding model Ollama holds cannot answer: not offered to a chat client
        ollama_server.models = ["mistral:latest", "nomic-embed-text:latest"]
        models = [m["id"] for m in c.get("/v1/models").json()["data"]]
        assert models == ["rag", "rag-offline", "rag:llama3.2", "rag:mistral:latest"]
        assert c.get("/v1/models/rag:nomic-embed-text").status_code == 404


def test_a_broken_model_stream_is_finish_reason_error(client: TestClient, seeded_settings, ollama_server) -> None:  # type: ignore[no-untyped-def]
    from rag.answering import Pipeline

    ollama_server.behaviour = "cut"  # half the answer, then the connection drops
    settings = seeded_settings.model_copy(update={"ollama_host": ollama_server.url})
    with Pipeline(settings, client.app.state.pipeline.retriever) as pipeline, \
            TestClient(create_app(settings, pipeline=pipeline)) as c:
        resp = c.post("/ask", json={"question": FACT_Q, "llm": "ollama"})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["incomplete"] and body["finish_reason"] == "error" and body["answer"].strip()
    assert body["error"]["message"].startswith("the answer stream from Ollama broke off")


def test_a_broken_model_stream_under_v1_is_an_openai_error(client: TestClient, seeded_settings, ollama_server) -> None:  # type: ignore[no-untyped-def]
    from rag.answering import Pipeline

    # it was a 200 with finish_reason "error", which is none of OpenAI's (clients that read the
    # reason as OpenAI's enum fail to parse the reply); streamed, it was already this error
    ollama_server.behaviour = "cut"
    settings = seeded_settings.model_copy(update={"ollama_host": ollama_server.url})
    with Pipeline(settings, client.app.state.pipeline.retriever) as pipeline, \
            TestClient(create_app(settings, pipeline=pipeline)) as c:
        resp = c.post("/v1/chat/completions", json={
            "model": "rag:llama3.2", "messages": [{"role": "user", "content": FACT_Q}]})
    assert resp.status_code == 503, resp.text
    error = resp.json()["error"]
    assert error["type"] == "service_unavailable" and error["code"] == "StreamBroken"
    assert error["message"].startswith("the answer stream from Ollama broke off") and error["hint"]
