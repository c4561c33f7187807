"""A real `rag serve` process on 127.0.0.1: SSE streaming of /chat, the real `openai` client
against /v1, and the CLI talking to it through RAG_SERVER_URL (rag/client.py).

The server answers with Ollama through the Ollama-protocol test server and requires a bearer
token (RAG_API_KEY), so every client here also proves it sends the key.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import run_rag
from tests.ollama_server import OllamaTestServer, free_port_with_nothing_listening
from tests.rag_server import RagServer, serving, sse_events

KEY = "test-key-0123"
FACT_Q = "How much faster is Skrull than DeepSpeed?"
# Answered from two papers (Skrull, DeepSpeed-Ulysses): the test model writes a sentence for
# each, so a stream has several sentences to show one by one.
STREAM_Q = "How do systems train with long sequences?"


@pytest.fixture(scope="module")
def server(seeded_settings, ollama, tmp_path_factory) -> Iterator[RagServer]:  # type: ignore[no-untyped-def]
    with serving(seeded_settings.home, tmp_path_factory.mktemp("serve"),
                 {"OLLAMA_HOST": ollama.url, "RAG_API_KEY": KEY}) as srv:
        yield srv


@pytest.fixture()
def behaviour(ollama):  # type: ignore[no-untyped-def]
    """Set the Ollama test server's behaviour/token delay for one test; restored after."""
    def set_(name: str = "cited", delay: float = 0.0) -> OllamaTestServer:
        ollama.behaviour, ollama.token_delay = name, delay
        return ollama

    yield set_
    ollama.behaviour, ollama.token_delay = "cited", 0.0
    ollama.gate.set()
    ollama.held.clear()


AUTH = {"Authorization": f"Bearer {KEY}"}


def stream_chat(url: str, body: dict[str, Any]) -> list[tuple[str, Any, float]]:
    with httpx.Client(timeout=60) as client, client.stream(
            "POST", f"{url}/chat", json={**body, "stream": True}, headers=AUTH) as resp:
        assert resp.status_code == 200, resp.read()
        assert resp.headers["content-type"].startswith("text/event-stream")
        return list(sse_events(resp))


# -- health and auth ---------------------------------------------------------------------------


def test_health_needs_no_key_and_sees_ollama(server: RagServer) -> None:
    health = httpx.get(f"{server.url}/health", timeout=10).json()
    assert health["papers"] == 60 and health["auth_required"] is True
    assert health["ollama"]["reachable"] and health["ollama"]["model_present"]
    resp = httpx.get(f"{server.url}/papers", timeout=10)
    assert resp.status_code == 401 and resp.json()["hint"]


# -- /chat server-sent events ------------------------------------------------------------------


def test_chat_streams_sentences_before_the_final_event(server: RagServer, behaviour) -> None:  # type: ignore[no-untyped-def]
    behaviour("cited", delay=0.05)
    events = stream_chat(server.url, {"messages": [{"role": "user", "content": STREAM_Q}],
                                      "llm": "ollama"})
    kinds = [k for k, _, _ in events]
    assert kinds.count("final") == 1 and kinds[-1] == "final", kinds
    assert "error" not in kinds
    sentences = [(d, t) for k, d, t in events if k == "sentence"]
    assert len(sentences) >= 2
    final, final_at = events[-1][1], events[-1][2]
    assert final_at - sentences[0][1] > 0.1  # the first sentence arrived well before the end
    assert final["answerer"] == "ollama:llama3.2" and final["citations"]
    assert {s["supported"] for s in final["sentences"]} == {True}
    # what streamed is the final answer, markers numbered as in it, each sentence checked
    assert "".join(d["delta"] for d, _ in sentences) == final["answer"]
    assert "".join(d["text"] for k, d, _ in events if k == "token") == final["answer"]
    assert [d["supported"] for d, _ in sentences if not d["meta"]] == \
        [s["supported"] for s in final["sentences"]]


