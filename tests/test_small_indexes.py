"""A small library answers what the same papers answer in a large one: indexes of 1, 5 and 20
seed papers (cut from the seeds/ index, so every vector is the same) against seeds/ itself,
on the held-out questions of evals/questions.yaml, offline. Before, an index of one paper
declined half of what its abstract plainly says: its word weights and "what is normal here"
had nothing to compare with (benchmarks/small_indexes.py prints the table)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import small_indexes  # noqa: E402

# At least this share of what seeds/ answers is answered by the small index too, and of what
# seeds/ declines, declined (the held-out figures were 0.96-0.98 and 0.89-0.93 when written).
ANSWERED = 0.9
DECLINED = 0.85
# Of fact questions over a corpus of abstracts cut to two sentences (44 of 51 when written).
SHORT_ANSWERED = 0.8


@pytest.mark.parametrize("size", [1, 5, 20])
def test_small_index_answers_what_seeds_answers(seeded_settings, tmp_path: Path, size: int) -> None:  # type: ignore[no-untyped-def]
    asked = small_indexes.questions({"heldout"})
    rows = small_indexes.compare(seeded_settings, asked, [size], seed=5, where=tmp_path)[size]["heldout"]
    (answered, answerable), (declined, unanswerable) = small_indexes.kept(rows)
    lost = sorted({q.id for q, full, small in rows if q.papers and full and not small})
    assert answerable >= 40 and answered / answerable >= ANSWERED, (answered, answerable, lost)
    if size > 1:  # an index of one paper is asked only about that paper
        assert unanswerable >= 20
        assert declined / unanswerable >= DECLINED, (declined, unanswerable)


def test_one_paper_index_answers_a_plain_fact(fresh_settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The issue's example: the abstract says it in one sentence, and nothing else is indexed."""
    import json

    from rag.answering import Pipeline
    from rag.ingest import ingest
    from rag.schema import AskOptions

    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps({
        "title": "InjSys: Injecting Structure into Sparse Attention Kernels",
        "abstract": "Sparse attention is slow on GPUs because general sparse kernels ignore the "
                    "block structure of attention masks. We present InjSys, a kernel generator "
                    "that injects the mask's structure into the sparse matrix format at compile "
                    "time. InjSys speeds up sparse attention by 2.1x over cuSPARSE. On "
                    "long-document models it cuts training time by 30% without changing accuracy."
    }) + "\n", encoding="utf-8")
    ingest([path], fresh_settings, show_progress=False)
    with Pipeline(fresh_settings) as pipeline:
        fact = pipeline.answer("How much does InjSys speed up sparse attention?", AskOptions(llm="none"))
        other = pipeline.answer("How is deep learning used to design CRISPR guide RNAs?", AskOptions(llm="none"))
    assert not fact.abstained and "2.1x" in fact.answer and "[1]" in fact.answer
    assert other.abstained


def test_a_corpus_of_very_short_abstracts_is_not_declined_wholesale(fresh_settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Every seed abstract cut to two sentences at most (the one stating a question's fact and
    the first, or the first two), so nothing about the corpus is normal-sized: the fact
    questions whose facts survive the cut are still answered."""
    import json

    from rag.answering import Pipeline
    from rag.corpus.text import split_sentences
    from rag.eval.metrics import fact_found
    from rag.eval.sets import resolve_refs, seed_papers
    from rag.ingest import ingest
    from rag.schema import AskOptions

    papers = seed_papers(ROOT / "seeds")
    facts = [q for q in small_indexes.questions({"fit", "heldout"}) if q.kind == "fact" and q.papers]
    refs = resolve_refs(facts, papers, small_indexes.QUESTIONS, "seeds")
    cut = {p.paper_id: split_sentences(p.abstract)[:2] for p in papers}
    asked = []
    for q in facts:
        pid = refs[q.papers[0]]
        whole = split_sentences(next(p.abstract for p in papers if p.paper_id == pid))
        holding = [s for s in whole if any(fact_found(a, s) for f in q.facts for a in f.split("|"))]
        if holding:
            cut[pid] = list(dict.fromkeys([*holding, whole[0]]))[:2]
            asked.append(q)
    # a later question about the same paper may have cut an earlier one's sentence
    asked = [q for q in asked if all(any(fact_found(a, " ".join(cut[refs[q.papers[0]]])) for a in f.split("|"))
                                     for f in q.facts)]
    path = tmp_path / "short.jsonl"
    path.write_text("".join(json.dumps({"id": p.paper_id, "title": p.title, "abstract": " ".join(cut[p.paper_id])}) + "\n"
                            for p in papers), encoding="utf-8")
    ingest([path], fresh_settings, show_progress=False)
    with Pipeline(fresh_settings) as pipeline:
        answered = [q.id for q in asked if not pipeline.answer(q.turns[-1], AskOptions(llm="none")).abstained]
    assert len(asked) >= 40
    assert len(answered) / len(asked) >= SHORT_ANSWERED, sorted({q.id for q in asked} - set(answered))
