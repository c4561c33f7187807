"""A small index read without Chroma: what a question reads from the store, kept on disk.

Importing chromadb and opening its client cost about 0.35 s of a cold `rag ask` of 1.0 s on
seeds/ (benchmarks/cold_start.py), more than everything rag itself does for the answer. A
question reads little from the store: the version (to find its cached snapshot), the chunk
count, the nearest chunks to the question's vector, and the cited papers' sentence vectors.
For an index of at most QUICK_MAX_CHUNKS chunks those fit in one file, and exact search over
every chunk vector (numpy) takes about a millisecond, where HNSW is approximate.

`remember(store)` writes that file and an entry in `cache/quick.json` for the index; the writer
does at the end of each write (it holds the ingest lock), and a reader does when it finds none
and no writer is busy. Every version bump removes the index's entries first (`forget`), so no
entry outlives the state it was written from; each entry also names the database file (device
and inode) it was read from, so a deleted or replaced index is never read from here.

`QuickStore.open(settings)` returns a store that answers those reads from the file; anything
else (a filtered search, a listing, a write, or an entry that changed since it opened) goes to
the real `Store`, opened then. A Chroma server (RAG_CHROMA_URL) is always read directly.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Callable

    from rag.config import Settings

# rag.store.collection's Store (which imports this module to forget and remember): typed
# loosely here, and handed in by the caller of QuickStore.open, so that no cycle forms.
_Store = Any

log = logging.getLogger(__name__)

# A cost bound, not a fitted decision: at 4,336 chunks (2,000 synthetic abstracts of
# benchmarks/scale_100k.py) the file is 36 MB, opens in 46 ms and answers a query in 1 ms,
# against 0.35 s to import and open Chroma; past it the file grows with every sentence vector.
QUICK_MAX_CHUNKS = 5000
VERSION_TTL = 1.0  # as rag.store.collection: how long a read version is trusted
FORMAT = 1


def _pointer(settings: Settings) -> Path:
    return settings.home / "cache" / "quick.json"


def _data(settings: Settings, collection: str, version: int) -> Path:
    return settings.home / "cache" / f"quick-{collection}-v{version}-f{FORMAT}.npz"


def _entries(settings: Settings) -> dict[str, dict[str, Any]]:
    try:
        entries = json.loads(_pointer(settings).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return entries if isinstance(entries, dict) else {}


def _save(settings: Settings, entries: dict[str, dict[str, Any]]) -> None:
    path = _pointer(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(entries, indent=1), encoding="utf-8")
    os.replace(tmp, path)  # atomic: a reader sees the old entries or the new


def _database(settings: Settings) -> list[int] | None:
    try:
        st = (settings.index_dir / "chroma.sqlite3").stat()
    except OSError:
        return None
    return [st.st_dev, st.st_ino]


def forget(settings: Settings, index: str) -> None:
    """Remove the entries that read the index (its own, and the default's that sends readers to
    it); before any write to it, and when it is deleted."""
    if settings.chroma_url:
        return
    entries = _entries(settings)
    keep = {k: e for k, e in entries.items()
            if k != index and e.get("index") != index and e.get("serve") != index}
    if keep != entries:
        try:
            _save(settings, keep)
        except OSError as exc:  # a reader that finds the entry checks the database and version
            log.warning("could not update %s: %s", _pointer(settings), exc)
        for entry in entries.values():
            if entry not in keep.values() and "collection" in entry and "serve" not in entry:
                _data(settings, entry["collection"], entry["version"]).unlink(missing_ok=True)


def remember(store: _Store, lock_held: bool = True) -> None:
    """Write the file of a small embedded index and its entry. The caller holds the ingest lock
    (a writer); a reader passes lock_held=False and it is taken here, or nothing is written
    when a writer holds it."""
    settings = store.settings
    if settings.chroma_url:
        return
    if not lock_held:
        from rag.errors import IndexStoreError
        from rag.store.lock import ingest_lock

        with contextlib.suppress(IndexStoreError), ingest_lock(settings, wait=False):
            remember(store)
        return
    try:
        count = store.count()
        if count > QUICK_MAX_CHUNKS or count == 0:
            return
        version = store.current_version()  # not one cached before the lock was taken
        ids, vectors = store.vectors()
        sentences = [(pid, *record) for pid, record in store.all_sentences().items()]
        data = _data(settings, store.name, version)
        data.parent.mkdir(parents=True, exist_ok=True)
        tmp = data.with_name(f".{data.stem}.{os.getpid()}.npz")
        np.savez(
            tmp,
            chunk_ids=np.array(ids, dtype=str),
            chunk_vectors=vectors,
            paper_ids=np.array([s[0] for s in sentences], dtype=str),
            offsets=np.cumsum([0] + [len(s[1]) for s in sentences]).astype(np.int64),
            # one UTF-8 JSON list: a fixed-width numpy string array pads each to the longest
            sentences=np.frombuffer(json.dumps([t for s in sentences for t in s[1]],
                                               ensure_ascii=False).encode(), dtype=np.uint8),
            sentence_vectors=(np.concatenate([s[2] for s in sentences]) if sentences
                              else np.zeros((0, vectors.shape[1]), dtype=np.float32)),
        )
        os.replace(tmp, data)
        entries = _entries(settings)
        entries[settings.index] = {"index": settings.index, "collection": store.name,
                                   "version": version, "count": count,
                                   "chunk_vectors": settings.chunk_vectors,
                                   "database": _database(settings)}
        _save(settings, entries)
    except Exception as exc:  # a cache: the question is answered from the store as before
        log.debug("no quick file for the index '%s': %s", settings.index, exc)


def remember_served(settings: Settings, empty: _Store, served: _Store) -> None:
    """The default index is empty and readers are sent to `served` (the demo index); written
    under the ingest lock, as `remember`, and removed by the default's next write."""
    if settings.chroma_url:
        return
    from rag.errors import IndexStoreError
    from rag.store.lock import ingest_lock

    with contextlib.suppress(IndexStoreError, OSError), ingest_lock(settings, wait=False):
        if empty.count() != 0:
            return
        entries = _entries(settings)
        entries[settings.index] = {"index": settings.index, "collection": empty.name,
                                   "serve": served.settings.index, "database": _database(settings)}
        _save(settings, entries)


