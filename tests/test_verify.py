"""The claim verifier as users meet it: `rag check` on claims and drafts, `rag.check` in
Python, verdicts in answers, citations rag adds, and a model that reads the sources before
any gate declines (a researcher's own two-paper library)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import ROOT, SEEDS, run_rag

LIBRARY = ROOT / "tests/data/library/refs.bib"
MEGABLOCKS = "seeds/002_582fbc6f8791162a.txt#17"


@pytest.fixture(scope="module")
def library_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A rag home whose default index holds the two papers of refs.bib (LoRA, Chinchilla)."""
    home = tmp_path_factory.mktemp("library") / ".rag"
    done = run_rag("ingest", str(LIBRARY), cwd=home.parent, env={"RAG_HOME": str(home)})
    assert done.returncode == 0, done.stderr
    return home


def _check(home: Path, *args: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    done = run_rag("check", *args, "--json", cwd=home.parent, env={"RAG_HOME": str(home)})
    assert done.returncode in (0, 6), done.stderr
    return done.returncode, json.loads(done.stdout)


def test_a_claim_against_its_paper_by_citation_key(library_home: Path) -> None:
    code, said = _check(library_home, "LoRA freezes the pre-trained model weights and injects "
                        "trainable rank decomposition matrices into each layer.", "--paper", "hu2022lora")
    assert (code, said["verdict"]) == (0, "supported")
    assert "freezes the pre-trained model weights" in said["quote"]
    code, said = _check(library_home, "LoRA reduces the GPU memory requirement by 30 times.",
                        "--paper", "hu2022lora")
    assert code == 6 and said["verdict"] != "supported"  # the abstract says 3 times


_KNOWN_MISS = pytest.mark.xfail(strict=True, reason="known miss of the verifier (evals/README.md): "
                                "the similarity judge passes it and the verifier does not veto it")


@pytest.mark.parametrize("claim", [
    "LoRA increases the number of trainable parameters by 10,000 times.",  # reversed direction
    "LoRA adds inference latency, unlike adapters.",  # negated
    "Chinchilla is outperformed by Gopher on most downstream evaluation tasks.",  # reversed
    "Chinchilla uses substantially more compute for fine-tuning and inference.",  # reversed direction
    "Chinchilla was trained on protein sequences from the Protein Data Bank.",  # a detail the abstract lacks
    "Current large language models are significantly overtrained.",  # the opposite word
    pytest.param("Chinchilla uses more compute for fine-tuning and inference than Gopher.", marks=_KNOWN_MISS),
])
def test_claims_the_abstract_does_not_support_are_not_supported(library_home: Path, claim: str) -> None:
    paper = "hu2022lora" if claim.startswith("LoRA") else "hoffmann2022chinchilla"
    code, said = _check(library_home, claim, "--paper", paper)
    assert code == 6
    assert said["verdict"] in ("contradicted", "not_supported")
    assert said["paper_id"] and said["quote"]


def test_papers_show_finds_a_paper_by_its_bibtex_key(library_home: Path) -> None:
    done = run_rag("papers", "show", "hoffmann2022chinchilla", "--json", cwd=library_home.parent,
                   env={"RAG_HOME": str(library_home)})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["title"] == "Training Compute-Optimal Large Language Models"


DRAFT_MD = """---
title: Related work
---
# Related work

LoRA freezes the pre-trained model weights and injects trainable rank decomposition
matrices into each layer [@hu2022lora]. Large language models
are significantly undertrained [see @hoffmann2022chinchilla, p. 1]. Chinchilla is outperformed
by Gopher on downstream evaluation tasks [@hoffmann2022chinchilla; @hu2022lora].

Nothing here cites. Scaling laws hold for vision too [@kaplan2020scaling].
"""

DRAFT_TEX = r"""\documentclass{article}
\begin{document}
\section{Related work}
LoRA freezes the pre-trained model weights and injects trainable rank decomposition
matrices into each layer~\cite{hu2022lora}. % a comment \cite{nobody}
\citet{hoffmann2022chinchilla} find that current large language models are significantly undertrained.
Current large language models are significantly overtrained \citep[p.~1]{hoffmann2022chinchilla}.
\end{document}
"""


@pytest.mark.parametrize(("name", "text", "expected"), [
    ("draft.md", DRAFT_MD, [("supported", 6), ("supported", 7), (None, 8), (None, 11)]),
    ("draft.tex", DRAFT_TEX, [("supported", 4), ("supported", 6), (None, 7)]),
])
def test_a_draft_is_checked_sentence_by_sentence(library_home: Path, name: str, text: str,
                                                 expected: list) -> None:  # type: ignore[type-arg]
    draft = library_home.parent / name
    draft.write_text(text, encoding="utf-8")
    code, said = _check(library_home, str(draft))
    sentences = said["sentences"]
    assert [(s["verdict"] if v else None, s["line"]) for s, (v, _) in zip(sentences, expected, strict=True)] \
        == [(v, line) for v, line in expected]
    assert all(s["verdict"] != "supported" for s, (v, _) in zip(sentences, expected, strict=True) if v is None)
    assert code == 6  # one sentence at least is not supported
    if name == "draft.md":
        assert sentences[3]["unknown_keys"] == ["kaplan2020scaling"]  # named, not guessed
        assert sentences[2]["keys"] == ["hoffmann2022chinchilla", "hu2022lora"]
    done = run_rag("check", str(draft), cwd=library_home.parent, env={"RAG_HOME": str(library_home)})
    assert f"{draft}:{expected[0][1]}: supported" in done.stdout


def test_check_refuses_bad_input_by_name(library_home: Path, tmp_path: Path) -> None:
    env = {"RAG_HOME": str(library_home)}
    done = run_rag("check", "no-such-draft.md", cwd=tmp_path, env=env)
    assert done.returncode == 2 and "--paper" in done.stderr
    binary = tmp_path / "draft.md"
    binary.write_bytes(b"\x00\x01PDF")
    done = run_rag("check", str(binary), cwd=tmp_path, env=env)
    assert done.returncode == 2 and "binary" in done.stderr
    done = run_rag("check", "A claim.", "--paper", "nobody2020", cwd=tmp_path, env=env)
    assert done.returncode == 2 and "nobody2020" in done.stderr


def test_python_check_returns_the_verdict_score_and_quote() -> None:
    import rag
    from rag.eval.run import seed_papers

    paper = next(p for p in seed_papers(SEEDS) if "MegaBlocks" in (p.title or p.label))
    said = rag.check("MegaBlocks never drops tokens and maps efficiently to modern hardware.",
                     paper.abstract, paper.title or "")
    assert said.verdict == "supported" and 0.0 <= said.score <= 1.0 and said.quote
    said = rag.check("MegaBlocks drops tokens to map MoE computation efficiently onto GPUs.",
                     paper.abstract, paper.title or "")
    assert said.verdict in ("contradicted", "not_supported")


def _ask(home: Path, server: object, question: str) -> dict:  # type: ignore[type-arg]
    done = run_rag("ask", "--llm", "ollama", "--json", question, cwd=home.parent,
                   env={"RAG_HOME": str(home), "OLLAMA_HOST": server.url})  # type: ignore[attr-defined]
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_the_model_reads_a_small_library_before_any_gate_declines(library_home: Path, ollama_server) -> None:  # type: ignore[no-untyped-def]
    ollama_server.replies = ["LoRA freezes the pre-trained model weights and injects trainable "
                             "rank decomposition matrices into each layer [1]."]
    said = _ask(library_home, ollama_server, "What does LoRA freeze?")
    prompt = json.dumps(ollama_server.requests[-1]["body"]["messages"])
    assert "freezes the pre-trained model weights" in prompt  # LoRA's abstract reached the model
    assert said["answerer"].startswith("ollama") and not said["abstained"]
    assert said["sentences"][0]["verdict"] == "supported"


def test_an_uncited_sentence_gets_the_citation_of_the_source_that_says_it(library_home: Path, ollama_server) -> None:  # type: ignore[no-untyped-def]
    # The model cites nothing (as small models do); the sentence is Chinchilla's abstract's.
    ollama_server.replies = ["Chinchilla reaches a state-of-the-art average accuracy of 67.5% on the "
                             "MMLU benchmark."]
    said = _ask(library_home, ollama_server, "What accuracy does Chinchilla reach on MMLU?")
    sentence = said["sentences"][0]
    assert sentence["attributed"] is True and sentence["verdict"] == "supported"
    cited = {c["n"]: c["title"] for c in said["citations"]}
    assert [cited[n] for n in sentence["citations"]] == ["Training Compute-Optimal Large Language Models"]
    assert f"[{sentence['citations'][0]}]" in said["answer"]


def test_a_sentence_its_source_does_not_support_is_never_shown_as_supported(
        library_home: Path, ollama_server) -> None:  # type: ignore[no-untyped-def]
    wrong = "LoRA increases the number of trainable parameters by 10,000 times [1]."
    ollama_server.replies = [wrong, wrong]
    said = _ask(library_home, ollama_server, "What does LoRA train?")
    sentence = said["sentences"][0]
    assert sentence["verdict"] in ("contradicted", "not_supported") and not sentence["supported"]
    done = run_rag("ask", "--llm", "ollama", "What does LoRA train?", cwd=library_home.parent,
                   env={"RAG_HOME": str(library_home), "OLLAMA_HOST": ollama_server.url})
    assert done.returncode == 0, done.stderr
    expected = "contradicted by its citation" if sentence["verdict"] == "contradicted" else "not supported"
    assert expected in done.stdout
    if sentence["verdict"] == "contradicted":
        assert sentence["quote"] in LIBRARY.read_text(encoding="utf-8")


def test_a_model_answer_with_nothing_supported_ends_as_an_abstention(library_home: Path, ollama_server) -> None:  # type: ignore[no-untyped-def]
    ollama_server.replies = ["The capital of France is Paris [1]."]
    said = _ask(library_home, ollama_server, "What is the capital of France?")
    assert said["abstained"] is True
    assert said["sentences"] and not any(s["supported"] for s in said["sentences"])
    assert any("none of the model's" in n for n in said["notices"])
    assert said["nearest"]  # the closest passages, to judge the refusal by
