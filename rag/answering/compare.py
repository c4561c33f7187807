"""Comparison questions ("Compare the speedups reported by GPipe, PipeDream and FlexGen") answered
as a table: one row per paper, each cell from that paper's abstract, cited and checked.

Which papers get a row: those the question names, in the order named; otherwise the papers
the chooser found. Offline, rag.answering.tables quotes each row's cell from the abstract; with a model,
the model writes one line per paper (prompts/compare.txt) and each line goes through the same
Checker as any answer sentence, then becomes its row's cell. Either way every cell is judged
against its own paper's abstract before it is shown.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from rag.answering.check import Checker
from rag.answering.generate import source_blocks
from rag.answering.names import CorpusNames
from rag.answering.tables import NOT_REPORTED, Cell, Row, Table, TableSource, build_table
from rag.corpus.paper import Paper
from rag.corpus.words import claim_of
from rag.judge import Judge
from rag.prompts import Template
from rag.question import Question
from rag.question.patterns import introduced_names, names_in_runs
from rag.retrieve import Filters, PaperHit, Retriever
from rag.schema import SentenceCheck, SentenceEvent, Source

if TYPE_CHECKING:
    pass

MAX_ROWS = 12  # a table wider than this is no longer read side by side
MAX_NEAR = 3  # names offered for one the index lacks: a hint, not a list
class Unplaced(list[str]):
    """Names the question gives that get no row: those the index does not have (the list),
    in `left_out` papers it has beyond MAX_ROWS, and in `outside` papers it has that the
    filters (described by `filters`) leave out. One list, so that a caller passing
    `plan.missing` on to check_table passes them all."""

    def __init__(self, missing: Iterable[str] = (), left_out: Iterable[str] = (),
                 outside: Iterable[str] = (), filters: str = "", shared: Iterable[str] = (),
                 near: dict[str, list[str]] | None = None) -> None:
        super().__init__(missing)
        self.near = near or {}  # a missing name -> names in the index that hold it as a word
        self.left_out = list(left_out)
        self.outside = list(outside)
        self.filters = filters
        self.shared = list(shared)  # not unplaced: names several papers go by, each with a row

    def outside_filters(self) -> str:
        """'“GPipe” is outside the filters (year 2023).', or ''."""
        if not self.outside:
            return ""
        verb = "is" if len(self.outside) == 1 else "are"
        return f"{', '.join(map(quoted, self.outside))} {verb} outside the filters ({self.filters})."

    def said(self) -> str:
        """Why the named papers get no row, when none does."""
        return " ".join(x for x in (self.outside_filters(), not_in_index(self, self.near) if self else "") if x)


@dataclass
class Plan:
    """The rows of a comparison and what the question names that gets no row."""

    sources: list[Source]
    missing: Unplaced = field(default_factory=Unplaced)

    @property
    def left_out(self) -> list[str]:
        return self.missing.left_out


_MARKDOWN = re.compile(r"([\\`*_{}\[\]()<>#+!|~])")


def not_in_index(names: list[str], near: dict[str, list[str]] | None = None) -> str:
    """'“Zorblax” is not in the index.', and the names it may mean: '“Colossal” is not in the
    index (did you mean “Colossal-AI” or “Colossal-Chat”?).'"""
    said = f"{', '.join(map(quoted, names))} {'is' if len(names) == 1 else 'are'} not in the index"
    hints = [(n, " or ".join(map(quoted, near[n]))) for n in names if near and near.get(n)]
    if len(names) == 1 and hints:
        said += f" (did you mean {hints[0][1]}?)"
    elif hints:
        said += " (" + "; ".join(f"for {quoted(n)}, did you mean {close}?" for n, close in hints) + ")"
    return said + "."


def _near(missing: list[str], names: CorpusNames) -> dict[str, list[str]]:
    """For each missing name, up to MAX_NEAR names in the index with a word it begins
    ("Colossal": Colossal-AI; "NeoX": GPT-NeoX)."""
    return {name: sorted(names.display(k) for k in names.known
                         if _begins_a_word(name.lower(), k))[:MAX_NEAR] for name in missing}


def _begins_a_word(part: str, text: str) -> bool:
    """`part` starts a word of `text` (at its start, or after a character not a letter or
    digit): a substring test, where a regex per missing name was compiled per question."""
    at = text.find(part)
    while at >= 0:
        if at == 0 or not text[at - 1].isalnum():
            return True
        at = text.find(part, at + 1)
    return False


def quoted(name: str) -> str:
    """A paper name in running Markdown text, whole: quoted, its Markdown characters escaped
    ("Pipe|Net" is one name, "**Bold**" no emphasis)."""
    escaped = _MARKDOWN.sub(r"\\\1", " ".join(name.split()))
    return f"“{escaped}”"


