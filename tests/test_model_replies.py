"""What a user gets from `rag ask --llm ollama --json` when a model writes its answer its own
way (citations at a sentence's start, its own bibliography, a refusal in its own words...), each
reply scripted on the Ollama test server and read as the user reads it."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from rag.corpus.text import split_sentences
from tests.conftest import RAG, run_rag
from tests.ollama_server import OllamaTestServer, parse_sources

LIST_Q = "Which papers study federated learning?"
FACT_Q = "What techniques reduce communication in distributed training?"


def ask(settings: Any, server: OllamaTestServer, tmp_path: Path, question: str,
        reply: str | None = None) -> dict[str, Any]:
    """`rag ask --llm ollama --json` with the model replying `reply` (else its behaviour)."""
    server.replies = [reply] if reply is not None else []
    res = run_rag("ask", question, "--llm", "ollama", "--json", cwd=tmp_path, env={
        "RAG_HOME": str(settings.home), "OLLAMA_HOST": server.url})
    assert res.returncode == 0, res.stderr
    return dict(json.loads(res.stdout))


def test_a_list_answer_does_not_list_again_the_paper_its_last_line_cites(
        seeded_settings: Any, ollama: OllamaTestServer, tmp_path: Path) -> None:
    # The scripted model cites the first two sources, the second in its last sentence.
    ollama.behaviour = "cited"
    obj = ask(seeded_settings, ollama, tmp_path, LIST_Q)
    before, after = obj["answer"].split("Also matching:")
    cited = [s["citations"] for s in obj["sentences"]]
    model_says = {n for s in obj["sentences"] if s["text"] in before for n in s["citations"]}
    listed = {n for s in obj["sentences"] if s["text"] in after for n in s["citations"]}
    assert model_says and listed, cited
    assert not model_says & listed, obj["answer"]  # each paper said once
    assert len(obj["citations"]) == len(model_says | listed)


@pytest.fixture(scope="module")
def claims(seeded_settings: Any, ollama: OllamaTestServer,
           tmp_path_factory: pytest.TempPathFactory) -> list[tuple[int, str]]:
    """(n, a sentence of that source's abstract) for FACT_Q's first three sources, as the
    prompt numbers them: the claims the replies below cite."""
    ollama.behaviour = "cited"
    ask(seeded_settings, ollama, tmp_path_factory.mktemp("claims"), FACT_Q)
    out = []
    for n, abstract in parse_sources(ollama.last_prompt):
        short = [s for s in split_sentences(abstract) if 40 < len(s) < 200 and s.endswith(".")]
        if short:
            out.append((n, short[0].rstrip(".")))
    assert len(out) >= 3
    return out[:3]


def cited_right(obj: dict[str, Any], claims: list[tuple[int, str]]) -> None:
    """Each claim is a sentence of its own, citing exactly the paper it came from."""
    by_n = {c["n"]: c["abstract"] for c in obj["citations"]}
    model_part = obj["answer"].split("Also matching:")[0]  # then the papers it left out
    said = [s for s in obj["sentences"] if s["citations"] and s["text"] in model_part]
    assert len(said) == len(claims), obj["answer"]
    for s, (_, claim) in zip(said, claims, strict=True):
        assert claim in s["text"] and len(s["citations"]) == 1, (s["text"], s["citations"])
        assert claim in by_n[s["citations"][0]], (claim, s["citations"])


def test_citations_at_the_start_of_sentences_cite_those_sentences(
        seeded_settings: Any, ollama: OllamaTestServer, tmp_path: Path,
        claims: list[tuple[int, str]]) -> None:
    reply = " ".join(f"[{n}] {claim}." for n, claim in claims)
    obj = ask(seeded_settings, ollama, tmp_path, FACT_Q, reply)
    cited_right(obj, claims)


def test_a_citation_after_the_full_stop_streamed_apart_keeps_sentences_apart(
        seeded_settings: Any, ollama: OllamaTestServer, tmp_path: Path,
        claims: list[tuple[int, str]]) -> None:
    # "Claim. [1] " then "Next claim.": a chunk that ends just after the marker's space
    chunks = [piece for n, claim in claims for piece in (f"{claim}. [{n}] ",)]
    obj = ask(seeded_settings, ollama, tmp_path, FACT_Q, chunks)
    cited_right(obj, claims)
    assert "].T" not in obj["answer"] and re.search(r"\]\. [A-Z]", obj["answer"])


@pytest.mark.parametrize("style", ["[Paper {n}]", "[Document {n}]", "(Paper {n})"])
def test_a_paper_cited_by_its_word_and_number_is_cited(
        seeded_settings: Any, ollama: OllamaTestServer, tmp_path: Path,
        claims: list[tuple[int, str]], style: str) -> None:
    reply = " ".join(f"{claim} {style.format(n=n)}." for n, claim in claims)
    obj = ask(seeded_settings, ollama, tmp_path, FACT_Q, reply)
    cited_right(obj, claims)
    assert "Paper" not in obj["answer"].split("Also matching:")[0] and obj["rewritten_citations"]
    assert all(s["supported"] for s in obj["sentences"])


def test_the_models_own_reference_list_is_left_out(
        seeded_settings: Any, ollama: OllamaTestServer, tmp_path: Path,
        claims: list[tuple[int, str]]) -> None:
    body = " ".join(f"{claim} [{n}]." for n, claim in claims[:2])
    reply = (f"**Techniques:**\n{body}\n\n**References:**\n"
             + "\n".join(f"- [{n}] {claim[:30]}" for n, claim in claims)
             + "\n\nSources: " + ", ".join(f"[{n}]" for n, _ in claims))
    obj = ask(seeded_settings, ollama, tmp_path, FACT_Q, reply)
    cited_right(obj, claims[:2])
    answer = obj["answer"]
    assert "References" not in answer and "Sources" not in answer, answer
    assert answer.startswith(f"{obj['matched']} of the 60 abstracts match:\n**Techniques:**\n")
    assert all(s["supported"] for s in obj["sentences"])  # no heading judged as a claim
    # the paper the model listed but did not cite is one it left out
    assert f"{claims[2][1][:30]}" not in answer.split("Also matching:")[0]


@pytest.mark.parametrize("refusal", [
    "The abstracts do not mention any technique for this.",
    "I'm sorry, but the provided sources don't contain information to answer this question.",
    "None of the provided papers discuss this.",
    "I couldn't find any information about this in the provided abstracts.",
])
def test_a_refusal_in_the_models_own_words_is_an_abstention(
        seeded_settings: Any, ollama: OllamaTestServer, tmp_path: Path, refusal: str) -> None:
    obj = ask(seeded_settings, ollama, tmp_path, FACT_Q, refusal)
    assert obj["abstained"] and obj["citations"] == [] and obj["nearest"]
    assert obj["answer"] == refusal  # said once, without claiming papers match it
    assert all(s["supported"] for s in obj["sentences"])


@pytest.mark.parametrize("reply", ["", "<think>Nothing to add.</think>\n"])
def test_an_empty_answer_is_the_models_failure_not_an_abstention(
        seeded_settings: Any, ollama: OllamaTestServer, tmp_path: Path, reply: str) -> None:
    env = {"RAG_HOME": str(seeded_settings.home), "OLLAMA_HOST": ollama.url}
    ollama.replies = [reply]
    res = run_rag("ask", FACT_Q, "--llm", "ollama", cwd=tmp_path, env=env)
    assert res.returncode == 4 and "sent an empty answer" in res.stderr, res.stderr
    assert "do not answer" not in res.stdout
    ollama.replies = [reply]  # by default, the offline answer, said as such
    res = run_rag("ask", FACT_Q, "--json", cwd=tmp_path, env=env)
    obj = json.loads(res.stdout)
    assert res.returncode == 0 and obj["answerer"] == "extractive" and not obj["abstained"]
    assert any("empty answer" in n for n in obj["notices"])


@pytest.mark.parametrize("rewrite", [
    "Here is the rewritten question:\n\nWhat speedup does Skrull report over DeepSpeed?",
    "**Stand-alone question:** What speedup does Skrull report over DeepSpeed?",
])
def test_a_follow_up_rewritten_after_a_lead_in_is_asked_as_rewritten(
        seeded_settings: Any, ollama: OllamaTestServer, tmp_path: Path, rewrite: str) -> None:
    ollama.behaviour = "cited"
    ollama.replies = ["Skrull is a dynamic data scheduler for long-SFT [1].", rewrite]
    res = subprocess.run(
        [RAG, "chat", "--llm", "ollama", "--json"],
        input="What does Skrull do?\nWhat speedup does it report?\n/quit\n",
        capture_output=True, text=True, cwd=tmp_path, timeout=180, env={
            **os.environ, "RAG_HOME": str(seeded_settings.home), "OLLAMA_HOST": ollama.url})
    assert res.returncode == 0, res.stderr
    decoder = json.JSONDecoder()
    first, end = decoder.raw_decode(res.stdout)
    second = decoder.raw_decode(res.stdout[end:].lstrip())[0]
    assert second["standalone_question"] == "What speedup does Skrull report over DeepSpeed?"
    assert not second["abstained"] and [c["label"] for c in second["citations"]] == ["Skrull"]


def test_markdown_headings_and_a_tables_head_are_not_judged_as_claims(
        seeded_settings: Any, ollama: OllamaTestServer, tmp_path: Path,
        claims: list[tuple[int, str]]) -> None:
    (n1, c1), (n2, c2) = claims[:2]
    reply = (f"### Summary\n{c1} [{n1}].\n\n| Paper | What it reports |\n| --- | :---: |\n"
             f"| The second | {c2} [{n2}] |")
    obj = ask(seeded_settings, ollama, tmp_path, FACT_Q, reply)
    assert "### Summary" in obj["answer"] and "| Paper | What it reports |" in obj["answer"]
    assert all(s["supported"] for s in obj["sentences"]), obj["sentences"]
    claims_said = [s["text"] for s in obj["sentences"] if s["text"].startswith((c1, "| The second"))]
    assert len(claims_said) == 2


@pytest.mark.parametrize("behaviour", ["length", "cut"])
def test_a_list_answer_cut_off_ends_where_the_model_stopped(
        seeded_settings: Any, ollama: OllamaTestServer, tmp_path: Path, behaviour: str) -> None:
    ollama.behaviour = behaviour  # at its token limit, or the stream broke off
    res = run_rag("ask", LIST_Q, "--json", cwd=tmp_path, env={
        "RAG_HOME": str(seeded_settings.home), "OLLAMA_HOST": ollama.url})
    obj = json.loads(res.stdout)
    assert res.returncode == 0 and obj["incomplete"], res.stderr
    assert obj["finish_reason"] == ("length" if behaviour == "length" else "error")
    # no list of the other papers after the cut sentence, as if the answer had ended there
    assert "Also matching" not in obj["answer"], obj["answer"]
    assert obj["answer"].endswith(obj["sentences"][-1]["text"])


def test_a_notice_over_http_names_the_request_field_not_the_cli_option(
        seeded_settings: Any, ollama: OllamaTestServer) -> None:
    from fastapi.testclient import TestClient

    from rag.api import create_app

    # the server's model is not pulled: each answer is the offline one, with a notice
    settings = seeded_settings.model_copy(update={"ollama_host": ollama.url, "llm": "auto",
                                                  "model": "mistral"})
    q = "What does Skrull optimise?"
    with TestClient(create_app(settings)) as c:
        notices = c.post("/ask", json={"question": q}).json()["notices"]
        with c.stream("POST", "/chat", json={"messages": [{"role": "user", "content": q}],
                                             "stream": True}) as resp:
            streamed = [json.loads(line[6:]) for line in resp.read().decode().splitlines()
                        if line.startswith("data: ")]
        v1 = c.post("/v1/chat/completions", json={
            "model": "rag", "messages": [{"role": "user", "content": q}]}).json()
    said = [d["message"] for d in streamed if set(d) == {"message"}]
    content = v1["choices"][0]["message"]["content"]
    assert notices and said == notices and "not available" in notices[0]
    assert all("--model" not in n and 'with "model"' in n for n in notices), notices
    assert "--model" not in content and 'with the model "rag:' in content, content  # markdown-escaped
