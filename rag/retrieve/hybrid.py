"""Hybrid retrieval: dense (Chroma, cosine) and BM25 (bm25s) fused by reciprocal rank,
then aggregated from chunks to papers, with metadata filters.

Fusion is written here rather than taken from llama-index's QueryFusionRetriever because
importing llama_index.core costs ~1.4 s, which would triple `rag ask`'s start-up; the
fusion itself is the few lines of reciprocal-rank arithmetic in `_fuse`.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import threading
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag.corpus.paper import Paper
from rag.errors import InputError
from rag.retrieve import metadata as metadata_match
from rag.retrieve.filters import Conditions, Filters  # Filters: imported from here by the faces

if TYPE_CHECKING:  # imported where used: `Filters` alone (the thin client) needs none of them
    import numpy as np

    from rag.config import Settings
    from rag.embed import Embedder
    from rag.store import Store

log = logging.getLogger(__name__)

RRF_K = 60  # the constant of Cormack et al. (2009), also llama-index's default
DENSE_POOL = 200  # chunks taken from each retriever before fusion
SNAPSHOT_FORMAT = 3  # bump when Snapshot changes shape: old disk caches are then ignored


@dataclass
class PaperHit:
    paper: Paper
    score: float  # fused reciprocal-rank score (ordering only)
    relevance: float  # best cosine similarity of a chunk to the query (absolute)
    matched: list[str] = field(default_factory=list)
    rank: int = 0


def normalise(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


def _tokenize(texts: list[str]) -> list[list[str]]:
    import bm25s
    import Stemmer

    return bm25s.tokenize(  # type: ignore[no-any-return]
        [normalise(t) for t in texts], stopwords="en", stemmer=Stemmer.Stemmer("english"),
        return_ids=False, show_progress=False,
    )


class Snapshot:
    """What a process keeps in memory about one version of the index: papers, chunk ids,
    chunk texts and the BM25 index, all rebuilt from the store (so replicas agree) and
    cached on disk next to it, keyed by the store's write version."""

    def __init__(self, store: Store | None, parts: dict[str, Any] | None = None) -> None:
        import bm25s

        if store is None:  # read back from the disk cache (`_load_cached`)
            assert parts is not None
            self._restore(parts)
            return
        self.version = store.version
        ids, docs, metas = store.chunks()
        self.chunk_ids: list[str] = ids
        self.chunk_text: dict[str, str] = dict(zip(ids, docs, strict=True))
        self.chunk_paper: dict[str, str] = {i: m["paper_id"] for i, m in zip(ids, metas, strict=True)}
        self.papers: dict[str, Paper] = {}
        for meta in metas:  # the paper record is on its first chunk (rag.store.format)
            if "paper" in meta and meta["paper_id"] not in self.papers:
                self.papers[meta["paper_id"]] = Paper.from_dict(json.loads(meta["paper"]))
        texts = []
        for doc, meta in zip(docs, metas, strict=True):
            p = self.papers[meta["paper_id"]]
            texts.append(" ".join(filter(None, [p.label, p.title, " ".join(p.authors), doc])))
        self.bm25 = bm25s.BM25()
        if texts:
            self.bm25.index(_tokenize(texts), show_progress=False)

    def _restore(self, parts: dict[str, Any]) -> None:
        self.version = parts["version"]
        self.chunk_ids = parts["chunk_ids"]
        self.chunk_text = dict(zip(self.chunk_ids, parts["chunk_docs"], strict=True))
        self.chunk_paper = dict(zip(self.chunk_ids, parts["chunk_papers"], strict=True))
        self.papers = {pid: Paper.from_dict(d) for pid, d in parts["papers"].items()}
        self.bm25 = parts["bm25"]

    def save(self, folder: Path) -> None:
        """JSON and NumPy arrays (bm25s's own save, no pickle): a planted cache file can at
        worst give wrong rankings, never run code."""
        folder.mkdir(parents=True, exist_ok=True)
        self.bm25.save(str(folder), allow_pickle=False)
        parts = {"version": self.version, "chunk_ids": self.chunk_ids,
                 "chunk_docs": [self.chunk_text[i] for i in self.chunk_ids],
                 "chunk_papers": [self.chunk_paper[i] for i in self.chunk_ids],
                 "papers": {pid: p.to_dict() for pid, p in self.papers.items()}}
        (folder / "snapshot.json").write_text(json.dumps(parts), encoding="utf-8")

    @classmethod
    def load(cls, folder: Path) -> Snapshot:
        import bm25s

        parts = json.loads((folder / "snapshot.json").read_text(encoding="utf-8"))
        if not isinstance(parts, dict):
            raise ValueError("not a snapshot")
        parts["bm25"] = bm25s.BM25.load(str(folder), load_corpus=False, allow_pickle=False)
        return cls(None, parts)

    def bm25_ranking(self, query: str, pool: int, keep: np.ndarray | None = None
                     ) -> list[tuple[str, float]]:
        """The best `pool` chunks, among those `keep` marks when given (filters)."""
        if not self.chunk_ids:
            return []
        vocab = self.bm25.vocab_dict
        tokens = [t for t in _tokenize([query])[0] if t in vocab]
        if not tokens:
            return []
        scores = self.bm25.get_scores(tokens)
        import numpy as np

        if keep is not None:
            scores = np.where(keep, scores, 0.0)
        top = np.argsort(-scores)[:pool]
        top = top[scores[top] > 0]
        ids = self.chunk_ids
        return [(ids[i], s) for i, s in zip(top.tolist(), scores[top].tolist(), strict=True)]


