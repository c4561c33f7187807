"""Relevance decisions that hold outside the corpora they were fitted on: a paper answers in an
index of 1, 5 or 20 papers what it answers inside seeds/; very short or very long abstracts
are not declined wholesale; and with a model writing the answer, a borderline question is
put to the model (which may still say the abstracts do not answer), while a clear "no" is
declined without asking it."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rag.eval.metrics import normalise
from rag.eval.sets import load_set, resolve_refs
from rag.prompts import NO_ANSWER

ROOT = Path(__file__).resolve().parent.parent
QUESTIONS = ROOT / "evals" / "questions.yaml"
PER_INDEX = 4  # questions asked of each small index (each answer costs about a second)


@pytest.fixture(scope="module")
def full(seeded_settings: Any) -> Iterator[Any]:
    from rag.answering import Pipeline

    with Pipeline(seeded_settings.model_copy(update={"llm": "none"})) as p:
        yield p


@pytest.fixture(scope="module")
def fact_questions(full: Any) -> list[tuple[str, Any, list[str]]]:
    """(question, its one answering paper, its facts) for the seeds fact questions."""
    qs = [q for q in load_set(QUESTIONS) if q.kind == "fact" and len(q.papers) == 1 and q.facts]
    refs = resolve_refs(qs, full.retriever.papers(), QUESTIONS, "default")
    papers = {p.paper_id: p for p in full.retriever.papers()}
    return [(q.turns[0], papers[refs[q.papers[0]]], q.facts) for q in qs]


def found(facts: list[str], text: str) -> set[str]:
    """The facts (any `|` alternative) the answer text holds, as `rag eval` matches them."""
    t = normalise(text)
    return {f for f in facts if any(normalise(a) in t for a in f.split("|") if a.strip())}


def write_corpus(path: Path, papers: list[Any], abstract: Any = lambda p: p.abstract) -> Path:
    with path.open("w", encoding="utf-8") as fh:
        for p in papers:
            fh.write(json.dumps({"id": p.paper_id, "title": p.title, "abstract": abstract(p),
                                 "authors": p.authors, "arxiv_id": p.arxiv_id}) + "\n")
    return path


def pipeline_over(tmp_path: Path, corpus: Path) -> Any:
    from rag.answering import Pipeline
    from rag.config import Settings
    from rag.ingest import ingest

    settings = Settings(home=tmp_path / ".rag", seeds=tmp_path / "no-seeds", llm="none")
    ingest([corpus], settings, show_progress=False)
    return Pipeline(settings)


def compare(full: Any, small: Any, asked: list[tuple[str, Any, list[str]]]) -> list[str]:
    """The questions the small index answers worse than seeds/: declined, or missing a fact
    that the answer over seeds/ gives."""
    worse = []
    for question, _, facts in asked:
        big = full.answer(question)
        if big.abstained or not found(facts, big.answer):
            continue  # nothing to keep: seeds/ itself does not answer it
        got = small.answer(question)
        if got.abstained or not found(facts, big.answer) <= found(facts, got.answer):
            worse.append(f"{question!r}: seeds/ {big.answer[:90]!r} | small {got.answer[:90]!r}")
    return worse


# Known gap, measured with the shipped params: the answer model weighs `named` at -1.4 (the
# fit sets' near misses name papers) and reads the candidates against each other (p_second,
# gap, miss_max); in an index of 1, 5 or 20 papers "What speedup does Skrull report over
# DeepSpeed?" gets P(answerable) 0.12-0.37 against the bound 0.48 (0.60 inside seeds/).
# Without `named` seeds/ loses half its declined near misses (scripts/fit_relevance.py).
SMALL_INDEX_GAP = pytest.mark.xfail(strict=True, reason="small indexes decline named-paper facts")


@pytest.mark.parametrize("size", [pytest.param(1, marks=SMALL_INDEX_GAP),
                                  pytest.param(5, marks=SMALL_INDEX_GAP),
                                  pytest.param(20, marks=SMALL_INDEX_GAP)])
def test_a_small_index_answers_what_seeds_answers(tmp_path: Path, full: Any, fact_questions: list[Any],
                                                  size: int) -> None:
    papers: list[Any] = []
    for _, paper, _ in fact_questions:
        if paper.paper_id not in {p.paper_id for p in papers}:
            papers.append(paper)
    papers = papers[:size]
    asked = [q for q in fact_questions if q[1].paper_id in {p.paper_id for p in papers}][:PER_INDEX]
    assert asked
    with pipeline_over(tmp_path, write_corpus(tmp_path / "small.jsonl", papers)) as small:
        assert small.corpus_size() == size
        assert compare(full, small, asked) == []


def test_an_index_of_one_paper_answers_its_own_number(tmp_path: Path) -> None:
    corpus = tmp_path / "one.jsonl"
    corpus.write_text(json.dumps({
        "id": "injsys", "title": "InjSys: fast sparse attention kernels",
        "abstract": "Sparse attention kernels are slow on GPUs. We present InjSys, a code "
                    "generator for sparse attention. InjSys speeds up sparse attention by 2.1x "
                    "over cuSPARSE. It supports block and sliding-window patterns."}) + "\n",
        encoding="utf-8")
    with pipeline_over(tmp_path, corpus) as p:
        ans = p.answer("How much does InjSys speed up sparse attention?")
    assert not ans.abstained and "2.1x" in ans.answer


@pytest.mark.parametrize("shape", ["short", pytest.param("long", marks=SMALL_INDEX_GAP)])
def test_short_or_long_abstracts_are_not_declined_wholesale(tmp_path: Path, full: Any,
                                                            fact_questions: list[Any], shape: str) -> None:
    from rag.corpus.text import split_sentences

    asked = fact_questions[:6]
    papers = list({p.paper_id: p for _, p, _ in asked}.values())

    def short(p: Any) -> str:  # only the sentence that holds the first fact
        facts = next(f for _, q, f in asked if q.paper_id == p.paper_id)
        return next((s for s in split_sentences(p.abstract) if found(facts, s)), p.abstract)

    boilerplate = ("The experimental setup is described in detail, including the hardware, the "
                   "software versions and the hyper-parameters of every run. Each measurement "
                   "was repeated several times and the mean is reported. ") * 12

    def long(p: Any) -> str:  # the abstract, then a long methods paragraph
        return p.abstract + " " + boilerplate

    corpus = write_corpus(tmp_path / f"{shape}.jsonl", papers, short if shape == "short" else long)
    with pipeline_over(tmp_path, corpus) as small:
        assert compare(full, small, asked) == []


# -- with a model writing the answer -----------------------------------------------------


@pytest.fixture()
def borderline(seeded_settings: Any, ollama: Any) -> Iterator[tuple[Any, Any, str]]:
    """A pipeline through the Ollama test server whose bounds make a seeds question
    borderline: its P(answerable) is just below the offline answerer's bound and just above
    the bound used when a model writes the answer."""
    from rag.answering import Pipeline

    question = "What speedup does Skrull report over DeepSpeed?"
    settings = seeded_settings.model_copy(update={"ollama_host": ollama.url, "llm": "ollama"})
    with Pipeline(settings) as p:
        rel = p.chooser.relevance
        d = p.chooser.decide(question, None, False)
        rel.models["answer"] = dataclasses.replace(rel.models["answer"],
                                                   threshold=min(1.0, d.p_answerable + 1e-6))
        rel.answer_with_model = max(0.0, d.p_answerable - 1e-6)
        ollama.behaviour, ollama.replies = "cited", []
        yield p, ollama, question


def chat_calls(server: Any) -> int:
    return sum(r["path"] == "/api/chat" for r in server.requests)


def test_a_borderline_question_is_put_to_the_model_and_checked(borderline: Any) -> None:
    from rag.schema import AskOptions

    p, server, question = borderline
    offline = p.answer(question, AskOptions(llm="none"))
    assert offline.abstained  # the offline answerer declines it
    before = chat_calls(server)
    ans = p.answer(question)
    assert chat_calls(server) == before + 1
    assert not ans.abstained and ans.sources and "[1]" in ans.answer
    assert ans.sentences and all(s.supported for s in ans.sentences)  # checked like any answer


def test_the_model_may_still_say_the_abstracts_do_not_answer(borderline: Any) -> None:
    p, server, question = borderline
    server.replies = [NO_ANSWER]
    before = chat_calls(server)
    ans = p.answer(question)
    assert chat_calls(server) == before + 1
    assert ans.abstained and ans.answer.startswith(NO_ANSWER)


def test_a_clear_no_is_declined_without_asking_the_model(ollama_pipeline: Any, ollama: Any) -> None:
    ollama.behaviour, ollama.replies = "cited", []
    before = chat_calls(ollama)
    ans = ollama_pipeline.answer("Is aspirin effective for preventing recurrent stroke in older adults?")
    assert ans.abstained and chat_calls(ollama) == before
