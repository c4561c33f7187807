"""Hybrid retrieval: dense (Chroma, cosine) and BM25 (bm25s) fused by reciprocal rank,
then aggregated from chunks to papers, with metadata filters; what it reads besides Chroma is
the index's snapshot (rag.retrieve.snapshot), cached on disk per index version.

Fusion is written here rather than taken from llama-index's QueryFusionRetriever because
importing llama_index.core costs ~1.4 s, which would triple `rag ask`'s start-up; the
fusion itself is the few lines of reciprocal-rank arithmetic in `_fuse`.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag.corpus.paper import Paper
from rag.corpus.text import MAX_NAME, short_label
from rag.errors import InputError
from rag.retrieve import metadata as metadata_match
from rag.retrieve import snapshot as snapshots
from rag.retrieve.filters import Conditions, Filters  # Filters: imported from here by the faces
from rag.retrieve.snapshot import Snapshot, normalise

if TYPE_CHECKING:  # imported where used: `Filters` alone (the thin client) needs none of them
    import numpy as np

    from rag.config import Settings
    from rag.embed import Embedder
    from rag.store import Store

log = logging.getLogger(__name__)

RRF_K = 60  # the constant of Cormack et al. (2009), also llama-index's default
DENSE_POOL = 200  # chunks taken from each retriever before fusion


@dataclass
class PaperHit:
    paper: Paper
    score: float  # fused reciprocal-rank score (ordering only)
    relevance: float  # best cosine similarity of a chunk to the query (absolute)
    matched: list[str] = field(default_factory=list)
    rank: int = 0


def _lookups(papers: list[Paper]) -> snapshots.Lookups:
    """The lookup tables a snapshot keeps besides the records: the names a query calls papers
    by (`paper_names`), the record fields rag.retrieve.metadata matches, and the names papers
    go by in running text (rag.answering.names): `short_names` (lower-cased -> as the first
    paper of that name writes it), `typed_names` (as a keyboard types one that Unicode writes
    otherwise: "pix2" -> "Pix²") and `label_papers` (lower-cased -> every paper going by it)."""
    tables = metadata_match.tables(papers)
    tables["paper_names"] = [(name, p.paper_id) for p in papers for name in sorted(paper_names(p))]
    labels = [(short_label(p.title, p.label), p.paper_id) for p in papers]
    tables["label_papers"] = [(name.lower(), pid) for name, pid in labels]
    display: dict[str, str] = {}
    for name, _ in labels:
        if len(name) <= MAX_NAME:
            display.setdefault(name.lower(), name)
    tables["short_names"] = list(display.items())
    tables["typed_names"] = list({typed.lower(): name for name in display.values()
                                  if (typed := normalise(name)) != name}.items())
    return tables


_snapshots: dict[str, Snapshot] = {}
_snap_lock = threading.Lock()


def load_snapshot(store: Store, settings: Settings) -> Snapshot:
    version = store.version
    key = f"{store.name}@{settings.chroma_url or settings.home.resolve()}"
    with _snap_lock:
        snap = _snapshots.get(key)
        if snap is not None and snap.version == version:
            return snap
        cache = settings.home / "cache" / f"{store.name}-v{version}-f{snapshots.FORMAT}"
        snap = _open(cache)
        if snap is None or snap.version != version:
            snap = _build(store, cache)
        _snapshots[key] = snap
        return snap


def _open(folder: Path) -> Snapshot | None:
    if not folder.is_dir() or folder.is_symlink():
        return None
    try:
        return Snapshot(folder)
    except Exception as exc:  # a stale, broken or planted cache is rebuilt, never fatal
        # said once, as the rebuild replaces it: a damaged file is never read for an answer
        log.warning("the index's cached snapshot %s was damaged (%s); rebuilding it from the index",
                    folder, exc)
        return None


def _build(store: Store, cache: Path) -> Snapshot:
    """The snapshot of the store's version, written to `cache` (older versions' removed); in a
    temporary directory when the cache cannot be written."""
    building = cache.with_name(f".building-{cache.name}-{os.getpid()}")
    try:
        shutil.rmtree(building, ignore_errors=True)
        cache.parent.mkdir(parents=True, exist_ok=True)
        snapshots.build(store, building, _lookups)
        for old in cache.parent.glob(f"{store.name}-v*"):  # incl. old .pickle and JSON caches
            if old.is_dir() and not old.is_symlink():
                shutil.rmtree(old)
            else:
                old.unlink(missing_ok=True)
        for left in cache.parent.glob(f".building-{store.name}-v*"):  # by a process killed then
            if left != building and not _alive(left.name.rsplit("-", 1)[-1]):
                shutil.rmtree(left, ignore_errors=True)
        try:
            building.replace(cache)
        except OSError:  # another process cached this version first
            shutil.rmtree(building, ignore_errors=True)
        snap = _open(cache)
        if snap is not None:
            return snap
    except OSError as exc:
        log.warning("could not cache the BM25 index: %s", exc)
    shutil.rmtree(building, ignore_errors=True)
    return snapshots.temporary(store, _lookups)


def _alive(pid: str) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _fuse(rankings: list[list[str]]) -> dict[str, float]:
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, cid in enumerate(ranking, 1):
            fused[cid] = fused.get(cid, 0.0) + 1.0 / (RRF_K + rank)
    return fused


_QUERY_WORD = re.compile(r"[\w²³⁴⁺]+(?:-[\w²³⁴⁺]+)*")


def paper_names(paper: Paper) -> set[str]:
    """What a query may call a paper by: the system name it proposes ('SimCLR') or the short
    head of its title ('Horovod' for 'Horovod: Fast and Easy Distributed Deep Learning')."""
    names = set()
    if paper.title:
        head = paper.title.split(":", 1)[0].strip()
        if ":" in paper.title and 1 <= len(head.split()) <= 3:
            names.add(head)
    elif len(paper.label.split()) == 1 and not paper.label.endswith("…"):
        names.add(paper.label)
    return {normalise(n) for n in names if len(n) >= 3}


def named_in(snap: Snapshot, query: str) -> list[str]:
    """Papers whose name (`paper_names`) the query spells out exactly (case-sensitive, whole
    words), in the order the query's words give them."""
    words = _QUERY_WORD.findall(normalise(query))
    grams = [" ".join(words[i : i + n]) for n in (1, 2, 3) for i in range(len(words) - n + 1)]
    papers: dict[str, list[str]] = {}
    for name, pid in snap.lookup("paper_names", grams):
        papers.setdefault(name, []).append(pid)
    out: list[str] = []
    for gram in grams:
        for pid in papers.get(gram, []):
            if pid not in out:
                out.append(pid)
    return out


