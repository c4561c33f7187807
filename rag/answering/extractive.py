"""Stage two, offline: write the answer from the abstracts' own sentences, no model."""

from __future__ import annotations

import re

import numpy as np

from rag.answering.metadata import metadata_answer
from rag.answering.questions import (
    CONTRIBUTION,
    GENERIC,
    QUANTITY,
    QUESTION_STOP,
    has_number,
    topic_of,
)
from rag.corpus.paper import Paper
from rag.corpus.text import split_sentences
from rag.judge import Judge, content_words, strip_markers
from rag.prompts import NO_ANSWER
from rag.retrieve import Retriever
from rag.schema import Source

# Best sentence score an offline fact answer needs; below it the abstracts "don't say".
FACT_MIN_SCORE = 0.45
OVERLAP_WEIGHT = 0.25  # weight of the share of question words a sentence contains
NEAR_BEST = 0.08  # sentences within this of the best one are quoted with it


class ExtractiveWriter:
    def __init__(self, retriever: Retriever, judge: Judge) -> None:
        self.retriever = retriever
        self.judge = judge

    def sentence_scores(self, question: str, qvec: np.ndarray, paper: Paper) -> list[tuple[float, str]]:
        sents, vecs = self.judge.sentences(paper.abstract)
        qwords = content_words(question) - QUESTION_STOP
        out = []
        for sent, sim in zip(sents, vecs @ qvec, strict=True):
            overlap = len(qwords & content_words(sent)) / len(qwords) if qwords else 0.0
            out.append((float(sim) + OVERLAP_WEIGHT * overlap, sent))
        return out

    def list_lines(self, question: str, sources: list[Source]) -> str:
        """One line per paper: the sentence that says what it contributes to the topic."""
        topic = topic_of(question)
        qvec = self.retriever.embed_query(topic)
        lines = []
        for s in sources:
            _, sent = max(
                (sc + 0.2 * bool(CONTRIBUTION.search(se) or s.name.lower() in se.lower()), se)
                for sc, se in self.sentence_scores(topic, qvec, s.paper)
            )
            lines.append(f"- {s.name}: {strip_markers(sent).rstrip('.')} [{s.n}].")
        return "\n".join(lines)

    def summary(self, source: Source) -> str:
        """For 'What does X do?': what the paper proposes and what it reports, in its words."""
        sents = split_sentences(source.paper.abstract)
        pick = [s for s in sents if CONTRIBUTION.search(s) or source.name.lower() in s.lower()][:2]
        results = [s for s in sents if re.search(r"\d", s) and s not in pick][-1:]
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
        aspect = question
        for s in named:
            aspect = re.sub(rf"(?i)(?<![\w-]){re.escape(s.name)}(?![\w-])", " ", aspect)
        if named and not content_words(aspect) - GENERIC:
            return self.summary(named[0])
        qvec = self.retriever.embed_query(aspect)
        wants_number = bool(QUANTITY.search(question))
        scored = [
            (score + (0.1 if wants_number and has_number(sent) else 0.0), sent, s)
            for s in (_subject(named, question) or sources[:3])
            for score, sent in self.sentence_scores(aspect, qvec, s.paper)
            if not wants_number or has_number(sent)  # "how much" needs a number to answer it
        ]
        scored.sort(key=lambda t: -t[0])
        if not scored or scored[0][0] < FACT_MIN_SCORE:
            return NO_ANSWER
        chosen = [t for t in scored if t[0] >= scored[0][0] - NEAR_BEST][:3]
        papers_used = {chosen[0][2].n}
        kept = []
        for t in chosen:
            if t[2].n in papers_used or len(papers_used) < 2:
                papers_used.add(t[2].n)
                kept.append(t)
        return _passages(kept)


def _subject(named: list[Source], question: str) -> list[Source]:
    """Of the papers a question names, the one it asks about: the first named."""
    q = question.lower()
    ranked = sorted((pos, s.n) for s in named if (pos := q.find(s.name.lower())) >= 0)
    return [s for s in named if s.n == ranked[0][1]] if ranked else named[:1]


def _passages(kept: list[tuple[float, str, Source]]) -> str:
    """The chosen sentences, grouped by paper (best paper first), each group in the abstract's
    own order so that it reads as a passage."""
    by_source: dict[int, list[tuple[float, str, Source]]] = {}
    for t in kept:
        by_source.setdefault(t[2].n, []).append(t)
    parts = []
    for _, items in sorted(by_source.items(), key=lambda kv: -max(t[0] for t in kv[1])):
        src = items[0][2]
        order = split_sentences(src.paper.abstract)
        items.sort(key=lambda t: order.index(t[1]) if t[1] in order else 0)
        text = " ".join(strip_markers(t[1]).rstrip(".") + f" [{src.n}]." for t in items)
        parts.append(text if src.name.lower() in text.lower() else f"{src.name}: {text}")
    return " ".join(parts)
