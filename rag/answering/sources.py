"""Stage one: choose the papers an answer may cite.

Whether the abstracts answer the question at all, which papers a "which papers" list holds
and which papers a fact is drawn from are decided by rag.relevance, from models fitted by
scripts/fit_relevance.py on labelled questions of three corpora and reported on held-out ones;
nothing here compares a score with a hand-picked constant.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from rag.answering.asked import (
    asked_acronyms,
    count_in,
    evaluated_in,
    expansion_in,
    factor_in,
    link_in,
    spelled_out,
)
from rag.answering.questions import (
    COMPARES,
    EXPANSION,
    PUBLISHED_CUE,
    WHO_WROTE,
    asks_for_authors,
    asks_for_summary,
    asks_only_for_authors_papers,
    asks_only_for_published,
    compared_in,
    defined_term,
    definition_marks,
    figure_test,
    is_list_question,
    name_test,
    names_related,
    publication_asked,
    term_words,
    topic_of,
)
from rag.corpus.paper import Paper
from rag.corpus.text import short_label
from rag.judge import Judge
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

    def choose(self, question: str, k: int, filters: Filters | None,
               with_model: bool = False) -> Selection:
        """The sources to answer from ([] to abstain); `with_model`: a model writes the
        answer, so a borderline question gets its sources too (Relevance.decide)."""
        list_q = is_list_question(question)
        if list_q and not (filters and filters.active()):
            question, filters = self._appeared(question, filters)
            if filters and filters.active() and not self.retriever.filtered(
                    self.retriever.snapshot(), filters)[0]:
                return Selection([], list_q, 0, unmatched=filters)
        decision = self.decide(question, filters, list_q, with_model)
        decision = self._authored(question, decision, filters) or decision
        if list_q:
            decision = (self._published(question, decision, filters)
                        or self._stating(question, decision, filters)
                        or self._mentioning(question, decision, filters) or decision)
        if not list_q and EXPANSION.search(question):
            decision = self._spelled_out(question, decision)
        elif not list_q and (stated := self._figure_stated(question, decision, filters)):
            decision = stated
        elif not decision.answerable and not list_q:
            decision = self._plainly_asked(question, decision)
        # A list cites every member (more than k when more papers match); a fact the k best.
        chosen = decision.members if list_q else decision.members[:k]
        named = set(decision.named)
        if not list_q:
            chosen = _as_named(question, chosen, named)
            self.prime([h.paper for h in chosen])
        # Relevance 1 marks a paper the question names (by name or by its record's fields):
        # the writers answer about that paper first.
        sources = [Source(i, h.paper, 1.0 if h.paper.paper_id in named else h.relevance)
                   for i, h in enumerate(chosen, 1)]
        return Selection(sources, list_q, len(decision.members), decision.borderline)

    def _authored(self, question: str, decision: Decision, filters: Filters | None) -> Decision | None:
        """"Which papers did Bingsheng He co-author?" asks for nothing but an author's papers:
        every paper whose record lists the author (within the filters) is the answer, whatever
        the relevance models make of the question. None when it asks anything else."""
        if not asks_for_authors(question):
            return None  # not about anyone's papers: no need to look names up
        snap = self.retriever.snapshot()
        authors = metadata_match.index_for(snap).authors_in(question)
        if not asks_only_for_authors_papers(question, list(authors)):
            return None
        # "papers by Trevor Gale and Matei Zaharia": the ones they wrote together, if any
        ids = sorted(set.intersection(*authors.values()) or set().union(*authors.values()))
        found = [snap.papers[i] for i in ids
                 if i in snap.papers and (filters is None or filters.accepts(snap.papers[i]))]
        if not found:
            return None
        return Decision(True, decision.p_answerable, [PaperHit(p, 1.0, 1.0) for p in found],
                        decision.scores, [p.paper_id for p in found])

    def _published(self, question: str, decision: Decision, filters: Filters | None) -> Decision | None:
        """"Which papers were published at AAAI 2023?", "Which papers are from 2022?" ask for
        nothing but the papers a venue or a year holds: the papers whose records say so (venue,
        journal reference, a venue note, year; within the filters) are the answer, not papers
        whose abstracts mention the year ("As of Oct. 2022, ..."). Declined when none does. None
        when the question asks anything else."""
        if not PUBLISHED_CUE.search(question):
            return None  # no year, nothing of where or when: not this kind (and no record read)
        snap = self.retriever.snapshot()
        index = metadata_match.index_for(snap)
        words, years = index.publication_in(question)
        if not asks_only_for_published(question, words, years):
            return None
        found = [snap.papers[i] for i in sorted(index.published(words, years))
                 if i in snap.papers and (filters is None or filters.accepts(snap.papers[i]))]
        found.sort(key=lambda p: -decision.scores.get(p.paper_id, 0.0))
        return Decision(bool(found), decision.p_answerable, [PaperHit(p, 1.0, 1.0) for p in found],
                        decision.scores, [p.paper_id for p in found])

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
            # asked (_published answers that)
            return question, filters
        asked = "|".join(sorted(map(re.escape, venues)))
        place = rf"(?:{asked})(?:'\d{{2}}\b)?(?:\s+(?:19|20)\d{{2}})?|" if asked else ""
        said = re.compile(r"(?:\b(?:were\s+|was\s+)?(?:published|appeared|presented|accepted)\s+)?"
                          r"(?:\b(?:at|in|from|since|during)\s+)?(?:the\s+)?(?:year\s+)?"
                          rf"(?<![\w-])(?:{place}(?:19|20)\d{{2}})(?![\w.-])", re.I)
        rest = " ".join(said.sub(" ", question).split())
        inferred = Filters(venue=min(venues, default=None),
                           year_from=min(years, default=None), year_to=max(years, default=None))
        return rest, inferred

    def _stating(self, question: str, decision: Decision, filters: Filters | None) -> Decision | None:
        """"Which papers report a 2.5x speedup?": a list whose topic gives a figure holds the
        papers whose abstract states that figure (the models listed six papers by likeness to
        "speedup", five of which state no 2.5x); declined when none does. None when the topic
        gives no figure."""
        states = figure_test(topic_of(question))
        if states is None:
            return None
        found = _papers_stating(states, self.retriever.snapshot().papers_containing(states.needles), filters)
        return Decision(bool(found), decision.p_answerable, _ranked(found, decision), decision.scores,
                        decision.named)

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
        found = _papers_stating(states, [named[i] for i in decision.named if i in named]
                                or snap.papers_containing(states.needles), filters)
        if not found:
            return None
        ranked = _ranked(found, decision)
        return Decision(True, decision.p_answerable, ranked, decision.scores,
                        [h.paper.paper_id for h in ranked])

    def _mentioning(self, question: str, decision: Decision, filters: Filters | None) -> Decision | None:
        """"Which papers compare against GPT-NeoX?" relates papers to a named thing and asks
        nothing else of them: the papers whose title or abstract names it, as a search for the
        exact name finds them (the thing's own paper aside), are the answer, instead of what
        the models chose by likeness to the topic (for "compare against TensorFlow", six
        papers that never name it beside the one that does). None when the topic asks
        anything else or no paper names it."""
        topic = topic_of(question)
        names = names_related(topic)
        # A topic that is a term the abstracts define ("mixture of experts" for "MoE"): the
        # papers that write the term or its acronym join those the models found alike. The
        # definition is looked for in the papers retrieved for the topic, where it is written
        # if anywhere (a scan of every abstract would cost 0.5 s at 100,000, on every list).
        term: list[str] = []
        if not names and term_words(topic):
            pool = self.retriever.snapshot().papers.many(decision.scores)
            term = defined_term(topic, [pool[i].abstract for i in decision.scores if i in pool])
        names = names or term
        if not names:
            return None
        own = {n.lower() for n in names}
        snap = self.retriever.snapshot()
        # A scan of the records, not BM25: its tokens are lower-cased and split at hyphens, so
        # "FL" would match "fl" in any text and "X-LM" any "LM". Of the records that
        # hold what a naming text must (Snapshot.papers_containing): every record was decoded
        # and tested, a second at 100,000 abstracts.
        names_it = name_test(names, [p.abstract for p in snap.papers_containing(definition_marks(names))])
        found = [p for p in snap.papers_containing(names_it.needles, titles=True)
                 if (names_it(p.abstract) or names_it(p.title or ""))
                 and short_label(p.title, p.label).lower() not in own
                 and (filters is None or filters.accepts(p))]
        if term and decision.answerable:
            have = {p.paper_id for p in found}
            found += [h.paper for h in decision.members if h.paper.paper_id not in have]
        if not found:
            return None
        return Decision(True, decision.p_answerable, _ranked(found, decision), decision.scores,
                        decision.named)

    def _plainly_asked(self, question: str, decision: Decision) -> Decision:
        """Questions about a named paper whose answer its abstract holds in plain sight,
        whatever the answer model makes of them (it scores them low: they are few in its
        training data, and naming a paper counts against answering there). Each needs its
        evidence found in the text, not a score, so a question the abstract does not answer
        stays declined:

        - "What is GPipe?": names a paper and asks nothing in particular of it;
        - "How does vLLM compare with Horovod?": the named paper's abstract names the other;
        - "How many models does HELM measure?": the named paper's abstract gives a count of
          them ("on 20+ models");
        - "What is PipeDream evaluated on?": the named paper's abstract says what its evaluation was
          on ("Evaluation on five widely used datasets ...");
        - "Is ByteScheduler open source?": the named paper's abstract gives where its code lives;
        - "Who wrote TinyBERT?": the named paper's record lists its authors.
        """
        papers = self.retriever.snapshot().papers
        named = [papers[i] for i in decision.named if i in papers]
        names = [short_label(p.title, p.label) for p in named]
        subject = None
        if WHO_WROTE.search(question):  # the record of each named paper that lists its authors
            subject = [p for p in named if p.authors]
        elif asks_for_summary(question, names):
            subject = named[:1]
        elif COMPARES.search(question):
            subject = [p for p in named if compared_in(question, p)][:1]
            subject += [p for p in named if subject and p is not subject[0]][:1]
        else:  # "How many ...?", "What speedup ...?", "What is it evaluated on?" (none finds
            # anything in another question)
            subject = [p for p, n in zip(named, names, strict=True)
                       if count_in(question, p.abstract) or factor_in(question, n, p.abstract)
                       or evaluated_in(question, n, p.abstract) or link_in(question, p.abstract)][:1]
        if not subject:
            return decision
        members = [PaperHit(p, 1.0, 1.0) for p in subject]
        return Decision(True, decision.p_answerable, members, decision.scores,
                        [p.paper_id for p in subject])

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

    def list_members(self, question: str, filters: Filters | None) -> list[PaperHit]:
        """Every paper on the question's topic (not just the top k), best first; [] when the
        abstracts do not cover it."""
        return self.decide(question, filters, True).members


def _ranked(found: list[Paper], decision: Decision) -> list[PaperHit]:
    """Papers found in their text, as list members: best scored first, each with the hit the
    models saw (a paper past the retrieved pool has no similarity measured: 0)."""
    hits = {h.paper.paper_id: h for h in decision.members}
    return [hits.get(p.paper_id) or PaperHit(p, 0.0, 0.0)
            for p in sorted(found, key=lambda p: -decision.scores.get(p.paper_id, 0.0))]


def _papers_stating(states: Callable[[str], bool], papers: Iterable[Paper], filters: Filters | None) -> list[Paper]:
    """The papers (within the filters) whose abstract states a figure (`figure_test`)."""
    return [p for p in papers if states(p.abstract) and (filters is None or filters.accepts(p))]


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