def test_event_loop_stays_free_while_an_answer_streams(server: RagServer, behaviour) -> None:  # type: ignore[no-untyped-def]
    ollama = behaviour("cited")
    ollama.gate.clear()  # the model's stream stops after its first chunk until the gate opens
    result: dict[str, Any] = {}

    def consume() -> None:
        with httpx.Client(timeout=60) as client, client.stream(
                "POST", f"{server.url}/chat", headers=AUTH,
                json={"messages": [{"role": "user", "content": FACT_Q}], "stream": True,
                      "llm": "ollama"}) as resp:
            for kind, _, _ in sse_events(resp):
                result.setdefault("kinds", []).append(kind)

    thread = threading.Thread(target=consume)
    thread.start()
    try:
        assert ollama.held.wait(30)  # the answer is streaming, and stays open meanwhile
        # Other requests are answered now, not when the answer ends: a blocked event loop
        # would keep them waiting for the gate, which opens only after them.
        for _ in range(3):
            assert httpx.get(f"{server.url}/health", timeout=30).status_code == 200
            assert httpx.get(f"{server.url}/search", params={"q": "pipeline parallelism"},
                             headers=AUTH, timeout=30).status_code == 200
        assert thread.is_alive() and "final" not in result.get("kinds", [])
    finally:
        ollama.gate.set()
        thread.join(60)
    assert result["kinds"][-1] == "final"


def test_a_broken_model_stream_arrives_as_an_error_event(server: RagServer, behaviour) -> None:  # type: ignore[no-untyped-def]
    behaviour("cut", delay=0.02)
    events = stream_chat(server.url, {"messages": [{"role": "user", "content": FACT_Q}],
                                      "llm": "ollama"})
    kinds = [k for k, _, _ in events]
    assert "final" not in kinds and kinds[-1] == "error", kinds
    assert kinds.index("token") < kinds.index("error")
    error = events[-1][1]
    assert "broke off" in error["message"] and error["hint"]
    assert error["incomplete"] is True and error["status"] == 503
    assert error["partial"]["incomplete"] is True
    # The server is still up and answers the next question in full.
    behaviour("cited")
    events = stream_chat(server.url, {"messages": [{"role": "user", "content": FACT_Q}],
                                      "llm": "ollama"})
    assert events[-1][0] == "final"


def test_a_client_leaving_mid_stream_does_not_hurt_the_server(server: RagServer, behaviour) -> None:  # type: ignore[no-untyped-def]
    ollama = behaviour("cited", delay=0.3)

    def generations() -> int:  # the /api/show probes of a first call to a model do not count
        return sum(r["path"] == "/api/chat" for r in ollama.requests)

    asked = generations()
    with httpx.Client(timeout=60) as client, client.stream(
            "POST", f"{server.url}/chat", headers=AUTH, json={
                "messages": [{"role": "user", "content": FACT_Q}], "stream": True,
                "llm": "ollama"}) as resp:
        kind, _, _ = next(sse_events(resp))
        assert kind == "sentence"
    # gone after the first words: one generation, not retried; the server stays healthy and
    # answers the next question (in random order this test can be the server's first model
    # call, which also asks /api/show)
    assert generations() == asked + 1
    assert httpx.get(f"{server.url}/health", timeout=10).status_code == 200
    behaviour("cited")
    assert stream_chat(server.url, {"messages": [{"role": "user", "content": FACT_Q}],
                                    "llm": "none"})[-1][0] == "final"


def test_citations_to_no_source_are_corrected_in_streams(server: RagServer, behaviour) -> None:  # type: ignore[no-untyped-def]
    from openai import OpenAI

    behaviour("wrong_citation")
    events = stream_chat(server.url, {"messages": [{"role": "user", "content": FACT_Q}],
                                      "llm": "ollama"})
    final = events[-1][1]
    assert events[-1][0] == "final" and final["dropped_citations"] == 1
    assert "[99]" not in final["answer"]
    with OpenAI(base_url=f"{server.url}/v1", api_key=KEY, max_retries=0) as client:
        chunks = list(client.chat.completions.create(
            model="rag:llama3.2", stream=True, messages=[{"role": "user", "content": FACT_Q}]))
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    # the model cited a source that does not exist: what streams is already the checked text
    assert text.startswith(final["answer"]) and "[99]" not in text
    assert "1 citation(s) to no source removed" in text


