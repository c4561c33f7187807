"""A hostile model server, drawn by hypothesis: status codes, content types, well-formed and
malformed stream events (JSON of any shape, raw bytes, comments, usage that is no count, no
end at all), pauses and endless keep-alives, on both protocols. Whatever it sends, an answer
ends within its deadline plus a small margin, fails only with a documented error, keeps its
JSON valid, and shows as supported only what the cited abstract supports.

Size: 15 examples per protocol, the same each run (as CI runs it); RAG_FUZZ_EXAMPLES=N draws
N new ones."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.hostile_servers import HostileServer, Script, ollama_part, sse

DEADLINE = 1.5
MARGIN = 5.0  # the offline parts of an answer (retrieval, the check) on 2 busy cores
EXAMPLES = int(os.environ.get("RAG_FUZZ_EXAMPLES", "15"))
FIXED = "RAG_FUZZ_EXAMPLES" not in os.environ  # CI draws the same examples each run; more are new
QUESTION = "What speedup does Skrull report over DeepSpeed?"
CLAIMS = ["Skrull outperforms DeepSpeed by 3.76x on average [1]. ", "Skrull is fast [2]. ",
          "It uses no GPUs [1]. ", "[1]", "[99] ", "<think>", "</think>", "\n- ", "Skrull"]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8)
texts = st.sampled_from(CLAIMS) | st.text(max_size=40)
counts = st.none() | st.integers(-5, 10**13) | st.floats() | st.text(max_size=5) | st.booleans()


@st.composite
def openai_event(draw: Any) -> bytes:
    kind = draw(st.sampled_from(["text", "text", "text", "reasoning", "usage", "finish", "json",
                                 "bytes", "comment", "done"]))
    if kind == "text":
        return sse({"choices": [{"delta": {"content": draw(texts)}, "finish_reason": None}]})
    if kind == "reasoning":
        return sse({"choices": [{"delta": {"reasoning_content": draw(texts)}}]})
    if kind == "usage":
        return sse({"choices": [], "usage": {"prompt_tokens": draw(counts), "completion_tokens": draw(counts)}})
    if kind == "finish":
        return sse({"choices": [{"delta": {}, "finish_reason": draw(st.sampled_from(["stop", "length", ""]))}]})
    if kind == "json":
        return b"data: " + json.dumps(draw(json_values)).encode() + b"\n\n"
    if kind == "bytes":
        return draw(st.binary(max_size=40)) + b"\n\n"
    if kind == "comment":
        return b": keep-alive\n\n"
    return b"data: [DONE]\n\n"


@st.composite
def ollama_event(draw: Any) -> bytes:
    kind = draw(st.sampled_from(["text", "text", "text", "thinking", "done", "json", "bytes"]))
    if kind == "text":
        return ollama_part(draw(texts))
    if kind == "thinking":
        return ollama_part("", thinking=draw(texts))
    if kind == "done":
        part = json.loads(ollama_part("", done=True))
        part.update(prompt_eval_count=draw(counts), eval_count=draw(counts),
                    done_reason=draw(st.sampled_from(["stop", "length", None])))
        return json.dumps(part).encode() + b"\n"
    if kind == "json":
        return json.dumps(draw(json_values)).encode() + b"\n"
    return draw(st.binary(max_size=40)) + b"\n"


@st.composite
def scripts(draw: Any, event: Any) -> Script:
    status = draw(st.sampled_from([200] * 8 + [204, 301, 302, 400, 401, 404, 429, 500, 502]))
    ctype = draw(st.sampled_from(["text/event-stream", "application/x-ndjson", "application/json",
                                  "text/html", "text/plain"]))
    headers = {"Content-Type": ctype, **({"Location": "http://127.0.0.1:9/x"} if status in (301, 302) else {})}
    parts = draw(st.lists(st.tuples(st.sampled_from([0.0] * 6 + [0.05, 0.3]), event), max_size=12))
    forever = draw(st.sampled_from([None] * 6 + [(0.3, b": keep-alive\n\n"), (0.3, b"")]))
    return Script(status, headers, parts, forever)


@pytest.fixture(scope="module")
def hostile() -> Iterator[HostileServer]:
    with HostileServer(lambda protocol, streamed, body: Script()) as server:
        yield server


@pytest.fixture(scope="module")
def pipeline(seeded_settings: Any, hostile: HostileServer) -> Iterator[Any]:
    from rag.answering.pipeline import Pipeline

    s = seeded_settings.model_copy(update={"openai_base_url": hostile.v1, "ollama_host": hostile.url,
                                           "model": "m", "answer_timeout": DEADLINE, "llm_timeout": 30.0})
    with Pipeline(s) as p:
        yield p


def _holds(pipeline: Any, protocol: str) -> None:
    from rag.errors import EXIT_INDEX, EXIT_INPUT, EXIT_LLM, RagError
    from rag.schema import AskOptions

    started = time.monotonic()
    try:
        ans = pipeline.answer(QUESTION, AskOptions(llm=protocol))
    except RagError as exc:
        assert exc.exit_code in (EXIT_INPUT, EXIT_INDEX, EXIT_LLM), exc
        assert "bug in rag" not in str(exc) and all(c.isprintable() or c == "\n" for c in str(exc))
        return
    finally:
        assert time.monotonic() - started < DEADLINE + MARGIN
    json.dumps(ans.to_public(), allow_nan=False)  # valid JSON, whatever the server's counts
    by_n = {s.n: s for s in ans.sources}
    for s in ans.sentences:
        if s.supported and not s.meta:
            assert s.citations and all(n in by_n for n in s.citations), s
            cited = [(by_n[n].header(), by_n[n].paper.abstract) for n in s.citations]
            assert pipeline.judge.check(s.text, cited).supported, s  # what the cited abstract supports


@pytest.mark.parametrize("protocol", ["openai", "ollama"])
def test_whatever_the_server_sends_an_answer_keeps_its_guarantees(pipeline: Any, hostile: HostileServer,
                                                                  protocol: str) -> None:
    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=FIXED,
              suppress_health_check=list(HealthCheck))
    @given(script=scripts(openai_event() if protocol == "openai" else ollama_event()))
    def check(script: Script) -> None:
        hostile.script = lambda p, streamed, body: script
        _holds(pipeline, protocol)

    check()
