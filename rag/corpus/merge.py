"""One record per paper across files, readers and ingests: the identifier rule.

Records are one paper when they share a DOI, an arXiv id (version stripped), a PMID, a paper
id, the same abstract, or the same normalised title with the same first-author surname and
years at most one apart. A title, and an id made from one, join records only when their DOIs
(a preprint's arXiv DOI aside), arXiv ids and PMIDs do not differ, nor first authors and
years: two papers titled "Deep learning" stay two, the second with its own id.

Which record's fields the paper keeps (its "base"):

1. with `replace` (`rag ingest --replace`), the last seen;
2. the record already in the index, unless the file it was indexed from is read again (then
   that file's record of the paper: the file was edited, or only read again beside others),
   no longer holds the paper, or is gone (`rag ingest --prune`);
3. within one ingest, a published record (a DOI other than arXiv's, from a reader other than
   the arXiv ones) over a preprint, then the first seen (the ingest reads files in path order).

Records of two indexed papers are never merged into one by an ingest, whatever a third record
shares with both: what an indexed paper says changes only through `replace` or its own file,
in any order of files and by any entry point (CLI, watch, MCP).

The other records only fill the base's empty fields (a title in capitals takes another
record's same title as written: Paper.merge), add their identifiers and categories,
and are listed in its `sources` (file, line, format, and the identifier that matched). Every
merge is returned as a `Merge`, naming the fields the other record filled, so the ingest
reports it: nothing is replaced silently.
"""

from __future__ import annotations

import copy
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rag.corpus.paper import (
    Paper,
    location,
    make_paper_id,
    norm_text,
    sha,
    source_files,
    strip_doi_link,
)

PREPRINT_FORMATS = frozenset({"arxiv-snapshot", "arxiv-listing", "arxiv-export", "arxiv-atom"})


@dataclass
class Merge:
    """Two records found to be one paper, as the ingest reports it."""

    paper: Paper  # what the records became: its id may change as later records join it
    kept: str  # where the kept fields (the abstract among them) come from
    other: str  # the record merged into it
    why: str  # "same DOI 10.1145/..."
    differ: bool  # the two abstracts differ: one of them was not kept
    filled: tuple[str, ...] = ()  # the kept record's empty fields the other record filled

    @property
    def paper_id(self) -> str:
        """The paper's id once every record is read (the arXiv id when a later record gave one)."""
        return self.paper.paper_id

    def describe(self) -> str:
        text = f"{self.paper_id} ({self.why}): {self.other} merged with {self.kept}"
        if self.differ:
            text += f"; kept the abstract from {self.kept}"
        if self.filled:
            text += f"; took the {', '.join(self.filled)} from {self.other}"
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
    # which record it was: read again at the same place with this abstract, it is the same one
    entry["abstract_hash"] = abstract_hash(p.abstract)
    if matched:
        entry["matched"] = matched
    return [entry]


def abstract_hash(text: str) -> str:
    return sha(norm_text(text))[:12]


def _place(entry: dict[str, object]) -> tuple[object, object, object]:
    return entry.get("source"), entry.get("line"), entry.get("record")


def _order(entry: dict[str, object]) -> tuple[str, int, int]:
    line, record = entry.get("line"), entry.get("record")
    return (str(entry.get("source")), line if isinstance(line, int) else 0,
            record if isinstance(record, int) else 0)


def _years_close(a: Paper, b: Paper) -> bool:
    return a.year is None or b.year is None or abs(a.year - b.year) <= 1


# The fields a merge names when another record fills them (what a citation shows).
SHOWN = {"title": "title", "authors": "authors", "venue": "venue", "year": "year", "doi": "DOI",
         "arxiv_id": "arXiv id", "journal_ref": "journal ref"}