def test_stream_errors_before_any_token_are_json_errors(server: RagServer, behaviour) -> None:  # type: ignore[no-untyped-def]
    behaviour("error500")
    resp = httpx.post(f"{server.url}/chat", headers=AUTH, timeout=60, json={
        "messages": [{"role": "user", "content": FACT_Q}], "stream": True, "llm": "ollama"})
    assert resp.status_code == 503
    body = resp.json()
    assert "500" in body["error"] and body["hint"] and body["type"] == "LLMError"


def test_chat_follow_up_uses_the_conversation(server: RagServer) -> None:
    events = stream_chat(server.url, {"llm": "none", "messages": [
        {"role": "user", "content": "What is Skrull?"},
        {"role": "assistant", "content": "Skrull is a dynamic data scheduler for long-SFT [1]."},
        {"role": "user", "content": "How much faster is it than DeepSpeed?"},
    ]})
    final = events[-1][1]
    assert events[-1][0] == "final"
    assert "Skrull" in final["standalone_question"] and "3.76x" in final["answer"]


def test_chat_system_messages_reach_the_model_as_under_v1(server: RagServer, behaviour) -> None:  # type: ignore[no-untyped-def]
    ollama = behaviour()
    conversation = [{"role": "system", "content": "Answer in French."}, {"role": "user", "content": FACT_Q}]
    for stream in (False, True):
        resp = httpx.post(f"{server.url}/chat", headers=AUTH, timeout=60,
                          json={"messages": conversation, "stream": stream})
        assert resp.status_code == 200, resp.text
        sent = [r for r in ollama.requests if r["path"] == "/api/chat"][-1]["body"]["messages"]
        assert "Answer in French" not in sent[0]["content"]  # rag's rules stay first
        assert any("Answer in French" in m["content"] for m in sent[1:]), stream


# -- the openai client -------------------------------------------------------------------------


def test_openai_client_non_streaming(server: RagServer) -> None:
    from openai import OpenAI

    with OpenAI(base_url=f"{server.url}/v1", api_key=KEY, max_retries=0) as client:
        completion = client.chat.completions.create(
            model="rag-offline", messages=[{"role": "user", "content": FACT_Q}])
    text = completion.choices[0].message.content or ""
    assert "3.76x" in text and "[1]" in text and "\n\nReferences\n\n[1] " in text
    refs = completion.model_extra["references"]  # type: ignore[index]
    assert [r["n"] for r in refs] == list(range(1, len(refs) + 1))
    assert any(r["label"] == "Skrull" for r in refs)
    assert completion.model_extra["rag"]["answerer"] == "extractive"  # type: ignore[index]


def test_openai_client_streaming(server: RagServer, behaviour) -> None:  # type: ignore[no-untyped-def]
    from openai import OpenAI

    behaviour("cited", delay=0.02)
    with OpenAI(base_url=f"{server.url}/v1", api_key=KEY, max_retries=0) as client:
        models = [m.id for m in client.models.list()]
        stream = client.chat.completions.create(
            model="rag:llama3.2", stream=True, messages=[{"role": "user", "content": STREAM_Q}])
        chunks = list(stream)
    assert {"rag", "rag-offline", "rag:llama3.2:latest"} <= set(models)
    pieces = [c.choices[0].delta.content for c in chunks if c.choices[0].delta.content]
    assert len(pieces) >= 3  # sentence by sentence, then the references
    assert chunks[-1].choices[0].finish_reason == "stop"
    refs = chunks[-1].model_extra["references"]  # type: ignore[index]
    text = "".join(pieces)
    assert refs and "[1]" in text and "\n\nReferences\n\n" in text
    assert "Checked answer" not in text  # the streamed text was already the checked one
    assert chunks[-1].model_extra["rag"]["answerer"] == "ollama:llama3.2"  # type: ignore[index]


