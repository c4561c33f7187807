"""One record per paper across files, readers and ingests: the identifier rule.

Records are one paper when they share a DOI, an arXiv id (version stripped), a PMID, a paper
id, the same abstract, or the same normalised title with the same first-author surname and
years at most one apart. A title, and an id made from one, join records only when their DOIs
(a preprint's arXiv DOI aside), arXiv ids and PMIDs do not differ, nor first authors and
years: two papers titled "Deep learning" stay two, the second with its own id.

Which record's fields the paper keeps (its "base"):

1. the record already in the index, unless the record comes from the file it was indexed
   from (the file was edited) or `replace` is set (`rag ingest --replace`);
2. within one ingest, a published record (a DOI other than arXiv's, from a reader other than
   the arXiv ones) over a preprint, then the first seen (with `replace`: the last seen).

The other records only fill the base's empty fields (a title in capitals takes another
record's same title as written: Paper.merge), add their identifiers and categories,
and are listed in its `sources` (file, line, format, and the identifier that matched). Every
merge is returned as a `Merge`, so the ingest reports it: nothing is replaced silently.
"""

from __future__ import annotations

import copy
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rag.corpus.paper import Paper, make_paper_id, norm_text, sha, strip_doi_link

if TYPE_CHECKING:
    from rag.corpus import FileResult

PREPRINT_FORMATS = frozenset({"arxiv-snapshot", "arxiv-listing", "arxiv-export", "arxiv-atom"})


@dataclass
class Merge:
    """Two records found to be one paper, as the ingest reports it."""

    paper: Paper  # what the records became: its id may change as later records join it
    kept: str  # where the kept fields (the abstract among them) come from
    other: str  # the record merged into it
    why: str  # "same DOI 10.1145/..."
    differ: bool  # the two abstracts differ: one of them was not kept

    @property
    def paper_id(self) -> str:
        """The paper's id once every record is read (the arXiv id when a later record gave one)."""
        return self.paper.paper_id

    def describe(self) -> str:
        text = f"{self.paper_id} ({self.why}): {self.other} merged with {self.kept}"
        if self.differ:
            text += f"; kept the abstract from {self.kept}"
        return text


def where(p: Paper) -> str:
    if p.line:
        return f"{p.source}:{p.line}"
    return f"{p.source} record {p.position}" if p.position else p.source


def norm_doi(doi: str | None) -> str | None:
    """A DOI as a merge key: no link prefix, lower case (DOIs are case-insensitive)."""
    return strip_doi_link(doi).lower() or None if doi else None


def surname(name: str) -> str:
    """The last word of a "First Last" name, without accents, lower-case."""
    plain = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    words = norm_text(plain).split()
    return words[-1] if words else ""


def keys(p: Paper) -> list[tuple[str, str]]:
    """(what, value) pairs that identify the paper; `title` pairs need years within one."""
    out = []
    doi = norm_doi(p.doi)
    if doi:
        out.append(("DOI", doi))
    if p.arxiv_id:
        out.append(("arXiv id", p.arxiv_id))
    if p.ids.get("pmid"):
        out.append(("PMID", p.ids["pmid"]))
    out += [("paper id", p.paper_id), ("abstract", sha(norm_text(p.abstract)))]
    if p.title and p.authors and surname(p.authors[0]):
        out.append(("title", f"{norm_text(p.title)}|{surname(p.authors[0])}"))
    return out


def _differ(a: Paper, b: Paper) -> bool:
    """Two records say they are different papers: different DOIs (a preprint's arXiv DOI
    against a publisher's is the same paper twice), arXiv ids or PMIDs."""
    da, db = norm_doi(a.doi), norm_doi(b.doi)
    if da and db and da != db and not (da.startswith("10.48550/") or db.startswith("10.48550/")):
        return True
    if a.arxiv_id and b.arxiv_id and a.arxiv_id != b.arxiv_id:
        return True
    pa, pb = a.ids.get("pmid"), b.ids.get("pmid")
    return bool(pa and pb and pa != pb)


def _same_authorship(a: Paper, b: Paper) -> bool:
    """Nothing in the records sets them apart as papers: first-author surnames agree where
    both have authors, years are at most one apart where both have one."""
    sa, sb = (surname(p.authors[0]) if p.authors else "" for p in (a, b))
    return (not sa or not sb or sa == sb) and _years_close(a, b)


def _derived_id(p: Paper) -> bool:
    """The paper id was made from the title or the abstract (make_paper_id), so another
    paper with the same title has it too: it is no identifier of its own."""
    return p.paper_id == make_paper_id(None, p.title, p.abstract)


