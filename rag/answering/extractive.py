"""Stage two, offline: write the answer from the abstracts' own sentences, no model.

Which sentence answers is rag.relevance's fitted sentence model (`best_sentences`); whether to
answer at all was decided with the sources (an abstention reaches here as no sources)."""

from __future__ import annotations

import numpy as np

from rag.answering.listing import RULE_NAMED
from rag.answering.metadata import metadata_answer
from rag.answering.rules import first_found, summary_sentences
from rag.corpus.paper import Paper
from rag.corpus.text import split_sentences
from rag.corpus.words import strip_markers
from rag.judge import Judge
from rag.prompts import NO_ANSWER
from rag.question import Question
from rag.question.asks import LINK_ASK
from rag.question.patterns import (
    introduced_names,
    mentions_name,
    topic_of,
    without_names,
)
from rag.relevance import Relevance
from rag.relevance.addresses import AnswerRelevance
from rag.relevance.features import CONTRIBUTION, URL
from rag.retrieve import Retriever
from rag.schema import Source

MAX_QUOTED = 3  # sentences a fact answer quotes (from at most two papers): a passage, not a page


class ExtractiveWriter:
    def __init__(self, retriever: Retriever, judge: Judge, relevance: Relevance | None = None) -> None:
        self.retriever = retriever
        self.judge = judge
        self.relevance = relevance or Relevance.load(retriever, judge)
        # Does a quote address what is asked? Reported on each sentence (`addresses`), not yet
        # deciding: as the offline answer's gate it cost PubMedQA's held-out answers more false
        # abstention than its thresholds allow (evals/README.md, "Answer relevance").
        self.addressing = AnswerRelevance.load(self.relevance)

    def sentence_scores(self, question: str, qvec: np.ndarray, paper: Paper) -> list[tuple[float, str]]:
        """(P(the sentence answers), sentence) for each sentence of the abstract, best first."""
        return self.relevance.best_sentences(question, paper, qvec)

    def list_lines(self, asked: Question, sources: list[Source], rule: str = "") -> str:
        """One line per paper: the sentence that says what it contributes to the topic, and
        the one the list rule that chose the papers quotes (`rule`, rag.answering.listing:
        where a paper names the thing the topic names, or states the figure it gives)."""
        topic = asked.topic or topic_of(asked.standalone)
        qvec = self.retriever.embed_query(topic)
        names_it = RULE_NAMED[rule].quotes(asked.standalone, self.retriever.snapshot) if rule else None
        lines = []
        self.relevance.prime([s.paper for s in sources])
        for s in sources:
            # What the paper says it does, closest to the topic: of the sentences that state its
            # contribution (or name it), else of all, the one nearest the topic. Not the fitted
            # sentence model: it finds what answers a fact question (often the results at the
            # end), not what a paper contributes to a topic.
            sents, vecs = self.judge.sentences(s.paper.abstract)
            sims = vecs @ qvec
            # its name, or the name it introduces ("Learning to Shard ... propose PowerSGD")
            names = introduced_names(s.paper.abstract)
            own = [i for i, se in enumerate(sents)
                   if CONTRIBUTION.search(se) or s.name.lower() in se.lower()
                   or any(mentions_name(n, se) for n in names)] or range(len(sents))
            picked = [max(own, key=lambda i: sims[i])]
            # "Which papers compare against GPT-NeoX?": and where it names GPT-NeoX; "Which
            # papers report a 2.5x speedup?": and where it states it
            naming = [i for i, se in enumerate(sents) if names_it and names_it(se)]
            if naming and not set(naming) & set(picked):
                picked.append(max(naming, key=lambda i: sims[i]))
            text = " ".join(strip_markers(sents[i]).rstrip(".") + f" [{s.n}]." for i in sorted(picked))
            lines.append(f"- {s.name}: {text}")
        return "\n".join(lines)

    def summary(self, source: Source) -> str:
        """For 'What does X do?': what the paper proposes and what it reports, in its words."""
        return _passages([(1.0, sent, source) for sent in summary_sentences(source.paper, source.name)])

    def write(self, asked: Question, sources: list[Source], rule: str = "") -> str:
        """The answer from the abstracts' own sentences: a list's lines (`rule`: the list rule
        that chose its papers), a record's fields, or a fact's sentences."""
        if asked.list_question:
            return self.list_lines(asked, sources, rule)
        return metadata_answer(asked.standalone, sources, self.summary) or self.fact(asked, sources)

    def fact(self, asked: Question, sources: list[Source]) -> str:
        """The sentences that answer a fact question: where a rule (rag.answering.rules) finds
        them in a paper the question names, else the sentence model's best."""
        question = asked.standalone
        named = [s for s in sources if s.named]
        # Judge sentences on what is asked, without the paper's name: a question that names a
        # system but asks what its abstract does not say must not match on the name alone.
        aspect = without_names(question, [s.name for s in named])
        found = first_found(asked, [(s.paper, s.name) for s in named], answers=("alone", "joined"))
        by_id = {s.paper.paper_id: s for s in named}
        if found and found.rule.answer == "alone":
            return _passages([(1.0, sent, by_id[p.paper_id]) for p, sents in found.answers
                              for sent in sents][:MAX_QUOTED])
        counted = [(by_id[found.papers[0].paper_id], found.sentences[0])] if found else []
        qvec = self.retriever.embed_query(aspect)
        # The sources are the papers the relevance model found to answer, best first; the
        # best sentence of the first answers, and sentences the sentence model accepts join it.
        bound = self.relevance.models["sentence"].threshold
        papers = _subject(named, question) or sources[:2]
        scored = [(p, sent, s) for s in papers for p, sent in self.sentence_scores(aspect, qvec, s.paper)]
        if not LINK_ASK.search(question):
            # where the code or data lives (a URL) answers nothing else: PowerSGD's gains
            # and ByteScheduler's benchmark were answered with their repository's address as well
            scored = [t for t in scored if not URL.search(t[1])] or scored
        if not scored:
            return NO_ANSWER
        first = scored[0]
        rest = sorted((t for t in scored[1:] if t[0] >= bound), key=lambda t: -t[0])
        kept = [first, *rest][:MAX_QUOTED]
        if counted and all(t[1] != counted[0][1] for t in kept):
            # "How many developers ...?", "What is it evaluated on?": the sentence a rule found
            # (that gives the count, or says what the evaluation was on), whatever the model
            # made of it, with the best of the others
            kept = [(1.0, counted[0][1], counted[0][0]), *kept][:MAX_QUOTED]
        return _passages(kept)


def _subject(named: list[Source], question: str) -> list[Source]:
    """Of the papers a question names, the one it asks about: the first named."""
    q = question.lower()
    ranked = sorted((pos, s.n) for s in named if (pos := q.find(s.name.lower())) >= 0)
    return [s for s in named if s.n == ranked[0][1]] if ranked else named[:1]


def _passages(kept: list[tuple[float, str, Source]]) -> str:
    """The chosen sentences, grouped by paper (in the order chosen: the best paper first), each
    group in the abstract's own order so that it reads as a passage."""
    by_source: dict[int, list[tuple[float, str, Source]]] = {}
    for t in kept:
        by_source.setdefault(t[2].n, []).append(t)
    parts = []
    for items in by_source.values():
        src = items[0][2]
        order = split_sentences(src.paper.abstract)
        items.sort(key=lambda t: order.index(t[1]) if t[1] in order else 0)
        text = " ".join(strip_markers(t[1]).rstrip(".") + f" [{src.n}]." for t in items)
        parts.append(text if src.name.lower() in text.lower() else f"{src.name}: {text}")
    return " ".join(parts)
