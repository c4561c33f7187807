"""Comparison tables: "Compare the speedups reported by GPipe, PipeDream and FlexGen" answered as
one row per paper, each cell quoted from that paper's abstract and citing it.

Pure: the caller supplies the papers (with their citation numbers) and a sentence scorer
(the pipeline passes its MiniLM one), so this module knows nothing of the index or the model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rag.corpus.figures import baseline_of, clause_stating, figure_pattern, words_pattern
from rag.question.compared import REPORTS, aspect, is_quantity

NOT_REPORTED = "not reported in the abstract"
BASELINE_COLUMN = "Baseline / setting"

# (aspect, abstract) -> [(score, sentence)] for the abstract's sentences: higher is closer.
SentenceScores = Callable[[str, str], list[tuple[float, str]]]

# -- the table --------------------------------------------------------------------------------


@dataclass(frozen=True)
class TableSource:
    """A paper that gets a row: its citation number, id, display label and abstract."""

    n: int
    paper_id: str
    label: str
    abstract: str


@dataclass
class Cell:
    text: str
    citations: list[int] = field(default_factory=list)
    supported: bool | None = None  # what the judge found; None until judged, or uncited

    def to_public(self) -> dict[str, Any]:
        out: dict[str, Any] = {"text": self.text, "citations": list(self.citations)}
        if self.supported is not None:
            out["supported"] = self.supported
        return out


@dataclass
class Row:
    paper_id: str
    label: str
    cells: list[Cell]

    def to_public(self) -> dict[str, Any]:
        return {"paper_id": self.paper_id, "label": self.label,
                "cells": [c.to_public() for c in self.cells]}


@dataclass
class Table:
    """Columns name the cells of each row; each row is headed by its paper's label."""

    columns: list[str]
    rows: list[Row]

    def to_public(self) -> dict[str, Any]:
        return {"columns": list(self.columns), "rows": [r.to_public() for r in self.rows]}

    def to_markdown(self) -> str:
        def cell(text: str, citations: Sequence[int] = ()) -> str:
            marks = "".join(f" [{n}]" for n in citations)
            return (" ".join(text.split()) + marks).strip().replace("|", "\\|")

        lines = ["| " + " | ".join(cell(c) for c in ["Paper", *self.columns]) + " |",
                 "|" + " --- |" * (len(self.columns) + 1)]
        for row in self.rows:
            cells = [cell(row.label), *(cell(c.text, c.citations) for c in row.cells)]
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines)


def _row(source: TableSource, what: str, sentence_scores: SentenceScores) -> list[Cell]:
    figure = figure_pattern(what)
    scored = sentence_scores(what, source.abstract)
    if not is_quantity(what):
        if not scored:
            return [Cell(NOT_REPORTED)]
        return [Cell(max(scored, key=lambda t: t[0])[1].strip().rstrip("."), [source.n])]
    # A quantity is answered by a figure: a sentence without one cannot fill the cell, nor,
    # for a quantity rag knows, one that does not say it is about it (a speedup is no memory
    # saving). The caller's scores choose among the rest; for a quantity named only by the
    # question, sentences that use its words come first.
    reports = REPORTS.get(what) or words_pattern(what)
    ranked = [(bool(reports.search(s)), score, s) for score, s in scored if figure.search(s)]
    if what in REPORTS:
        ranked = [t for t in ranked if t[0]]
    if not ranked:
        return [Cell(NOT_REPORTED), Cell("")]
    text = clause_stating(max(ranked, key=lambda t: t[:2])[2], figure)
    baseline = baseline_of(text)
    return [Cell(text, [source.n]), Cell(baseline, [source.n] if baseline else [])]


def build_table(question: str, rows: list[TableSource], sentence_scores: SentenceScores) -> Table:
    """One row per paper, in the order given: the clause of its abstract that states what
    the question compares, and the baseline or setting that clause names, both citing the
    paper; "not reported in the abstract" (uncited) where no sentence states it."""
    what = aspect(question)
    built = [Row(s.paper_id, s.label, _row(s, what, sentence_scores)) for s in rows]
    column = what[:1].upper() + what[1:]
    return Table([column, BASELINE_COLUMN] if is_quantity(what) else [column], built)