def _papers(snap: Snapshot, ranked: list[tuple[str, float]], similarity: dict[str, float],
            k: int) -> list[PaperHit]:
    """The k best papers of the fused chunk ranking (best first), each scored by its best chunk,
    with the best cosine of its chunks and their texts; only those k papers' records and
    chunk texts are read."""
    paper_of = snap.chunk_paper.many([cid for cid, _ in ranked])
    order: list[str] = []  # papers by their best chunk
    score: dict[str, float] = {}
    for cid, s in ranked:
        pid = paper_of.get(cid)
        if pid is not None and pid not in score:
            score[pid] = s
            order.append(pid)
    found: dict[str, Paper] = {}
    at = 0
    while len(found) < k and at < len(order):  # a paper may lack its record: written after
        step = order[at : at + k - len(found) + 8]
        found.update(snap.papers.many(step))
        at += len(step)
    top = [pid for pid in order if pid in found][:k]
    hits = {pid: PaperHit(found[pid], score[pid], 0.0, rank=i) for i, pid in enumerate(top, 1)}
    kept = [(cid, paper_of[cid]) for cid, _ in ranked if paper_of.get(cid) in hits]
    texts = snap.chunk_text.many([cid for cid, _ in kept])
    for cid, pid in kept:
        hit = hits[pid]
        sim = similarity.get(cid, 0.0)
        hit.relevance = sim if not hit.matched else max(hit.relevance, sim)
        hit.matched.append(texts.get(cid, ""))
    return list(hits.values())