def _matches(what: str, found: Paper, p: Paper) -> bool:
    """Whether a shared key of `what` kind makes `found` and `p` one paper. A title, or an
    id made from one, is shared by different papers ("Deep learning", "Editorial"): it
    counts only when their identifiers and authorship do not tell them apart."""
    if what == "title":
        return _years_close(found, p) and not _differ(found, p)
    if what == "paper id" and (_derived_id(found) or _derived_id(p)):
        return _same_authorship(found, p) and not _differ(found, p)
    return True


def distinct_id(p: Paper, taken: Callable[[str], bool]) -> str:
    """An id for a paper whose made-up id (from its title) another paper holds: the same id
    with a suffix from what sets it apart (DOI, arXiv id, PMID, else its abstract), so it is
    the same on every ingest of the same files."""
    what = norm_doi(p.doi) or p.arxiv_id or p.ids.get("pmid") or norm_text(p.abstract)
    tag, n = sha(what), 4
    while taken(f"{p.paper_id}-{tag[:n]}") and n < len(tag):
        n += 2
    return f"{p.paper_id}-{tag[:n]}"


def _describe(what: str, value: str, p: Paper) -> str:
    if what == "title":
        return f"same title, first author and year ({p.title}, {surname(p.authors[0])})"
    if what == "abstract":
        return "same abstract"
    return f"same {what} {value}"


def published(p: Paper) -> bool:
    doi = norm_doi(p.doi)
    return bool(doi and not doi.startswith("10.48550/") and p.format not in PREPRINT_FORMATS)


def entries(p: Paper, matched: str = "") -> list[dict[str, object]]:
    """The provenance of a record: its own `sources`, or itself alone."""
    if p.sources:
        return [dict(e) for e in p.sources]
    entry: dict[str, object] = {"source": p.source}
    if p.line:
        entry["line"] = p.line
    elif p.position:  # a record without lines (XML, a database): its place among the file's
        entry["record"] = p.position
    if p.format:
        entry["format"] = p.format
    if matched:
        entry["matched"] = matched
    return [entry]


def _place(entry: dict[str, object]) -> tuple[object, object, object]:
    return entry.get("source"), entry.get("line"), entry.get("record")


def _years_close(a: Paper, b: Paper) -> bool:
    return a.year is None or b.year is None or abs(a.year - b.year) <= 1


def combine(base: Paper, other: Paper, why: str) -> None:
    """Fill `base` from `other` (of the same paper) and record `other` as a source."""
    mine = entries(base)
    theirs = entries(other, why)
    if theirs and not theirs[0].get("matched"):
        theirs[0]["matched"] = why
    base.merge(other)
    base.categories = list(dict.fromkeys([*base.categories, *other.categories]))
    seen = {_place(e) for e in mine}
    if len(theirs) == 1 and _place(theirs[0]) in seen and other.position and "record" not in theirs[0]:
        theirs[0]["record"] = other.position  # two records on one line: an API page saved on one
    merged = mine + [e for e in theirs if _place(e) not in seen]
    base.sources = merged if len(merged) > 1 else []


class Merger:
    """Merges records into papers, in the order given."""

    def __init__(self, replace: bool = False) -> None:
        self.replace = replace
        self.papers: list[Paper] = []
        self.merges: list[Merge] = []
        self._by_key: dict[str, Paper] = {}

    def find(self, p: Paper) -> tuple[Paper, str] | None:
        for what, value in keys(p):
            found = self._by_key.get(f"{what}:{value}")
            if found is not None and _matches(what, found, p):
                return found, _describe(what, value, p)
        return None

    def _index(self, p: Paper) -> None:
        for what, value in keys(p):
            self._by_key.setdefault(f"{what}:{value}", p)

    def add(self, p: Paper) -> Paper:
        """Merge `p` into the paper it belongs to (or start one); return that paper."""
        hit = self.find(p)
        if hit is None:
            if f"paper id:{p.paper_id}" in self._by_key:  # another paper of the same title
                p.paper_id = distinct_id(p, lambda i: f"paper id:{i}" in self._by_key)
            self.papers.append(p)
            self._index(p)
            return p
        base, why = hit
        differ = norm_text(base.abstract) != norm_text(p.abstract)
        wins = self.replace or (published(p) and not published(base))
        if wins:
            # the new record's fields win: swap contents, so `base` stays the listed object
            old = copy.copy(base)
            base.__dict__.update(copy.copy(p).__dict__)
            base.sources = []
            combine(base, old, why)
            kept, other = where(p), where(old)
        else:
            combine(base, p, why)
            kept, other = where(base), where(p)
        self.merges.append(Merge(base, kept, other, why, differ))
        self._index(base)
        self._index(p)
        return base


def merge_papers(papers: list[Paper], replace: bool = False) -> list[Paper]:
    """One record per paper, by the rule above."""
    m = Merger(replace)
    for p in papers:
        m.add(p)
    return m.papers


