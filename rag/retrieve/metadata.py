"""Fielded matching of a query against the papers' records: arXiv id, DOI, paper id, author
names, venue and year phrases ("Which paper has arXiv id 2303.01277?", "papers by Trevor Gale
and Matei Zaharia", "published at AAAI 2023").

Neither half of retrieval sees these: the dense model knows no ids or names, BM25 indexes the
text (title, authors, abstract) but not ids, venues or years. `fuse` adds the matches to the
retriever's reciprocal-rank fusion as one more ranking, weighted by how much of the record the
query names. Written by hand: the fields are a handful of strings per paper and no library
here does fielded matching over them without a search server.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rag.corpus.paper import Paper
from rag.corpus.words import spans

# Points a paper earns per field the query names. An id or DOI identifies one paper; an
# author's full name nearly does; a venue or a year narrows to many. `fuse` weighs a match by
# its points, so "AAAI 2023" (venue + year) outranks the papers that only share the year.
ID_POINTS, AUTHOR_POINTS, SURNAME_POINTS, VENUE_POINTS, YEAR_POINTS = 4.0, 2.0, 1.0, 1.0, 0.5
# Matches within this many points of the best one form the ranking (ties of a venue's papers
# stay together; the papers that only share the year with "AAAI 2023" drop out).
KEEP_WITHIN = 0.5
# Weight of the metadata ranking in the fusion, per point: chosen with scripts/fit_relevance.py
# --metadata-grid on the fit split's 21 metadata questions (the paper in `rag search`'s top 5):
# 0 -> 0.571, 0.5 -> 0.905, 1, 2 and 4 -> 1.000; 2 is the middle of that plateau (held-out
# with 2: 1.000 of 21).
WEIGHT_PER_POINT = 2.0

_ARXIV = re.compile(r"(?<![\d.])(\d{4}\.\d{4,5})(?:v\d+)?(?![\d])")
_DOI = re.compile(r"\b(10\.\d{4,9}/[^\s\"'<>]+)", re.I)
_YEAR = re.compile(r"(?<![\d.])((?:19|20)\d{2})(?![\d.])")
_SHORT_YEAR = re.compile(r"[A-Za-z]'(\d{2})\b")  # ICCV'23
_TOKEN = re.compile(r"[\w][\w'-]*")
_ID_CUE = re.compile(r"\b(pmid|pubmed|id|identifier|doc(?:ument)?|record)\b", re.I)
_YEAR_CUE = re.compile(r"\b(published|appeared|accepted|presented|year|papers? (?:from|of|in)|"
                       r"studies (?:from|of|in)|works? (?:from|of|in)|dated)\b", re.I)
_VENUE_NOTE = re.compile(r"(?i:\b(accepted|conference|proceedings|workshop|symposium|journal)\b)|"
                         r"\b[A-Z][A-Z-]{2,}'?\s?\d{2,4}\b")
# Words of a venue note that name no venue.
_NOT_VENUE = frozenset(
    ["accepted", "by", "at", "in", "to", "for", "the", "of", "on", "and", "conference", "international", "proceedings", "workshop", "symposium", "journal", "annual", "transactions", "main", "track", "paper", "papers", "pages", "figures", "figure", "tables", "appendix", "text", "preprint", "code", "available", "arxiv", "admin", "note", "substantial", "overlap", "with"])


def venue_note(paper: Paper) -> str | None:
    """The comment line that names where the paper appeared ("ICML 2022", "Accepted by ...")."""
    return next((c for c in paper.comments if _VENUE_NOTE.search(c)), None)


def _norm(text: str) -> str:
    return unicodedata.normalize("NFKC", text).lower()


@dataclass(frozen=True)
class MetaMatch:
    paper_id: str
    points: float
    fields: tuple[str, ...]  # "arxiv_id", "doi", "paper_id", "author", "venue", "year"


def tables(papers: list[Paper]) -> dict[str, list[tuple[str, str]]]:
    """The fields of these papers as the snapshot's lookup tables (rag.retrieve.snapshot), rows
    in paper order: `meta_ids` (arXiv id, DOI, paper id and its part after "pubmed:"; the first
    paper of a key is the one it names), `meta_authors` (full names, lower-cased),
    `meta_surnames` (only those few papers share), `meta_venues` (venue words) and
    `meta_years` (a paper's own year and its venue note's)."""
    ids: list[tuple[str, str]] = []
    authors: list[tuple[str, str]] = []
    surnames: list[tuple[str, str]] = []
    venues: list[tuple[str, str]] = []
    years: list[tuple[str, str]] = []
    for p in papers:
        for key in (p.arxiv_id, p.doi and p.doi.lower(), p.paper_id.lower(),
                    p.paper_id.split(":", 1)[-1].lower()):
            if key and any(c.isdigit() for c in key) and len(key) >= 5:
                ids.append((key, p.paper_id))
        for author in p.authors:
            name = " ".join(_norm(author).split())
            if len(name) >= 5 and " " in name:
                authors.append((name, p.paper_id))
                surnames.append((name.rsplit(" ", 1)[1], p.paper_id))
        own = {p.year} if p.year else set()
        notes = [p.venue or "", p.journal_ref or ""] + [c for c in p.comments if _VENUE_NOTE.search(c)]
        for note in notes:
            for word in _TOKEN.findall(re.sub(r"\d+", " ", _norm(note.split(". ")[0]))):
                word = word.strip("'-")
                if len(word) >= 3 and word not in _NOT_VENUE:
                    venues.append((word, p.paper_id))
            own |= {int(y) for y in _YEAR.findall(note)}
            own |= {2000 + int(y) for y in _SHORT_YEAR.findall(note)}
        years += [(str(y), p.paper_id) for y in sorted(y for y in own if y)]
    # A surname names a paper only when few papers share it ("Lamy-Poirier", not "Li").
    sharing: dict[str, set[str]] = {}
    for surname, pid in surnames:
        sharing.setdefault(surname, set()).add(pid)
    kept = {s for s, pids in sharing.items() if len(s) >= 4 and len(pids) <= 3}
    return {"meta_ids": ids, "meta_authors": authors,
            "meta_surnames": [(s, pid) for s, pid in surnames if s in kept],
            "meta_venues": venues, "meta_years": years}


def _grouped(rows: Iterable[tuple[str, str]]) -> dict[str, set[str]]:
    """key -> its values, keys in the order they were first written."""
    out: dict[str, set[str]] = {}
    for key, value in rows:
        out.setdefault(key, set()).add(value)
    return out


class _Keys:
    """The keys of one lookup table, for `in` (the venue words of rag.question.patterns)."""

    def __init__(self, snapshot: Any, table: str) -> None:
        self._snapshot, self._table = snapshot, table
        self._seen: dict[str, bool] = {}

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        if key not in self._seen:
            self._seen[key] = bool(self._snapshot.lookup(self._table, [key]))
        return self._seen[key]


class _FirstOf:
    """key -> the first value written for it (the paper an id names)."""

    def __init__(self, snapshot: Any, table: str) -> None:
        self._snapshot, self._table = snapshot, table

    def get(self, key: str, default: str | None = None) -> str | None:
        return next((v for _, v in self._snapshot.lookup(self._table, [key])), default)


class MetadataIndex:
    """The fields of one snapshot's papers, matched against queries by looking them up in the
    snapshot's tables (`tables`): nothing here reads every paper."""

    def __init__(self, snapshot: Any) -> None:
        self._snapshot = snapshot
        self.ids = _FirstOf(snapshot, "meta_ids")  # arXiv id, DOI, paper id -> paper
        self.venues = _Keys(snapshot, "meta_venues")  # venue words, lower-cased

    def authors_in(self, query: str) -> dict[str, set[str]]:
        """Authors the query names in full (lower-cased) -> the ids of their papers."""
        q = " ".join(_norm(query).split())
        # a full name holds a space and five characters at least (`tables`)
        found = [t for t in spans(q, self._snapshot.longest("meta_authors")) if len(t) >= 5 and " " in t]
        rows = self._snapshot.lookup("meta_authors", found)
        return _grouped(rows)

    def publication_in(self, query: str) -> tuple[set[str], set[int]]:
        """The venue words ("aaai") and years (2023, or 2023 from "ICCV'23") the query names."""
        q = _norm(query)
        asked = {t.split("'")[0].strip("-") for t in _TOKEN.findall(q)}
        words = {k for k, _ in self._snapshot.lookup("meta_venues", sorted(asked))}
        years = {int(y) for y in _YEAR.findall(q)} | {2000 + int(y) for y in _SHORT_YEAR.findall(q)}
        return words, years

    def published(self, words: set[str], years: set[int]) -> set[str]:
        """Papers whose record names every venue word and one of the years (where given)."""
        dated = {pid for _, pid in self._snapshot.lookup("meta_years", [str(y) for y in sorted(years)])}
        if not words:
            return dated if years else set(self._snapshot.papers)
        venues = _grouped(self._snapshot.lookup("meta_venues", sorted(words)))
        ids = set.intersection(*(venues.get(w, set()) for w in words))
        return ids & dated if years else ids

    def match(self, query: str) -> list[MetaMatch]:
        """Papers the query names by a field of their record, most points first."""
        q = " ".join(_norm(query).split())
        points: dict[str, float] = {}
        fields: dict[str, list[str]] = {}

        def add(pid: str, pts: float, name: str) -> None:
            points[pid] = points.get(pid, 0.0) + pts
            fields.setdefault(pid, []).append(name)

        wanted = set(_ARXIV.findall(q)) | {d.rstrip(".,;:?!)") for d in _DOI.findall(q)}
        if _ID_CUE.search(q):
            wanted |= {t for t in _TOKEN.findall(q) if any(c.isdigit() for c in t)}
        named: dict[str, str] = {}
        for key, pid in self._snapshot.lookup("meta_ids", sorted(wanted)):
            named.setdefault(key, pid)
        for key in wanted:
            if key in named:
                add(named[key], ID_POINTS, "id")
        words = set(_TOKEN.findall(q))
        for ids in self.authors_in(q).values():
            for pid in ids:
                add(pid, AUTHOR_POINTS, "author")
        for ids in _grouped(self._snapshot.lookup("meta_surnames", sorted(words))).values():
            for pid in ids:
                if "author" not in fields.get(pid, []):
                    add(pid, SURNAME_POINTS, "author")
        venues = _grouped(self._snapshot.lookup("meta_venues", sorted(words)))
        for word in words & set(venues):
            for pid in venues[word]:
                if "venue" not in fields.get(pid, []):
                    add(pid, VENUE_POINTS, "venue")
        asked_years = {int(y) for y in _YEAR.findall(q)}
        if asked_years:
            cue = bool(_YEAR_CUE.search(q))
            rows = self._snapshot.lookup("meta_years", [str(y) for y in sorted(asked_years)])
            for pid in dict.fromkeys(pid for _, pid in rows):  # in paper order
                # A year alone names a paper only when the question asks about publication.
                if cue or pid in points:
                    add(pid, YEAR_POINTS, "year")
        if not points:
            return []
        best = max(points.values())
        kept = [MetaMatch(pid, pts, tuple(fields[pid])) for pid, pts in points.items()
                if pts >= best - KEEP_WITHIN]
        return sorted(kept, key=lambda m: -m.points)


