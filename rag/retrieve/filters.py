"""Search filters (venue, year range, source file, arXiv category, author) and their translation into
metadata conditions the store evaluates itself, instead of a list of every allowed paper id.

Year ranges and categories are exact conditions on stored metadata (`year`, `categories`).
Venue and source are substring matches ("Only papers whose venue mentions this"), which
Chroma's metadata filters cannot express (`$contains` applies to documents and to array
members, never to a substring of a metadata string). So: a source becomes `$in` over the
*files* whose path contains it (a handful, not a paper each), or the ids of the papers
merged from such a file but stored under another (few); a venue becomes conditions on
the stored words of its fields, each partial word widened to the corpus's words that contain
it. Both are supersets of the exact match; `Filters.accepts` then decides exactly on the few
papers that come back. An author names few papers: they are found in the snapshot and named
by id.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import astuple, dataclass
from functools import cached_property
from typing import Any

from rag.corpus.paper import Paper, category_keys, source_files, venue_text, venue_words
from rag.errors import InputError

MAX_WIDENED = 64  # corpus words a partial venue word may stand for before it is left to accepts()
NOTHING = {"paper_id": {"$in": ["\0none"]}}  # a condition no paper meets


def name_words(text: str) -> list[str]:
    """A person's name as lower-case words without accents: "Müller, J." -> ["muller", "j"]."""
    folded = unicodedata.normalize("NFKD", text)
    folded = "".join(c for c in folded if not unicodedata.combining(c)).lower()
    return re.findall(r"[^\W_]+", folded)


def by_author(wanted: list[str], authors: Iterable[list[str]]) -> bool:
    """Whether one of the authors (each as name_words) is the person `wanted` names: each word
    is a word of that author's name, or an initial of one or given by one ("Hwang", "Changho
    Hwang", "C. Hwang", "Hwang, Changho"; "Changho Hwang" for a record's "C. Hwang"), whatever
    the order and accents; one word at least, the surname, in full ("Gale" is not "G. Smith")."""
    def same(w: str, h: str) -> bool:
        return w == h or (len(w) == 1 and h.startswith(w)) or (len(h) == 1 and w.startswith(h))

    return any(all(any(same(w, h) for h in have) for w in wanted)
               and any(len(w) > 1 and w in have for w in wanted) for have in authors)


@dataclass
class Filters:
    venue: str | None = None
    year_from: int | None = None
    year_to: int | None = None
    source: str | None = None
    category: str | None = None
    author: str | None = None

    @classmethod
    def parse(cls, venue: str | None = None, year: str | int | None = None,
              source: str | None = None, *, category: str | None = None,
              author: str | None = None) -> Filters:
        f = cls(venue=venue or None, source=source or None, category=(category or "").strip() or None,
                author=" ".join((author or "").split()) or None)
        if f.author and not any(len(w) > 1 for w in name_words(f.author)):
            raise InputError(f"author filter {f.author!r} has no name in it",
                             "give a surname or a full name: Hwang, Changho Hwang, C. Hwang")
        if year is not None and str(year).strip():
            text = str(year).strip()
            m = re.fullmatch(r"(\d{4})?\s*(?:-|\.\.|–)\s*(\d{4})?|(\d{4})", text)
            if not m or text in ("-", ".."):
                raise InputError(
                    f"year filter {text!r} is not a year or range",
                    "use 2023, 2022-2023, 2022- or -2023",
                )
            if m.group(3):
                f.year_from = f.year_to = int(m.group(3))
            else:
                f.year_from = int(m.group(1)) if m.group(1) else None
                f.year_to = int(m.group(2)) if m.group(2) else None
                if f.year_from and f.year_to and f.year_from > f.year_to:
                    raise InputError(f"year range {text!r} ends before it starts",
                                     f"did you mean {f.year_to}-{f.year_from}?")
        return f

    def active(self) -> bool:
        return any(v is not None for v in astuple(self))

    def key(self) -> tuple[Any, ...]:
        return astuple(self)

    def describe(self) -> str:
        """The filters as a person set them: 'venue mlsys, year 2022-2023'."""
        years = None
        if self.year_from is not None or self.year_to is not None:
            years = str(self.year_from) if self.year_from == self.year_to \
                else f"{self.year_from or ''}-{self.year_to or ''}"
        parts = [("venue", self.venue), ("year", years), ("source", self.source),
                 ("category", self.category), ("author", self.author)]
        return ", ".join(f"{name} {value}" for name, value in parts if value is not None)

    def accepts(self, p: Paper) -> bool:
        if self.year_from is not None and (p.year is None or p.year < self.year_from):
            return False
        if self.year_to is not None and (p.year is None or p.year > self.year_to):
            return False
        if self.source and not any(self.source in f for f in source_files(p)):
            return False
        if self.category and self.category.lower() not in category_keys(p.categories):
            return False
        if self.author and not by_author(name_words(self.author), map(name_words, p.authors)):
            return False
        return not (self.venue and self.venue.lower() not in venue_text(p))


