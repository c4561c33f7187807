"""Stage one: choose the papers an answer may cite.

Whether the abstracts answer the question at all, which papers a "which papers" list holds
and which papers a fact is drawn from are decided by rag.relevance, from models fitted by
scripts/fit_relevance.py on labelled questions of three corpora and reported on held-out ones;
nothing here compares a score with a hand-picked constant.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rag.answering.listing import first_listing, papers_stating, ranked
from rag.answering.rules import first_found
from rag.corpus.paper import Paper
from rag.corpus.text import short_label
from rag.judge import Judge
from rag.question import Question
from rag.question.asks import (
    asked_acronyms,
    expansion_in,
    spelled_out,
)
from rag.question.patterns import (
    figure_test,
    topic_of,
)
from rag.question.published import (
    PUBLISHED_CUE,
    asks_only_for_published,
    publication_asked,
    without_publication,
)
from rag.relevance import Decision, Relevance
from rag.retrieve import Filters, PaperHit, Retriever
from rag.retrieve import metadata as metadata_match
from rag.schema import Source


@dataclass(frozen=True)
class Selection:
    sources: list[Source]  # numbered 1..n in the order the writer sees them
    list_question: bool
    matched: int  # papers judged relevant
    borderline: bool = False  # chosen only because a model answers (Decision.borderline)
    # The venue or year a list question names ("Which ICML 2030 papers ..."), read as filters
    # that no paper of the index passes: said as such, not as a topic the abstracts lack.
    unmatched: Filters | None = None
    rule: str = ""  # the list rule (rag.answering.listing) that chose the papers, if one did


class SourceChooser:
    def __init__(self, retriever: Retriever, judge: Judge, relevance: Relevance | None = None) -> None:
        self.retriever = retriever
        self.judge = judge
        self.relevance = relevance or Relevance.load(retriever, judge)

    def decide(self, question: str, filters: Filters | None, list_question: bool,
               with_model: bool = False) -> Decision:
        """The relevance decision over the papers retrieval finds for the question (for a list
        question: for its topic, from a pool that grows with the index)."""
        topic, hits = self.candidates(question, filters, list_question)
        return self.relevance.decide(question, hits, list_question=list_question, topic=topic,
                                     with_model=with_model)

    def candidates(self, question: str, filters: Filters | None, list_question: bool
                   ) -> tuple[str, list[PaperHit]]:
        """What retrieval is asked (the question, or a list question's topic) and the papers
        it finds, from a pool that grows with the index for a list."""
        topic = topic_of(question) if list_question else question
        return topic, self.retriever.search(topic, self.relevance.pool_size(list_question), filters)

    def choose(self, asked: Question, k: int, filters: Filters | None,
               with_model: bool = False) -> Selection:
        """The sources to answer from ([] to abstain); `with_model`: a model writes the
        answer, so a borderline question gets its sources too (Relevance.decide)."""
        question, list_q = asked.standalone, asked.list_question
        if list_q and not (filters and filters.active()):
            question, filters = self._appeared(question, filters)
            if filters and filters.active() and not self.retriever.filtered(
                    self.retriever.snapshot(), filters)[0]:
                return Selection([], list_q, 0, unmatched=filters)
        decision = self.decide(question, filters, list_q, with_model)
        rule = first_listing(question, list_q, decision, filters, lambda: self.retriever.snapshot())
        if rule:
            decision = rule[1]
        if not list_q and asked.expansion:
            decision = self._spelled_out(question, decision)
        elif not list_q and (stated := self._figure_stated(question, decision, filters)):
            decision = stated
        elif not decision.answerable and not list_q:
            decision = self._plainly_asked(asked, decision)
        # A list cites every member (more than k when more papers match); a fact the k best.
        chosen = decision.members if list_q else decision.members[:k]
        named = set(decision.named)
        if not list_q:
            chosen = _as_named(question, chosen, named)
            self.prime([h.paper for h in chosen])
        # A paper the question names (by name or by its record's fields): the writers answer
        # about that paper first.
        sources = [Source(i, h.paper, h.relevance, h.paper.paper_id in named)
                   for i, h in enumerate(chosen, 1)]
        return Selection(sources, list_q, len(decision.members), decision.borderline,
                         rule=rule[0].name if rule else "")

    def _appeared(self, question: str, filters: Filters | None) -> tuple[str, Filters | None]:
        """"Which MLSys 2023 papers are about GNNs?": a list that says where or when its papers
        appeared is asked as "Which papers are about GNNs?" with --venue mlsys --year 2023 (it
        listed an arXiv paper, by likeness to a topic that held "MLSys 2023"). The question as
        it was when it says neither."""
        if not PUBLISHED_CUE.search(question) and not re.search(r"[A-Z]\w*[A-Z]", question):
            return question, filters  # no year, no name in capitals: not this kind
        index = metadata_match.index_for(self.retriever.snapshot())
        venues, years = publication_asked(question, index.venues)
        if (not venues and not years or len(venues) > 1
                or asks_only_for_published(question, *index.publication_in(question))):
            # nothing said; two venue words, which one filter cannot hold; or nothing else
            # asked (the list rule "published" answers that)
            return question, filters
        rest = without_publication(question, venues)
        inferred = Filters(venue=min(venues, default=None),
                           year_from=min(years, default=None), year_to=max(years, default=None))
        return rest, inferred

    def _figure_stated(self, question: str, decision: Decision, filters: Filters | None) -> Decision | None:
        """"What is the 2.5x speedup?" is answered from the papers whose abstract states that
        figure (one paper's "2.5× speedup"; the models answered with another paper's 40X), of those the
        question names if it names any. None when the question gives no figure or no such paper
        states it: left to the models ("Does GPipe reach 5x?" is answered by what it reaches)."""
        states = figure_test(question)
        if states is None:
            return None
        snap = self.retriever.snapshot()
        named = snap.papers.many(decision.named)
        found = papers_stating(states, [named[i] for i in decision.named if i in named]
                                or snap.papers_containing(states.needles), filters)
        if not found:
            return None
        hits = ranked(found, decision)
        return Decision(True, decision.p_answerable, hits, decision.scores,
                        [h.paper.paper_id for h in hits])

    def _plainly_asked(self, asked: Question, decision: Decision) -> Decision:
        """A question about a named paper whose answer its abstract (or record) holds in plain
        sight, as a rule of rag.answering.rules finds it, whatever the answer model makes of it
        (it scores them low: they are few in its training data, and naming a paper counts
        against answering there). The rule needs its evidence found in the text, not a score,
        so a question the abstract does not answer stays declined."""
        papers = self.retriever.snapshot().papers
        named = [papers[i] for i in decision.named if i in papers]
        found = first_found(asked, [(p, short_label(p.title, p.label)) for p in named])
        if found is None:
            return decision
        return Decision(True, decision.p_answerable, [PaperHit(p, 1.0, 1.0) for p in found.papers],
                        decision.scores, [p.paper_id for p in found.papers])

    def _spelled_out(self, question: str, decision: Decision) -> Decision:
        """"What does Horovod stand for?" about a named paper is answered only by the sentence
        of its abstract that spells the name (or an acronym the question asks about) out;
        without one the abstracts do not answer it, whatever else they say of the paper (the
        models answered with Horovod's speed-ups). "What does LoRA stand for?", which the
        models decline, is answered the same way."""
        papers = self.retriever.snapshot().papers
        named = [papers[i] for i in decision.named if i in papers]
        if not named:
            return self._acronym_spelled_out(question, decision)
        subject = [p for p in named if spelled_out(question, short_label(p.title, p.label), p.abstract)][:1]
        if subject:
            return Decision(True, decision.p_answerable, [PaperHit(subject[0], 1.0, 1.0)],
                            decision.scores, [subject[0].paper_id])
        return Decision(False, decision.p_answerable, [], decision.scores, decision.named)

    def _acronym_spelled_out(self, question: str, decision: Decision) -> Decision:
        """"What does MPT stand for?" names no paper: the paper whose abstract spells the
        acronym out ("mixed-precision training (MPT) workloads") answers it, the best
        scored where several do (the models answered from MLPerf's other sentences that use
        MPT, and declined "What does ACAP stand for?"). Declined when none does ("What does
        GPU stand for?" was answered with a sentence that uses GPU); left to the models when the
        question asks of no acronym ("What does federated learning stand for?")."""
        acronyms = asked_acronyms(question)
        if not acronyms:
            return decision
        found = [p for p in self.retriever.snapshot().papers_containing(acronyms)
                 if any(expansion_in(a, p.abstract) for a in acronyms)]
        if not found:
            return Decision(False, decision.p_answerable, [], decision.scores, decision.named)
        best = max(found, key=lambda p: decision.scores.get(p.paper_id, 0.0))
        return Decision(True, decision.p_answerable, [PaperHit(best, 1.0, 1.0)], decision.scores,
                        [best.paper_id])

    def prime(self, papers: list[Paper]) -> None:
        """Load the stored sentence vectors of these papers into the judge's cache."""
        self.relevance.prime(papers)

    def list_members(self, asked: Question, filters: Filters | None) -> list[PaperHit]:
        """Every paper on the question's topic (not just the top k), best first; [] when the
        abstracts do not cover it."""
        return self.decide(asked.standalone, filters, True).members


def _as_named(question: str, chosen: list[PaperHit], named: set[str]) -> list[PaperHit]:
    """The papers a fact question names first, in the order it names them: "How much faster
    does vLLM train MoEs compared with Horovod?" asks about vLLM, whichever of the
    two retrieval ranks higher (a model was given Horovod as source 1)."""
    def at(hit: PaperHit) -> int:
        p = hit.paper
        found = [i for name in {short_label(p.title, p.label), p.label}
                 if (i := question.lower().find(name.lower())) >= 0]
        return min(found, default=len(question))

    if sum(h.paper.paper_id in named for h in chosen) < 2:
        return chosen
    return sorted(chosen, key=lambda h: (h.paper.paper_id not in named, at(h) if h.paper.paper_id in named else 0))

