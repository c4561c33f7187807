"""An ingest's papers against the index: which indexed papers they change, which stay as they
are, which files count as read again or gone, and what PubMed's DeleteCitation takes.

The precedence is rag.corpus.merge's: an indexed paper keeps its record unless its own file is
read again (and still holds it, or no longer does), is gone (`--prune`), or `--replace`. Files
are compared by where they were when read (Paper.located), so an ingest run from another
folder, where the same file has another name, changes nothing.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rag.corpus.merge import Merge, Merger, _place, combine, distinct_id, entries, where
from rag.corpus.paper import Paper, location, norm_text

if TYPE_CHECKING:
    from rag.corpus import FileResult

PUBMED_FORMATS = frozenset({"pubmed-xml", "medline"})


@dataclass(frozen=True)
class Read:
    """The files an ingest read, by name as written and by place; `partial`: only the records
    its filters kept (--category, --since), so a record missing from them is not gone."""

    names: frozenset[str] = frozenset()
    places: frozenset[str] = frozenset()
    partial: bool = False

    @classmethod
    def of(cls, results: Sequence[FileResult], partial: bool = False) -> Read:
        return cls(frozenset(r.source for r in results),
                   frozenset(str(r.path.resolve()) for r in results), partial)

    def holds(self, s: Paper, source: str) -> bool:
        """Whether `source`, a file of the indexed paper `s`, was read now."""
        at = s.located.get(source)
        return at in self.places if at else source in self.names

    def whole(self, s: Paper, source: str) -> bool:
        """Whether `source` was read now with every record in it."""
        return not self.partial and self.holds(s, source)


class Gone:
    """With --prune, the files of indexed papers that no longer exist, each checked where it
    was when read (a name relative to another folder was taken for a deleted file)."""

    def __init__(self, prune: bool) -> None:
        self.prune = prune
        self._exists: dict[str, bool] = {}

    def __call__(self, s: Paper, source: str) -> bool:
        if not self.prune:
            return False
        at = location(s, source)
        if at not in self._exists:
            self._exists[at] = Path(at).exists()
        return not self._exists[at]


def merge_with_index(merger: Merger, stored: list[Paper], read: Read, replace: bool = False,
                     gone: Gone | None = None) -> tuple[list[Paper], list[Merge], set[str]]:
    """The merger's papers (its `stored` being these) merged with the indexed ones they belong
    to. Returns the papers to write, the merges to report, and the ids of indexed papers now
    part of another paper (to delete)."""
    gone = gone or Gone(False)
    out: list[Paper] = []
    merges: list[Merge] = []
    absorbed: set[str] = set()
    taken: dict[str, Paper] = {}  # indexed paper id -> the paper it became in this ingest
    fresh: list[Paper] = []  # papers of no indexed paper
    for p in merger.papers:
        match = merger.stored_match(p) if merger.anchor(p) is None else None  # by keys its records gave together
        hit = merger.anchor(p) or (match[:2] if match else None)
        if hit is None:
            out.append(p)
            fresh.append(p)
            continue
        s, why = hit
        if s.paper_id in taken:  # two new papers matched one indexed paper: join them
            joined = taken[s.paper_id]
            differ = norm_text(joined.abstract) != norm_text(p.abstract)
            merges.append(Merge(joined, where(joined), where(p), why, differ, combine(joined, p, why)))
            continue

        def superseded(source: str, s: Paper = s) -> bool:
            return read.holds(s, source) or gone(s, source)

        # what the index knew from the files read now is superseded by what they say now
        kept_entries = [e for e in entries(s) if not superseded(str(e.get("source")))]
        if replace or merger.own(p) or read.whole(s, s.source) or gone(s, s.source):
            merged = p
            if kept_entries:
                rest = copy.copy(s)
                rest.sources = kept_entries
                differ = replace and norm_text(s.abstract) != norm_text(p.abstract)
                filled = combine(merged, rest, why)
                others = ", ".join(str(e.get("source")) for e in kept_entries)
                merges.append(Merge(merged, where(p), others, why, differ, filled))
        else:
            merged = copy.copy(s)
            merged.sources = kept_entries
            differ = norm_text(s.abstract) != norm_text(p.abstract)
            merges.append(Merge(merged, s.source, where(p), why, differ, combine(merged, p, why)))
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
                read.holds(holder, str(e.get("source"))) for e in entries(holder))):
            p.paper_id = distinct_id(p, ids.__contains__)
            ids.add(p.paper_id)
    return out, merges, absorbed - {p.paper_id for p in out}


@dataclass
class Plan:
    """What an ingest does to the index: the papers to write, the merges to report, the
    indexed papers to remove, and what each PubMed deletion did."""

    papers: list[Paper]
    merges: list[Merge]
    removed: set[str]
    deletions: list[str]


def plan(results: Sequence[FileResult], stored: dict[str, Paper], chunk_sources: dict[str, str], *,
         replace: bool = False, prune: bool = False, partial: bool = False,
         source_paths: dict[str, str] | None = None) -> Plan:
    """The ingest of `results` into an index holding `stored` (and chunks of `chunk_sources`:
    paper id -> source, some perhaps with no whole record). The files are taken in order of
    their full paths, whatever order they were named in (or a watcher saw them change in), from
    any folder: which record of a paper is kept never depends on it."""
    # a file named twice (or inside a folder named too) is one file
    results = sorted({str(r.path.resolve()): r for r in results}.values(), key=lambda r: str(r.path.resolve()))
    records, deleted = records_in_order(results)
    read, gone = Read.of(results, partial), Gone(prune)
    merger = Merger(replace, list(stored.values()), gone)
    for record in records:
        merger.add(record)
    papers, merges, absorbed = merge_with_index(merger, list(stored.values()), read, replace, gone)
    out, said = removed(chunk_sources, stored, papers, read, deleted, gone, source_paths or {})
    return Plan(papers, merger.merges + merges, out | absorbed, said)


def removed(chunk_sources: dict[str, str], stored: dict[str, Paper], papers: list[Paper], read: Read,
            deleted: set[str], gone: Gone, source_paths: dict[str, str]) -> tuple[set[str], list[str]]:
    """The indexed papers (their ids, and the source of their chunks) that this ingest's
    `papers` leave out and that go: every file holding them was read whole now, or is gone, or
    PubMed deleted them (and no other library holds them); and what each deletion did."""
    present = {p.paper_id: p for p in papers}
    out: set[str] = set()
    said: list[str] = []
    for pid, source in chunk_sources.items():
        known = stored.get(pid)
        pmid = known.ids.get("pmid") if known is not None else None
        if pid in present:
            if pmid in deleted:
                said.append(_kept(pmid, pid, present[pid]))
            continue
        if known is None:  # no whole record (a write was interrupted): by its chunks' source
            if (source in read.names and not read.partial) or (
                    gone.prune and not Path(source_paths.get(pid, source)).exists()):
                out.add(pid)
        elif pmid in deleted:
            if from_pubmed_only(known):
                out.add(pid)
                said.append(f"PMID {pmid}: {pid} removed")
            else:
                said.append(_kept(pmid, pid, known))
        elif all(read.whole(known, str(e.get("source"))) for e in entries(known)) or gone(known, source):
            out.add(pid)  # a paper merged from several files stays while a file not read now holds it
    return out, sorted(said)  # by PMID, whatever order the index holds them in


def _kept(pmid: str, pid: str, paper: Paper) -> str:
    """What a PubMed deletion did to a paper another library holds too."""
    return f"PMID {pmid}: {pid} kept, as {', '.join(other_libraries(paper))} also hold(s) it"


def records_in_order(results: Sequence[FileResult]) -> tuple[list[Paper], set[str]]:
    """The records of all files in order, and the PMIDs deleted (PubMed DeleteCitation): a
    deletion removes the PubMed records of earlier files (what another library says of the
    paper stays), and a later record brings the paper back."""
    records: list[Paper] = []
    deleted: set[str] = set()
    for r in results:
        if r.deleted:
            gone = set(r.deleted)
            records = [p for p in records if p.format not in PUBMED_FORMATS or p.ids.get("pmid") not in gone]
            deleted |= gone
        for p in r.papers:
            deleted.discard(p.ids.get("pmid", ""))
            records.append(p)
    return records, deleted


def other_libraries(p: Paper) -> list[str]:
    """The files of the paper's records that are not PubMed's."""
    return sorted({str(e.get("source")) for e in entries(p) if e.get("format") not in PUBMED_FORMATS})


def from_pubmed_only(p: Paper) -> bool:
    """Every record of the indexed paper came from PubMed (XML or MEDLINE text), whose
    DeleteCitation retracts them; what other libraries say of it is theirs to keep."""
    if p.sources:
        return all(e.get("format") in PUBMED_FORMATS for e in p.sources)
    return p.format in PUBMED_FORMATS if p.format else p.paper_id.startswith("PMID:")