_indexes: dict[int, tuple[Any, MetadataIndex]] = {}
_lock = threading.Lock()


def index_for(snapshot: Any) -> MetadataIndex:
    """The MetadataIndex of a retrieval snapshot (one per snapshot)."""
    with _lock:
        hit = _indexes.get(id(snapshot))
        if hit is not None and hit[0] is snapshot:
            return hit[1]
    index = MetadataIndex(snapshot)
    with _lock:
        if len(_indexes) >= 8:
            _indexes.clear()
        _indexes[id(snapshot)] = (snapshot, index)
    return index


def fuse(fused: dict[str, float], query: str, snapshot: Any, allowed: set[str] | None,
         rrf_k: int) -> dict[str, float]:
    """The fused chunk scores with the metadata ranking added: the best chunk of each paper the
    query names gains WEIGHT_PER_POINT x points / (rrf_k + rank), as one more reciprocal-rank
    list whose vote counts as much as the record's fields say."""
    matches = [m for m in index_for(snapshot).match(query) if allowed is None or m.paper_id in allowed]
    chunks = snapshot.chunks_of([m.paper_id for m in matches]) if matches else {}
    matches = [m for m in matches if chunks.get(m.paper_id)]
    if not matches:
        return fused
    out = dict(fused)
    ranked = sorted(matches, key=lambda m: (-m.points, -max(fused.get(c, 0.0) for c in chunks[m.paper_id])))
    for rank, m in enumerate(ranked, 1):
        best = max(chunks[m.paper_id], key=lambda c: fused.get(c, 0.0))
        out[best] = out.get(best, 0.0) + WEIGHT_PER_POINT * m.points / (rrf_k + rank)
    return out


