"""Stage one: choose the papers an answer may cite."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from rag.answering.questions import ARXIV_ID, BY_AUTHOR, QUESTION_STOP, is_list_question, topic_of
from rag.corpus.paper import Paper
from rag.corpus.text import short_label
from rag.judge import Judge, content_words
from rag.retrieve import Filters, PaperHit, Retriever
from rag.schema import Source

LIST_MAX_SOURCES = 30  # a "which papers" answer may cite more than k papers, up to this
LIST_POOL = 60  # papers retrieved for a list question before membership is decided
FACT_POOL = 50
# A paper is listed in a "which papers" answer when its best abstract sentence scores
# (cosine to the topic + LIST_OVERLAP x topic words found) at least max(LIST_MIN, LIST_FRAC x
# the best paper's score). Chosen on the 19 list questions of evals/questions.yaml, where
# chunk-level cosine alone gave precision 0.60 at recall 0.74 (see evals/README.md).
LIST_MIN, LIST_FRAC, LIST_OVERLAP = 0.45, 0.80, 0.2


@dataclass(frozen=True)
class Selection:
    sources: list[Source]  # numbered 1..n in the order the writer sees them
    list_question: bool
    matched: int  # papers judged relevant


def named_in(name: str, text: str) -> bool:
    return len(name) >= 3 and re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text) is not None


class SourceChooser:
    def __init__(self, retriever: Retriever, judge: Judge, min_relevance: float) -> None:
        self.retriever = retriever
        self.judge = judge
        self.min_relevance = min_relevance

    def choose(self, question: str, k: int, filters: Filters | None) -> Selection:
        list_q = is_list_question(question)
        pool = self.retriever.search(question, max(k, FACT_POOL), filters)
        first: dict[str, PaperHit] = {}
        for h in self.lookup(question, filters) + self.relevant(question, pool):
            first.setdefault(h.paper.paper_id, h)
        relevant = list(first.values())
        if list_q:
            chosen = self.list_members(question, filters)[:LIST_MAX_SOURCES] if relevant else []
        else:
            chosen = relevant[:k]
            self.prime([h.paper for h in chosen])
        sources = [Source(i, h.paper, h.relevance) for i, h in enumerate(chosen, 1)]
        return Selection(sources, list_q, len(sources) if list_q else len(relevant))

    def lookup(self, question: str, filters: Filters | None) -> list[PaperHit]:
        """Papers the question points at by arXiv id or by an author's full name."""
        papers = self.retriever.snapshot().papers.values()
        q = question.lower()
        ids = set(ARXIV_ID.findall(question))
        found = [p for p in papers if p.arxiv_id in ids]
        if not found and BY_AUTHOR.search(question):
            found = [p for p in papers if any(len(a) > 5 and a.lower() in q for a in p.authors)]
        if filters and filters.active():
            found = [p for p in found if filters.accepts(p)]
        return [PaperHit(p, 1.0, 1.0) for p in found[:LIST_MAX_SOURCES]]

    def relevant(self, question: str, hits: list[PaperHit]) -> list[PaperHit]:
        """Hits that are relevant enough, plus any paper the question names (relevance 1)."""
        q = question.lower()
        out = []
        for h in hits:
            if named_in(short_label(h.paper.title, h.paper.label).lower(), q):
                h = PaperHit(h.paper, h.score, max(h.relevance, 1.0), h.matched, h.rank)
            if h.relevance >= self.min_relevance:
                out.append(h)
        return sorted(out, key=lambda h: (-(h.relevance >= 1.0), -h.score))

    def prime(self, papers: list[Paper]) -> None:
        """Load the stored sentence vectors of these papers into the judge's cache."""
        stored = self.retriever.store.sentences([p.paper_id for p in papers])
        for p in papers:
            if p.paper_id in stored:
                self.judge.prime(p.abstract, *stored[p.paper_id])

    def list_members(self, question: str, filters: Filters | None) -> list[PaperHit]:
        """Every paper whose abstract has a sentence on the question's topic (not just top k)."""
        topic = topic_of(question)
        pool = self.retriever.search(topic, LIST_POOL, filters)
        self.prime([h.paper for h in pool])
        qvec = self.retriever.embed_query(topic)
        words = content_words(topic) - QUESTION_STOP
        scored = []
        for h in pool:
            _, vecs = self.judge.sentences(h.paper.abstract)
            text_words = content_words(f"{h.paper.title or ''} {h.paper.abstract}")
            overlap = len(words & text_words) / len(words) if words else 0.0
            scored.append((float(np.max(vecs @ qvec)) + LIST_OVERLAP * overlap, h))
        if not scored:
            return []
        cut = max(LIST_MIN, LIST_FRAC * max(sc for sc, _ in scored))
        return [h for sc, h in sorted(scored, key=lambda t: -t[0]) if sc >= cut]