class _Known:
    """The names the index knows (lower-cased), and those found introduced in its abstracts."""

    def __init__(self, names: Container[str]) -> None:
        self.names, self.extra = names, set[str]()

    def __contains__(self, name: object) -> bool:
        return name in self.extra or name in self.names


def _introducing(candidates: list[str], papers: Iterable[Paper]) -> dict[str, tuple[str, list[Paper]]]:
    """For each name (lower-case) that papers introduce their work by in their abstract ("we
    propose Alpa"): the name as written, and those papers."""
    found: dict[str, tuple[str, list[Paper]]] = {}
    for paper in papers:
        for name in candidates:
            # the name's letters first: a regex over every abstract of a large index costs seconds
            if name in paper.abstract and name in introduced_names(paper.abstract, beside=True):
                found.setdefault(name.lower(), (name, []))[1].append(paper)
    return found


def plan(asked: Question, chosen: list[Source], names: CorpusNames, retriever: Retriever,
         members: Callable[[], list[PaperHit]], filters: Filters | None = None) -> Plan:
    """Rows for the named papers in the order named (those the filters accept), else for the
    papers `members` finds on the question's topic (as for "which papers" questions)."""
    question = asked.standalone
    known = _Known(names.known)
    # "Compare Alpa and Ansor": a name an abstract introduces its work by, under a title
    # that gives another ("Adaptive Message Quantization and ..."), names that paper; it was
    # said not to be in the index
    mentioned = list(asked.names)
    candidates = names_in_runs(question, mentioned, known, every_run=True)
    snap = retriever.snapshot()
    introducing = _introducing(candidates, snap.papers_containing(candidates))
    named = sorted([*mentioned, *introducing], key=lambda n: question.lower().find(n))
    known.extra |= set(introducing)

    def display(name: str) -> str:
        return introducing[name][0] if name in introducing else names.display(name)

    by_name: dict[str, Source] = {}  # by paper id: a name several papers go by gives each a row
    left_out: list[str] = []
    outside: list[str] = []  # named papers the filters leave out: said, not compared
    shared: list[str] = []  # names that several papers go by
    # "GPipe vs Zorblax": one paper the index knows, set against a name it does not, is a
    # comparison too (GPipe's row, and "Zorblax is not in the index")
    if len(named) >= 2 or (named and names_in_runs(question, named, known)):
        # keyed like CorpusNames (the display name, lower-case)
        papers: dict[str, list[Paper]] = {n: list(found) for n, (_, found) in introducing.items()}
        going = names.papers_named(named)
        records = snap.papers.many([pid for ids in going.values() for pid in ids])
        for name, ids in going.items():
            papers.setdefault(name, []).extend(records[pid] for pid in ids if pid in records)
        relevance = {s.paper.paper_id: s.relevance for s in chosen}
        for name in named:
            going_by = papers.get(name, [])
            within = [p for p in going_by if filters is None or filters.accepts(p)]
            if going_by and not within:
                outside.append(display(name))
            if len(within) > 1:
                shared.append(display(name))
            for paper in within:
                if len(by_name) < MAX_ROWS:
                    by_name[paper.paper_id] = Source(len(by_name) + 1, paper,
                                                     relevance.get(paper.paper_id, 1.0))
                elif display(name) not in left_out:
                    left_out.append(display(name))
    missing = names_in_runs(question, named, known) if by_name or outside else []
    described = filters.describe() if filters is not None else ""
    if by_name or outside:  # none within the filters: no table, the answer says why
        return Plan(list(by_name.values()),
                    Unplaced(missing, left_out, outside, described, shared, _near(missing, names)))
    found = [(h.paper, h.relevance) for h in members()] or [(s.paper, s.relevance) for s in chosen]
    if not found:  # "compare Zorblax and Quux": nothing to compare; the names the index lacks
        missing = names_in_runs(question, [], known, every_run=True)
        return Plan([], Unplaced(missing, near=_near(missing, names)))
    return Plan([Source(i, p, r) for i, (p, r) in enumerate(found[:MAX_ROWS], 1)], Unplaced(missing))


def prompt(template: Template, system: Template, no_answer: str, asked: Question,
           sources: list[Source]) -> list[dict[str, str]]:
    blocks = source_blocks(sources)
    rows = ", ".join(f"{s.name} [{s.n}]" for s in sources)
    return [{"role": "system", "content": system.render(no_answer=no_answer)},
            {"role": "user", "content": template.render(
                sources=blocks, question=asked.standalone, n_sources=len(sources), rows=rows,
                aspect=asked.aspect)}]


