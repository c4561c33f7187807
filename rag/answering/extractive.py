"""Stage two, offline: write the answer from the abstracts' own sentences, no model.

Which sentence answers is rag.relevance's fitted sentence model (`best_sentences`); whether to
answer at all was decided with the sources (an abstention reaches here as no sources)."""

from __future__ import annotations

import numpy as np

from rag.answering.asked import LINK_ASK, count_in, evaluated_in, link_in, spelled_out
from rag.answering.metadata import metadata_answer
from rag.answering.questions import (
    COMPARES,
    EXPANSION,
    asks_for_summary,
    compared_in,
    definition_marks,
    figure_test,
    introduced_names,
    mentions_name,
    name_test,
    names_related,
    topic_of,
    without_names,
)
from rag.corpus.paper import Paper
from rag.corpus.text import split_sentences
from rag.judge import Judge, strip_markers
from rag.prompts import NO_ANSWER
from rag.relevance import Relevance
from rag.relevance.addresses import AnswerRelevance
from rag.relevance.features import CONTRIBUTION, URL, has_number
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

    def list_lines(self, question: str, sources: list[Source]) -> str:
        """One line per paper: the sentence that says what it contributes to the topic."""
        topic = topic_of(question)
        qvec = self.retriever.embed_query(topic)
        related = names_related(topic)  # "compare against GPT-NeoX": where each names it
        defining = self.retriever.snapshot().papers_containing(definition_marks(related))
        names_it = name_test(related, [p.abstract for p in defining]
                             ) if related else figure_test(topic)  # "report a 2.5x speedup": where
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
            # "Which papers compare against GPT-NeoX?": and where it names GPT-NeoX
            naming = [i for i, se in enumerate(sents) if names_it and names_it(se)]
            if naming and not set(naming) & set(picked):
                picked.append(max(naming, key=lambda i: sims[i]))
            text = " ".join(strip_markers(sents[i]).rstrip(".") + f" [{s.n}]." for i in sorted(picked))
            lines.append(f"- {s.name}: {text}")
        return "\n".join(lines)

    def summary(self, source: Source) -> str:
        """For 'What does X do?': what the paper proposes and what it reports, in its words."""
        sents = split_sentences(source.paper.abstract)
        # The sentences stating what the paper proposes come first, then others naming it; one
        # that gives where its code or data lives (a URL) says nothing of what it does.
        states = [s for s in sents if CONTRIBUTION.search(s)]
        naming = [s for s in sents if source.name.lower() in s.lower() and s not in states
                  and not URL.search(s)]
        pick = (states + naming)[:2]
        results = [s for s in sents if has_number(s) and s not in pick][-1:]  # a URL's digits are no result
        chosen = [s for s in sents if s in pick + results] or sents[:2]
        text = " ".join(strip_markers(s).rstrip(".") + f" [{source.n}]." for s in chosen)
        return text if source.name.lower() in text.lower() else f"{source.name}: {text}"

    def write(self, question: str, sources: list[Source], list_question: bool) -> str:
        if list_question:
            return self.list_lines(question, sources)
        return metadata_answer(question, sources, self.summary) or self.fact(question, sources)

    def fact(self, question: str, sources: list[Source]) -> str:
        named = [s for s in sources if s.relevance >= 1.0]
        # Judge sentences on what is asked, without the paper's name: a question that names a
        # system but asks what its abstract does not say must not match on the name alone.
        aspect = without_names(question, [s.name for s in named])
        if asks_for_summary(question, [s.name for s in named]):
            return self.summary(named[0])
        if EXPANSION.search(question):  # "What does LoRA stand for?": where it is spelled out
            spelled = [(s, sent) for s in named if (sent := spelled_out(question, s.name, s.paper.abstract))]
            if spelled:
                return _passages([(1.0, spelled[0][1], spelled[0][0])])
        if COMPARES.search(question):
            # "How does vLLM compare with Horovod?": what the named paper's abstract says
            # where it names the other, each such sentence in the abstract's order.
            for s in named:
                others = compared_in(question, s.paper)
                said = [sent for sent in split_sentences(s.paper.abstract)
                        if any(mentions_name(o, sent, compound=False) for o in others)]
                if said:
                    return _passages([(1.0, sent, s) for sent in said[:MAX_QUOTED]])
        if states := figure_test(question):
            # "What is the 2.5x speedup?": where the papers found to state it state it; the
            # sentence model's other picks (its accuracy, its design) say nothing of the figure
            stating = [(1.0, sent, s) for s in named for sent in split_sentences(s.paper.abstract)
                       if states(sent)]
            if stating:
                return _passages(stating[:MAX_QUOTED])
        linked = [(1.0, sent, s) for s in named if (sent := link_in(question, s.paper.abstract))]
        if linked:  # "Where is ByteScheduler's code?": where it says so, not the sentences before
            return _passages(linked[:1])
        counted = [(s, sent) for s in named if (sent := count_in(question, s.paper.abstract)
                                                or evaluated_in(question, s.name, s.paper.abstract))]
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
            # "How many developers ...?", "What is it evaluated on?": the sentence that gives the
            # count, or says what the evaluation was on, whatever the model made of it, with the
            # best of the others
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
