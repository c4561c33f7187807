"""What rag does with a model's answer that runs away, fills its context, cites without
saying anything, or is cut: each failure scripted on the Ollama test server (the same ones
are met on real generations in tests/test_real_model.py), read as `rag ask --json` or the
pipeline gives it to a user."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from rag.answering.budget import BASE_ANSWER, PER_SOURCE, estimate
from rag.eval.metrics import credited
from rag.schema import AskOptions
from tests.conftest import run_rag
from tests.ollama_server import OllamaTestServer

FACT_Q = "What training throughput speedups does Cupcake get?"
LIST_Q = "Which papers study federated learning?"
LOOP = "It is designed to optimize the communication-efficient way of DDT [1]. "


def pipeline(settings: Any, server: OllamaTestServer, **update: Any) -> Any:
    from rag.answering.pipeline import Pipeline

    return Pipeline(settings.model_copy(update={"ollama_host": server.url, "llm": "ollama", **update}))


def answer(settings: Any, server: OllamaTestServer, question: str, reply: str | None = None,
           options: AskOptions | None = None, **update: Any) -> Any:
    server.replies = [reply] if reply is not None else []
    with pipeline(settings, server, **update) as p:
        return p.answer(question, options)


def chats(server: OllamaTestServer) -> list[dict[str, Any]]:
    return [r["body"] for r in server.requests if r["path"] == "/api/chat"]


def test_a_model_repeating_itself_is_stopped_and_says_so(seeded_settings: Any,
                                                         ollama_server: OllamaTestServer) -> None:
    ollama_server.token_delay = 0.02  # still writing when rag has seen enough
    ans = answer(seeded_settings, ollama_server, FACT_Q, "Cupcake compresses gradients [1]. " + LOOP * 60)
    assert ans.incomplete and ans.finish_reason == "length"
    assert any("kept repeating itself" in n for n in ans.notices), ans.notices
    assert ans.answer.count("It is designed to optimize") == 1, ans.answer  # said once, not 60 times
    # rag hung up: the model stopped writing
    assert ollama_server.wait_for_ended_streams(1, 10) and ollama_server.completed_streams == 0


def test_rag_eval_counts_a_stopped_loop_as_stopped_not_as_a_runaway(seeded_settings: Any,
                                                                    ollama_server: OllamaTestServer) -> None:
    """rag eval's gate is on answers rag failed to stop (past their budget or the deadline); a
    loop it stopped is what the model did, counted apart (it failed the real-model gate)."""
    from rag.eval.metrics import model_scores

    ollama_server.token_delay = 0.02
    looped = answer(seeded_settings, ollama_server, FACT_Q, "Cupcake compresses gradients [1]. " + LOOP * 60)
    scores = model_scores(looped, 300.0, {})
    assert scores["runaway_rate"] == 0.0 and scores["stopped_rate"] == 1.0
    ollama_server.token_delay = 0.0
    plain = answer(seeded_settings, ollama_server, FACT_Q, "Cupcake compresses gradients [1].")
    assert model_scores(plain, 300.0, {})["stopped_rate"] == 0.0
    assert model_scores(plain, 0.0, {})["runaway_rate"] == 1.0  # past a deadline of 0 s


def test_a_model_still_writing_at_the_deadline_is_stopped(seeded_settings: Any,
                                                          ollama_server: OllamaTestServer) -> None:
    ollama_server.token_delay = 0.3
    reply = " ".join(f"Cupcake step {i} reduces traffic [1]." for i in range(40))
    ans = answer(seeded_settings, ollama_server, FACT_Q, reply, answer_timeout=1.0)
    assert ans.incomplete and ans.finish_reason == "length"
    assert any("RAG_ANSWER_TIMEOUT" in n for n in ans.notices), ans.notices
    assert ollama_server.wait_for_ended_streams(1, 10) and ollama_server.completed_streams == 0


def test_every_answer_is_sent_with_a_budget(seeded_settings: Any,
                                            ollama_server: OllamaTestServer) -> None:
    ans = answer(seeded_settings, ollama_server, FACT_Q)
    options = chats(ollama_server)[-1]["options"]
    n_sources = chats(ollama_server)[-1]["messages"][-1]["content"].count("<source n=")
    assert options["num_predict"] == BASE_ANSWER + PER_SOURCE * n_sources
    assert ans.budget == {"context": 8192, "prompt_tokens": ans.budget["prompt_tokens"],
                          "max_tokens": options["num_predict"], "left_out": 0, "cut": 0}
    ans = answer(seeded_settings, ollama_server, FACT_Q, num_predict=100)
    assert chats(ollama_server)[-1]["options"]["num_predict"] == 100 == ans.budget["max_tokens"]


def test_a_prompt_is_fitted_to_a_small_context_and_a_list_stays_complete(
        seeded_settings: Any, ollama_server: OllamaTestServer) -> None:
    ollama_server.behaviour = "cited"  # cites the first two sources the prompt gives
    roomy = answer(seeded_settings, ollama_server, LIST_Q, options=AskOptions(k=12))
    ans = answer(seeded_settings, ollama_server, LIST_Q, options=AskOptions(k=12), num_ctx=1024)
    sent = chats(ollama_server)[-1]
    assert estimate(sent["messages"]) + sent["options"]["num_predict"] <= 1024
    assert sent["options"]["num_ctx"] == 1024
    fitted = [n for n in ans.notices if "fitted to the model's context of 1024 tokens" in n]
    assert fitted and "left out" in fitted[0], ans.notices
    assert ans.budget["left_out"] > 0
    # The papers left out of the prompt are listed from their abstracts: none is lost.
    assert {s.paper.paper_id for s in ans.sources} == {s.paper.paper_id for s in roomy.sources}


def test_a_server_that_read_less_than_it_was_sent_is_said(seeded_settings: Any,
                                                          ollama_server: OllamaTestServer) -> None:
    ollama_server.prompt_eval_count = 40  # as Ollama reports a prompt it cut to its context
    ans = answer(seeded_settings, ollama_server, FACT_Q)
    assert any("cut the prompt to fit its context" in n for n in ans.notices), ans.notices
    ollama_server.prompt_eval_count = None
    ans = answer(seeded_settings, ollama_server, FACT_Q)
    assert not any("cut the prompt" in n for n in ans.notices), ans.notices


def test_the_length_notice_names_the_limit_that_was_reached(seeded_settings: Any,
                                                            ollama_server: OllamaTestServer) -> None:
    words = [a + b + c for a in "bcdfghjklm" for b in "aeiou" for c in "nprst"]  # no sentence said twice
    reply = " ".join(f"Cupcake variant {w} reduces traffic [1]." for w in words)
    ans = answer(seeded_settings, ollama_server, FACT_Q, reply, num_predict=20)
    assert ans.finish_reason == "length"
    assert any("answer budget of 20 tokens (RAG_NUM_PREDICT)" in n for n in ans.notices), ans.notices
    # A context with less room than the answer's budget: the context is the limit said.
    ans = answer(seeded_settings, ollama_server, LIST_Q, reply, options=AskOptions(k=3),
                 num_ctx=768, num_predict=5000)
    said = [n for n in ans.notices if "incomplete" in n]
    assert said and "filled its context of 768 tokens" in said[0] and "RAG_NUM_PREDICT" not in said[0], \
        (ans.notices, ans.finish_reason, ans.budget, ans.abstained)


def test_an_answer_of_citation_markers_shows_no_sentence_and_names_no_paper(
        seeded_settings: Any, ollama_server: OllamaTestServer) -> None:
    for reply in ("[1]\n\n[2]\n\n[3]\n\n[4]", "1. [1]\n2. [2]\n3. [3]"):
        ans = answer(seeded_settings, ollama_server, LIST_Q, reply)
        assert not [s.text for s in ans.sentences if s.citations], ans.answer
        assert "1 [1]." not in ans.answer and not credited(ans)
        assert any("only citation markers" in n for n in ans.notices), ans.notices


def test_numbered_items_are_items(seeded_settings: Any, ollama_server: OllamaTestServer) -> None:
    ollama_server.behaviour = "cited"
    claims = [s.text for s in answer(seeded_settings, ollama_server, LIST_Q).sentences if s.citations]
    reply = "\n".join(f"{i}. {c}" for i, c in enumerate(claims, 1))
    ans = answer(seeded_settings, ollama_server, LIST_Q, reply)
    lines = ans.answer.splitlines()
    assert [ln for ln in lines if ln.startswith(("1. ", "2. "))][:2] == [f"1. {claims[0]}", f"2. {claims[1]}"]
    assert all(s.supported for s in ans.sentences if s.citations)


def test_strict_says_what_it_left_out(seeded_settings: Any, ollama_server: OllamaTestServer) -> None:
    reply = "Cupcake was written in COBOL on a mainframe in 1971 [1]."
    ans = answer(seeded_settings, ollama_server, FACT_Q, reply, options=AskOptions(strict=True))
    assert ans.abstained
    said = [n for n in ans.notices if n.startswith("--strict left out 1 sentence")]
    assert said and "nothing supported was left" in said[0], ans.notices
    # without --strict it is shown, marked, and the answer with nothing supported is declined
    ans = answer(seeded_settings, ollama_server, FACT_Q, reply)
    assert not any("--strict" in n for n in ans.notices) and ans.abstained
    assert ans.sentences and not ans.sentences[0].supported and ans.nearest
    assert any(n.startswith("none of the model's 1 sentence(s) is supported") for n in ans.notices)


def test_the_model_judge_is_asked_each_pair_once_and_never_about_an_empty_claim(
        seeded_settings: Any, ollama_server: OllamaTestServer) -> None:
    from rag.eval.run import run_set
    from rag.eval.sets import Question

    ollama_server.behaviour = "cited"
    qs = [Question(id="fact-a", kind="fact", turns=[FACT_Q], split="heldout"),
          Question(id="fact-b", kind="fact", turns=[LIST_Q], split="heldout")]
    with pipeline(seeded_settings, ollama_server) as p:
        rows = run_set(p, qs, {}, llm="ollama", model=None, judge="model")
    asked = [b["messages"][-1]["content"] for b in chats(ollama_server) if b.get("format")]
    assert asked and len(asked) == len(set(asked)), "a (claim, abstract) pair was judged twice"
    claims = [a.rsplit("<claim>", 1)[1].split("</claim>")[0] for a in asked]
    assert all(re.search(r"[A-Za-z]{2}", c) and not re.search(r"\[\d+\]", c) for c in claims), claims
    assert all(r["metrics"]["citation_recall"] is not None for r in rows)


def test_answers_of_a_model_record_what_the_eval_gates_on(seeded_settings: Any, tmp_path: Path,
                                                          ollama_server: OllamaTestServer) -> None:
    ollama_server.replies = ["Cupcake compresses gradients [1]. " + LOOP * 60]
    res = run_rag("ask", "--llm", "ollama", "--json", FACT_Q, cwd=tmp_path, env={
        "RAG_HOME": str(seeded_settings.home), "OLLAMA_HOST": ollama_server.url})
    assert res.returncode == 0, res.stderr
    obj = json.loads(res.stdout)
    assert obj["finish_reason"] == "length" and obj["incomplete"]
    assert obj["budget"]["context"] == 8192 and obj["budget"]["max_tokens"] > 0


@pytest.mark.parametrize("value", ["ftp://x", "http://127.0.0.1:0/v1"])
def test_a_bad_openai_base_url_is_a_named_setting_error(tmp_path: Path, value: str) -> None:
    res = run_rag("ask", "--llm", "openai", "q?", cwd=tmp_path, env={"RAG_OPENAI_BASE_URL": value})
    assert res.returncode == 2 and "RAG_OPENAI_BASE_URL" in res.stderr, res.stderr


def test_openai_without_a_base_url_says_which_setting_to_set(seeded_settings: Any, tmp_path: Path) -> None:
    res = run_rag("ask", "--llm", "openai", FACT_Q, cwd=tmp_path, env={
        "RAG_HOME": str(seeded_settings.home), "RAG_OPENAI_BASE_URL": ""})
    assert res.returncode == 2, res.stderr
    assert "RAG_OPENAI_BASE_URL" in res.stderr and "llama.cpp" in res.stderr