def offline_table(asked: Question, sources: list[Source], retriever: Retriever, judge: Judge) -> Table:
    """Each row's cell quoted from its abstract: the sentence closest to what is compared."""
    vectors: dict[str, np.ndarray] = {}

    def scores(what: str, abstract: str) -> list[tuple[float, str]]:
        if what not in vectors:
            vectors[what] = retriever.embed_query(what)
        sents, vecs = judge.sentences(abstract)
        return [(float(v), s) for s, v in zip(sents, vecs @ vectors[what], strict=True)]

    rows = [TableSource(s.n, s.paper.paper_id, s.name, s.paper.abstract) for s in sources]
    return build_table(asked.standalone, rows, scores)


def model_table(asked: Question, sources: list[Source], checker: Checker) -> Table:
    """The table from the model's checked lines: a row's cell is the first line that cites
    its paper alone (checked like any sentence); a paper with no such line is "not reported"."""
    writer_n = {new: old for old, new in checker.order.items()}
    lines: dict[int, str] = {}
    for check in checker.checks:
        cited = {writer_n.get(n) for n in check.citations}
        n = cited.pop() if len(cited) == 1 else None
        if n is not None and n not in lines:
            text = claim_of(check.text)
            lines[n] = text.split(":", 1)[1].strip() if ":" in text[:60] else text
    what = asked.aspect
    rows = [Row(s.paper.paper_id, s.name,
                [Cell(lines[s.n].rstrip("."), [s.n]) if s.n in lines else Cell(NOT_REPORTED)])
            for s in sources]
    return Table([what[:1].upper() + what[1:]], rows)


@dataclass
class Checked:
    """A table whose cells were judged, with its papers numbered by row and the answer's units."""

    table: Table
    sources: list[Source]  # the cited papers, numbered 1..m in row order
    checks: list[SentenceCheck]  # one per row that cites its paper
    events: list[SentenceEvent]


def check_table(table: Table, sources: list[Source], judge: Judge, strict: bool,
                missing: list[str], left_out: list[str] | None = None) -> Checked:
    """Judge every cited cell against its own paper (strict: an unsupported cell becomes "not
    reported"), number the cited papers in row order, and lay the answer out as a lead line
    and a Markdown table, one unit per row."""
    by_n = {s.n: s for s in sources}
    order: dict[int, int] = {}
    checks: list[SentenceCheck | None] = []
    rows: list[Row] = []
    for row in table.rows:
        cells, row_check = [], None
        for i, cell in enumerate(row.cells):
            cited = [by_n[n] for n in cell.citations if n in by_n]
            if not cited:
                cells.append(Cell(cell.text))
                continue
            support = judge.check(cell.text, [(s.header(), s.paper.abstract) for s in cited])
            if strict and not support.supported:
                cells.append(Cell(NOT_REPORTED))
                continue
            nums = [order.setdefault(s.n, len(order) + 1) for s in cited]
            cells.append(Cell(cell.text, nums, support.supported))
            if i == 0:
                marks = " ".join(f"[{n}]" for n in nums)
                row_check = SentenceCheck(f"{row.label}: {cell.text} {marks}", nums, support.supported,
                                          support.score, support.quote, support.reasons)
        rows.append(Row(row.paper_id, row.label, cells))
        checks.append(row_check)
    final = Table(table.columns, rows)
    what = table.columns[0].lower() if table.columns else "results"
    found = sum(c is not None for c in checks)
    if len(rows) == 1:  # one known paper against names the index lacks: nothing beside it
        lead = f"The {what} of {rows[0].label}" + (", from its abstract:" if found else " (not in its abstract):")
    else:
        stated = "1 states it in its abstract" if found == 1 else f"{found} state it in their abstract"
        lead = f"The {what} of {len(rows)} papers side by side ({stated}):"
    if missing:
        lead += f" {not_in_index(missing, getattr(missing, 'near', None))}"
    if outside := getattr(missing, "outside_filters", lambda: "")():
        lead += f" {outside}"
    if shared := getattr(missing, "shared", []):
        lead += (f" Several papers go by {' and by '.join(map(quoted, shared))}: "
                 "each has a row.")
    left_out = getattr(missing, "left_out", []) if left_out is None else left_out
    if left_out:
        lead += (f" {len(left_out)} more named {'paper is' if len(left_out) == 1 else 'papers are'} left "
                 f"out (a table has at most {MAX_ROWS} rows; ask about them separately): "
                 f"{', '.join(map(quoted, left_out))}.")
    lines = final.to_markdown().split("\n")
    units: list[tuple[str, SentenceCheck | None]] = [(lead, None), ("\n\n" + "\n".join(lines[:2]), None)]
    units += [("\n" + line, check) for line, check in zip(lines[2:], checks, strict=True)]
    events = [SentenceEvent(delta, check or SentenceCheck(delta.strip(), [], True, 0.0, meta=True))
              for delta, check in units]
    cited = [Source(new, by_n[old].paper, by_n[old].relevance)
             for old, new in sorted(order.items(), key=lambda t: t[1])]
    return Checked(final, cited, [c for c in checks if c is not None], events)