Filtered = tuple[set[str], "dict[str, Any] | None", "np.ndarray"]


class Retriever:
    def __init__(self, settings: Settings, store: Store | None = None,
                 embedder: Embedder | None = None) -> None:
        self.settings = settings
        if store is None:
            from rag.store import Store

            store = Store(settings)
        self.store = store
        self._embedder = embedder
        self._filtered: tuple[Snapshot | None, Conditions | None, dict[tuple[Any, ...], Filtered]] = (
            None, None, {})

    @property
    def embedder(self) -> Embedder:
        """Loaded on first use: listing or showing papers needs no model (~1 s saved)."""
        if self._embedder is None:
            from rag.embed import model_for

            self._embedder = model_for(self.settings)
        return self._embedder

    def snapshot(self) -> Snapshot:
        return load_snapshot(self.store, self.settings)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embedder.embed([text])[0]

    def search(self, query: str, k: int = 10, filters: Filters | None = None) -> list[PaperHit]:
        """The top k papers for the query."""
        if not query.strip():
            raise InputError("the question is empty", "type a question or search terms")
        snap = self.snapshot()
        allowed: set[str] | None = None
        where: dict[str, Any] | None = None
        keep: np.ndarray | None = None
        if filters and filters.active():
            allowed, where, keep = self.filtered(snap, filters)
            if not allowed:
                return []
        vector = self.embed_query(query)
        dense = self.store.query_ids(vector, DENSE_POOL, where, total=len(snap.chunk_ids))
        if allowed is not None:  # the store's conditions may let a few more through (filters)
            paper_of = snap.chunk_paper.many([cid for cid, _ in dense])
            dense = [(cid, s) for cid, s in dense if paper_of.get(cid) in allowed]
        bm25 = snap.bm25_ranking(query, DENSE_POOL, keep)
        dense_ids = [cid for cid, _ in dense]
        fused = _fuse([dense_ids, [cid for cid, _ in bm25]])
        # A third ranking: papers the query names ("How does SimCLR work?"). The dense model
        # does not know such names, and RRF lets its confident-looking but unrelated top hit
        # tie with BM25's exact match; this puts a named paper first, as users expect.
        named_ids = [pid for pid in named_in(snap, query) if allowed is None or pid in allowed]
        chunks = snap.chunks_of(named_ids)
        named = [max(chunks[pid], key=lambda c: fused.get(c, 0.0)) for pid in named_ids if pid in chunks]
        if named:
            fused = _fuse([dense_ids, [cid for cid, _ in bm25], named])
        # And papers the query names by their record's fields (arXiv id, DOI, authors, venue,
        # year), which neither ranking sees: rag.retrieve.metadata weighs them.
        fused = metadata_match.fuse(fused, query, snap, allowed, RRF_K)
        return _papers(snap, sorted(fused.items(), key=lambda kv: -kv[1]), dict(dense), k)

    def filtered(self, snap: Snapshot, filters: Filters) -> Filtered:
        """The papers the filters accept, the store's conditions for them and the chunks they
        keep, per snapshot and filter (a filter set in the chat page repeats every query)."""
        if self._filtered[0] is not snap:
            self._filtered = (snap, Conditions(snap.papers.values()), {})
        _, conditions, cache = self._filtered
        key = filters.key()
        if key not in cache:
            import numpy as np

            assert conditions is not None
            allowed = {pid for pid, p in snap.papers.items() if filters.accepts(p)}
            keep = np.fromiter((pid in allowed for pid in snap.chunk_papers()), dtype=bool,
                               count=len(snap.chunk_ids))
            if len(cache) >= 32:
                cache.pop(next(iter(cache)))
            cache[key] = (allowed, conditions.where(filters), keep)
        return cache[key]

    def paper(self, paper_id: str) -> Paper | None:
        return self.snapshot().papers.get(paper_id)

    def papers(self) -> list[Paper]:
        return sorted(self.snapshot().papers.values(), key=lambda p: (p.source, p.position))
