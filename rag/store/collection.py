"""The Chroma collection: the one module that talks to Chroma.

A collection is named after the index and a fingerprint of the model and chunk settings, so
changing either builds a new collection instead of mixing vectors. Each chunk carries its
paper's metadata (and the record as JSON): a paper is listed, shown, filtered and re-checked
for changes from the store alone, embedded or server.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rag.config import Settings
from rag.corpus.paper import Paper
from rag.embed import MODEL_NAME
from rag.errors import IndexStoreError
from rag.store import format as store_format
from rag.store import indexes, quick, space
from rag.store.check import index_error, rebuild_command
from rag.store.client import Guarded, database_id, open_client
from rag.store.format import CHUNK_RECIPE
from rag.store.indexes import collection_name

log = logging.getLogger(__name__)

_BATCH = 2000  # stay under Chroma's max batch size
_WHERE_BATCH = 500  # paper ids per `$in` filter
VERSION_TTL = 1.0


@dataclass
class Chunk:
    chunk_id: str
    paper_id: str
    text: str
    index: int


def all_index_sizes(settings: Settings) -> dict[str, int]:
    """Every index of the data directory these settings read, with its paper count, whether
    or not the index they name exists; listing makes no index (`rag index list`)."""
    try:
        store = Store(settings, create=False)
    except IndexStoreError:  # the named one is missing: read the others through a bare client
        return indexes.index_sizes(open_client(settings), settings)
    try:
        return indexes.index_sizes(store.client, settings)
    finally:
        store.close()


def _groups(items: list[str], size: int = _WHERE_BATCH) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _where_in(key: str, values: list[str]) -> dict[str, Any]:
    return {key: {"$in": values}} if len(values) > 1 else {key: values[0]}


class Store:
    """One index: a Chroma collection of chunks."""

    _writing = 0  # depth of `writing()`; not reset when `version` opens the store afresh

    def __init__(self, settings: Settings, upgrade: bool = False, create: bool = True) -> None:
        """`upgrade`: bring an index of an earlier format up to date (the caller holds the
        ingest lock); without it such an index is an error that says how to upgrade.
        `create`: make the index if it does not exist; without it a missing index is an error
        naming those that exist, and a mistyped name leaves no empty index behind."""
        collection_name(settings)  # a bad index name is an InputError before Chroma opens
        self.client = Guarded(open_client(settings), settings)
        self.settings = settings = store_format.own_vectors(
            settings, lambda: indexes.collection_names(self.client),
            lambda n: Guarded(self.client.get_collection(n, embedding_function=None), settings).count(),
            growing=upgrade)
        self.name = collection_name(settings)
        if not create:
            names = indexes.collection_names(self.client)
            if self.name not in names:
                raise indexes.missing(settings, self.client, names)
        self._version: tuple[int, float] | None = None
        self._database = database_id(settings)  # deleted or replaced under us: see `version`
        try:
            # Abstract sentences with their vectors, embedded at ingest for the judge and the
            # offline answerer (never per question); read by paper id, never searched: one
            # record per paper (rag.store.format), in the smallest HNSW graph Chroma allows.
            self.sentences_collection = self.client.get_or_create_collection(
                name=f"{self.name}-paper-sentences", embedding_function=None,
                configuration={"hnsw": {"space": "cosine", "ef_construction": 8,
                                        "max_neighbors": 4}},
            )
            self.collection = self.client.get_or_create_collection(
                name=self.name,
                embedding_function=None,  # never Chroma's default: it downloads a model
                metadata={"embedding_model": MODEL_NAME, "chunk_size": settings.chunk_size,
                          "chunk_overlap": settings.chunk_overlap, "recipe": CHUNK_RECIPE,
                          "vectors": f"{settings.embed_precision}/{settings.chunk_vectors}",
                          "version": 0, "format": store_format.FORMAT},
                configuration={"hnsw": {"space": "cosine", "ef_construction": 200,
                                        "ef_search": 200, "max_neighbors": 32}},
            )
        except Exception as exc:
            raise index_error(settings, exc) from exc
        self.sentences_collection = Guarded(self.sentences_collection, settings)
        self.collection = Guarded(self.collection, settings)
        if int((self.collection.metadata or {}).get("format", 2)) < store_format.FORMAT:
            self._upgrade(upgrade)

    def close(self) -> None:
        """Release the client (its share of the embedded store, or its server session)."""
        # chromadb's HTTP client stops its Systems (its own and its admin client's) without
        # closing their httpx sessions: their sockets leak (ResourceWarning) unless closed here.
        clients = [self.client, getattr(self.client, "_admin_client", None)]
        servers = [(getattr(c, "_identifier", None), getattr(c, "_server", None)) for c in clients]
        self.client.close()
        if self.settings.chroma_url:
            from chromadb.api.shared_system_client import SharedSystemClient

            for identifier, server in servers:
                session = getattr(server, "_session", None)
                if session is not None and identifier not in SharedSystemClient._identifier_to_system:
                    session.close()

    # -- reading -------------------------------------------------------------------------

    def count(self) -> int:
        return int(self.collection.count())

    @property
    def version(self) -> int:
        """Changes on every write; readers key caches (BM25) on it.

        Read from the store at most every VERSION_TTL seconds: a query asks several times,
        and a replica may see another's write that much later.
        """
        now = time.monotonic()
        if self._version is None or now - self._version[1] > VERSION_TTL:
            if self._database is not None and database_id(self.settings) != self._database:
                # Chroma would go on reading the deleted files it holds open, then fail on the
                # first one it opens anew: say what happened instead, now.
                raise IndexStoreError(
                    f"the index at {self.settings.index_dir} was deleted or replaced while "
                    "this process had it open",
                    f"if it was deleted, rebuild it: {rebuild_command(self.settings)}; "
                    "then restart `rag serve`",
                )
            meta = self.client.get_collection(self.name, embedding_function=None).metadata or {}
            version = int(meta.get("version", 0))
            if self._version is not None and version != self._version[0] and not self.settings.chroma_url:
                # The embedded store keeps its vector index in memory and never sees another
                # process's writes (a running server would rank new papers by BM25 alone):
                # open it afresh, as a new process would.
                self.close()
                self.__init__(self.settings)  # type: ignore[misc]  # keeps _writing
            self._version = (version, now)
        return self._version[0]

    def _get_all(self, include: list[str], where: dict[str, Any] | None = None) -> dict[str, Any]:
        out: dict[str, list[Any]] = {"ids": [], **{k: [] for k in include}}
        total, offset = self.count(), 0
        while offset < total:
            page = self.collection.get(include=include, where=where, limit=_BATCH, offset=offset)
            if not page["ids"]:
                break
            out["ids"].extend(page["ids"])
            for k in include:
                out[k].extend(page[k])
            offset += len(page["ids"])
        return out

    def chunks(self) -> tuple[list[str], list[str], list[dict[str, Any]]]:
        """Every chunk: ids, texts and metadata (for the BM25 index)."""
        page = self._get_all(["documents", "metadatas"])
        return page["ids"], page["documents"], page["metadatas"]

    def source_paths(self) -> dict[str, str]:
        """paper_id -> absolute path of its source file when it was ingested."""
        return {m["paper_id"]: m.get("source_path", m["source"])
                for m in self._get_all(["metadatas"], where={"chunk": 0})["metadatas"]}

    def paper_states(self) -> dict[str, tuple[str, int, int, str]]:
        """paper_id -> (content hash, chunks expected, chunks present, source)."""
        states: dict[str, tuple[str, int, int, str]] = {}
        for meta in self._get_all(["metadatas"])["metadatas"]:
            pid = meta["paper_id"]
            h, n, seen, src = states.get(pid, (meta["content_hash"], meta["n_chunks"], 0, meta["source"]))
            if h != meta["content_hash"]:
                h = "mixed"  # chunks from two versions: a write was interrupted
            states[pid] = (h, n, seen + 1, src)
        return states

    def papers(self) -> list[Paper]:
        by_id: dict[str, Paper] = {}
        for meta in self._get_all(["metadatas"], where={"chunk": 0})["metadatas"]:
            by_id[meta["paper_id"]] = store_format.stored_paper(meta)
        return sorted(by_id.values(), key=lambda p: (p.source, p.position))

    def paper(self, paper_id: str) -> Paper | None:
        page = self.collection.get(where={"$and": [{"paper_id": paper_id}, {"chunk": 0}]},
                                   include=["metadatas"], limit=1)
        if not page["ids"]:
            return None
        return store_format.stored_paper(page["metadatas"][0])

    def sentences(self, paper_ids: list[str]) -> dict[str, tuple[list[str], np.ndarray]]:
        """Stored abstract sentences and vectors of these papers, in abstract order."""
        if not paper_ids:
            return {}
        page = self.sentences_collection.get(ids=list(dict.fromkeys(paper_ids)), include=["metadatas"])
        return {pid: store_format.read_sentence_record(meta)
                for pid, meta in zip(page["ids"], page["metadatas"], strict=True)}

    def vectors(self) -> tuple[list[str], np.ndarray]:
        """Every chunk's id and vector (rag.store.quick keeps them for a small index)."""
        page = self._get_all(["embeddings"])
        return page["ids"], np.asarray(page["embeddings"], dtype=np.float32).reshape(len(page["ids"]), -1)

    def all_sentences(self) -> dict[str, tuple[list[str], np.ndarray]]:
        """Every paper's stored sentences and their vectors."""
        page = self.sentences_collection.get(include=["metadatas"])
        return {pid: store_format.read_sentence_record(meta)
                for pid, meta in zip(page["ids"], page["metadatas"], strict=True)}

    def current_version(self) -> int:
        """The version as the store has it now, not as read up to VERSION_TTL ago."""
        self._version = None
        return self.version

    def query_ids(self, vector: np.ndarray, n: int, where: dict[str, Any] | None = None,
                  total: int | None = None) -> list[tuple[str, float]]:
        """Nearest chunks as (chunk id, cosine similarity), best first.

        Without documents and metadata: the retriever has both in its snapshot, and reading
        them back costs most of the query (22 ms of 27 ms for 200
        chunks of SciFact, where each chunk's metadata holds its paper's record).
        """
        n = min(n, self.count() if total is None else total)
        if n <= 0:
            return []
        res = self.collection.query(
            query_embeddings=[vector.tolist()], n_results=n, where=where, include=["distances"],
        )
        return [(cid, 1.0 - float(dist)) for cid, dist in zip(res["ids"][0], res["distances"][0],
                                                              strict=True)]

    # -- writing -------------------------------------------------------------------------

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """The writes within count as one for readers: the version is bumped before the first
        and after the last, not around each (an ingest writes every ~500 texts, and a
        reader that sees the version move reads the index again)."""
        if not self._writing:  # the outermost: a write() inside adds no bump of its own
            self._bump()
        self._writing += 1
        done = False
        try:
            yield
            done = True
        finally:
            self._writing -= 1
            if not self._writing:
                self._bump()
                if done:  # the writer holds the ingest lock (rag.store.lock): a small index's
                    quick.remember(self)  # reads, for questions that need no Chroma

    def write(self, papers: Sequence[tuple[Paper, list[Chunk], np.ndarray]], delete_papers: Iterable[str] = (),
              sentences: Sequence[tuple[str, list[str], np.ndarray]] = (), new: bool = False) -> None:
        """_write, with a failure for want of room on the disk said as such (rag.store.space)."""
        directory = None if self.settings.chroma_url else self.settings.index_dir
        with space.checked_write(directory, space.write_size(papers, sentences)), self.writing():
            self._write(papers, delete_papers, sentences, new)

    def _write(
        self,
        papers: Sequence[tuple[Paper, list[Chunk], np.ndarray]],
        delete_papers: Iterable[str] = (),
        sentences: Sequence[tuple[str, list[str], np.ndarray]] = (),
        new: bool = False,
    ) -> None:
        """Replace the chunks (and sentence vectors) of the given papers and delete others;
        `new`: none of the papers is in the store (no chunks of theirs to look for).

        Safe to interrupt at any point and run again: the version is bumped first (`writing`:
        before the first write), so no reader keeps a cache of the old state; sentences are
        written before chunks, and a paper counts as stored only when all its chunks carry its
        content hash; chunk ids are deterministic (paper_id#n) and upserted, and stale ones
        deleted last.
        """
        # Batched: a few upserts per write, not a round trip per paper (on SciFact's 5,183
        # abstracts the per-paper calls cost more than the HNSW inserts).
        self._put_sentences([(pid, *store_format.sentence_record(pid, sents, vecs))
                             for pid, sents, vecs in sentences if sents])
        ids: list[str] = []
        docs: list[str] = []
        metas: list[dict[str, Any]] = []
        vecs: list[np.ndarray] = []
        for paper, chunks, vectors in papers:
            base = store_format.paper_metadata(paper)
            for chunk, vec in zip(chunks, vectors, strict=True):
                ids.append(chunk.chunk_id)
                docs.append(chunk.text)
                metas.append(store_format.chunk_metadata(paper, chunk.chunk_id, chunk.index,
                                                         len(chunks), base))
                vecs.append(vec)
        for start in range(0, len(ids), _BATCH):
            end = start + _BATCH
            self.collection.upsert(
                ids=ids[start:end], documents=docs[start:end], metadatas=metas[start:end],
                embeddings=np.asarray(vecs[start:end], dtype=np.float32),
            )
        keep = set(ids)
        written = [] if new else [paper.paper_id for paper, _, _ in papers]
        for group in _groups(written):
            stale = self.collection.get(where=_where_in("paper_id", group), include=[])["ids"]
            extra = [i for i in stale if i not in keep]
            if extra:
                self.collection.delete(ids=extra)
        for group in _groups(list(delete_papers)):
            self.collection.delete(where=_where_in("paper_id", group))
            self.sentences_collection.delete(ids=group)

    def _put_sentences(self, records: list[tuple[str, dict[str, Any], np.ndarray]]) -> None:
        for start in range(0, len(records), _BATCH):
            part = records[start : start + _BATCH]
            self.sentences_collection.upsert(
                ids=[r[0] for r in part], metadatas=[r[1] for r in part],
                embeddings=np.asarray([r[2] for r in part], dtype=np.float32))

    def _upgrade(self, allowed: bool) -> None:
        if self.count() and not allowed:
            index = "" if self.settings.index == "default" else f" --index {self.settings.index}"
            raise IndexStoreError(
                f"the index '{self.settings.index}' was written by an earlier version of rag",
                f"run `rag ingest{index}` once: it upgrades the index in place, without "
                "embedding anything again (then restart any `rag serve` using it)")
        store_format.upgrade(self, f"{self.name}-sentences")
        self._bump()

    def _bump(self) -> None:
        quick.forget(self.settings, self.settings.index)  # before the write it announces
        self._version = None
        meta = dict(self.collection.metadata or {})
        meta["version"] = int(meta.get("version", 0)) + 1
        self.collection.modify(metadata=meta)
