"""The answering rules for a question about a paper it names: one table, each row with its name,
when it applies (a condition on the `Question`), what it finds in the named paper's abstract,
and its precision on the held-out halves of evals/blind/ (`scripts/rule_precision.py` measures
it; docs/asking/decisions.md gives the table).

Both stages read the table. The source chooser answers from a named paper whose abstract holds
what a rule finds, whatever the relevance models make of the question (they score such
questions low: naming a paper counts against answering in their training data). The offline
writer quotes the sentences the same rule finds. A rule finds its evidence in the text, never
by a score, so a question the abstract does not answer stays declined.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rag.corpus.paper import Paper
from rag.corpus.text import split_sentences
from rag.question import Question
from rag.question.asks import (
    asked_words_in,
    count_in,
    evaluated_in,
    factor_in,
    link_in,
    spelled_out,
)
from rag.question.patterns import (
    WHO_WROTE,
    asks_for_summary,
    compared_in,
    figure_test,
    mentions_name,
)
from rag.relevance.features import CONTRIBUTION, URL, has_number

# (question, the named paper, the name it goes by) -> the sentences of its abstract that answer
Finder = Callable[[Question, Paper, str], list[str]]


def _one(found: str | None) -> list[str]:
    return [found] if found else []


def _compared(asked: Question, paper: Paper, name: str) -> list[str]:
    others = compared_in(asked.standalone, paper)
    return [s for s in split_sentences(paper.abstract)
            if others and any(mentions_name(o, s, compound=False) for o in others)]


def _stating(asked: Question, paper: Paper, name: str) -> list[str]:
    states = figure_test(asked.standalone)
    return [s for s in split_sentences(paper.abstract) if states and states(s)]


def summary_sentences(paper: Paper, name: str) -> list[str]:
    """What a paper proposes and what it reports, in its words: the sentences stating what it
    proposes first, then others naming it (not one that gives where its code or data lives),
    and its last sentence with a number; its first two when none does."""
    sents = split_sentences(paper.abstract)
    states = [s for s in sents if CONTRIBUTION.search(s)]
    naming = [s for s in sents if name.lower() in s.lower() and s not in states and not URL.search(s)]
    pick = (states + naming)[:2]
    results = [s for s in sents if has_number(s) and s not in pick][-1:]  # a URL's digits are no result
    return [s for s in sents if s in pick + results] or sents[:2]


@dataclass(frozen=True)
class Rule:
    name: str
    applies: Callable[[Question], bool]
    finds: Finder
    # "record": the answer is the record's field (rag.answering.metadata writes it); "alone":
    # its sentences are the answer; "joined": they join the sentence model's best
    answer: str
    # whose paper answers: the first named paper it finds in ("one"), every one ("every"), or
    # the first and the next named ("pair": a paper and the one it is compared with)
    takes: str
    does: str  # what it answers with, for the docs


RULES: tuple[Rule, ...] = (
    Rule("authors", lambda q: bool(WHO_WROTE.search(q.standalone)),
         lambda q, p, n: list(p.authors[:1]), "record", "every",
         "asks who wrote it: the named papers' records that list their authors"),
    Rule("summary", lambda q: asks_for_summary(q.standalone, list(q.labels)),
         lambda q, p, n: summary_sentences(p, n), "alone", "one",
         "names a paper and asks nothing in particular of it: what the paper does"),
    Rule("expansion", lambda q: q.expansion,
         lambda q, p, n: _one(spelled_out(q.standalone, n, p.abstract)), "alone", "one",
         "what a name stands for: the sentence that spells it out"),
    Rule("compared", lambda q: q.compares, _compared, "alone", "pair",
         "sets the paper against other names its abstract names: where it names them"),
    Rule("figure", lambda q: q.figure is not None, _stating, "alone", "every",
         "gives a figure: the sentences that state it"),
    Rule("link", lambda q: True, lambda q, p, n: _one(link_in(q.standalone, p.abstract)),
         "alone", "one", "asks where its code or data lives: the sentence with the address"),
    Rule("count", lambda q: "how many" in q.standalone.lower(),
         lambda q, p, n: _one(count_in(q.standalone, p.abstract)), "joined", "one",
         "how many of a thing: the sentence that counts that thing"),
    Rule("factor", lambda q: True, lambda q, p, n: _one(factor_in(q.standalone, n, p.abstract)),
         "joined", "one", "a speed-up factor: the sentence with a factor and every other word asked"),
    Rule("evaluated", lambda q: True,
         lambda q, p, n: _one(evaluated_in(q.standalone, n, p.abstract)), "joined", "one",
         "what it was evaluated on: the sentence that names the evaluation and its data"),
    Rule("asked words", lambda q: q.kind == "fact",
         lambda q, p, n: _one(asked_words_in(q.standalone, n, p.abstract)), "joined", "one",
         "any other question: the one sentence holding every word it asks with"),
)


@dataclass(frozen=True)
class Found:
    rule: Rule
    papers: list[Paper]  # whose abstracts (or records) answer, as the rule takes them
    answers: list[tuple[Paper, list[str]]]  # of those, each with the sentences found in it

    @property
    def sentences(self) -> list[str]:
        return [s for _, sents in self.answers for s in sents]


def first_found(asked: Question, named: list[tuple[Paper, str]],
                answers: tuple[str, ...] = ("record", "alone", "joined")) -> Found | None:
    """The first rule (of those that answer as `answers` says) that applies to the question and
    finds its answer in one of the named papers (each with the name it goes by); None if none."""
    for rule in RULES:
        if rule.answer not in answers or not rule.applies(asked):
            continue
        found = [(paper, sents) for paper, name in named if (sents := rule.finds(asked, paper, name))]
        if not found:
            continue
        taken = found if rule.takes == "every" else found[:1]
        papers = [p for p, _ in taken]
        if rule.takes == "pair":
            papers += [p for p, _ in named if p is not papers[0]][:1]
        return Found(rule, papers, taken)
    return None
