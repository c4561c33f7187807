"""Stage one: choose the papers an answer may cite.

Whether the abstracts answer the question at all, which papers a "which papers" list holds
and which papers a fact is drawn from are decided by rag.relevance, from models fitted by
scripts/fit_relevance.py on labelled questions of three corpora and reported on held-out ones;
nothing here compares a score with a hand-picked constant.
"""

from __future__ import annotations

from dataclasses import dataclass

from rag.answering.questions import asks_for_summary, is_list_question, topic_of
from rag.corpus.paper import Paper
from rag.corpus.text import short_label
from rag.judge import Judge
from rag.relevance import Decision, Relevance
from rag.retrieve import Filters, PaperHit, Retriever
from rag.schema import Source


@dataclass(frozen=True)
class Selection:
    sources: list[Source]  # numbered 1..n in the order the writer sees them
    list_question: bool
    matched: int  # papers judged relevant
    borderline: bool = False  # chosen only because a model answers (Decision.borderline)


class SourceChooser:
    def __init__(self, retriever: Retriever, judge: Judge, relevance: Relevance | None = None) -> None:
        self.retriever = retriever
        self.judge = judge
        self.relevance = relevance or Relevance.load(retriever, judge)

    def decide(self, question: str, filters: Filters | None, list_question: bool,
               with_model: bool = False) -> Decision:
        """The relevance decision over the papers retrieval finds for the question (for a list
        question: for its topic, from a pool that grows with the index)."""
        topic = topic_of(question) if list_question else question
        hits = self.retriever.search(topic, self.relevance.pool_size(list_question), filters)
        return self.relevance.decide(question, hits, list_question=list_question, topic=topic,
                                     with_model=with_model)

    def choose(self, question: str, k: int, filters: Filters | None,
               with_model: bool = False) -> Selection:
        """The sources to answer from ([] to abstain); `with_model`: a model writes the
        answer, so a borderline question gets its sources too (Relevance.decide)."""
        list_q = is_list_question(question)
        decision = self.decide(question, filters, list_q, with_model)
        if not list_q and not decision.answerable:
            decision = self._summary_of_named(question, decision)
        # A list cites every member (more than k when more papers match); a fact the k best.
        chosen = decision.members if list_q else decision.members[:k]
        if not list_q:
            self.prime([h.paper for h in chosen])
        named = set(decision.named)
        # Relevance 1 marks a paper the question names (by name or by its record's fields):
        # the writers answer about that paper first.
        sources = [Source(i, h.paper, 1.0 if h.paper.paper_id in named else h.relevance)
                   for i, h in enumerate(chosen, 1)]
        return Selection(sources, list_q, len(decision.members), decision.borderline)

    def _summary_of_named(self, question: str, decision: Decision) -> Decision:
        """"What is Skrull?" names a paper and asks for what its abstract is: answerable
        whatever the answer model makes of so short a question (it scores them low: they
        are few in its training data)."""
        papers = self.retriever.snapshot().papers
        named = [papers[i] for i in decision.named if i in papers]
        names = [short_label(p.title, p.label) for p in named]
        if not asks_for_summary(question, names):
            return decision
        members = [PaperHit(p, 1.0, 1.0) for p in named[:1]]
        return Decision(True, decision.p_answerable, members, decision.scores, decision.named)

    def prime(self, papers: list[Paper]) -> None:
        """Load the stored sentence vectors of these papers into the judge's cache."""
        self.relevance.prime(papers)

    def list_members(self, question: str, filters: Filters | None) -> list[PaperHit]:
        """Every paper on the question's topic (not just the top k), best first; [] when the
        abstracts do not cover it."""
        return self.decide(question, filters, True).members
