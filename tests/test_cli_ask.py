"""`rag ask` as a user runs it: output, JSON object, exit codes, fallback notice."""

from __future__ import annotations

import json
import os
import subprocess

from tests.conftest import RAG, run_rag
from tests.ollama_server import free_port_with_nothing_listening

Q = "which systems target long-sequence training?"
ANSWER_KEYS = {"question", "answer", "abstained", "answerer", "citations", "sentences",
               "dropped_citations", "timings_ms"}
CITATION_KEYS = {"n", "paper_id", "title", "label", "source", "arxiv_id", "quote", "abstract"}
SENTENCE_KEYS = {"text", "citations", "supported", "support"}


def _env(settings, **extra: str) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {"RAG_HOME": str(settings.home), **extra}


def test_ask_json_object(seeded_settings, tmp_path) -> None:  # type: ignore[no-untyped-def]
    res = run_rag("ask", Q, "--llm", "none", "--json", cwd=tmp_path, env=_env(seeded_settings))
    assert res.returncode == 0, res.stderr
    obj = json.loads(res.stdout)
    assert set(obj) >= ANSWER_KEYS and obj["answerer"] == "extractive" and not obj["abstained"]
    assert {"retrieve", "generate", "total"} <= set(obj["timings_ms"])
    for c in obj["citations"]:
        assert set(c) >= CITATION_KEYS and c["quote"] in c["abstract"]
    for s in obj["sentences"]:
        assert set(s) >= SENTENCE_KEYS and set(s["citations"]) <= {c["n"] for c in obj["citations"]}
    assert {"Skrull", "DeepSpeed-Ulysses", "Buff"} <= {c["label"] for c in obj["citations"]}


def test_ask_readable_output_with_references(seeded_settings, tmp_path) -> None:  # type: ignore[no-untyped-def]
    res = run_rag("ask", Q, cwd=tmp_path, env=_env(
        seeded_settings, OLLAMA_HOST=f"http://127.0.0.1:{free_port_with_nothing_listening()}"))
    assert res.returncode == 0, res.stderr
    assert "of the 60 abstracts match" in res.stdout and "\nReferences\n" in res.stdout
    assert "[1] " in res.stdout.split("References")[1]
    # auto mode: Ollama is not running, one line on stderr says so and how to enable it
    assert "answering offline" in res.stderr and "ollama serve" in res.stderr


def test_ask_with_ollama_required_but_absent_exits_4(seeded_settings, tmp_path) -> None:  # type: ignore[no-untyped-def]
    res = run_rag("ask", Q, "--llm", "ollama", cwd=tmp_path, env=_env(
        seeded_settings, OLLAMA_HOST=f"http://127.0.0.1:{free_port_with_nothing_listening()}"))
    assert res.returncode == 4
    assert "Ollama is not running" in res.stderr and "ollama serve" in res.stderr


def test_ask_through_the_ollama_test_server(seeded_settings, tmp_path, ollama_server) -> None:  # type: ignore[no-untyped-def]
    res = run_rag("ask", Q, "--json", cwd=tmp_path, env=_env(seeded_settings, OLLAMA_HOST=ollama_server.url))
    assert res.returncode == 0, res.stderr
    obj = json.loads(res.stdout)
    assert obj["answerer"] == "ollama:llama3.2" and obj["citations"]
    assert all(s["supported"] for s in obj["sentences"])


def test_ask_streams_tokens_to_the_terminal(seeded_settings, tmp_path, ollama_server) -> None:  # type: ignore[no-untyped-def]
    ollama_server.behaviour = "wrong_number"
    res = run_rag("ask", "What speedup does Skrull report over DeepSpeed?", cwd=tmp_path,
                  env=_env(seeded_settings, OLLAMA_HOST=ollama_server.url))
    assert res.returncode == 0, res.stderr
    assert "not supported by their citations" in res.stdout


