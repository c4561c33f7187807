"""A real instruct model (SmolLM2-135M-Instruct under llama.cpp's own server) answering
through `rag ask`, by both paths: as an OpenAI-compatible server (`--llm openai`) and behind
the Ollama-protocol relay (`--llm ollama`). A 135M model writes weak answers: these tests
assert what rag guarantees whatever it writes (no sentence shown as supported that the judge
did not find in its cited abstract, no answer past its budget or its context, a notice for
whatever was cut), never the model's words."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.conftest import run_rag

LIST_Q = "Which papers compare against Megatron-LM?"
FACT_Q = "What training throughput speedups does Cupcake get?"


def ask(settings: Any, tmp_path: Path, *args: str, **env: str) -> tuple[dict[str, Any], str]:
    res = run_rag("ask", "--json", *args, cwd=tmp_path, timeout=600,
                  env={"RAG_HOME": str(settings.home), **env})
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout), res.stderr


def guarantees(settings: Any, obj: dict[str, Any]) -> None:
    """What every model answer keeps, whatever the model wrote."""
    from rag.answering.pipeline import Pipeline
    from rag.judge import Judge

    budget, usage = obj["budget"], obj["usage"] or {}
    assert budget and budget["max_tokens"] > 0
    if usage:  # the server's own counts: the answer kept its budget, the prompt its context
        assert usage["completion_tokens"] <= budget["max_tokens"]
        assert usage["prompt_tokens"] + budget["max_tokens"] <= budget["context"]
    if obj["finish_reason"] != "stop" or obj["incomplete"]:
        assert any("incomplete" in n for n in obj["notices"]), obj["notices"]
    cited = {c["n"]: c for c in obj["citations"]}
    with Pipeline(settings) as p:
        judge = Judge(p.retriever.embedder, known_names=p.names.known)
        for s in obj["sentences"]:
            assert s["text"].strip("[]0-9 ,.") or not s["citations"], s  # no marker-only unit
            if s["supported"]:  # shown as supported: the default judge finds it in its sources
                records = [(c["title"] or "", c["abstract"]) for n, c in cited.items()
                           if n in s["citations"]]
                assert records and Judge.check(judge, s["text"], records).supported, s


def test_an_openai_compatible_server_answers_with_checked_citations(
        seeded_settings: Any, llama: Any, tmp_path: Path) -> None:
    obj, _ = ask(seeded_settings, tmp_path, "--llm", "openai", "-k", "3", FACT_Q,
                 RAG_OPENAI_BASE_URL=f"{llama.url}/v1")
    assert obj["answerer"] == "openai:SmolLM2-135M-Instruct"
    assert obj["budget"]["context"] == 8192  # as llama.cpp lists the model's context
    guarantees(seeded_settings, obj)


def test_the_ollama_path_answers_real_generations_with_checked_citations(
        seeded_settings: Any, relay: Any, tmp_path: Path) -> None:
    obj, _ = ask(seeded_settings, tmp_path, "--llm", "ollama", "-k", "3", LIST_Q,
                 OLLAMA_HOST=relay.url, RAG_MODEL="smollm2:135m")
    assert obj["answerer"] == "ollama:smollm2:135m"
    assert obj["usage"]["prompt_tokens"] > 0  # the model's own count, relayed
    guarantees(seeded_settings, obj)


def test_fifty_sources_and_a_2048_token_context_fit_without_the_server_cutting(
        seeded_settings: Any, relay: Any, tmp_path: Path) -> None:
    # 18 papers match, about 5,000 tokens of abstracts: a prompt Ollama would cut at 2048
    obj, _ = ask(seeded_settings, tmp_path, "--llm", "ollama", "-k", "50", "Which papers use GPUs?",
                 OLLAMA_HOST=relay.url, RAG_MODEL="smollm2:135m", RAG_NUM_CTX="2048")
    assert obj["budget"]["context"] == 2048 and obj["budget"]["left_out"] > 0
    assert any("fitted to the model's context of 2048 tokens" in n for n in obj["notices"])
    assert not any("cut the prompt" in n for n in obj["notices"]), obj["notices"]
    guarantees(seeded_settings, obj)


def test_a_cut_prompt_is_said(seeded_settings: Any, relay: Any, tmp_path: Path) -> None:
    # Fitted to a window twice the real one, the prompt is cut by the relay as Ollama cuts
    # it; the server's count tells rag so.
    from rag.answering.pipeline import Pipeline
    from rag.schema import AskOptions

    settings = seeded_settings.model_copy(update={
        "ollama_host": relay.url, "llm": "ollama", "model": "smollm2:135m", "num_ctx": 1024,
        "num_predict": 16})
    with Pipeline(settings) as p:
        client = p.client()
        client.context_window = lambda deadline=None: 4096  # type: ignore[method-assign]  # what a server claims
        ans = p.answer(LIST_Q, AskOptions(k=8))
    assert ans.usage and ans.usage["prompt_tokens"] <= 1024 // 2 + 2
    assert any("cut the prompt to fit its context" in n for n in ans.notices), ans.notices


def test_llama_cpp_mistaken_for_ollama_is_named(seeded_settings: Any, llama: Any,
                                                tmp_path: Path) -> None:
    res = run_rag("ask", "--llm", "ollama", FACT_Q, cwd=tmp_path, env={
        "RAG_HOME": str(seeded_settings.home), "OLLAMA_HOST": llama.url})
    assert res.returncode == 4, res.stderr
    assert "--llm openai" in res.stderr and f"RAG_OPENAI_BASE_URL={llama.url}/v1" in res.stderr
    assert "ollama pull" not in res.stderr
    obj, _ = ask(seeded_settings, tmp_path, FACT_Q, OLLAMA_HOST=llama.url)  # --llm auto
    assert obj["answerer"] == "extractive"
    assert any("--llm openai" in n for n in obj["notices"]), obj["notices"]


def test_the_model_judge_is_asked_only_about_claims(seeded_settings: Any, relay: Any) -> None:
    from rag.answering.pipeline import Pipeline
    from rag.schema import AskOptions

    settings = seeded_settings.model_copy(update={
        "ollama_host": relay.url, "llm": "ollama", "model": "smollm2:135m", "num_predict": 64})
    with Pipeline(settings) as p:
        ans = p.answer(LIST_Q, AskOptions(k=2, judge="model"))
        judge = p.model_judge(p.client())
    asked = [r["body"]["messages"][-1]["content"] for r in relay.requests
             if r["path"] == "/api/chat" and r["body"].get("format")]
    claims = [a.rsplit("<claim>", 1)[1].split("</claim>")[0] for a in asked]
    assert judge.asked == len(asked) == len(set(asked))  # each pair once
    assert all(re.search(r"[A-Za-z]{2}", c) and not re.fullmatch(r"[\s\[\]\d,.]*", c) for c in claims)
    assert all(s.text.strip("[]0-9 ,.") for s in ans.sentences if s.citations)
