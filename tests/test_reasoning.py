"""Reasoning models: their reasoning is never printed, judged or numbered, whatever form it
comes in (a <think> block anywhere, cut between chunks, left open, opened by the template,
or apart in message.thinking), and the user sees that the model is thinking."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag.llm import Ollama, StreamEnd, ThinkFilter, Thinking, Token, opens_think_in_prompt
from tests.conftest import run_rag
from tests.ollama_server import REASONING, THINKING, OllamaTestServer
from tests.rag_server import parse_sse

FACT_Q = "What speedup does Skrull report over DeepSpeed?"


def _split(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts})
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]


def _run(filt: ThinkFilter, chunks: list[str]) -> tuple[str, str]:
    items = [i for c in chunks for i in filt.feed(c)] + filt.flush()
    return ("".join(i.text for i in items if isinstance(i, Token)),
            "".join(i.text for i in items if isinstance(i, Thinking)))


CASES = [  # (model output, start inside?, answer, reasoning)
    ("<think>\nwhy [7]\n</think>\n\nA is fast [1].", False, "A is fast [1].", "\nwhy [7]\n"),
    ("A is fast [1]. <think>hmm</think> B is slow [2].", False, "A is fast [1]. B is slow [2].", "hmm"),
    ("<think>never closed [7]. So", False, "", "never closed [7]. So"),
    ("opened by the template [7]</think>\n\nA [1].", True, "A [1].", "opened by the template [7]"),
    ("A [1]. No tags at all: x < y, <b>bold</b>, </th.", False, "A [1]. No tags at all: x < y, <b>bold</b>, </th.", ""),
    ("A [1]. <thin", False, "A [1]. <thin", ""),  # a tag that never completed is text
]


@pytest.mark.parametrize(("text", "inside", "answer", "reasoning"), CASES)
@settings(max_examples=60, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=8))
def test_think_filter_is_the_same_for_every_chunking(text: str, inside: bool, answer: str,
                                                      reasoning: str, cuts: list[int]) -> None:
    assert _run(ThinkFilter(inside), _split(text, cuts)) == (answer, reasoning)


def test_every_single_character_chunking_of_the_tags() -> None:
    text = CASES[0][0]
    assert _run(ThinkFilter(), list(text)) == (CASES[0][2], CASES[0][3])
    for cut in range(len(text) + 1):
        assert _run(ThinkFilter(), [text[:cut], text[cut:]]) == (CASES[0][2], CASES[0][3])


def test_templates_that_open_the_think_block_in_the_prompt() -> None:
    assert opens_think_in_prompt("{{ .Prompt }}<|Assistant|><think>\n")
    # DeepSeek-R1's Ollama template shows earlier reasoning closed: not an open block
    assert not opens_think_in_prompt("{{ if .Thinking }}<think>{{ .Thinking }}</think>{{ end }}")
    assert not opens_think_in_prompt("{{ .Prompt }}")


def _stream(server: OllamaTestServer, prompt: str, **kw: Any) -> list[Any]:
    with Ollama(server.url, "llama3.2", timeout=10, think=kw.get("think"), keep_alive=kw.get("keep_alive"),
                num_predict=kw.get("num_predict")) as client:
        return list(client.stream([{"role": "user", "content": prompt}]))


PROMPT = ('<source n="1">\nabstract:\nSkrull is 3.76x faster than DeepSpeed.\n</source>\n'
          '<source n="2">\nabstract:\nMegaBlocks never drops tokens.\n</source>')
ANSWER = "Skrull is 3.76x faster than DeepSpeed [1]. MegaBlocks never drops tokens [2]."


@pytest.mark.parametrize("behaviour", REASONING)
def test_each_reasoning_style_comes_apart_from_the_answer(behaviour: str) -> None:
    with OllamaTestServer(behaviour=behaviour) as server:
        items = _stream(server, PROMPT, think=True if behaviour == "think_field" else None)
    answer = "".join(i.text for i in items if isinstance(i, Token))
    reasoning = "".join(i.text for i in items if isinstance(i, Thinking))
    assert isinstance(items[-1], StreamEnd) and sum(isinstance(i, StreamEnd) for i in items) == 1
    assert reasoning.strip() == THINKING
    assert "think>" not in answer and "[7]" not in answer and "Okay" not in answer
    if behaviour == "think_unterminated":
        assert answer == "" and items[-1].done_reason == "length"
    else:
        assert answer.split() == ANSWER.split()


def test_think_option_keep_alive_and_num_predict_are_sent_only_when_set() -> None:
    with OllamaTestServer(behaviour="think_field") as server:
        _stream(server, PROMPT)
        plain = server.requests[-1]["body"]
        items = _stream(server, PROMPT, think="high", keep_alive="10m", num_predict=3)
        sent = server.requests[-1]["body"]
    assert "think" not in plain and "keep_alive" not in plain and "num_predict" not in plain["options"]
    assert sent["think"] == "high" and sent["keep_alive"] == "10m" and sent["options"]["num_predict"] == 3
    end = items[-1]
    assert isinstance(end, StreamEnd) and end.done_reason == "length"
    assert end.prompt_tokens == len(PROMPT) // 4 + 8 and end.completion_tokens == 3  # the stand-in's count


def test_complete_returns_the_answer_without_reasoning() -> None:
    with OllamaTestServer(behaviour="think_tags") as server, \
            Ollama(server.url, "llama3.2", timeout=10, think=None) as client:
        assert client.complete([{"role": "user", "content": PROMPT}]) == ANSWER


# -- end to end: the answering pipeline and `rag ask` through the Ollama test server ----------


def assert_cited_right(answer: Any) -> None:
    """No reasoning in the answer; every claim cites the paper it came from, and is supported."""
    assert "think>" not in answer.answer and "Okay" not in answer.answer and "[7]" not in answer.answer
    by_n = {s.n: s.paper for s in answer.sources}
    assert answer.sentences and set(by_n) == {n for s in answer.sentences for n in s.citations}
    for s in answer.sentences:
        claim = re.sub(r"\s*\[[\d, ]+\]", "", s.text).rstrip(".")
        assert any(claim in by_n[n].abstract for n in s.citations), (s.text, s.citations)
        assert s.supported, (s.text, s.reasons)


@pytest.mark.parametrize("behaviour", [b for b in REASONING if b != "think_unterminated"])
def test_reasoning_never_reaches_the_answer(ollama_pipeline: Any, ollama: OllamaTestServer,
                                            behaviour: str) -> None:
    from rag.schema import AskOptions, DoneEvent, ProgressEvent, TokenEvent

    ollama.behaviour = behaviour
    # A model's template is read once per client: the template-opened style is another model.
    model = "qwq" if behaviour == "think_close_only" else None
    if model and "qwq:latest" not in ollama.models:
        ollama.models.append("qwq:latest")
    events = list(ollama_pipeline.stream(FACT_Q, AskOptions(llm="ollama", model=model)))
    answer = events[-1].answer
    assert isinstance(events[-1], DoneEvent)
    assert_cited_right(answer)
    assert not answer.incomplete and answer.finish_reason == "stop"
    assert "Okay" not in "".join(e.text for e in events if isinstance(e, TokenEvent))
    # the wait is visible: a progress notice while the model reasons
    assert any(isinstance(e, ProgressEvent) and "thinking" in e.stage for e in events)


def test_a_model_that_reasons_until_its_token_limit_gives_an_incomplete_answer(
        ollama_pipeline: Any, ollama: OllamaTestServer) -> None:
    from rag.schema import AskOptions

    ollama.behaviour = "think_unterminated"
    answer = ollama_pipeline.answer(FACT_Q, AskOptions(llm="ollama"))
    assert answer.incomplete and answer.finish_reason == "length"
    assert answer.abstained and not answer.sources and "Okay" not in answer.answer


def test_rag_ask_with_a_reasoning_model(seeded_settings: Any, tmp_path: Any,
                                        ollama: OllamaTestServer) -> None:
    ollama.behaviour = "think_field"
    res = run_rag("ask", FACT_Q, "--json", cwd=tmp_path, env={
        "RAG_HOME": str(seeded_settings.home), "OLLAMA_HOST": ollama.url, "RAG_THINK": "true",
        "RAG_KEEP_ALIVE": "10m"})
    assert res.returncode == 0, res.stderr
    obj = json.loads(res.stdout)
    sent = [r["body"] for r in ollama.requests if r["path"] == "/api/chat"][-1]
    assert sent["think"] is True and sent["keep_alive"] == "10m"
    assert "Okay" not in obj["answer"] and obj["citations"] and all(s["supported"] for s in obj["sentences"])
    assert obj["usage"]["prompt_tokens"] > 100 and obj["finish_reason"] == "stop"
    res = run_rag("ask", FACT_Q, cwd=tmp_path, env={
        "RAG_HOME": str(seeded_settings.home), "OLLAMA_HOST": ollama.url, "RAG_THINK": "true"})
    assert res.returncode == 0 and "Okay" not in res.stdout and "Okay" not in res.stderr
    assert "thinking" in res.stderr


def test_the_api_shows_thinking_then_only_the_answer(seeded_settings: Any, ollama: OllamaTestServer) -> None:
    from fastapi.testclient import TestClient

    from rag.api import create_app

    ollama.behaviour = "think_tags"
    settings = seeded_settings.model_copy(update={"ollama_host": ollama.url})
    with TestClient(create_app(settings)) as client:
        r = client.post("/chat", json={"messages": [{"role": "user", "content": FACT_Q}],
                                       "stream": True, "llm": "ollama"})
        assert r.status_code == 200
        events = parse_sse(r.text)
        ollama.behaviour = "cite_source_parens"
        asked = client.post("/ask", json={"question": FACT_Q, "llm": "ollama"}).json()
    kinds = [k for k, _ in events]
    assert any(k == "progress" and d.get("stage") == "thinking" for k, d in events)
    assert kinds.index("progress") < kinds.index("sentence") and kinds[-1] == "final"
    final = events[-1][1]
    assert "Okay" not in r.text.split("event: final")[0] and "Okay" not in final["answer"]
    assert final["citations"] and all(s["supported"] for s in final["sentences"])
    assert {"from": "(Source 1)", "to": "[1]"} in asked["rewritten_citations"]
    assert "Source" not in asked["answer"] and all(s["supported"] for s in asked["sentences"])