def test_ask_bad_input_exits_2(seeded_settings, tmp_path) -> None:  # type: ignore[no-untyped-def]
    res = run_rag("ask", "   ", "--llm", "none", cwd=tmp_path, env=_env(seeded_settings))
    assert res.returncode == 2 and "question is empty" in res.stderr
    res = run_rag("ask", "x" * 2001, "--llm", "none", cwd=tmp_path, env=_env(seeded_settings))
    assert res.returncode == 2 and "at most 2000" in res.stderr
    res = run_rag("ask", Q, "--year", "twenty", "--llm", "none", cwd=tmp_path, env=_env(seeded_settings))
    assert res.returncode == 2 and "year" in res.stderr


def test_ask_with_an_empty_index_and_no_seeds_exits_3(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # a fresh machine, run outside the checkout: nothing to answer from
    home = tmp_path / ".rag"
    res = run_rag("ask", Q, "--llm", "none", cwd=tmp_path,
                  env={"RAG_HOME": str(home), "RAG_SEEDS": str(tmp_path / "nowhere")})
    assert res.returncode == 3, res.stderr
    assert "is empty" in res.stderr and str(tmp_path / "nowhere") in res.stderr
    assert "rag ingest PATH" in res.stderr


def test_chat_follow_up_and_commands(seeded_settings, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import subprocess

    from tests.conftest import RAG

    script = "What speedup does Skrull report over DeepSpeed?\nWhat is it implemented on?\n/sources\n/reset\n/sources\n/quit\n"
    res = subprocess.run([RAG, "chat", "--llm", "none"], input=script, capture_output=True, text=True,
                         cwd=tmp_path, env={**__import__("os").environ, "RAG_HOME": str(seeded_settings.home)},
                         timeout=120)
    assert res.returncode == 0, res.stderr
    assert "3.76x" in res.stdout and "DeepSpeed" in res.stdout
    assert "searching for: What is it implemented on (Skrull)?" in res.stderr
    assert "[1] Skrull" in res.stdout and "(no sources yet)" in res.stdout


def test_chat_json_prints_only_the_answers_objects(seeded_settings, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`rag chat --json | jq`: the `you> ` prompts go to stderr, not between the objects."""
    script = "What speedup does Skrull report over DeepSpeed?\nWhat is it implemented on?\n/quit\n"
    res = subprocess.run([RAG, "chat", "--llm", "none", "--json"], input=script, capture_output=True,
                         text=True, cwd=tmp_path, env={**os.environ, "RAG_HOME": str(seeded_settings.home)},
                         timeout=120)
    assert res.returncode == 0, res.stderr
    decoder, text, objects = json.JSONDecoder(), res.stdout.strip(), []
    while text:
        obj, end = decoder.raw_decode(text)
        objects.append(obj)
        text = text[end:].lstrip()
    assert [o["question"]["text"] for o in objects] == script.splitlines()[:2]
    # the follow-up is shown as read: made stand-alone, about the paper asked of before
    assert [o["question"]["follow_up"] for o in objects] == [False, True]
    assert "Skrull" in objects[1]["question"]["standalone"]
    assert "3.76x" in objects[0]["answer"] and "you> " in res.stderr


def test_filters_that_leave_no_paper_say_so(seeded_settings, tmp_path) -> None:  # type: ignore[no-untyped-def]
    res = run_rag("ask", "Which papers study federated learning?", "--llm", "none", "--year", "3000",
                  cwd=tmp_path, env=_env(seeded_settings))
    assert res.returncode == 0, res.stderr  # as `rag search` says "No papers match."
    assert res.stdout.strip() == "No papers match the filters: year 3000."
    res = run_rag("ask", Q, "--llm", "none", "--json", "--venue", "nosuchvenue", "--category", "cs.DC",
                  cwd=tmp_path, env=_env(seeded_settings))
    assert res.returncode == 0, res.stderr
    obj = json.loads(res.stdout)
    said = "No papers match the filters: venue nosuchvenue, category cs.DC."
    assert obj["answer"] == said and obj["notices"] == [said]
    assert obj["abstained"] and obj["citations"] == [] and obj["nearest"] == [] and obj["matched"] == 0