class Conditions:
    """Builds the store's metadata conditions for filters over one snapshot of the papers."""

    def __init__(self, papers: Iterable[Paper]) -> None:
        words: set[str] = set()
        sources: set[str] = set()
        self._merged: dict[str, list[str]] = {}  # a file -> papers merged from it, stored under another
        # paper id -> its authors, split into name words the first time an author filter asks
        # (2.8 s for 500,000 names: every filtered index's first query paid it), then kept
        self._authors: list[tuple[str, list[str]]] = []
        for p in papers:
            if p.authors:
                self._authors.append((p.paper_id, p.authors))
            words.update(venue_words(p))
            sources.add(p.source)
            for f in source_files(p)[1:]:
                self._merged.setdefault(f, []).append(p.paper_id)
        self.words, self.sources, self._known = sorted(words), sorted(sources), words

    @cached_property
    def _author_words(self) -> list[tuple[str, list[list[str]]]]:
        return [(pid, [name_words(a) for a in authors]) for pid, authors in self._authors]

    def where(self, f: Filters) -> dict[str, Any] | None:
        """Conditions every chunk of an accepted paper meets (None: no condition); NOTHING
        when no paper can match."""
        conds: list[dict[str, Any]] = []
        if f.year_from is not None:
            conds.append({"year": {"$gte": f.year_from}})
        if f.year_to is not None:
            conds.append({"year": {"$lte": f.year_to}})
            if f.year_from is None:
                conds.append({"year": {"$gte": 1}})  # 0 is stored for "no year"
        if f.category:
            conds.append({"categories": {"$contains": f.category.lower()}})
        if f.source:
            files = [s for s in self.sources if f.source in s]
            # a paper merged from a matching file is stored under the file its fields came
            # from: named by id (the few merged papers, not every allowed one)
            merged = sorted({pid for s, ids in self._merged.items() if f.source in s for pid in ids})
            either: list[dict[str, Any]] = []
            if files:
                either.append({"source": {"$in": files}} if len(files) > 1 else {"source": files[0]})
            if merged:
                either.append({"paper_id": {"$in": merged}})
            if not either:
                return NOTHING
            conds.append(either[0] if len(either) == 1 else {"$or": either})
        if f.author:
            wanted = name_words(f.author)
            ids = [pid for pid, authors in self._author_words if by_author(wanted, authors)]
            if not ids:
                return NOTHING
            conds.append({"paper_id": {"$in": ids}} if len(ids) > 1 else {"paper_id": ids[0]})
        if f.venue:
            venue = self._venue(f.venue.lower())
            if venue is NOTHING:
                return NOTHING
            conds += venue
        if not conds:
            return None
        return conds[0] if len(conds) == 1 else {"$and": conds}

    def _venue(self, text: str) -> Any:
        tokens = re.findall(r"\w+", text)
        out: list[dict[str, Any]] = []
        for i, tok in enumerate(tokens):
            # A substring may begin inside a word and end inside one: its first word is the end
            # of a stored word, its last the start of one, a lone word any part of one.
            if len(tokens) == 1:
                found = [w for w in self.words if tok in w]
            elif i == 0:
                found = [w for w in self.words if w.endswith(tok)]
            elif i == len(tokens) - 1:
                found = [w for w in self.words if w.startswith(tok)]
            else:
                found = [tok] if tok in self._known else []
            if not found:
                return NOTHING
            if len(found) <= MAX_WIDENED:
                options = [{"venue_words": {"$contains": w}} for w in found]
                out.append(options[0] if len(options) == 1 else {"$or": options})
        return out