def combine(base: Paper, other: Paper, why: str) -> tuple[str, ...]:
    """Fill `base` from `other` (of the same paper) and record `other` as a source; returns
    the names of the shown fields `other` filled."""
    mine = entries(base)
    theirs = entries(other, why)
    if theirs and not theirs[0].get("matched"):
        theirs[0]["matched"] = why
    empty = [f for f in SHOWN if not getattr(base, f)]
    base.merge(other)
    base.categories = list(dict.fromkeys([*base.categories, *other.categories]))
    seen = {_place(e) for e in mine}
    if len(theirs) == 1 and _place(theirs[0]) in seen and other.position and "record" not in theirs[0]:
        theirs[0]["record"] = other.position  # two records on one line: an API page saved on one
    # the base's own record first, the others in order of place: the same list whatever order
    # the records were merged in, over one ingest or several
    merged = mine[:1] + sorted(mine[1:] + [e for e in theirs if _place(e) not in seen], key=_order)
    base.sources = merged if len(merged) > 1 else []
    return tuple(SHOWN[f] for f in empty if getattr(base, f))


def same_file(s: Paper, source: str, p: Paper) -> bool:
    """Whether the record `p` comes from `source`, a file of the indexed paper `s`: the same
    place when both are known (the names are relative to the folder each ingest ran in), else
    the same name."""
    at = s.located.get(source)
    return p.located.get(p.source) == at if at and p.located.get(p.source) else p.source == source


Place = tuple[str, str, int, str]  # (where the file is, "line" or "record", number, abstract_hash)


def _places(p: Paper) -> list[Place]:
    """Where the record `p` is (its file and its line, and its place among the file's records),
    and which it is."""
    at, which = location(p, p.source), abstract_hash(p.abstract)
    return ([(at, "line", p.line, which)] if p.line else []) + [(at, "record", p.position, which)]


def _listed(s: Paper) -> dict[Place, tuple[bool, str]]:
    """The records the indexed paper `s` was made from (as its `sources` list them; the base's
    is its own abstract), each with whether it is the base's. An entry of an index written
    before entries said which record they were is left out: its record is placed by its keys."""
    out: dict[Place, tuple[bool, str]] = {}
    for i, e in enumerate(entries(s)):
        at = location(s, str(e.get("source")))
        which = abstract_hash(s.abstract) if i == 0 else e.get("abstract_hash")
        for kind in ("line", "record"):
            number = e.get(kind)
            if isinstance(number, int) and isinstance(which, str):
                out.setdefault((at, kind, number, which), (i == 0, str(e.get("matched") or "")))
    return out