def test_openai_streamed_list_answer_is_not_repeated(server: RagServer, behaviour) -> None:  # type: ignore[no-untyped-def]
    from openai import OpenAI

    behaviour("cited")
    with OpenAI(base_url=f"{server.url}/v1", api_key=KEY, max_retries=0) as client:
        chunks = list(client.chat.completions.create(
            model="rag:llama3.2", stream=True,
            messages=[{"role": "user", "content": "Which papers are about long-sequence training?"}]))
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    rag = chunks[-1].model_extra["rag"]  # type: ignore[index]
    assert rag["answerer"] == "ollama:llama3.2"
    assert "Checked answer" not in text
    assert re.match(r"\d+ of the 60 abstracts match:\n", text)  # the count streams first
    assert "Also matching" in text  # the papers the model left out, streamed as well
    assert len(chunks[-1].model_extra["references"]) >= 3  # type: ignore[index]


def test_openai_client_sees_errors(server: RagServer, behaviour) -> None:  # type: ignore[no-untyped-def]
    import openai
    from openai import OpenAI

    with OpenAI(base_url=f"{server.url}/v1", api_key="wrong", max_retries=0) as client, \
            pytest.raises(openai.AuthenticationError):
        client.chat.completions.create(model="rag", messages=[{"role": "user", "content": "hi"}])
    behaviour("cut", delay=0.01)
    with OpenAI(base_url=f"{server.url}/v1", api_key=KEY, max_retries=0) as client:
        with pytest.raises(openai.NotFoundError):
            client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
        stream = client.chat.completions.create(
            model="rag:llama3.2", stream=True, messages=[{"role": "user", "content": FACT_Q}])
        with pytest.raises(openai.APIError, match="broke off"):
            for _ in stream:
                pass


# -- the CLI through RAG_SERVER_URL ------------------------------------------------------------


def test_cli_search_through_the_server_equals_local(server: RagServer, seeded_settings,  # type: ignore[no-untyped-def]
                                                   tmp_path: Path) -> None:
    # with every filter too: the thin client must send each one (a dropped filter widens the
    # results silently); the seed papers have no arXiv categories, so cs.DC matches nothing
    for extra in ((), ("--year", "2023", "--venue", "mlsys"), ("--category", "cs.DC")):
        args = ("search", "--json", "-k", "5", "sequence parallelism for long sequences", *extra)
        remote = run_rag(*args, cwd=tmp_path, env={
            "RAG_SERVER_URL": server.url, "RAG_API_KEY": KEY, "RAG_HOME": str(tmp_path / "none")})
        local = run_rag(*args, cwd=tmp_path, env={"RAG_HOME": str(seeded_settings.home)})
        assert remote.returncode == 0, remote.stderr
        assert local.returncode == 0, local.stderr
        assert json.loads(remote.stdout) == json.loads(local.stdout)
        assert bool(json.loads(remote.stdout)["results"]) == (extra != ("--category", "cs.DC"))
    assert not (tmp_path / "none").exists()  # the remote run never opened a local index


def test_cli_ask_through_the_server_equals_local(server: RagServer, seeded_settings,  # type: ignore[no-untyped-def]
                                                tmp_path: Path) -> None:
    args = ("ask", "--json", "--llm", "none", FACT_Q)
    remote = run_rag(*args, cwd=tmp_path, env={"RAG_SERVER_URL": server.url, "RAG_API_KEY": KEY})
    local = run_rag(*args, cwd=tmp_path, env={"RAG_HOME": str(seeded_settings.home)})
    assert remote.returncode == 0, remote.stderr
    assert local.returncode == 0, local.stderr
    r, lo = json.loads(remote.stdout), json.loads(local.stdout)
    assert r.keys() == lo.keys() and r["timings_ms"].keys() == lo["timings_ms"].keys()
    r.pop("timings_ms"), lo.pop("timings_ms")
    assert r == lo