_snapshots: dict[str, Snapshot] = {}
_snap_lock = threading.Lock()


def load_snapshot(store: Store, settings: Settings) -> Snapshot:
    version = store.version
    key = f"{store.name}@{settings.chroma_url or settings.home.resolve()}"
    with _snap_lock:
        snap = _snapshots.get(key)
        if snap is not None and snap.version == version:
            return snap
        cache = settings.home / "cache" / f"{store.name}-v{version}-f{SNAPSHOT_FORMAT}"
        snap = None
        if cache.is_dir() and not cache.is_symlink():
            try:
                snap = Snapshot.load(cache)
            except Exception:  # a stale, broken or planted cache is rebuilt, never fatal
                snap = None
        if snap is None or snap.version != version:
            snap = Snapshot(store)
            try:
                if snap.chunk_ids:  # an empty index: nothing worth caching (nor a warning)
                    for old in cache.parent.glob(f"{store.name}-v*"):  # incl. old .pickle files
                        if old.is_dir() and not old.is_symlink():
                            shutil.rmtree(old)
                        else:
                            old.unlink(missing_ok=True)
                    tmp = cache.with_name(cache.name + ".tmp")
                    snap.save(tmp)
                    tmp.replace(cache)
            except OSError as exc:
                log.warning("could not cache the BM25 index: %s", exc)
        _snapshots[key] = snap
        return snap


def _fuse(rankings: list[list[str]]) -> dict[str, float]:
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, cid in enumerate(ranking, 1):
            fused[cid] = fused.get(cid, 0.0) + 1.0 / (RRF_K + rank)
    return fused


_QUERY_WORD = re.compile(r"[\w²³⁴⁺]+(?:-[\w²³⁴⁺]+)*")


def paper_names(paper: Paper) -> set[str]:
    """What a query may call a paper by: the system name it proposes ('PASCL') or the short
    head of its title ('Tutel' for 'Tutel: Adaptive Mixture-of-Experts at Scale')."""
    names = set()
    if paper.title:
        head = paper.title.split(":", 1)[0].strip()
        if ":" in paper.title and 1 <= len(head.split()) <= 3:
            names.add(head)
    elif len(paper.label.split()) == 1 and not paper.label.endswith("…"):
        names.add(paper.label)
    return {normalise(n) for n in names if len(n) >= 3}