_ID_PREFIX = re.compile(r"^(?:https?://(?:dx\.)?doi\.org/|https?://arxiv\.org/abs/|arxiv:|doi:)", re.I)
_ARXIV_VERSION = re.compile(r"^(\d{4}\.\d{4,5})v\d+$")
_OTHER_PREFIX = re.compile(r"^(?:pmid|pubmed|pmcid|openalex|s2|zotero):\s*", re.I)


def find_paper(snapshot: Any, ident: str) -> Paper | None:
    """A paper of the snapshot by the index's id, its arXiv id (with or without "arXiv:", a
    version or the abs/ URL), its DOI (with or without "doi:" or the doi.org URL), or an
    identifier of a record merged into it (a PMID, as "PMID:…" too; PMC, OpenAlex, Semantic
    Scholar, Zotero): a paper read first from a .bib file keeps the id made from its title."""
    ident = ident.strip()
    if ident in snapshot.papers:
        return snapshot.papers[ident]  # type: ignore[no-any-return]
    key = _ARXIV_VERSION.sub(r"\1", _ID_PREFIX.sub("", ident).strip())
    pid = index_for(snapshot).ids.get(key) or index_for(snapshot).ids.get(key.lower())
    if pid in snapshot.papers:
        return snapshot.papers[pid]  # type: ignore[no-any-return]
    other = _OTHER_PREFIX.sub("", key)
    # a scan: a lookup by hand (`rag papers show`, an MCP paper), not on a question's path
    return next((p for p in snapshot.papers.values() if other and other in p.ids.values()), None)

