"""What a reader sees on the way is what the finished answer says: in the terminal, the
printed answer is the `--json` answer and every marker is a number of its reference list;
over SSE, the sentence events are the final answer's sentences."""

from __future__ import annotations

import json
import re

from fastapi.testclient import TestClient

from rag.api import create_app
from tests.conftest import run_rag
from tests.ollama_server import free_port_with_nothing_listening
from tests.rag_server import parse_sse

LONG_SEQ = "which systems target long-sequence training?"
CHIP = "Which paper uses reinforcement learning for chip placement?"


def _env(settings, **extra: str) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {"RAG_HOME": str(settings.home), **extra}


def printed_answer(stdout: str) -> str:
    """The answer text of `rag ask`'s output: everything before the notes and references."""
    return re.split(r"\n\n(?:\[|References\n)", stdout.rstrip("\n"), maxsplit=1)[0]


def references(stdout: str) -> dict[int, str]:
    """{n: the reference line} of `rag ask`'s reference list."""
    refs = stdout.split("\nReferences\n", 1)[1]
    return {int(m.group(1)): m.group(2) for m in re.finditer(r"^\[(\d+)\] (.+)$", refs, re.M)}


def markers(text: str) -> set[int]:
    return {int(n) for group in re.findall(r"\[([\d, ]+)\]", text) for n in group.split(",")}


def test_auto_mode_without_ollama_prints_the_list_header_once(seeded_settings, tmp_path) -> None:  # type: ignore[no-untyped-def]
    res = run_rag("ask", LONG_SEQ, cwd=tmp_path, env=_env(
        seeded_settings, OLLAMA_HOST=f"http://127.0.0.1:{free_port_with_nothing_listening()}"))
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("abstracts match:") == 1


def test_offline_markers_are_the_reference_numbers_and_text_is_the_json(seeded_settings, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # (CHIP itself is declined by the relevance model: no seeds/ paper is about chip placement)
    q = "Which paper uses reinforcement learning for device placement?"
    shown = run_rag("ask", "--llm", "none", q, cwd=tmp_path, env=_env(seeded_settings))
    as_json = run_rag("ask", "--llm", "none", "--json", q, cwd=tmp_path, env=_env(seeded_settings))
    assert shown.returncode == 0 and as_json.returncode == 0, shown.stderr + as_json.stderr
    obj = json.loads(as_json.stdout)
    text = printed_answer(shown.stdout)
    assert text == obj["answer"]
    refs = references(shown.stdout)
    assert markers(text) == set(refs) == {c["n"] for c in obj["citations"]}
    # each sentence cites the paper it quotes: the marker leads to that paper's reference
    for s in obj["sentences"]:
        cited = {c["n"]: c for c in obj["citations"]}
        assert all(s["quote"] in cited[n]["abstract"] for n in s["citations"][:1])
        assert all(cited[n]["name"] in refs[n] for n in s["citations"])


def _source_labels(prompt: str) -> dict[int, str]:
    return {int(n): label.strip() for n, label in
            re.findall(r'<source n="(\d+)">\s*label: ([^\n]+)', prompt)}


def test_model_citing_two_then_one_is_renumbered_on_screen_as_in_json(seeded_settings, tmp_path, ollama_server) -> None:  # type: ignore[no-untyped-def]
    q = "How do Skrull and DeepSpeed-Ulysses handle long sequences?"
    reply = ("In passing, one system uses dynamic data scheduling [2]. "
             "Another partitions along the sequence dimension [1].")
    ollama_server.replies = [reply, reply]
    env = _env(seeded_settings, OLLAMA_HOST=ollama_server.url)
    shown = run_rag("ask", "--llm", "ollama", q, cwd=tmp_path, env=env)
    sent = _source_labels(ollama_server.requests[-1]["body"]["messages"][-1]["content"])
    as_json = run_rag("ask", "--llm", "ollama", "--json", q, cwd=tmp_path, env=env)
    assert shown.returncode == 0 and as_json.returncode == 0, shown.stderr + as_json.stderr
    obj = json.loads(as_json.stdout)
    text = printed_answer(shown.stdout)
    assert text == obj["answer"]
    assert "scheduling [1]" in text and "dimension [2]" in text  # first use decides the number
    refs = references(shown.stdout)
    assert markers(text) == set(refs)
    assert refs[1].startswith(sent[2]) and refs[2].startswith(sent[1])


def test_sse_sentence_events_are_the_final_answer(seeded_settings) -> None:  # type: ignore[no-untyped-def]
    with TestClient(create_app(seeded_settings)) as client:
        for question in (LONG_SEQ, CHIP, "What speedup does Skrull report over DeepSpeed?"):
            r = client.post("/chat", json={"messages": [{"role": "user", "content": question}],
                                           "stream": True, "llm": "none"})
            assert r.status_code == 200
            events = parse_sse(r.text)
            final = [d for k, d in events if k == "final"][0]
            sentences = [d for k, d in events if k == "sentence"]
            assert "".join(d["delta"] for d in sentences) == final["answer"]
            claims = [{k: d[k] for k in ("text", "citations", "supported", "verdict", "attributed",
                                         "support", "quote", "addresses")}
                      for d in sentences if not d["meta"]]
            assert claims == final["sentences"]
