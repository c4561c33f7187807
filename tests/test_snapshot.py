"""The index's snapshot (rag.retrieve.snapshot) as read from disk: the same BM25 tokens and
scores as bm25s, the same names, papers and record matches as the scans it replaces, and a
question that imports neither bm25s nor scipy and embeds nothing the index already knows."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from tests.conftest import ROOT

QUERIES = [
    "which systems target long-sequence training?",
    "What speedup does Skrull report over DeepSpeed-Ulysses on 128 GPUs?",
    "federated learning with gradient boosted trees (FedTree)",
    "the the of and",  # stop words only
]


def test_bm25_tokens_and_scores_are_bm25s_own(retriever: Any) -> None:
    import bm25s
    import numpy as np

    from rag.retrieve.snapshot import bm25_text, normalise, stemmer

    snap = retriever.snapshot()
    papers = {pid: p for pid, p in snap.papers.items()}
    texts = [normalise(bm25_text(papers[pid], text))
             for (cid, pid), text in zip(snap.chunk_paper.items(), snap.chunk_text.values(), strict=True)]
    index = bm25s.BM25()
    index.index(bm25s.tokenize(texts, stopwords="en", stemmer=stemmer(), return_ids=False,
                               show_progress=False), show_progress=False)
    ids = list(snap.chunk_ids)
    for q in QUERIES:
        tokens = bm25s.tokenize([normalise(q)], stopwords="en", stemmer=stemmer(), return_ids=False,
                                show_progress=False)[0]
        assert snap.query_tokens(q) == tokens
        known = [t for t in tokens if t in index.vocab_dict]
        ranked = snap.bm25_ranking(q, 50)
        if not known:
            assert ranked == []
            continue
        scores = index.get_scores(known)
        top = np.argsort(-scores)[:50]
        want = [(ids[i], float(scores[i])) for i in top if scores[i] > 0]
        assert ranked == want  # the same chunks, the same float32 sums


def test_lookups_find_what_the_scans_found(retriever: Any) -> None:
    import re

    from rag.answering.names import CorpusNames
    from rag.corpus.text import MAX_NAME, short_label
    from rag.question.patterns import mentions, names_pattern
    from rag.retrieve import metadata

    snap = retriever.snapshot()
    every = list(snap.papers.values())
    display: dict[str, str] = {}
    for p in every:
        name = short_label(p.title, p.label)
        if len(name) <= MAX_NAME:
            display.setdefault(name.lower(), name)
    names = CorpusNames(retriever)
    texts = ["How does DeepSpeed-Ulysses compare with Skrull, HEAT and AdaCM² on GPUs?",
             "skrull vs deepspeed-ulysses vs zorblax", "What is Tutel?", "Nothing named here.",
             "What does AdaCM2 do?"]
    for text in texts:
        assert names.mentioned(text) == mentions(names_pattern(list(display)), text), text
        lowered = text.lower()
        assert names.known.found_in(lowered) == {
            n for n in display if re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", lowered)}
    assert set(names.known) == set(display)
    assert names.as_written("What does AdaCM2 do?") == "What does AdaCM² do?"
    index = metadata.index_for(snap)
    authored = next(p for p in every if len(p.authors) >= 2)
    asked = f"Which papers did {authored.authors[0]} and {authored.authors[1]} write?"
    assert authored.paper_id in set.intersection(*index.authors_in(asked).values())
    if authored.arxiv_id:
        assert [m.paper_id for m in index.match(f"arXiv:{authored.arxiv_id}")][:1] == [authored.paper_id]
    for needles in (["3.76x"], ["(MoE)", "Skrull"], ["no abstract says this"]):
        assert [p.paper_id for p in snap.papers_containing(needles)] == \
            [p.paper_id for p in every if any(n in p.abstract for n in needles)]


def test_probes_are_embedded_once_per_index_version(seeded_settings: Any) -> None:
    from rag.answering import Pipeline

    with Pipeline(seeded_settings) as first:
        owners, vecs = first.chooser.relevance.probes()
    with Pipeline(seeded_settings) as again:  # a new process's: the probes come from disk
        embedder = again.retriever.embedder
        calls = []
        again.retriever._embedder = type("Counting", (), {
            "embed": lambda self, texts, *a, **k: calls.append(texts) or embedder.embed(texts, *a, **k)})()
        owners2, vecs2 = again.chooser.relevance.probes()
        again.retriever._embedder = embedder
    assert owners2 == owners and (vecs2 == vecs).all()
    assert calls == []


@pytest.mark.skipif(sys.platform == "win32", reason="one rag process per check")
def test_a_question_imports_neither_bm25s_nor_scipy(seeded_settings: Any) -> None:
    script = (
        "import sys\n"
        "from rag.cli import main\n"
        "sys.argv = ['rag', 'ask', '--llm', 'none', '--json', 'What speedup does Skrull report over DeepSpeed?']\n"
        "main()\n"
        "import importlib\n"
        "checks = importlib.import_module('overrides.overrides')\n"
        "print('LOADED', *sorted(m for m in ('bm25s', 'scipy', 'chromadb') if m in sys.modules),\n"
        "      checks._overrides.__name__, file=sys.stderr)\n"
    )
    env = {**os.environ, "RAG_HOME": str(seeded_settings.home), "RAG_SEEDS": str(seeded_settings.seeds)}
    for _ in range(2):  # the first may build the index's snapshot (with bm25s)
        proc = subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
    loaded = next(line for line in proc.stderr.splitlines() if line.startswith("LOADED")).split()
    # nor chromadb: the dense half of a small index is its quick file (rag.store.quick);
    # `overrides` checks again once it is imported
    assert loaded[1:] == ["_overrides"]
