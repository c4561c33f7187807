"""Stage three: turn the writer's raw text into the final answer, one unit at a time.

Each sentence or list item is final as soon as the next one has begun: its citation style is
normalised, markers that point at no source are dropped, the rest are renumbered in order of
first use, and the judge checks it against the abstracts it cites. Every face shows these
units, so what a reader sees on the way is what the finished answer says.

Written by hand because no library splits a token stream into stable sentences: a sentence
is held while what follows could still be its citation ("claim. [1" or "claim. (Source 1").
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rag.answering.citations import (
    TRAILING_MARKERS,
    clean_markers,
    normalize_citations,
    numbers_in,
    renumber,
)
from rag.corpus.text import sentence_pieces
from rag.corpus.words import claim_of, strip_markers
from rag.judge import Judge, Support
from rag.prompts import NO_ANSWER
from rag.schema import SentenceCheck, SentenceEvent, Source
from rag.verify import NOT_SUPPORTED

if TYPE_CHECKING:
    import numpy as np

# Attribution in an answer of more sources than a default one (k=8) verifies a sentence
# against the 8 whose sentences come nearest it and those it names, not against every source:
# a 102-paper list's 6 unsupported lines cost 612 verifier runs (21 s at 35 ms) instead of 48.
ATTRIBUTION_POOL = 8
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")
_NO_ANSWER = NO_ANSWER.lower().rstrip(".")
_MAYBE_CITATION = ("(", "[", "【", "^")
# The model's own reference list: a heading ("**References:**", "Sources: [1], [2]") and the
# lines after it that start with a marker ("[2] Petals: ...", "- [2] ..."), or a markdown
# footnote's definition ("[^2]: Petals", normalised to "[2]:").
_MARKS = r"\[\s*\d+(?:\s*,\s*\d+)*\s*\]"
_BIBLIOGRAPHY = re.compile(
    r"[#*_\s]*(?:references?|sources?(?: cited)?|bibliography|citations?|works cited|"
    rf"cited (?:papers|sources|works))[*_\s]*:?[*_\s]*(?:{_MARKS}[,;\s]*)*$|\s*{_MARKS}:", re.I)
_ENTRY = re.compile(rf"\s*(?:[-*•]\s+|\d+[.)]\s+)?{_MARKS}")
_HEADING = re.compile(r"\s*#{1,6}(?:\s|$)")  # markdown's "### Summary"
_TABLE_RULE = re.compile(r"[\s|:-]*-[\s|:-]*")  # |---|:---:|
# A refusal in the model's own words ("The abstracts do not mention...", "None of the sources
# discuss..."), not the sentence the prompt asks for: honoured as that sentence is, when uncited.
_DOCS = r"(?:abstracts?|sources?|papers?|documents?|context|excerpts?|passages?|texts?)"
_REFUSAL = re.compile(
    rf"\b{_DOCS}\b[^.!?]{{0,80}}?\b(?:do|does|did|can|could)(?:n['’]t|\s+not)\s+(?:\w+\s+){{0,2}}?"
    r"(?:answer|mention|contain|provide|discuss|address|include|describe|say|specify|state|cover|"
    r"report|give|offer|present|explain|detail|touch|talk)"
    rf"|\bnone of the (?:\w+\s+)?{_DOCS}\b"
    rf"|\bno (?:information|mention|details?|data|evidence)\b[^.!?]{{0,60}}\b(?:in|from) the (?:\w+\s+)?{_DOCS}\b"
    r"|\b(?:cannot|can['’]t|can not|could not|couldn['’]t|unable to)\s+(?:\w+\s+){0,2}?"
    rf"(?:answer|find|determine|tell)\b[^.!?]{{0,80}}\b(?:in|from|on|with) the (?:\w+\s+)?{_DOCS}\b",
    re.I,
)
_MARKS_ONLY = re.compile(rf"{_MARKS}|\b\d+[.)]")  # what a unit with no claim is made of
_WORD = re.compile(r"[^\W\d_]", re.U)
# "[1] Claim. [2] Next claim.": a sentence that starts with its citation starts a unit (the
# sentence splitter, which abstracts use too, does not end a sentence before a "[").
_CITED_FIRST = re.compile(r"(?<=[.!?])\s+(?=\[\s*\d+(?:\s*,\s*\d+)*\s*\][ \t]*[^\s\[])")


def _markers_to_claims(line: str, complete: bool) -> str:
    """ "Claim. [1] Next claim." -> "Claim [1]. Next claim.": markers after a full stop cite
    the sentence before, unless that one cites already ("[1] Claim. [2] Next claim.": this
    writer cites at the start of a sentence). Markers that end a line being written wait for
    what follows them; the whitespace after them stays, or two sentences would run together."""

    def move(m: re.Match[str]) -> str:
        markers = m.group(2)
        cites = numbers_in(re.split(r"[.!?]\s", line[: m.start()])[-1])
        if cites and (line[m.end():].strip() or not complete):
            return m.group(0)
        return " " + markers.strip() + m.group(1) + markers[len(markers.rstrip()):]

    return TRAILING_MARKERS.sub(move, line)


def _cited_first(piece: str) -> list[str]:
    """A sentence piece split before each sentence in it that starts with its citation."""
    out, at = [], 0
    for m in _CITED_FIRST.finditer(piece):
        out.append(piece[at: m.end()])
        at = m.end()
    return [*out, piece[at:]]


@dataclass(frozen=True)
class _Piece:
    text: str
    bullet: str
    newline: bool  # starts a new line of the answer


class Checker:
    """Feed it the writer's text; it returns the final units as SentenceEvents."""

    def __init__(self, sources: list[Source], judge: Judge, strict: bool,
                 prelude: list[str] | None = None,
                 addresses: Callable[[str, list[Source]], bool | None] | None = None,
                 verified: bool = False) -> None:
        self.by_n = {s.n: s for s in sources}
        self.addresses = addresses  # does a unit address the question (None: not judged)
        self.judge = judge
        self.strict = strict
        self.order: dict[int, int] = {}  # writer's number -> final number
        self.checks: list[SentenceCheck] = []
        self.rewrites: list[dict[str, str]] = []
        self.dropped = 0
        self.text = ""
        self.claims = 0  # units kept that are not headers or the no-answer sentence
        self.abstaining = False
        self.judge_ms = 0.0
        self.strict_dropped = 0  # units --strict left out: unsupported
        self.repeated = 0  # units left out: the same as one shown before
        self.empty = 0  # units left out: markers and no words
        self.attributed = 0  # units whose citation rag added (the writer's did not support them)
        self.verified = verified  # a model writes: an answer with nothing supported is an abstention
        self._seen: set[str] = set()
        self._pending = ""
        self._line_open = False  # the pending text continues a line already begun
        self._bibliography = False  # in the model's own reference list
        self._table = False  # the last line was a markdown table's row
        # Headers (a list's count) wait for the first claim: an answer that turns out to say
        # "the abstracts do not answer this" must not have claimed matches first.
        self._prelude = [_Piece(p, "", True) for p in prelude or []]
        self._matrix: tuple[np.ndarray, np.ndarray] | None = None  # every source's sentences

    # -- input ------------------------------------------------------------------------------

    def not_addressing(self) -> str | None:
        """The notice for sentences that do not address what was asked (their abstracts may
        support them: they say something else), None when every judged one does."""
        off = [c for c in self.checks if c.addresses is False]
        if not off:
            return None
        quoted = "; ".join(f'"{c.text}"' for c in off[:3])
        return f"{len(off)} of {len(self.checks)} sentences do not address what was asked: {quoted}"

    def feed(self, text: str) -> list[SentenceEvent]:
        self._pending, rewrites = normalize_citations(self._pending + text, len(self.by_n))
        self.rewrites += rewrites
        out: list[SentenceEvent] = []
        while "\n" in self._pending:
            line, self._pending = self._pending.split("\n", 1)
            out += self._line(line, complete=True)
        return out + self._line(self._pending, complete=False)

    def flush(self) -> list[SentenceEvent]:
        """The rest, at the end of the writer's text."""
        # The text is complete now: a citation at its very end ("claim (1)") can be decided.
        line, rewrites = normalize_citations(self._pending, len(self.by_n), end=True)
        self.rewrites += rewrites
        self._pending = ""
        out = self._line(line, complete=True)
        if self.claims == 0 and not self.abstaining and (self.strict or not self.text):
            out += self._emit(_Piece(NO_ANSWER, "", True), abstention=True)
        return out

    @property
    def abstained(self) -> bool:
        """Nothing was claimed; or, for a model's answer (`verified`), nothing it claimed is
        supported by its sources."""
        return self.claims == 0 or (self.verified and not any(c.supported for c in self.checks))

    def nothing_supported(self) -> str | None:
        """The notice for a model's answer that claims things and none of them supported."""
        if not self.verified or not self.claims or any(c.supported for c in self.checks):
            return None
        contradicted = sum(c.verdict == "contradicted" for c in self.checks)
        said = f"; {contradicted} contradicted by the abstract cited" if contradicted else ""
        return (f"none of the model's {self.claims} sentence(s) is supported by the abstracts"
                f"{said}: the abstracts may not answer this (the closest passages are listed)")

    def cited(self) -> set[int]:
        """The writer's numbers of the sources cited so far."""
        return set(self.order)

    # -- units ------------------------------------------------------------------------------

    def _line(self, line: str, complete: bool) -> list[SentenceEvent]:
        if not line.strip():
            if complete:
                self._line_open = False
            return []
        if not self._line_open and (self._bibliography or _BIBLIOGRAPHY.match(line)):
            if not complete:  # decided when the line ends
                self._pending = line
                return []
            if _BIBLIOGRAPHY.match(line) or _ENTRY.match(line):
                self._bibliography = True
                return []  # the model's own reference list: rag lists the papers cited
            self._bibliography = False
        # A numbered item's own number is no sentence's end: "1. [1]" keeps its marker.
        item = None if self._line_open else _BULLET.match(line)
        head = item.group(0) if item else ""
        line = head + _markers_to_claims(line[len(head):], complete)
        if not self._line_open and (line.lstrip().startswith("|") or _HEADING.match(line)):
            if not complete:  # a table row or a markdown heading is one unit
                self._pending = line
                return []
            first_row, self._table = not self._table, line.lstrip().startswith("|")
            text = clean_markers(line.strip(), set(self.by_n))[0]
            if not numbers_in(text) and (_HEADING.match(line) or first_row
                                         or _TABLE_RULE.fullmatch(text)):
                return self._heading(_Piece(text, "", True))  # a heading, a table's head
            return self._unit(_Piece(line.strip(), "", True))
        self._table = False
        bullet = None if self._line_open else _BULLET.match(line)
        if bullet:  # a list item is one unit, final when its line ends
            if not complete:
                self._pending = line
                return []
            return self._unit(_Piece(line[bullet.end():].strip(), bullet.group(0).strip(), True))
        pieces = [p for piece in sentence_pieces(line) for p in _cited_first(piece)]
        if complete:
            final = pieces
        else:
            # The last sentence is still being written; the one before it too while the
            # last could be its citation.
            cut = len(pieces) - 1
            if cut and pieces[-1].lstrip().startswith(_MAYBE_CITATION):
                cut -= 1
            final, self._pending = pieces[:cut], "".join(pieces[cut:])
        out: list[SentenceEvent] = []
        for piece in final:
            if piece.strip():
                out += self._unit(_Piece(piece.strip(), "", not self._line_open))
                self._line_open = True
        if complete:
            self._line_open = False
        return out

    def _unit(self, piece: _Piece) -> list[SentenceEvent]:
        text, dropped = clean_markers(piece.text, set(self.by_n))
        self.dropped += dropped
        text = text.strip()
        if not _WORD.search(_MARKS_ONLY.sub("", text)):
            self.empty += 1
            return []  # nothing but markers ("[1]", "1. [2]"): no claim to show or judge
        shape = " ".join(text.lower().split())  # the same unit again, citations and all
        if shape in self._seen:
            self.repeated += 1  # a model that says it again says nothing new
            return []
        self._seen.add(shape)
        if not numbers_in(text) and (_NO_ANSWER in text.lower() or _REFUSAL.search(text)):
            if self.claims == 0:  # the no-answer sentence, or a refusal in the model's words
                self.abstaining = True
            return self._emit(_Piece(text, piece.bullet, piece.newline), abstention=True)
        if text.rstrip("*_ ").endswith(":") and not numbers_in(text):  # "**Results:**" too
            return self._heading(_Piece(text, piece.bullet, piece.newline))
        cited = [self.by_n[n] for n in numbers_in(text) if n in self.by_n]
        started = time.perf_counter()
        support = self.judge.check(text, [(s.header(), s.paper.abstract) for s in cited])
        attributed = False
        if support.verdict == NOT_SUPPORTED and (found := self._attribute(text, cited)):
            text, support, cited, attributed = *found, True
        self.judge_ms += (time.perf_counter() - started) * 1000
        if self.strict and not support.supported:
            self.strict_dropped += 1
            return []
        for n in numbers_in(text):
            self.order.setdefault(n, len(self.order) + 1)
        text = renumber(text, self.order)
        check = SentenceCheck(text, numbers_in(text), support.supported, support.score,
                              support.quote, support.reasons, verdict=support.verdict,
                              attributed=attributed)
        self.attributed += attributed
        if self.addresses and cited:
            check.addresses = self.addresses(text, cited)
        self.checks.append(check)
        self.claims += 1
        self.abstaining = False
        out = [ev for p in self._prelude for ev in self._emit(p, meta=True)]
        self._prelude = []
        return out + self._emit(_Piece(text, piece.bullet, piece.newline), check=check)

    def _attribute(self, text: str, cited: list[Source]) -> tuple[str, Support, list[Source]] | None:
        """A sentence its citations do not support (or that cites nothing), checked against the
        other sources the writer was given: the one that supports it best becomes its only
        citation, marked as added by rag. None when none does: it stays not supported."""
        others = [s for s in self.by_n.values() if s not in cited]
        if not others or not claim_of(text):
            return None
        if len(others) > ATTRIBUTION_POOL:  # a long list: the nearest, and those it names
            others = self._nearest(text, others)
        found = self.judge.check(text, [(s.header(), s.paper.abstract) for s in others])
        if not found.supported or found.source is None:
            return None
        source = others[found.source]
        body = strip_markers(text)
        end = len(body.rstrip(".!?;:"))
        return f"{body[:end]} [{source.n}]{body[end:]}", found, [source]

    def _nearest(self, text: str, others: list[Source]) -> list[Source]:
        """The ATTRIBUTION_POOL sources whose sentences come nearest the sentence, and those it
        names, in the answer's order."""
        if self._matrix is None:
            self._matrix = self.judge.sentence_matrix([s.paper.abstract for s in self.by_n.values()])
        best = self.judge.nearest(text, self._matrix)  # in by_n's order
        if best is None:
            return others
        closeness = dict(zip(self.by_n, best.tolist(), strict=True))
        near = set(sorted((s.n for s in others), key=lambda n: -closeness[n])[:ATTRIBUTION_POOL])
        low = text.lower()
        return [s for s in others if s.n in near or (len(s.name) >= 3 and s.name.lower() in low)]

    def _heading(self, piece: _Piece) -> list[SentenceEvent]:
        """A line that introduces claims and states none: shown, not judged."""
        if self._prelude:  # after the list's count, which waits for the first claim
            self._prelude.append(piece)
            return []
        return self._emit(piece, meta=True)

    def _emit(self, piece: _Piece, *, check: SentenceCheck | None = None, meta: bool = False,
              abstention: bool = False) -> list[SentenceEvent]:
        if check is None:
            check = SentenceCheck(piece.text, [], True, 0.0, meta=True)
        body = f"{piece.bullet} {piece.text}" if piece.bullet else piece.text
        sep = "" if not self.text else ("\n" if piece.newline else " ")
        self.text += sep + body
        return [SentenceEvent(sep + body, check)]
