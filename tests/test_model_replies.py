"""What a user gets from `rag ask --llm ollama --json` when a model writes its answer its own
way (citations at a sentence's start, its own bibliography, a refusal in its own words...), each
reply scripted on the Ollama test server and read as the user reads it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import run_rag
from tests.ollama_server import OllamaTestServer

LIST_Q = "Which papers study federated learning?"


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