class _Names:
    """Paper names of one snapshot, and the chunks of each paper."""

    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap
        self.papers: dict[str, list[str]] = {}
        for pid, paper in snap.papers.items():
            for name in paper_names(paper):
                self.papers.setdefault(name, []).append(pid)
        self.chunks: dict[str, list[str]] = {}
        for cid in snap.chunk_ids:
            self.chunks.setdefault(snap.chunk_paper[cid], []).append(cid)

    def named_in(self, query: str) -> list[str]:
        """Papers whose name the query spells out exactly (case-sensitive, whole words)."""
        words = _QUERY_WORD.findall(normalise(query))
        out: list[str] = []
        for n in (1, 2, 3):
            for i in range(len(words) - n + 1):
                for pid in self.papers.get(" ".join(words[i : i + n]), []):
                    if pid not in out:
                        out.append(pid)
        return out


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
        self._names: _Names | None = None
        self._filtered: tuple[Snapshot | None, Conditions | None, dict[tuple[Any, ...], Filtered]] = (
            None, None, {})

    @property
    def embedder(self) -> Embedder:
        """Loaded on first use: listing or showing papers needs no model (~1 s saved)."""
        if self._embedder is None:
            from rag.embed import get_embedder

            self._embedder = get_embedder(self.settings.model_cache, self.settings.embed_threads,
                                          precision=self.settings.embed_precision)
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
        dense = [  # the store's conditions may let a few more through (see rag.retrieve.filters)
            (cid, s) for cid, s in self.store.query_ids(vector, DENSE_POOL, where,
                                                         total=len(snap.chunk_ids))
            if allowed is None or snap.chunk_paper.get(cid) in allowed
        ]
        bm25 = snap.bm25_ranking(query, DENSE_POOL, keep)
        dense_ids = [cid for cid, _ in dense]
        fused = _fuse([dense_ids, [cid for cid, _ in bm25]])
        # A third ranking: papers the query names ("How does PASCL work?"). The dense model
        # does not know such names, and RRF lets its confident-looking but unrelated top hit
        # tie with BM25's exact match; this puts a named paper first, as users expect.
        if self._names is None or self._names.snap is not snap:
            self._names = _Names(snap)
        named = [
            max(self._names.chunks.get(pid, []), key=lambda c: fused.get(c, 0.0))
            for pid in self._names.named_in(query)
            if (allowed is None or pid in allowed) and self._names.chunks.get(pid)
        ]
        if named:
            fused = _fuse([dense_ids, [cid for cid, _ in bm25], named])
        # And papers the query names by their record's fields (arXiv id, DOI, authors, venue,
        # year), which neither ranking sees: rag.retrieve.metadata weighs them.
        fused = metadata_match.fuse(fused, query, snap, self._names.chunks, allowed, RRF_K)

        similarity = dict(dense)
        paper_of = snap.chunk_paper
        hits: dict[str, PaperHit] = {}
        for cid, score in sorted(fused.items(), key=lambda kv: -kv[1]):
            pid = paper_of.get(cid, "")
            paper = snap.papers.get(pid)
            if paper is None:  # written after the snapshot was taken
                continue
            hit = hits.get(pid)
            if hit is None:
                hit = hits[pid] = PaperHit(paper, score, similarity.get(cid, 0.0))
            else:
                hit.relevance = max(hit.relevance, similarity.get(cid, 0.0))
            hit.matched.append(snap.chunk_text.get(cid, ""))
        ranked = sorted(hits.values(), key=lambda h: -h.score)[:k]
        for i, h in enumerate(ranked, 1):
            h.rank = i
        return ranked

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
            keep = np.fromiter((snap.chunk_paper[c] in allowed for c in snap.chunk_ids), dtype=bool,
                               count=len(snap.chunk_ids))
            if len(cache) >= 32:
                cache.pop(next(iter(cache)))
            cache[key] = (allowed, conditions.where(filters), keep)
        return cache[key]

    def paper(self, paper_id: str) -> Paper | None:
        return self.snapshot().papers.get(paper_id)

    def papers(self) -> list[Paper]:
        return sorted(self.snapshot().papers.values(), key=lambda p: (p.source, p.position))