def test_cli_remote_errors_keep_their_exit_codes(server: RagServer, tmp_path: Path) -> None:
    wrong = run_rag("search", "--json", "pipelines", cwd=tmp_path,
                    env={"RAG_SERVER_URL": server.url, "RAG_API_KEY": "wrong"})
    assert wrong.returncode == 2 and "API key" in wrong.stderr and "RAG_API_KEY" in wrong.stderr
    too_long = run_rag("ask", "--json", "--llm", "none", "x" * 2001, cwd=tmp_path,
                       env={"RAG_SERVER_URL": server.url, "RAG_API_KEY": KEY})
    assert too_long.returncode == 2 and "2000" in too_long.stderr
    no_model = run_rag("ask", "--json", "--llm", "ollama", "--model", "nonexistent", FACT_Q,
                       cwd=tmp_path, env={"RAG_SERVER_URL": server.url, "RAG_API_KEY": KEY})
    assert no_model.returncode == 4, no_model.stderr  # ModelNotFound, as when run locally
    assert "nonexistent" in no_model.stderr and "ollama pull" in no_model.stderr


def test_cli_through_the_server_refuses_an_index_it_does_not_serve(server: RagServer,
                                                                   tmp_path: Path) -> None:
    """The server answers from its one index: another named with --index or RAG_INDEX is
    refused (exit 2), never answered from the server's index."""
    env = {"RAG_SERVER_URL": server.url, "RAG_API_KEY": KEY}
    for args, extra in ((("search", "--json", "pipelines", "--index", "other"), {}),
                        (("ask", "--json", "--llm", "none", FACT_Q, "--index", "other"), {}),
                        (("search", "--json", "pipelines"), {"RAG_INDEX": "other"})):
        res = run_rag(*args, cwd=tmp_path, env={**env, **extra})
        assert res.returncode == 2 and res.stdout == "", (args, res.stderr)
        assert f"the rag server at {server.url} serves the index 'default', not 'other'" in res.stderr
        assert "rag serve --index other" in res.stderr and "unset RAG_SERVER_URL" in res.stderr
    same = run_rag("search", "--json", "pipelines", "--index", "default", cwd=tmp_path, env=env)
    assert same.returncode == 0 and json.loads(same.stdout)["index"] == "default", same.stderr


def test_client_reports_an_unreachable_server() -> None:
    from rag.client import Remote, remote_ask, remote_search
    from rag.errors import RagError
    from rag.schema import AskOptions

    remote = Remote(f"http://127.0.0.1:{free_port_with_nothing_listening()}")
    for call in (lambda: remote_search(remote, "x", 3), lambda: remote_ask(remote, "x", AskOptions())):
        with pytest.raises(RagError) as info:
            call()
        assert "cannot connect" in info.value.message and "rag serve" in info.value.hint


# -- abandoned requests ----------------------------------------------------------------------


@pytest.mark.parametrize(("path", "stream"), [("/ask", False), ("/chat", True),
                                            ("/v1/chat/completions", False),
                                            ("/v1/chat/completions", True)])
def test_a_client_that_gives_up_stops_the_model(server: RagServer, behaviour, path: str,  # type: ignore[no-untyped-def]
                                                stream: bool) -> None:
    """A client that times out and goes away must not leave the server generating (and a
    worker busy) for an answer nobody reads: the model's stream is closed early."""
    ollama = behaviour("cited", delay=0.4)  # a few seconds for the whole answer
    before, ended = ollama.completed_streams, ollama.ended_streams
    messages = [{"role": "user", "content": FACT_Q}]
    body = {"question": FACT_Q, "llm": "ollama"} if path == "/ask" else \
        {"messages": messages, "llm": "ollama", "stream": True} if path == "/chat" else \
        {"messages": messages, "model": "rag:llama3.2", "stream": stream}
    with pytest.raises(httpx.ReadTimeout), httpx.Client(timeout=httpx.Timeout(60, read=1.5)) as c, \
            c.stream("POST", server.url + path, json=body, headers=AUTH) as resp:
        for _ in resp.iter_bytes():
            pass
    assert ollama.wait_for_ended_streams(ended + 1, timeout=60)  # the model's stream ended
    assert ollama.completed_streams == before  # the server hung up on the model mid-answer
    health = httpx.get(server.url + "/health", headers=AUTH, timeout=10)
    assert health.status_code == 200