class Merger:
    """Merges records into papers, in the order given. Each record is first placed with the
    indexed paper (of `stored`) it is a record of, its "anchor": the one that lists its place
    among its sources, else one its file is the own file of, else the first it shares an
    identifier with. The indexed paper's own record is its base (`rank`), and records of two
    indexed papers are never merged (one sharing a paper's id and another's title joined them)."""

    def __init__(self, replace: bool = False, stored: Sequence[Paper] = (),
                 gone: Callable[[Paper, str], bool] | None = None) -> None:
        self.replace = replace
        self._gone = gone or (lambda s, source: False)
        self.papers: list[Paper] = []
        self.merges: list[Merge] = []
        self._by_key: dict[str, Paper] = {}
        self._stored: dict[str, list[Paper]] = {}
        self._places: dict[Place, tuple[Paper, bool, str]] = {}
        for s in stored:
            for what, value in keys(s):
                self._stored.setdefault(f"{what}:{value}", []).append(s)
            for at, (base, matched) in _listed(s).items():
                self._places.setdefault(at, (s, base, matched))
        self._anchor: dict[int, tuple[Paper, str]] = {}  # id(paper) -> its indexed paper, and why
        self._anchored: dict[str, Paper] = {}  # indexed paper id -> the paper of its records
        self._rank: dict[int, tuple[int, bool]] = {}  # id(paper) -> its base record's rank

    def anchor(self, p: Paper) -> tuple[Paper, str] | None:
        """The indexed paper a paper of this merger was placed with, and why, if any."""
        return self._anchor.get(id(p))

    def own(self, p: Paper) -> bool:
        """The paper's fields are its indexed paper's own file's record, read now."""
        return self._rank.get(id(p), (0, False))[0] > 0

    def stored_match(self, p: Paper, ks: list[tuple[str, str]] | None = None) -> tuple[Paper, str, int] | None:
        """The indexed paper `p` is a record of (and why), and whether it is that paper's own
        record: 2 where the paper lists `p`'s place as its base's, 1 where `p` is elsewhere in
        the paper's own file (edited since), 0 where it is another file's record. `ks`: keys(p),
        when the caller has them."""
        if not self._stored:  # nothing indexed (a first ingest): no key or place can match
            return None
        found = [(s, _describe(what, value, p)) for what, value in (keys(p) if ks is None else ks)
                 for s in self._stored.get(f"{what}:{value}", ()) if _matches(what, s, p)]
        for at in _places(p):  # the same record, where the index last read it
            if at in self._places:
                s, base, matched = self._places[at]
                why = next((why for t, why in found if t is s), matched or "the same record as before")
                return s, why, 2 if base else 0
        return next(((s, why, 1) for s, why in found if same_file(s, s.source, p)),
                    (*found[0], 0) if found else None)

    def find(self, p: Paper, anchor: Paper | None = None,
             ks: list[tuple[str, str]] | None = None) -> tuple[Paper, str] | None:
        for what, value in keys(p) if ks is None else ks:
            found = self._by_key.get(f"{what}:{value}")
            if found is None or not _matches(what, found, p):
                continue
            other = self._anchor.get(id(found))
            if anchor is not None and other is not None and other[0].paper_id != anchor.paper_id:
                continue  # records of two indexed papers stay two
            return found, _describe(what, value, p)
        return None

    def _index(self, p: Paper, paper: Paper) -> None:
        for what, value in keys(p):
            self._by_key.setdefault(f"{what}:{value}", paper)

    def add(self, p: Paper) -> Paper:
        """Merge `p` into the paper it belongs to (or start one); return that paper."""
        ks = keys(p)  # hashes the abstract: once for both lookups
        match = self.stored_match(p, ks)
        anchored = (match[0], match[1]) if match else None
        anchor = match[0] if match else None
        hit = self.find(p, anchor, ks)
        group = self._anchored.get(anchor.paper_id) if anchor is not None else None
        if anchored and group is not None and (hit is None or hit[0] is not group):
            hit = group, anchored[1]  # one paper for the records of one indexed paper
        rank = (match[2] if match else 0, published(p))
        if hit is None:
            if f"paper id:{p.paper_id}" in self._by_key:  # another paper of the same title
                p.paper_id = distinct_id(p, lambda i: f"paper id:{i}" in self._by_key)
            self.papers.append(p)
            self._as_indexed(p, anchor, rank)
            self._index(p, p)
            self._rank[id(p)] = rank
            self._place(p, anchored)
            return p
        base, why = hit
        differ = norm_text(base.abstract) != norm_text(p.abstract)
        if self.replace or rank > self._rank[id(base)]:
            # the new record's fields win: swap contents, so `base` stays the listed object
            old = copy.copy(base)
            base.__dict__.update(copy.copy(p).__dict__)
            if self._by_key.get(f"paper id:{p.paper_id}", base) is not base:
                base.paper_id = old.paper_id  # another paper holds the new record's id: two stay two
            base.sources = []
            self._as_indexed(base, anchor, rank)
            filled = combine(base, old, why)
            kept, other = where(p), where(old)
            self._rank[id(base)] = rank
        else:
            filled = combine(base, p, why)
            kept, other = where(base), where(p)
        self.merges.append(Merge(base, kept, other, why, differ, filled))
        self._index(base, base)
        self._index(p, base)
        self._place(base, anchored)
        return base

    def _as_indexed(self, base: Paper, anchor: Paper | None, rank: tuple[int, bool]) -> None:
        """An indexed paper's own record, read again, is first filled from what the index says
        of the paper, then from the other records: which of them filled a field stays the
        same, whatever files are read with it and in what order."""
        if anchor is not None and rank[0] and not self.replace and not any(
                self._gone(anchor, f) for f in source_files(anchor)):  # --prune: what a deleted file said goes
            base.merge(copy.copy(anchor))

    def _place(self, paper: Paper, anchored: tuple[Paper, str] | None) -> None:
        if anchored is not None and id(paper) not in self._anchor:
            self._anchor[id(paper)] = anchored
            self._anchored.setdefault(anchored[0].paper_id, paper)


def merge_papers(papers: list[Paper], replace: bool = False) -> list[Paper]:
    """One record per paper, by the rule above."""
    m = Merger(replace)
    for p in papers:
        m.add(p)
    return m.papers
