"""Comparison tables: "Compare the speedups reported by GPipe, PipeDream and FlexGen" answered as
one row per paper, each cell quoted from that paper's abstract and citing it.

Pure: the caller supplies the papers (with their citation numbers) and a sentence scorer
(the pipeline passes its MiniLM one), so this module knows nothing of the index or the model.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

NOT_REPORTED = "not reported in the abstract"
BASELINE_COLUMN = "Baseline / setting"
DEFAULT_ASPECT = "reported results"

# (aspect, abstract) -> [(score, sentence)] for the abstract's sentences: higher is closer.
SentenceScores = Callable[[str, str], list[tuple[float, str]]]

# -- what a question asks -----------------------------------------------------------------------

# "How does FlexGen compare with Petals?" asks for one paper's result against its baseline
# (a fact question); "How do A, B and C compare?" asks for several papers side by side.
_COMPARISON = re.compile(
    r"""^\W*(?:(?:please|now|can\s+you|could\s+you|would\s+you)\s+)*(?:compare|contrast|tabulate)\b
      | \b(?:in|as|into)\s+a\s+table\b
      | \b(?:a|the)\s+(?:comparison\s+)?table\s+(?:of|comparing|with|showing|for|that|listing)\b
      | \bcomparison\s+table\b | \btable\s+comparing\b
      | ^\W*(?:make|build|give|show|create|draw|produce|generate)\b.{0,40}?\btable\b
      | \bside[-\s]by[-\s]side\b | \bhead[-\s]to[-\s]head\b
      | \bvs\.?(?=\s) | \bversus\b
      | \bhow\s+do\b.{1,200}?\bcompare\b
      | \b(?:compare|comparing)\s+(?:the\s+)?[a-z][\w-]*(?:\s+[a-z][\w-]*)?\s+
        (?:of|reported\s+by|achieved\s+by|across|among|between)\b
    """,
    re.I | re.X,
)

# Quantities a comparison usually asks for: the words that name each in a question, and the
# words by which an abstract's sentence says it reports that quantity.
_KNOWN_ASPECTS = [
    ("speedup", r"speed-?ups?|faster|speed|acceleration",
     r"speed|faster|accelerat|outperform|improve|\btime\b"),
    ("throughput", r"throughputs?", r"throughput|speed|faster|tokens?/s|per\s+second"),
    ("latency", r"latenc(?:y|ies)|response\s+times?", r"latenc|delay|response\s+time|time"),
    ("memory", r"memory|footprints?", r"memory|footprint|[KMG]i?B\b"),
    ("accuracy", r"accurac(?:y|ies)|top-1|f1(?:\s+scores?)?|bleu", r"accura|top-1|F1|BLEU|error"),
    ("energy", r"energy|power(?:\s+efficiency)?", r"energy|power"),
    ("cost", r"costs?|prices?", r"cost|price|\$"),
    ("scalability", r"scal(?:ability|ing(?:\s+efficiency)?)", r"scal"),
]
_REPORTS = {name: re.compile(rf"(?i){said}") for name, _, said in _KNOWN_ASPECTS}
_ASPECT_WORDS = re.compile(
    "|".join(f"(?P<a{i}>\\b(?:{asked})\\b)" for i, (_, asked, _) in enumerate(_KNOWN_ASPECTS)), re.I)
# Otherwise the words the question puts where a compared quantity goes.
_NAMED_ASPECT = [
    re.compile(r"\b(?:[Cc]ompar|[Cc]ontrast|[Tt]abulat)\w*\s+(?:the\s+)?(?P<a>[a-z][\w-]*(?:\s+[a-z][\w-]*)?)\s+"
               r"(?:of|reported|achieved|by|across|among|between|for|in|from)\b"),
    re.compile(r"\btheir\s+(?:reported\s+)?(?P<a>[a-z][\w-]*(?:\s+[a-z][\w-]*)?)"),
    re.compile(r"\b(?:on|by|in\s+terms\s+of)\s+(?P<a>[a-z][\w-]*(?:\s+[a-z][\w-]*)?)\s*\??\s*$"),
]
# Words that say how to compare, or what, but not in what respect.
_HOW = re.compile(r"(?i)\b(?:side[-\s]by[-\s]side|head[-\s]to[-\s]head|(?:in|as|into)\s+a\s+table|"
                  r"(?:a\s+)?comparison\s+table|table)\b")
_NOT_ASPECTS = frozenset({
    "the", "and", "their", "paper", "papers", "system", "systems", "work", "works", "abstract",
    "abstracts", "one", "ones"
})
# What is compared without a figure: the row quotes the best sentence, number or not.
_QUALITATIVE = frozenset({
    "approach", "approaches", "method", "methods", "design", "designs", "technique",
    "techniques", "idea", "ideas", "goal", "goals", "contribution", "contributions",
    "architecture", "architectures", "hardware", "platform", "platforms", "model", "models",
    "dataset", "datasets", "setting", "settings", "task", "tasks", "application",
    "applications", "limitation", "limitations", "assumption", "assumptions", "baseline",
    "baselines"
})


def is_comparison(question: str) -> bool:
    """Does the question ask for several papers side by side (a table)?"""
    return bool(_COMPARISON.search(question))


def _singular(phrase: str) -> str:
    *head, last = phrase.split()
    if last.endswith("ies"):
        last = last[:-3] + "y"
    elif last.endswith(("tches", "rches", "nches", "oaches", "shes", "sses", "xes")):
        last = last[:-2]
    elif last.endswith("s") and not last.endswith(("ss", "us", "is")):
        last = last[:-1]
    return " ".join([*head, last])


def aspect(question: str) -> str:
    """What is compared: "speedup", "throughput", ... (DEFAULT_ASPECT when unsaid)."""
    m = _ASPECT_WORDS.search(question)
    if m:
        return _KNOWN_ASPECTS[int(next(k for k, v in m.groupdict().items() if v)[1:])][0]
    question = _HOW.sub(" ", question)
    for pattern in _NAMED_ASPECT:
        for found in pattern.finditer(question):
            words = [w for w in found.group("a").split() if w not in _NOT_ASPECTS]
            if words:
                return _singular(" ".join(words))
    return DEFAULT_ASPECT


def is_quantity(what: str) -> bool:
    return not any(w in _QUALITATIVE for w in what.split())


# -- figures in a sentence --------------------------------------------------------------------

_NUM = r"\d[\d,]*(?:\.\d+)?"
_MULTIPLIER = rf"{_NUM}\s*(?:x|×|X|times|-fold|fold)(?![A-Za-z0-9])"
_PERCENT = rf"{_NUM}\s*(?:%|percent\b)"
# A number standing alone: not part of a name (V100, x86, SwinV2) nor a list mark "(1)", "1)".
_PLAIN = rf"(?<![\w.(\-]){_NUM}(?![\w)])"
_UNITS = {
    "throughput": r"(?:tokens|samples|images|sequences|queries|requests|frames)\s*(?:/|per)\s*(?:s|sec|second)\b|TFLOPS|FPS",
    "memory": r"[KMGT]B\b|[KMGT]iB\b|bytes\b",
    "latency": r"(?:ms|us|µs|s|sec|seconds|minutes|hours)\b",
    "energy": r"(?:J|kJ|W|mW|kWh)\b",
}
_RELATIVE = re.compile(f"{_MULTIPLIER}|{_PERCENT}")
_ANY_FIGURE = re.compile(f"{_MULTIPLIER}|{_PERCENT}|{_PLAIN}")


def _figure_pattern(what: str) -> re.Pattern[str]:
    """The figures that can state this quantity: a speedup is a ratio or a percentage, a
    memory saving may also be in GB, an accuracy is any number."""
    if what in ("speedup", "scalability"):
        return _RELATIVE
    if what in _UNITS:
        return re.compile(rf"{_MULTIPLIER}|{_PERCENT}|{_NUM}\s*(?:{_UNITS[what]})")
    return _ANY_FIGURE


# -- condensing a sentence to the clause that states the figure --------------------------------

# "Experimental results demonstrate that X ..." -> "X ...": the claim, not its preamble.
_PREAMBLE = re.compile(
    r"^.{0,200}?\b(?:show|shows|showed|shown|demonstrate|demonstrates|demonstrated|indicate|"
    r"indicates|indicated|reveal|reveals|revealed|confirm|confirms|confirmed|suggest|suggests)"
    r"\s+that\s+", re.S)
# Two sentences glued without a space ("state-of-the-art.Our evaluation") or joined by ";".
_CLAUSE_BREAK = re.compile(r"(?<=[a-z0-9)][.;])\s*(?=[A-Z])|;\s+")
_STOP = r"(?=\s+(?:by|in|on|at|for|when|while|across|respectively|and\s+(?:about\s+|up\s+to\s+)?\d)\b|\s*[,;()]|\.?\s*$)"
_BASELINES = [
    re.compile(r"\b(?:over|than|compared\s+(?:to|with)|relative\s+to|against|versus|vs\.?)\s+"
               rf"(?!\d|up\s+to\b)(?P<b>(?:the\s+)?[^,;()]+?){_STOP}", re.I),
    re.compile(rf"\b(?:outperforms?|outperformed|beats?|surpass(?:es|ed)?)\s+(?P<b>[^,;()]+?){_STOP}", re.I),
]
_SETTING = re.compile(
    r"\b(?:on|with|using|across|over|at)\s+(?:a\s+scale\s+of\s+)?(?P<b>(?:up\s+to\s+)?\d[\d,]*(?:\s+(?:and|to|-)\s+\d[\d,]*)?"
    r"\s+(?:[A-Z][\w-]*\d[\w-]*\s+)?(?:GPUs?|CPUs?|TPUs?|nodes|machines|cores|devices|servers|workers))",
)


def _clause(sentence: str, figure: re.Pattern[str]) -> str:
    """The part of the sentence that states the figure: its preamble cut, and of a sentence
    that holds two claims, the one with the figure. Only cut, never reworded: the cell stays
    a quote of the abstract."""
    parts = [p for p in _CLAUSE_BREAK.split(sentence) if p.strip()]
    text = next((p for p in parts if figure.search(p)), sentence).strip()
    m = _PREAMBLE.match(text)
    if m and figure.search(text[m.end():]):
        text = text[m.end():]
    return text.rstrip(" .")


def _baseline(clause: str) -> str:
    """Against what and where the figure was measured ("over FairScale", "on 64 GPUs")."""
    found: list[str] = []
    for pattern in [*_BASELINES, _SETTING]:
        for m in pattern.finditer(clause):
            b = m.group("b").strip(" .")
            if b and not any(b in f or f in b for f in found):
                found.append(b)
    return "; ".join(found)


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


def _words_of(what: str) -> re.Pattern[str]:
    """A sentence uses the words of "dataset size" if it says "dataset" or "size" (or "sizes")."""
    stems = [re.escape(w[:6]) for w in re.findall(r"[a-z][\w-]{2,}", what.lower())]
    return re.compile(rf"(?i)\b(?:{'|'.join(stems)})" if stems else r"(?!)")


def _row(source: TableSource, what: str, sentence_scores: SentenceScores) -> list[Cell]:
    figure = _figure_pattern(what)
    scored = sentence_scores(what, source.abstract)
    if not is_quantity(what):
        if not scored:
            return [Cell(NOT_REPORTED)]
        return [Cell(max(scored, key=lambda t: t[0])[1].strip().rstrip("."), [source.n])]
    # A quantity is answered by a figure: a sentence without one cannot fill the cell, nor,
    # for a quantity rag knows, one that does not say it is about it (a speedup is no memory
    # saving). The caller's scores choose among the rest; for a quantity named only by the
    # question, sentences that use its words come first.
    reports = _REPORTS.get(what) or _words_of(what)
    ranked = [(bool(reports.search(s)), score, s) for score, s in scored if figure.search(s)]
    if what in _REPORTS:
        ranked = [t for t in ranked if t[0]]
    if not ranked:
        return [Cell(NOT_REPORTED), Cell("")]
    text = _clause(max(ranked, key=lambda t: t[:2])[2], figure)
    baseline = _baseline(text)
    return [Cell(text, [source.n]), Cell(baseline, [source.n] if baseline else [])]


def build_table(question: str, rows: list[TableSource], sentence_scores: SentenceScores) -> Table:
    """One row per paper, in the order given: the clause of its abstract that states what
    the question compares, and the baseline or setting that clause names, both citing the
    paper; "not reported in the abstract" (uncited) where no sentence states it."""
    what = aspect(question)
    built = [Row(s.paper_id, s.label, _row(s, what, sentence_scores)) for s in rows]
    column = what[:1].upper() + what[1:]
    return Table([column, BASELINE_COLUMN] if is_quantity(what) else [column], built)
