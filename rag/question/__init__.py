"""A question as rag reads it: parsed once, where it enters the pipeline (after a follow-up is
made stand-alone), into a `Question` that every stage takes instead of the string, as
LlamaIndex's `QueryBundle` is. `patterns` holds what a question's words are tested against,
`asks` what a question asks of one abstract (a count, a factor, an evaluation, a link)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rag.retrieve.filters import Filters

__all__ = ["KINDS", "Question", "read_question"]

# What a question is, in the order a question of two kinds is read as: "Compare the speedups
# of A and B" is a comparison though it also asks for figures.
KINDS = ("compare", "list", "definition", "metadata", "figure", "count", "summary", "fact")


@dataclass(frozen=True)
class Question:
    """What `rag ask --json`, `/ask` and MCP show as `question`: how rag read it."""

    text: str  # as asked
    standalone: str  # as answered: a follow-up made stand-alone, names written as papers write them
    kind: str  # one of KINDS
    names: tuple[str, ...] = ()  # the papers of the index it names, lower-cased, as first named
    labels: tuple[str, ...] = ()  # the same names as the papers write them
    topic: str = ""  # a list's topic: what its papers are to be about
    aspect: str = ""  # a comparison's: in what respect ("speedup", "memory", "reported results")
    figure: str | None = None  # a figure it gives ("2.5x")
    record: str | None = None  # the field of a paper's record it asks for (authors, doi, ...)
    list_question: bool = False  # it asks for papers (a comparison may too)
    compares: bool = False  # it sets one thing against another ("faster than", "versus")
    expansion: bool = False  # it asks for a name's long form ("stand for")
    follow_up: bool = False  # it leaned on the conversation before it
    filters: Filters | None = None  # venue, year, author it was asked with

    def to_public(self) -> dict[str, Any]:
        """The documented JSON object (docs/reference/json.md)."""
        return {"text": self.text, "standalone": self.standalone, "kind": self.kind,
                "names": list(self.labels), "topic": self.topic, "aspect": self.aspect,
                "figure": self.figure,
                "record": self.record, "follow_up": self.follow_up,
                "filters": {k: v for k, v in asdict(self.filters).items() if v is not None}
                if self.filters is not None else {}}


def read_question(text: str, standalone: str | None = None, names: Sequence[str] = (),
                  labels: Sequence[str] = (), filters: Filters | None = None,
                  follow_up: bool = False) -> Question:
    """Read `standalone` (the question as answered; `text` when it is not a follow-up) once.
    `names`: the papers of the index it names, lower-cased (rag.answering.names finds them),
    and `labels`, as the papers write them; `follow_up`: it was rewritten to stand alone."""
    # Imported here, not at the top: rag.schema holds a Question, and the thin client and
    # `rag search` import rag.schema without reading any question (the patterns and the
    # retrieve package cost them 15 ms of start-up).
    from rag.question.compared import aspect, is_comparison
    from rag.question.patterns import (
        ARXIV_ID,
        COMPARES,
        EXPANSION,
        FIGURE,
        META,
        asks_for_summary,
        is_list_question,
        topic_of,
    )

    asked = standalone if standalone is not None else text
    list_q, comparison = is_list_question(asked), is_comparison(asked)
    figure = FIGURE.search(asked)
    meta = META.search(asked)
    record = _field(meta.group(1)) if meta else "arxiv_id" if ARXIV_ID.search(asked) else None
    expansion = bool(EXPANSION.search(asked))
    kind = ("compare" if comparison else "list" if list_q else "definition" if expansion
            else "metadata" if record else "figure" if figure else
            "count" if "how many" in asked.lower() else
            "summary" if asks_for_summary(asked, list(labels)) else "fact")
    return Question(
        text=text, standalone=asked, kind=kind, names=tuple(names), labels=tuple(labels),
        topic=topic_of(asked) if list_q else "", aspect=aspect(asked) if comparison else "",
        figure=figure.group(0) if figure else None,
        record=record, list_question=list_q,
        compares=bool(COMPARES.search(asked)), expansion=expansion,
        follow_up=follow_up,
        filters=filters,
    )


def _field(asked: str) -> str:
    """The record's field a META match asks for: "who wrote" -> "authors", "what year" -> "date"."""
    asked = asked.lower()
    if asked.startswith("arxiv"):
        return "arxiv_id"
    if asked == "doi":
        return "doi"
    if asked in ("what year", "which year", "when was"):
        return "date"
    if asked in ("venue", "published", "journal", "conference"):
        return "venue"
    return "authors"
