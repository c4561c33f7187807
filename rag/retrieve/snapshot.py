"""What a process reads about one version of the index: its papers, chunk ids and texts, the
BM25 index and lookup tables over the papers' records, all built from the store (so replicas
agree) and cached on disk next to it, keyed by the store's write version.

Read where a question needs it, never loaded whole: the records, chunk texts and lookup tables
are a SQLite database of rag's own (`snapshot.sqlite3`; Chroma's files are never read here), the
BM25 index is its sparse matrix as three NumPy arrays mapped from disk. Opening a snapshot of
100,000 abstracts costs what opening one of 60 does; when it was one JSON file, read whole, a
process spent 3.1 s on it at 100,000 abstracts and held every record in memory.

A question's BM25 tokens are made as bm25s makes them at indexing (same pattern, stop words
and stemmer; tests/test_search.py checks both against bm25s), and scored as bm25s scores them,
so answering imports neither bm25s nor scipy (0.1-0.3 s of a cold `rag ask`).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import tempfile
import threading
import unicodedata
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag.corpus.paper import Paper
from rag.retrieve.records import ChunkField, ChunkIds, Db, Papers

if TYPE_CHECKING:
    import numpy as np

    from rag.store import Store

FORMAT = 5  # bump when the files change shape: caches of another format are rebuilt
DATABASE = "snapshot.sqlite3"
# Each file's size and checksum, written last: a snapshot that does not match it was damaged
# (a disk error, a half-copied backup, a hand edit) and is rebuilt, never read.
MANIFEST = "manifest.json"
# Files up to this size are checksummed at every open (a 1,000-abstract snapshot: all of it,
# ~2 ms); larger ones when their modification time is not the one written, since reading
# 100 MB of a 100,000-abstract snapshot on every cold question would cost ~0.1 s.
CHECK_ALWAYS = 8 * 1024 * 1024
_ARRAYS = ("data", "indices", "indptr")  # the BM25 matrix, compressed sparse columns by term
_TOKEN = re.compile(r"(?u)\b\w\w+\b")  # bm25s.tokenize's token_pattern
_LOOKUP_TABLES = ("paper_names", "short_names", "typed_names", "label_papers", "meta_ids",
                  "meta_authors", "meta_surnames", "meta_venues", "meta_years")

# Derived lookup tables: name -> rows of (key, value) for the papers given, in paper order.
Lookups = dict[str, list[tuple[str, str]]]


def normalise(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


def stemmer() -> Any:
    import Stemmer

    return Stemmer.Stemmer("english")


def bm25_text(paper: Paper, chunk_text: str) -> str:
    """What BM25 indexes for a chunk: its paper's label, title and authors, then the chunk."""
    return " ".join(filter(None, [paper.label, paper.title, " ".join(paper.authors), chunk_text]))


class Damaged(ValueError):
    """A snapshot's files are not those its manifest lists; the message names the file."""


def _crc(path: Path) -> int:
    crc = 0
    with path.open("rb") as fh:
        while block := fh.read(1 << 20):
            crc = zlib.crc32(block, crc)
    return crc


def _manifest(folder: Path) -> dict[str, dict[str, int]]:
    """Each file of a snapshot just written: its size, modification time and checksum."""
    out = {}
    for path in sorted(folder.iterdir()):
        if path.is_file() and path.name != MANIFEST:
            st = path.stat()
            out[path.name] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "crc32": _crc(path)}
    return out


def verify(folder: Path) -> None:
    """Raise Damaged, naming the file, unless every file of the snapshot in `folder` has the
    size and checksum its manifest gives (a file's checksum is read when it is small or its
    modification time is not the one written)."""
    try:
        listed = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))["files"]
        if not isinstance(listed, dict) or DATABASE not in listed:
            raise ValueError("no files listed")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise Damaged(f"{MANIFEST} is missing or unreadable ({exc})") from None
    for name, want in listed.items():
        path = folder / name
        if os.sep in name or name.startswith("."):
            raise Damaged(f"{MANIFEST} lists {name!r}")
        try:
            st = path.stat()
        except OSError:
            raise Damaged(f"{name}, which {MANIFEST} lists, is missing") from None
        if st.st_size != want.get("size"):
            raise Damaged(f"{name} has {st.st_size} bytes, not the {want.get('size')} {MANIFEST} lists")
        if (st.st_size <= CHECK_ALWAYS or st.st_mtime_ns != want.get("mtime_ns")) \
                and _crc(path) != want.get("crc32"):
            # the file, or the manifest's line for it, changed: which one cannot be told apart
            raise Damaged(f"{name} does not have the content {MANIFEST} lists for it")