class QuickStore:
    """The reads of a question from the quick file; the rest from the real Store, opened on
    first need. Duck-types `rag.store.Store` for the retriever and the relevance gate."""

    def __init__(self, settings: Settings, entry: dict[str, Any], data: dict[str, np.ndarray],
                 opener: Callable[[Settings], _Store]) -> None:
        self._full: _Store | None = None
        self._opener = opener
        self._opening = threading.Lock()  # one real store, however many threads ask (rag serve)
        self.settings = settings
        self.name: str = entry["collection"]
        self._entry = entry
        self._checked = time.monotonic()
        self._ids = data["chunk_ids"]
        self._vectors = data["chunk_vectors"]
        offsets = data["offsets"]
        self._texts: list[str] = json.loads(data["sentences"].tobytes().decode())
        self._sentence_vectors = data["sentence_vectors"]
        self._sentences = {str(pid): (int(offsets[i]), int(offsets[i + 1]))
                           for i, pid in enumerate(data["paper_ids"])}

    @classmethod
    def open(cls, settings: Settings, opener: Callable[[Settings], _Store]) -> QuickStore | None:
        """The index's quick store, or None when it has no valid entry (read it from Chroma);
        `opener` opens the real store (rag.store.Store) when a read needs it."""
        if settings.chroma_url:
            return None
        from rag.store.indexes import collection_name

        entries = _entries(settings)
        entry = entries.get(settings.index)
        database = _database(settings)
        if entry is not None and "serve" in entry:  # the default is empty: the demo index
            if entry.get("database") != database or entry["collection"] != collection_name(settings):
                return None
            entry = entries.get(entry["serve"])
        if entry is None or entry.get("database") != database or database is None:
            return None
        kind = entry.get("chunk_vectors")
        if "chunk_vectors" in settings.model_fields_set and kind != settings.chunk_vectors:
            return None
        update: dict[str, Any] = {"index": entry["index"]}
        if kind != settings.chunk_vectors:
            update["chunk_vectors"] = kind
        if entry["collection"] != collection_name(settings.model_copy(update=update)):
            return None  # built under other chunk settings (RAG_CHUNK_*): Chroma decides
        try:
            with np.load(_data(settings, entry["collection"], entry["version"]), allow_pickle=False) as npz:
                data = {k: npz[k] for k in npz.files}
            return cls(settings.model_copy(update=update), entry, data, opener)
        except Exception as exc:  # missing or damaged: read from Chroma, which rewrites it
            log.debug("quick file of '%s' not read: %s", settings.index, exc)
            return None

    def store(self) -> _Store:
        """The real store (Chroma), opened on first need."""
        with self._opening:
            if self._full is None:
                self._full = self._opener(self.settings)
            return self._full

    def _current(self) -> bool:
        """Whether the entry still holds (checked every VERSION_TTL: a long-lived reader sees
        another process's write as it would through Chroma)."""
        if self._full is not None:
            return False
        now = time.monotonic()
        if now - self._checked > VERSION_TTL:
            if _entries(self.settings).get(self.settings.index) != self._entry:
                self.store()
                return False
            self._checked = now
        return True

    @property
    def version(self) -> int:
        return int(self._entry["version"]) if self._current() else self.store().version

    def count(self) -> int:
        return int(self._entry["count"]) if self._current() else self.store().count()

    def query_ids(self, vector: np.ndarray, n: int, where: dict[str, Any] | None = None,
                  total: int | None = None) -> list[tuple[str, float]]:
        """Exact nearest chunks (cosine: the vectors are unit length), best first."""
        if where is not None or not self._current():
            return self.store().query_ids(vector, n, where, total)
        n = min(n, len(self._ids))
        if n <= 0:
            return []
        sims = self._vectors @ np.asarray(vector, dtype=np.float32)
        top = np.argpartition(-sims, n - 1)[:n] if n < len(sims) else np.arange(len(sims))
        top = top[np.argsort(-sims[top], kind="stable")]
        return [(str(self._ids[i]), float(sims[i])) for i in top]

    def sentences(self, paper_ids: list[str]) -> dict[str, tuple[list[str], np.ndarray]]:
        if not self._current():
            return self.store().sentences(paper_ids)
        out = {}
        for pid in dict.fromkeys(paper_ids):
            span = self._sentences.get(pid)
            if span is not None:
                start, end = span
                out[pid] = (self._texts[start:end],
                            self._sentence_vectors[start:end].copy())
        return out

    def close(self) -> None:
        if self._full is not None:
            self._full.close()

    def __getattr__(self, name: str) -> Any:  # client, chunks, papers, write, ...: the real store
        if name.startswith("__") or name in ("_full", "_opener", "_opening"):
            raise AttributeError(name)
        return getattr(self.store(), name)