def merge_with_index(papers: list[Paper], stored: list[Paper], read_sources: set[str],
                     replace: bool = False, gone_sources: frozenset[str] = frozenset()
                     ) -> tuple[list[Paper], list[Merge], set[str]]:
    """This ingest's papers merged with the indexed ones they share an identifier with.

    Returns the papers to write, the merges to report, and the ids of indexed papers now
    part of another paper (to delete). An indexed paper keeps its fields and id unless the
    new record comes from the file it was indexed from, that file is gone (`gone_sources`:
    `rag ingest --prune` found it deleted), or `replace`."""
    index = Merger()
    for s in stored:
        index.papers.append(s)
        index._index(s)
    out: list[Paper] = []
    merges: list[Merge] = []
    absorbed: set[str] = set()
    taken: dict[str, Paper] = {}  # indexed paper id -> the paper it became in this ingest
    fresh: list[Paper] = []  # records of no indexed paper
    for p in papers:
        hit = index.find(p)
        if hit is None:
            out.append(p)
            fresh.append(p)
            continue
        s, why = hit
        if s.paper_id in taken:  # two new papers matched one indexed paper: join them
            joined = taken[s.paper_id]
            merges.append(Merge(joined, where(joined), where(p), why,
                                norm_text(joined.abstract) != norm_text(p.abstract)))
            combine(joined, p, why)
            continue
        # what the index knew from the files read now is superseded by what they say now
        kept_entries = [e for e in entries(s) if e.get("source") not in read_sources | gone_sources]
        if s.source in read_sources or s.source in gone_sources or replace:
            merged = p
            if kept_entries:
                rest = copy.copy(s)
                rest.sources = kept_entries
                combine(merged, rest, why)
                others = ", ".join(str(e.get("source")) for e in kept_entries)
                merges.append(Merge(merged, where(p), others, why,
                                    replace and norm_text(s.abstract) != norm_text(p.abstract)))
        else:
            merged = copy.copy(s)
            merged.sources = kept_entries
            combine(merged, p, why)
            merges.append(Merge(merged, s.source, where(p), why,
                                norm_text(s.abstract) != norm_text(p.abstract)))
        # a record seen before keeps the reason it was first merged for: the paper's stored
        # record (and so its content hash) does not change when nothing in the files did
        before = {_place(e): e.get("matched") for e in s.sources}
        for e in merged.sources:
            if before.get(_place(e)) is not None:
                e["matched"] = before[_place(e)]
            elif _place(e) in before:
                e.pop("matched", None)
        if merged.paper_id != s.paper_id:
            if merged.arxiv_id and merged.paper_id == merged.arxiv_id and s.paper_id != s.arxiv_id:
                absorbed.add(s.paper_id)  # the id became the arXiv id (Paper.merge)
            else:
                merged.paper_id = s.paper_id  # the indexed id stays: citations of it hold
        taken[s.paper_id] = merged
        out.append(merged)
    # A new paper whose made-up id an indexed paper of the same title holds takes another id,
    # unless that paper goes: its files, all read now, no longer hold it (it was edited).
    by_id = {s.paper_id: s for s in stored}
    ids = set(by_id) | {p.paper_id for p in out}
    for p in fresh:
        holder = by_id.get(p.paper_id)
        if holder is not None and (p.paper_id in taken or not all(
                e.get("source") in read_sources for e in entries(holder))):
            p.paper_id = distinct_id(p, ids.__contains__)
            ids.add(p.paper_id)
    return out, merges, absorbed - {p.paper_id for p in out}


def gone_sources(stored: dict[str, Paper], source_paths: dict[str, str]) -> frozenset[str]:
    """With --prune (`source_paths` given): the files the stored papers came from that no
    longer exist. A file is checked at the absolute path it had when a paper was indexed
    from it, else (a file that only added records to papers of other files) as written."""
    if not source_paths:
        return frozenset()
    where = {p.source: source_paths[pid] for pid, p in stored.items() if pid in source_paths}
    named = {str(e.get("source")) for p in stored.values() for e in entries(p)}
    return frozenset(src for src in named | set(where) if not Path(where.get(src, src)).exists())


def records_in_order(results: Sequence[FileResult]) -> tuple[list[Paper], set[str]]:
    """The records of all files in order, and the PMIDs deleted (PubMed DeleteCitation): a
    deletion removes the records of earlier files, and a later record brings the paper back."""
    records: list[Paper] = []
    deleted: set[str] = set()
    for r in results:
        if r.deleted:
            gone = set(r.deleted)
            records = [p for p in records if p.ids.get("pmid") not in gone]
            deleted |= gone
        for p in r.papers:
            deleted.discard(p.ids.get("pmid", ""))
            records.append(p)
    return records, deleted
