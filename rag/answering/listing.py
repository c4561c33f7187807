"""The list rules: a "which papers" question answered by the papers whose records or texts say
what it asks, found in the text and not by a score, whatever the relevance models make of it.
One table (LIST_RULES): each row says when it applies, which papers it lists, and which
sentence each paper's line quotes; the source chooser and the offline writer both read it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from rag.corpus.paper import Paper
from rag.corpus.text import short_label
from rag.question.patterns import (
    Needled,
    asks_for_authors,
    asks_only_for_authors_papers,
    defined_term,
    definition_marks,
    figure_test,
    name_test,
    names_related,
    term_words,
    topic_of,
)
from rag.question.published import PUBLISHED_CUE, asks_only_for_published
from rag.relevance import Decision
from rag.retrieve import Filters, PaperHit
from rag.retrieve import metadata as metadata_match
from rag.retrieve.snapshot import Snapshot

# The index's snapshot, taken only by a rule that applies (most questions need no record read)
Shot = Callable[[], Snapshot]


def authored(question: str, decision: Decision, filters: Filters | None, snapshot: Shot) -> Decision | None:
    """"Which papers did Bingsheng He co-author?" asks for nothing but an author's papers:
    every paper whose record lists the author (within the filters) is the answer, whatever
    the relevance models make of the question. None when it asks anything else."""
    if not asks_for_authors(question):
        return None  # not about anyone's papers: no need to look names up
    snap = snapshot()
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


def published(question: str, decision: Decision, filters: Filters | None, snapshot: Shot) -> Decision | None:
    """"Which papers were published at AAAI 2023?", "Which papers are from 2022?" ask for
    nothing but the papers a venue or a year holds: the papers whose records say so (venue,
    journal reference, a venue note, year; within the filters) are the answer, not papers
    whose abstracts mention the year ("As of Oct. 2022, ..."). Declined when none does. None
    when the question asks anything else."""
    if not PUBLISHED_CUE.search(question):
        return None  # no year, nothing of where or when: not this kind (and no record read)
    snap = snapshot()
    index = metadata_match.index_for(snap)
    words, years = index.publication_in(question)
    if not asks_only_for_published(question, words, years):
        return None
    found = [snap.papers[i] for i in sorted(index.published(words, years))
             if i in snap.papers and (filters is None or filters.accepts(snap.papers[i]))]
    found.sort(key=lambda p: -decision.scores.get(p.paper_id, 0.0))
    return Decision(bool(found), decision.p_answerable, [PaperHit(p, 1.0, 1.0) for p in found],
                    decision.scores, [p.paper_id for p in found])


def stating(question: str, decision: Decision, filters: Filters | None, snapshot: Shot) -> Decision | None:
    """"Which papers report a 2.5x speedup?": a list whose topic gives a figure holds the
    papers whose abstract states that figure (the models listed six papers by likeness to
    "speedup", five of which state no 2.5x); declined when none does. None when the topic
    gives no figure."""
    states = figure_test(topic_of(question))
    if states is None:
        return None
    found = papers_stating(states, snapshot().papers_containing(states.needles), filters)
    return Decision(bool(found), decision.p_answerable, ranked(found, decision), decision.scores,
                    decision.named)


def mentioning(question: str, decision: Decision, filters: Filters | None, snapshot: Shot) -> Decision | None:
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
        pool = snapshot().papers.many(decision.scores)
        term = defined_term(topic, [pool[i].abstract for i in decision.scores if i in pool])
    names = names or term
    if not names:
        return None
    own = {n.lower() for n in names}
    snap = snapshot()
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
    return Decision(True, decision.p_answerable, ranked(found, decision), decision.scores,
                    decision.named)


def ranked(found: list[Paper], decision: Decision) -> list[PaperHit]:
    """Papers found in their text, as list members: best scored first, each with the hit the
    models saw (a paper past the retrieved pool has no similarity measured: 0)."""
    hits = {h.paper.paper_id: h for h in decision.members}
    return [hits.get(p.paper_id) or PaperHit(p, 0.0, 0.0)
            for p in sorted(found, key=lambda p: -decision.scores.get(p.paper_id, 0.0))]


def papers_stating(states: Callable[[str], bool], papers: Iterable[Paper], filters: Filters | None) -> list[Paper]:
    """The papers (within the filters) whose abstract states a figure (`figure_test`)."""
    return [p for p in papers if states(p.abstract) and (filters is None or filters.accepts(p))]




def _names_quoted(question: str, snapshot: Shot) -> Needled | None:
    """A line of a list of papers that name a thing quotes where its paper names it."""
    related = names_related(topic_of(question))
    if not related:
        return None
    defining = snapshot().papers_containing(definition_marks(related))
    return name_test(related, [p.abstract for p in defining])


@dataclass(frozen=True)
class ListRule:
    name: str
    # the papers it lists (a Decision), or None when it does not apply to the question (as the
    # chooser reads it: a venue and year it names are filters by then)
    lists: Callable[[str, Decision, Filters | None, Shot], Decision | None]
    # the sentence each listed paper's line quotes beside what the paper contributes, if any
    quotes: Callable[[str, Shot], Needled | None]
    lists_only: bool  # a list question's rule; else it answers any question it applies to
    does: str  # for the docs


LIST_RULES: tuple[ListRule, ...] = (
    ListRule("published", published, lambda q, s: None, True,
             "asks for nothing but a venue's or a year's papers: those whose records say so"),
    ListRule("stating", stating, lambda q, s: figure_test(topic_of(q)), True,
             "its topic gives a figure: the papers whose abstracts state it, quoting where"),
    ListRule("mentioning", mentioning, _names_quoted, True,
             "relates papers to a named thing or a defined term and asks nothing else: the papers "
             "that name it, quoting where"),
    ListRule("authored", authored, lambda q, s: None, False,
             "asks for nothing but an author's papers: those whose records list the author"),
)
RULE_NAMED = {r.name: r for r in LIST_RULES}


def first_listing(question: str, list_question: bool, decision: Decision, filters: Filters | None,
                  snapshot: Shot) -> tuple[ListRule, Decision] | None:
    """The first list rule that applies to the question, with the papers it lists."""
    for rule in LIST_RULES:
        if (list_question or not rule.lists_only) and (
                listed := rule.lists(question, decision, filters, snapshot)) is not None:
            return rule, listed
    return None
