"""The Chroma collection: the one module that talks to Chroma.

A collection is named after the index and a fingerprint of the embedding model and chunk
settings, so changing either builds a new collection instead of mixing vectors. Each chunk
carries its paper's metadata (and the whole record as JSON) so that a paper can be listed,
shown, filtered and re-checked for changes from the store alone, embedded or server.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np

from rag.config import Settings
from rag.corpus.paper import Paper, sha
from rag.embed import MODEL_NAME
from rag.errors import IndexStoreError, InputError

log = logging.getLogger(__name__)

CHUNK_RECIPE = "title+chunk/v1"  # bump when the text that is embedded changes
_INDEX_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,40}$")
_BATCH = 2000  # stay under Chroma's max batch size
VERSION_TTL = 1.0


@dataclass
class Chunk:
    chunk_id: str
    paper_id: str
    text: str
    index: int


@dataclass
class Hit:
    chunk_id: str
    paper_id: str
    text: str
    similarity: float  # cosine similarity in [-1, 1]


def fingerprint(settings: Settings) -> str:
    return sha(f"{MODEL_NAME}|{settings.chunk_size}|{settings.chunk_overlap}|{CHUNK_RECIPE}")[:8]


def collection_name(settings: Settings) -> str:
    if not _INDEX_NAME.match(settings.index):
        raise InputError(
            f"index name {settings.index!r} is not allowed",
            "use letters, digits, '-' and '_' (at most 41 characters), e.g. --index scifact",
        )
    return f"{settings.index}-{fingerprint(settings)}"


def _client(settings: Settings) -> Any:
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    chroma_settings = ChromaSettings(anonymized_telemetry=False)
    try:
        if settings.chroma_url:
            url = urlparse(settings.chroma_url)
            return chromadb.HttpClient(
                host=url.hostname or "127.0.0.1", port=url.port or 8000,
                ssl=url.scheme == "https", settings=chroma_settings,
            )
        settings.index_dir.mkdir(parents=True, exist_ok=True)
        return chromadb.PersistentClient(path=str(settings.index_dir), settings=chroma_settings)
    except Exception as exc:  # chromadb raises bare Exceptions/ValueErrors here
        where = settings.chroma_url or settings.index_dir
        raise IndexStoreError(
            f"cannot open the index at {where}: {exc}",
            "check RAG_CHROMA_URL / RAG_HOME; to rebuild: rm -rf the index directory, then rag ingest",
        ) from exc


def _metadata(paper: Paper, chunk: Chunk, n_chunks: int) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "paper_id": paper.paper_id,
        "chunk": chunk.index,
        "n_chunks": n_chunks,
        "content_hash": paper.content_hash(),
        "source": paper.source,
        # where the file was when ingested: --prune checks this, whatever the working directory
        "source_path": str(Path(paper.source).resolve()),
        "label": paper.label,
        "title": paper.title or "",
        "venue": (paper.venue or "").lower(),
        "year": paper.year or 0,
        "paper": json.dumps(paper.to_dict(), ensure_ascii=False),
    }
    return meta


class Store:
    """One index: a Chroma collection of chunks."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.name = collection_name(settings)
        self._version: tuple[int, float] | None = None
        self.client = _client(settings)
        try:
            # Abstract sentences with their vectors, embedded at ingest: the judge and the
            # offline answerer compare against them, and must not embed them per question.
            self.sentences_collection = self.client.get_or_create_collection(
                name=f"{self.name}-sentences", embedding_function=None,
                configuration={"hnsw": {"space": "cosine"}},
            )
            self.collection = self.client.get_or_create_collection(
                name=self.name,
                embedding_function=None,  # never Chroma's default: it downloads a model
                metadata={"embedding_model": MODEL_NAME, "chunk_size": settings.chunk_size,
                          "chunk_overlap": settings.chunk_overlap, "recipe": CHUNK_RECIPE,
                          "version": 0},
                configuration={"hnsw": {"space": "cosine", "ef_construction": 200,
                                        "ef_search": 200, "max_neighbors": 32}},
            )
        except Exception as exc:
            raise IndexStoreError(
                f"the index {self.name} cannot be opened: {exc}",
                f"rebuild it: rm -rf {settings.index_dir} && rag ingest",
            ) from exc

    def close(self) -> None:
        """Release the client (its share of the embedded store, or its server session)."""
        self.client.close()

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
            meta = self.client.get_collection(self.name, embedding_function=None).metadata or {}
            self._version = (int(meta.get("version", 0)), now)
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
            by_id[meta["paper_id"]] = Paper.from_dict(json.loads(meta["paper"]))
        return sorted(by_id.values(), key=lambda p: (p.source, p.position))

    def paper(self, paper_id: str) -> Paper | None:
        page = self.collection.get(where={"paper_id": paper_id}, include=["metadatas"], limit=1)
        if not page["ids"]:
            return None
        return Paper.from_dict(json.loads(page["metadatas"][0]["paper"]))

    def sentences(self, paper_ids: list[str]) -> dict[str, tuple[list[str], np.ndarray]]:
        """Stored abstract sentences and vectors of these papers, in abstract order."""
        if not paper_ids:
            return {}
        where: dict[str, Any] = (
            {"paper_id": {"$in": paper_ids}} if len(paper_ids) > 1 else {"paper_id": paper_ids[0]}
        )
        page = self.sentences_collection.get(where=where, include=["documents", "metadatas", "embeddings"])
        rows: dict[str, list[tuple[int, str, Any]]] = {}
        for doc, meta, vec in zip(page["documents"], page["metadatas"], page["embeddings"], strict=True):
            rows.setdefault(meta["paper_id"], []).append((meta["n"], doc, vec))
        out = {}
        for pid, items in rows.items():
            items.sort(key=lambda t: t[0])
            out[pid] = ([t[1] for t in items], np.asarray([t[2] for t in items], dtype=np.float32))
        return out

    def query(self, vector: np.ndarray, n: int, where: dict[str, Any] | None = None,
              total: int | None = None) -> list[Hit]:
        """Nearest chunks; `total` (the chunk count, if the caller knows it) saves a count."""
        n = min(n, self.count() if total is None else total)
        if n <= 0:
            return []
        res = self.collection.query(
            query_embeddings=[vector.tolist()], n_results=n, where=where,
            include=["documents", "metadatas", "distances"],
        )
        return [
            Hit(cid, meta["paper_id"], doc, 1.0 - float(dist))
            for cid, doc, meta, dist in zip(
                res["ids"][0], res["documents"][0], res["metadatas"][0], res["distances"][0],
                strict=True,
            )
        ]

    # -- writing -------------------------------------------------------------------------

    def write(
        self,
        papers: Sequence[tuple[Paper, list[Chunk], np.ndarray]],
        delete_papers: Iterable[str] = (),
        sentences: Sequence[tuple[str, list[str], np.ndarray]] = (),
    ) -> None:
        """Replace the chunks (and sentence vectors) of the given papers and delete others.

        Safe to interrupt at any point and run again: the version is bumped first, so no
        reader keeps a cache of the old state; sentences are written before chunks, and a
        paper counts as stored only when all its chunks carry its content hash; chunk ids
        are deterministic (paper_id#n) and upserted, and stale ones deleted last.
        """
        self._bump()
        for pid, sents, svecs in sentences:
            self.sentences_collection.delete(where={"paper_id": pid})
            if sents:
                self.sentences_collection.add(
                    ids=[f"{pid}#s{i}" for i in range(len(sents))], documents=list(sents),
                    metadatas=[{"paper_id": pid, "n": i} for i in range(len(sents))],
                    embeddings=np.asarray(svecs, dtype=np.float32),
                )
        ids: list[str] = []
        docs: list[str] = []
        metas: list[dict[str, Any]] = []
        vecs: list[np.ndarray] = []
        for paper, chunks, vectors in papers:
            for chunk, vec in zip(chunks, vectors, strict=True):
                ids.append(chunk.chunk_id)
                docs.append(chunk.text)
                metas.append(_metadata(paper, chunk, len(chunks)))
                vecs.append(vec)
        for start in range(0, len(ids), _BATCH):
            end = start + _BATCH
            self.collection.upsert(
                ids=ids[start:end], documents=docs[start:end], metadatas=metas[start:end],
                embeddings=np.asarray(vecs[start:end], dtype=np.float32),
            )
        keep = set(ids)
        for paper, _, _ in papers:
            stale = self.collection.get(where={"paper_id": paper.paper_id}, include=[])["ids"]
            extra = [i for i in stale if i not in keep]
            if extra:
                self.collection.delete(ids=extra)
        for pid in delete_papers:
            self.collection.delete(where={"paper_id": pid})
            self.sentences_collection.delete(where={"paper_id": pid})
        self._bump()

    def _bump(self) -> None:
        self._version = None
        meta = dict(self.collection.metadata or {})
        meta["version"] = int(meta.get("version", 0)) + 1
        self.collection.modify(metadata=meta)
