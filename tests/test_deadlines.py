"""One deadline per answer, held by a timer: a model server that sends keep-alives, empty
deltas, endless reasoning or nothing at all is stopped at RAG_ANSWER_TIMEOUT on both
backends, its connection closed; the model judge and the follow-up rewrite run under the same
deadline; a reply far larger than asked for is cut, not read whole; a client that leaves
`rag serve` frees its worker at once."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import run_rag
from tests.hostile_servers import (
    HostileServer,
    Script,
    delta,
    ollama_answer,
    ollama_part,
    openai_answer,
)
from tests.rag_server import serving

QUESTION = "What speedup does Skrull report over DeepSpeed?"
DEADLINE = 2.0
SSE = {"Content-Type": "text/event-stream"}
ND = {"Content-Type": "application/x-ndjson"}

# Streams that never send answer text, each as a real server might misbehave.
ENDLESS: dict[tuple[str, str], Script] = {
    ("openai", "keep-alive comments"): Script(headers=SSE, forever=(0.3, b": keep-alive\n\n")),
    ("openai", "empty deltas"): Script(headers=SSE, forever=(0.3, delta(content=""))),
    ("openai", "endless reasoning_content"): Script(
        headers=SSE, forever=(0.3, delta(reasoning_content="still thinking "))),
    ("openai", "an unclosed <think>"): Script(
        headers=SSE, parts=[(0, delta(content="<think>"))], forever=(0.3, delta(content="hmm "))),
    ("openai", "headers, then nothing"): Script(headers=SSE, forever=(5.0, b"")),
    ("ollama", "empty content chunks"): Script(headers=ND, forever=(0.3, ollama_part(""))),
    ("ollama", "endless thinking"): Script(headers=ND, forever=(0.3, ollama_part("", thinking="hmm "))),
    ("ollama", "an unclosed <think>"): Script(
        headers=ND, parts=[(0, ollama_part("<think>"))], forever=(0.3, ollama_part("hmm "))),
    ("ollama", "headers, then nothing"): Script(headers=ND, forever=(5.0, b"")),
}


@pytest.fixture(scope="module")
def hostile() -> Iterator[HostileServer]:
    with HostileServer(lambda protocol, streamed, body: openai_answer("")) as server:
        yield server


@pytest.fixture(scope="module")
def pipeline(seeded_settings: Any, hostile: HostileServer) -> Iterator[Any]:
    from rag.answering.pipeline import Pipeline

    settings = seeded_settings.model_copy(update={
        "openai_base_url": hostile.v1, "ollama_host": hostile.url, "model": "m",
        "answer_timeout": DEADLINE, "llm_timeout": 60.0})
    with Pipeline(settings) as p:
        yield p


def _closed(server: HostileServer, within: float = 3.0) -> bool:
    """Has rag hung up on every reply (the server stops writing)?"""
    ends = time.monotonic() + within
    while server.open_replies() and time.monotonic() < ends:
        time.sleep(0.05)
    return server.open_replies() == 0


@pytest.mark.parametrize(("protocol", "mode"), list(ENDLESS), ids=[f"{p}: {m}" for p, m in ENDLESS])
def test_a_stream_without_answer_text_stops_at_the_deadline(pipeline: Any, hostile: HostileServer,
                                                            protocol: str, mode: str) -> None:
    from rag.schema import AskOptions

    hostile.script = lambda p, streamed, body: ENDLESS[protocol, mode]
    started = time.monotonic()
    ans = pipeline.answer(QUESTION, AskOptions(llm=protocol))
    took = time.monotonic() - started
    assert took < DEADLINE + 3, took
    assert ans.incomplete and ans.finish_reason == "length"
    assert any("RAG_ANSWER_TIMEOUT" in n for n in ans.notices), ans.notices
    assert not any(s.supported for s in ans.sentences)
    assert _closed(hostile), "the model's stream was left open"


@pytest.mark.parametrize("protocol", ["openai", "ollama"])
def test_the_model_judge_runs_under_the_answers_deadline(pipeline: Any, hostile: HostileServer,
                                                         protocol: str) -> None:
    from rag.schema import AskOptions

    claim = "Skrull outperforms DeepSpeed by 3.76x on average [1]."

    def script(p: str, streamed: bool, body: dict[str, Any]) -> Script:
        if streamed:  # the answer, at once
            return openai_answer(claim) if p == "openai" else ollama_answer(claim)
        # the verdict, a byte every 2 s: no read timeout ever fires
        return Script(headers={"Content-Type": "application/json"}, forever=(2.0, b" "))

    hostile.script = script
    started = time.monotonic()
    ans = pipeline.answer(QUESTION, AskOptions(llm=protocol, judge="model"))
    assert time.monotonic() - started < DEADLINE + 3
    said = " ".join(ans.notices)
    assert "model judge gave no verdict" in said and "RAG_ANSWER_TIMEOUT" in said, ans.notices
    # rag's own verifier judged the sentence instead: the quote it holds is what it cites
    assert [s.supported for s in ans.sentences] == [True]
    assert _closed(hostile)


def test_a_judge_that_never_answers_json_is_said_and_the_verifier_decides(
        pipeline: Any, hostile: HostileServer) -> None:
    from rag.schema import AskOptions

    claim = "Skrull outperforms DeepSpeed by 3.76x on average [1]."
    wrong = "Skrull does not outperform DeepSpeed [1]."

    def script(p: str, streamed: bool, body: dict[str, Any]) -> Script:
        if streamed:
            return ollama_answer(f"{claim} {wrong}")
        reply = {"model": "m", "created_at": "2026-01-01T00:00:00Z", "done": True,
                 "message": {"role": "assistant", "content": "Sure! It is supported."}}
        return Script(headers={"Content-Type": "application/json"}, parts=[(0, json.dumps(reply).encode())])

    hostile.script = script
    ans = pipeline.answer(QUESTION, AskOptions(llm="ollama", judge="model"))
    assert any("not the JSON asked for" in n for n in ans.notices), ans.notices
    verdicts = {s.text.split(" [")[0]: s.supported for s in ans.sentences}
    assert verdicts == {claim.split(" [")[0]: True, wrong.split(" [")[0]: False}, verdicts


@pytest.mark.parametrize("protocol", ["openai", "ollama"])
def test_a_huge_delta_is_cut_not_read_whole(pipeline: Any, hostile: HostileServer, protocol: str) -> None:
    from rag.errors import LLMError
    from rag.schema import AskOptions

    big = "Skrull is fast. " * (50 * 1024 * 1024 // 16)  # 50 MB in one delta
    part = delta(content=big) if protocol == "openai" else ollama_part(big)
    hostile.script = lambda p, streamed, body: Script(headers=SSE if p == "openai" else ND, parts=[(0, part)])
    started = time.monotonic()
    with pytest.raises(LLMError, match="more than 32 MB"):
        pipeline.answer(QUESTION, AskOptions(llm=protocol))
    assert time.monotonic() - started < DEADLINE + 30


def test_text_past_the_answers_budget_is_cut_before_it_is_checked(pipeline: Any, hostile: HostileServer) -> None:
    from rag.schema import AskOptions

    big = "Skrull balances long and short sequences [1]. " * 40_000  # 1.9 MB, under the byte bound
    hostile.script = lambda p, streamed, body: Script(headers=SSE, parts=[(0, delta(content=big))],
                                                      forever=(0.5, b": more\n\n"))
    started = time.monotonic()
    ans = pipeline.answer(QUESTION, AskOptions(llm="openai"))
    assert time.monotonic() - started < DEADLINE + 10
    assert ans.incomplete and any("more answer text than its budget" in n for n in ans.notices), ans.notices
    assert len(ans.answer) < len(big) // 10


@pytest.mark.parametrize("protocol", ["openai", "ollama"])
def test_rag_ask_ends_at_its_deadline_with_valid_json(seeded_settings: Any, hostile: HostileServer,
                                                      tmp_path: Any, protocol: str) -> None:
    hostile.script = lambda p, streamed, body: ENDLESS[(p, "empty deltas" if p == "openai" else "empty content chunks")]
    env = {"RAG_HOME": str(seeded_settings.home), "RAG_OPENAI_BASE_URL": hostile.v1,
           "OLLAMA_HOST": hostile.url, "RAG_MODEL": "m", "RAG_ANSWER_TIMEOUT": "3",
           "RAG_LLM_TIMEOUT": "60"}
    started = time.monotonic()
    done = run_rag("ask", "--llm", protocol, "--json", QUESTION, cwd=tmp_path, env=env, timeout=60)
    assert time.monotonic() - started < 3 + 10 + 5  # the deadline, a margin, the process's start
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["incomplete"] is True and "bug in rag" not in done.stderr
    assert any("RAG_ANSWER_TIMEOUT" in n for n in result["notices"])


def test_clients_that_leave_free_the_server_for_the_next(seeded_settings: Any, hostile: HostileServer,
                                                         tmp_path: Any) -> None:
    """Eight /ask requests stuck on a model that sends nothing, whose clients leave after 2 s:
    their workers are freed (and the model's requests closed), so an offline /ask is answered."""
    hostile.script = lambda p, streamed, body: ENDLESS["ollama", "empty content chunks"]
    env = {"OLLAMA_HOST": hostile.url, "RAG_MODEL": "m", "RAG_ANSWER_TIMEOUT": "120",
           "RAG_LLM_TIMEOUT": "120"}
    with serving(seeded_settings.home, tmp_path, env) as srv:
        def stuck() -> None:
            with contextlib.suppress(httpx.HTTPError):  # the client gives up: what is tested
                httpx.post(f"{srv.url}/ask", json={"question": QUESTION, "llm": "ollama"}, timeout=2.0)

        threads = [threading.Thread(target=stuck) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        started = time.monotonic()
        reply = httpx.post(f"{srv.url}/ask", json={"question": QUESTION, "llm": "none"}, timeout=30)
        assert reply.status_code == 200, reply.text
        assert time.monotonic() - started < 10
        assert _closed(hostile, 5.0), "the stuck requests' model streams were never closed"


def test_the_follow_up_rewrite_runs_under_the_answers_deadline(pipeline: Any, hostile: HostileServer) -> None:
    from rag.schema import AskOptions

    def script(p: str, streamed: bool, body: dict[str, Any]) -> Script:
        if streamed:
            return ollama_answer("Skrull outperforms DeepSpeed by 3.76x on average [1].")
        return Script(headers={"Content-Type": "application/json"}, forever=(2.0, b" "))  # the rewrite

    hostile.script = script
    history = [{"role": "user", "content": "What is Skrull?"},
               {"role": "assistant", "content": "Skrull is a dynamic data scheduler [1]."}]
    started = time.monotonic()
    ans = pipeline.answer("What speedup does it report?", AskOptions(llm="ollama"), history=history)
    assert time.monotonic() - started < DEADLINE + 3
    assert ans.incomplete and any("RAG_ANSWER_TIMEOUT" in n for n in ans.notices), ans.notices
    assert _closed(hostile)


@pytest.mark.parametrize("protocol", ["openai", "ollama"])
def test_a_redirect_is_an_error_naming_the_server_not_followed(pipeline: Any, hostile: HostileServer,
                                                              protocol: str) -> None:
    from rag.errors import LLMError
    from rag.schema import AskOptions

    hostile.script = lambda p, streamed, body: Script(302, {"Location": "http://127.0.0.1:9/elsewhere"})
    before = len(hostile.requests)
    with pytest.raises(LLMError, match=r"127\.0\.0\.1:\d+.*30?2|302.*127\.0\.0\.1"):
        pipeline.answer(QUESTION, AskOptions(llm=protocol))
    assert len(hostile.requests) == before + 1  # asked once, never at the redirect's target