class Snapshot:
    """One version of the index as read from its cache folder (`build` writes it); its files
    are checked against their manifest first (`verify`)."""

    def __init__(self, folder: Path, keep: Any = None) -> None:
        import numpy as np

        verify(folder)
        self.folder = folder
        self._keep = keep  # the temporary directory of a snapshot that could not be cached
        self._db = Db(folder / DATABASE)
        try:
            meta = {k: json.loads(v) for k, v in self._db.rows("SELECT key, value FROM meta")}
            if meta.get("format") != FORMAT:
                raise ValueError(f"snapshot format {meta.get('format')!r}, not {FORMAT}")
            self.version = int(meta["version"])
            chunks, papers = int(meta["chunks"]), int(meta["papers"])
            self._stop = frozenset(meta["stopwords"])
            self._longest: dict[str, int] = meta["longest"]
            self._dtype = np.dtype(meta["dtype"])
            self._bm25: dict[str, np.ndarray] = {}
            if chunks:
                self._bm25 = {k: np.load(folder / f"bm25-{k}.npy", mmap_mode="r", allow_pickle=False)
                              for k in _ARRAYS}
                # bm25s adds an empty token to the vocabulary that no column holds
                if len(self._bm25["indptr"]) not in (int(meta["terms"]), int(meta["terms"]) + 1) or \
                        len(self._bm25["data"]) != len(self._bm25["indices"]):
                    raise ValueError("the BM25 arrays do not match the snapshot")
        except Exception:
            self._db.close()
            raise
        self.chunk_ids = ChunkIds(self._db, chunks)
        self.chunk_paper = ChunkField(self._db, "paper", 50_000)
        self.chunk_text = ChunkField(self._db, "text", 5_000)
        self.papers = Papers(self._db, papers)
        self._stemmer: Any = None
        self._stem_lock = threading.Lock()
        self._mapped: dict[str, tuple[Any, np.ndarray]] = {}

    # -- BM25 ----------------------------------------------------------------------------

    def query_tokens(self, text: str) -> list[str]:
        """BM25 tokens of a query, as bm25s.tokenize makes them (stop words out, stemmed)."""
        words = [w for w in _TOKEN.findall(normalise(text).lower()) if w not in self._stop]
        with self._stem_lock:
            if self._stemmer is None:
                self._stemmer = stemmer()
            return list(self._stemmer.stemWords(words))

    def bm25_ranking(self, query: str, pool: int, keep: np.ndarray | None = None
                     ) -> list[tuple[str, float]]:
        """The best `pool` chunks, among those `keep` marks when given (filters)."""
        if not self._bm25:
            return []
        tokens = self.query_tokens(query)
        term = dict(self._db.many("SELECT term, id FROM vocab WHERE term IN ({})", list(set(tokens))))
        ids = [term[t] for t in tokens if t in term and term[t] < len(self._bm25["indptr"]) - 1]
        if not ids:
            return []
        import numpy as np

        # bm25s.BM25.get_scores, term by term in the query's order: the same sums, bit for bit
        data, indices, indptr = (self._bm25[k] for k in _ARRAYS)
        scores = np.zeros(len(self.chunk_ids), dtype=self._dtype)
        for t in ids:
            start, end = int(indptr[t]), int(indptr[t + 1])
            np.add.at(scores, indices[start:end], data[start:end])
        if keep is not None:
            scores = np.where(keep, scores, 0.0)
        top = np.argsort(-scores)[:pool]
        top = top[scores[top] > 0]
        at = self.chunk_ids.at(top.tolist())
        self.chunk_paper.remember(dict(at))
        return [(cid, s) for (cid, _), s in zip(at, scores[top].tolist(), strict=True)]

    def papers_containing(self, needles: Iterable[str], titles: bool = False) -> list[Paper]:
        """The papers whose abstract (`titles`: or title) holds one of these strings, in the
        snapshot's order: the first test of every scan for a figure, name or acronym in the
        abstracts, run over the abstracts' bytes mapped from disk instead of every record."""
        needles = list(dict.fromkeys(needles))
        if not needles:  # nothing to look for: nothing mapped, nothing read
            return []
        import numpy as np

        found: set[int] = set()
        for kind in ("abstracts", "titles") if titles else ("abstracts",):
            text, starts = self._texts(kind)
            for needle in needles:
                raw = needle.encode("utf-8")
                if not raw or b"\0" in raw:
                    return list(self.papers.values())
                at = text.find(raw)
                while at >= 0:
                    pos = int(np.searchsorted(starts, at, side="right")) - 1
                    found.add(pos)
                    at = text.find(raw, int(starts[pos + 1])) if pos + 1 < len(starts) else -1
        ids = [pid for _, pid in self._db.many("SELECT pos, id FROM papers WHERE pos IN ({})", sorted(found))]
        return self.papers.ordered(ids)

    def _texts(self, kind: str) -> tuple[Any, np.ndarray]:
        """The papers' abstracts (or titles) as one block of UTF-8 bytes, each ended by a NUL,
        mapped from disk, and where each starts."""
        with self._stem_lock:
            if kind not in self._mapped:
                import mmap

                import numpy as np

                path = self.folder / f"{kind}.bin"
                with path.open("rb") as fh:
                    block = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) \
                        if path.stat().st_size else b""
                starts = np.load(self.folder / f"{kind}-starts.npy", allow_pickle=False)
                if len(starts) != len(self.papers):
                    raise ValueError(f"{kind}-starts.npy does not match the snapshot")
                self._mapped[kind] = (block, starts)
            return self._mapped[kind]

    # -- lookups -------------------------------------------------------------------------

    def chunks_of(self, pids: Iterable[str]) -> dict[str, list[str]]:
        """paper id -> its chunk ids, in snapshot order (papers without chunks left out)."""
        out: dict[str, list[str]] = {}
        for _, pid, cid in sorted(self._db.many("SELECT pos, paper, id FROM chunks WHERE paper IN ({})",
                                                list(dict.fromkeys(pids)))):
            out.setdefault(pid, []).append(cid)
        return out

    def chunk_papers(self) -> list[str]:
        """The paper id of every chunk, in BM25's order (a scan: filters, once per snapshot)."""
        return [pid for _, pid in self._db.scan(
            "SELECT pos, paper FROM chunks WHERE pos > ? ORDER BY pos LIMIT 20000")]

    def lookup(self, table: str, keys: Iterable[str]) -> list[tuple[str, str]]:
        """The (key, value) rows of a lookup table for these keys, in the order written."""
        if table not in _LOOKUP_TABLES:
            raise ValueError(f"no lookup table {table!r}")
        rows = self._db.many(f"SELECT rowid, key, value FROM {table} WHERE key IN ({{}})",
                             list(dict.fromkeys(keys)))
        return [(k, v) for _, k, v in sorted(rows)]

    def longest(self, table: str) -> int:
        """The length of a lookup table's longest key."""
        return int(self._longest.get(table, 0))

    def scan_lookup(self, table: str) -> Iterator[tuple[str, str]]:
        """Every row of a lookup table, in the order written (a scan)."""
        if table not in _LOOKUP_TABLES:
            raise ValueError(f"no lookup table {table!r}")
        for _, k, v in self._db.scan(
                f"SELECT rowid, key, value FROM {table} WHERE rowid > ? ORDER BY rowid LIMIT 20000"):
            yield k, v


# -- writing ---------------------------------------------------------------------------------


def build(store: Store, folder: Path, lookups: Callable[[list[Paper]], Lookups]) -> None:
    """Write the snapshot of the store's current version into `folder` (a new directory)."""
    import bm25s
    import numpy as np
    from bm25s.stopwords import STOPWORDS_EN

    version = store.version
    ids, docs, metas = store.chunks()
    papers: dict[str, Paper] = {}
    records: dict[str, str] = {}
    for meta in metas:  # the paper record is on its first chunk (rag.store.format)
        pid = meta["paper_id"]
        if "paper" in meta and pid not in papers:
            papers[pid] = Paper.from_dict(json.loads(meta["paper"]))
            records[pid] = meta["paper"]
    texts = [bm25_text(papers[m["paper_id"]], doc) for doc, m in zip(docs, metas, strict=True)]
    folder.mkdir(parents=True)
    arrays: dict[str, Any] = {}
    vocab: dict[str, int] = {}
    dtype = "float32"
    if texts:
        bm25 = bm25s.BM25()
        bm25.index(bm25s.tokenize([normalise(t) for t in texts], stopwords="en", stemmer=stemmer(),
                                  return_ids=False, show_progress=False), show_progress=False)
        if bm25.nonoccurrence_array is not None:  # BM25L and BM25+ only; rag uses bm25s's default
            raise ValueError(f"BM25 method {bm25.method} is not supported")
        arrays = {k: bm25.scores[k] for k in _ARRAYS}
        vocab, dtype = bm25.vocab_dict, str(np.dtype(bm25.dtype))
        for k, a in arrays.items():
            np.save(folder / f"bm25-{k}.npy", a, allow_pickle=False)
    for kind, field in (("abstracts", "abstract"), ("titles", "title")):
        parts = [(getattr(p, field) or "").replace("\0", " ").encode("utf-8") + b"\0"
                 for p in papers.values()]
        (folder / f"{kind}.bin").write_bytes(b"".join(parts))
        np.save(folder / f"{kind}-starts.npy", np.cumsum([0] + [len(b) for b in parts[:-1]],
                                                          dtype=np.int64)[: len(parts)], allow_pickle=False)
    tables = {t: list(rows) for t, rows in lookups(list(papers.values())).items()}
    meta_rows = {"format": FORMAT, "version": version, "chunks": len(ids), "papers": len(papers),
                 "terms": len(vocab), "dtype": dtype, "stopwords": sorted(STOPWORDS_EN),
                 "longest": {t: max((len(k) for k, _ in rows), default=0) for t, rows in tables.items()}}
    conn = sqlite3.connect(folder / DATABASE)
    try:
        conn.executescript(
            "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;"
            "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
            "CREATE TABLE chunks(pos INTEGER PRIMARY KEY, id TEXT NOT NULL, paper TEXT NOT NULL,"
            " text TEXT NOT NULL);"
            "CREATE TABLE papers(pos INTEGER PRIMARY KEY, id TEXT NOT NULL, record TEXT NOT NULL);"
            "CREATE TABLE vocab(term TEXT PRIMARY KEY, id INTEGER NOT NULL) WITHOUT ROWID;"
            + "".join(f"CREATE TABLE {t}(key TEXT NOT NULL, value TEXT NOT NULL);" for t in _LOOKUP_TABLES))
        conn.executemany("INSERT INTO meta VALUES (?, ?)", [(k, json.dumps(v)) for k, v in meta_rows.items()])
        conn.executemany("INSERT INTO chunks VALUES (?, ?, ?, ?)",
                         ((i, cid, m["paper_id"], doc) for i, (cid, doc, m)
                          in enumerate(zip(ids, docs, metas, strict=True))))
        conn.executemany("INSERT INTO papers VALUES (?, ?, ?)",
                         ((i, pid, rec) for i, (pid, rec) in enumerate(records.items())))
        conn.executemany("INSERT INTO vocab VALUES (?, ?)", ((t, int(i)) for t, i in vocab.items()))
        for table, rows in tables.items():
            conn.executemany(f"INSERT INTO {table} VALUES (?, ?)", rows)
        conn.executescript(
            "CREATE UNIQUE INDEX chunks_id ON chunks(id); CREATE INDEX chunks_paper ON chunks(paper);"
            "CREATE UNIQUE INDEX papers_id ON papers(id);"
            + "".join(f"CREATE INDEX {t}_key ON {t}(key);" for t in _LOOKUP_TABLES))
        conn.commit()
    finally:
        conn.close()
    (folder / MANIFEST).write_text(json.dumps({"format": FORMAT, "files": _manifest(folder)}),
                                   encoding="utf-8")


def temporary(store: Store, lookups: Callable[[list[Paper]], Lookups]) -> Snapshot:
    """A snapshot where none can be cached (a read-only home): in a temporary directory, removed
    with the snapshot."""
    keep = tempfile.TemporaryDirectory(prefix="rag-snapshot-")
    folder = Path(keep.name) / "snapshot"
    build(store, folder, lookups)
    return Snapshot(folder, keep)
