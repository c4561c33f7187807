"""What the store keeps for each chunk and each paper (metadata, sentence vectors), as plain
data: rag.store writes and reads these records, and upgrades indexes written in an earlier
format without embedding anything again.

Format 4 (this one): each chunk also carries LlamaIndex's node keys (`_node_content`, the
node without its text, `_node_type`, and `ref_doc_id`/`doc_id`/`document_id` = the paper id),
so LlamaIndex's ChromaVectorStore reads the chunks as nodes of their paper; the paper record
(`paper`) is stored once, on the paper's first chunk (chunk 0), no longer on every chunk.
Format 3: every chunk carries its paper's `venue_words` and `categories` (arrays) for native
filters; a paper's abstract sentences and their vectors are one record, read by paper id.
Format 2 (indexes without a `format` key) stored one record per sentence in an HNSW
collection, which no query ever searched by vector.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from rag.config import Settings
from rag.corpus.paper import Paper, category_keys, sha, source_files, venue_words
from rag.embed import MODEL_NAME, pooling
from rag.errors import InputError

FORMAT = 4
CHUNK_RECIPE = "title+chunk/v3"  # bump when the text embedded changes (v2: own sentence ends;
# v3: sentences glued by a lost space end there)


def vector_recipe(settings: Settings) -> str:
    """How the index's vectors are made, where that makes other vectors: pooled chunk vectors
    (RAG_CHUNK_VECTORS=sentences, as rag/embed/pooling.json makes them); "" for the model
    reading each chunk. The model's precision is not part of it: int8 vectors keep cosine 0.998
    or more to fp32 ones (rag.embed.build.int8_model), so an index built with either reads
    and grows with either."""
    return f"sentences/{pooling.recipe()}" if settings.chunk_vectors == "sentences" else ""


def vector_kinds(settings: Settings) -> list[Settings]:
    """The settings an index of this name may have been built with: these first, and, with
    RAG_CHUNK_VECTORS unset, those with the other kind of chunk vectors (an index keeps the
    kind it was built with; set explicitly, the setting decides)."""
    if "chunk_vectors" in settings.model_fields_set:
        return [settings]
    return [settings, *_other_kinds(settings)]


def _other_kinds(settings: Settings) -> list[Settings]:
    return [settings.model_copy(update={"chunk_vectors": kind})
            for kind in ("model", "sentences") if kind != settings.chunk_vectors]


def own_vectors(settings: Settings, collections: Callable[[], list[str]],
                papers: Callable[[str], int], growing: bool = False) -> Settings:
    """The settings of the index's own chunk vectors (`vector_kinds`): the first kind whose
    collection is among `collections()` and holds papers (`papers(name)`; both asked only
    when the kind is not set, or to grow the index), else these, whose collection an ingest
    creates. A read with the other kind set leaves an empty collection of that kind; it must
    not hide the index's own.

    Growing an index with the kind set (RAG_CHUNK_VECTORS, `rag ingest --fast`) while only the
    other kind has papers is an InputError: it would start a second collection under the same
    name, whose papers no read sees."""
    kinds = vector_kinds(settings)
    if len(kinds) == 1 and not growing:
        return settings
    names = set(collections())

    def filled(kind: Settings) -> bool:
        name = f"{kind.index}-{fingerprint(kind)}"
        return name in names and papers(name) > 0

    if len(kinds) > 1:
        return next((k for k in kinds if filled(k)), settings)
    if filled(settings):
        return settings
    for other in _other_kinds(settings):
        if filled(other):
            fast = " (--fast)" if settings.chunk_vectors == "sentences" else ""
            built = ("the model reading each chunk" if other.chunk_vectors == "model"
                     else "chunk vectors pooled from sentences (--fast)")
            raise InputError(
                f"the index '{settings.index}' was built with {built}; "
                f"RAG_CHUNK_VECTORS={settings.chunk_vectors}{fast} would start a second "
                "collection beside it",
                "grow it as it was built (without --fast, RAG_CHUNK_VECTORS unset), or "
                "ingest into a new index: --index NEW")
    return settings


def fingerprint(settings: Settings) -> str:
    recipe = vector_recipe(settings)
    vectors = f"|{recipe}" if recipe else ""  # indexes of the model's chunk vectors keep their names
    return sha(f"{MODEL_NAME}|{settings.chunk_size}|{settings.chunk_overlap}|{CHUNK_RECIPE}{vectors}")[:8]


def paper_metadata(paper: Paper) -> dict[str, Any]:
    """The metadata every chunk of a paper carries (computed once per paper)."""
    meta: dict[str, Any] = {
        "content_hash": paper.content_hash(),
        "source": paper.source,
        # where the files were when read: --prune checks these, whatever the working directory
        # (resolved now, a relative name of an earlier ingest from another folder was wrong)
        "source_path": paper.located.get(paper.source) or str(Path(paper.source).resolve()),
        "file_paths": json.dumps({s: paper.located[s] for s in source_files(paper) if s in paper.located},
                                 ensure_ascii=False),
        "label": paper.label,
        "title": paper.title or "",
        "venue": (paper.venue or "").lower(),
        "year": paper.year or 0,
        "paper": json.dumps(paper.to_dict(), ensure_ascii=False),
    }
    meta.update(filter_metadata(paper))
    return meta


def stored_paper(meta: dict[str, Any]) -> Paper:
    """The record a first chunk's metadata holds, with where its files were when read."""
    paper = Paper.from_dict(json.loads(meta["paper"]))
    paper.located = json.loads(meta.get("file_paths") or "{}")
    if meta.get("source_path"):
        paper.located.setdefault(paper.source, str(meta["source_path"]))
    return paper


def chunk_metadata(paper: Paper, chunk_id: str, index: int, n_chunks: int,
                   base: dict[str, Any]) -> dict[str, Any]:
    """One chunk's metadata: its place, its paper's `base` (the record only on chunk 0), and
    the keys LlamaIndex's vector stores write and read, made by LlamaIndex itself (imported
    here only: writing happens at ingest, which already uses its sentence splitter)."""
    from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
    from llama_index.core.vector_stores.utils import node_to_metadata_dict

    node = TextNode(
        id_=chunk_id, text="",
        metadata={"paper_id": paper.paper_id, "chunk": index, "title": paper.title or "",
                  "label": paper.label, "year": paper.year, "venue": paper.venue},
        excluded_llm_metadata_keys=["paper_id", "chunk", "label"],
        excluded_embed_metadata_keys=["paper_id", "chunk", "label", "year", "venue"],
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=paper.paper_id)})
    own = {"paper_id": paper.paper_id, "chunk": index, "n_chunks": n_chunks, **base}
    if index != 0:
        own.pop("paper", None)
    return {**node_to_metadata_dict(node, remove_text=True, flat_metadata=True), **own}


def filter_metadata(paper: Paper) -> dict[str, list[str]]:
    """The arrays native filters test with `$contains` (Chroma takes no empty array)."""
    out = {"venue_words": venue_words(paper), "categories": category_keys(paper.categories)}
    return {k: v for k, v in out.items() if v}


def sentence_record(paper_id: str, sentences: list[str], vectors: np.ndarray
                    ) -> tuple[dict[str, Any], np.ndarray]:
    """One paper's sentences as (metadata, the record's own vector).

    The vectors travel as base64 float32 in the metadata: exact, and read back with the
    record by id. The record's own vector (the store needs one) is their normalised mean; it
    is never searched.
    """
    vecs = np.ascontiguousarray(vectors, dtype=np.float32).reshape(len(sentences), -1)
    mean = vecs.mean(axis=0)
    mean /= max(float(np.linalg.norm(mean)), 1e-12)
    meta = {"paper_id": paper_id, "sentences": json.dumps(sentences, ensure_ascii=False),
            "dim": int(vecs.shape[1]), "vectors": base64.b64encode(vecs.tobytes()).decode("ascii")}
    return meta, mean


def read_sentence_record(meta: dict[str, Any]) -> tuple[list[str], np.ndarray]:
    sentences = json.loads(meta["sentences"])
    vecs = np.frombuffer(base64.b64decode(meta["vectors"]), dtype=np.float32)
    return sentences, vecs.reshape(len(sentences), int(meta["dim"])).copy()


def group_sentence_rows(documents: list[str], metadatas: list[dict[str, Any]],
                        embeddings: Any) -> dict[str, tuple[list[str], np.ndarray]]:
    """Format 2's one-record-per-sentence rows, as each paper's sentences in order."""
    rows: dict[str, list[tuple[int, str, Any]]] = {}
    for doc, meta, vec in zip(documents, metadatas, embeddings, strict=True):
        rows.setdefault(meta["paper_id"], []).append((meta["n"], doc, vec))
    out = {}
    for pid, items in rows.items():
        items.sort(key=lambda t: t[0])
        out[pid] = ([t[1] for t in items], np.asarray([t[2] for t in items], dtype=np.float32))
    return out


def upgrade(store: Any, old_sentences: str, batch: int = 500) -> None:
    """Format 2 -> 3 in place, through the store's own collections: chunks get their filter
    metadata, sentence vectors move to one record per paper, and the format is recorded last,
    so a stopped upgrade simply runs again. Nothing is embedded again."""
    metas = store._get_all(["metadatas"])
    papers = {m["paper_id"]: m["paper"] for m in metas["metadatas"] if "paper" in m}
    fmt = int((store.collection.metadata or {}).get("format", 2))
    if fmt < 4:  # LlamaIndex's node keys, and the paper record on chunk 0 only
        records = {pid: Paper.from_dict(json.loads(doc)) for pid, doc in papers.items()}
        nodes = [(cid, {**chunk_metadata(records[m["paper_id"]], cid, m["chunk"], m["n_chunks"], {}),
                        **({"paper": None} if m["chunk"] != 0 else {})})
                 for cid, m in zip(metas["ids"], metas["metadatas"], strict=True)]
        for start in range(0, len(nodes), batch):
            part = nodes[start : start + batch]
            store.collection.update(ids=[c for c, _ in part], metadatas=[e for _, e in part])
    if fmt >= 3:
        _record_format(store)
        return
    extra = {pid: filter_metadata(Paper.from_dict(json.loads(doc))) for pid, doc in papers.items()}
    todo = [(cid, extra[m["paper_id"]]) for cid, m in zip(metas["ids"], metas["metadatas"], strict=True)
            if extra[m["paper_id"]]]
    for start in range(0, len(todo), batch):
        part = todo[start : start + batch]
        store.collection.update(ids=[c for c, _ in part], metadatas=[e for _, e in part])
    if any(c.name == old_sentences for c in store.client.list_collections()):
        previous = store.client.get_collection(old_sentences, embedding_function=None)
        ids = sorted(papers)
        for start in range(0, len(ids), batch):
            group = ids[start : start + batch]
            page = previous.get(where={"paper_id": {"$in": group}},
                                include=["documents", "metadatas", "embeddings"])
            rows = group_sentence_rows(page["documents"], page["metadatas"], page["embeddings"])
            store._put_sentences([(pid, *sentence_record(pid, *rows[pid])) for pid in group
                                  if pid in rows])
        store.client.delete_collection(old_sentences)
    _record_format(store)


def rewrite(store: Any, papers: list[Paper], batch: int = 500) -> None:
    """New records for indexed papers whose embedded text (title and abstract) is unchanged:
    their chunks' metadata is written again and their vectors kept, so a journal's kind, an
    author's name parts or a corrected DOI costs no embedding. The version is bumped before
    and after, as for any write (readers drop their caches)."""
    by_id = {p.paper_id: p for p in papers}
    ids = sorted(by_id)
    store._bump()
    for start in range(0, len(ids), batch):
        page = store.collection.get(where={"paper_id": {"$in": ids[start : start + batch]}},
                                    include=["metadatas"])
        bases = {pid: paper_metadata(by_id[pid]) for pid in ids[start : start + batch]}
        # a filter array the record no longer has is deleted (None), not left behind
        metas = [{"venue_words": None, "categories": None,
                  **chunk_metadata(by_id[m["paper_id"]], cid, m["chunk"], m["n_chunks"], bases[m["paper_id"]])}
                 for cid, m in zip(page["ids"], page["metadatas"], strict=True)]
        for at in range(0, len(metas), batch):
            store.collection.update(ids=page["ids"][at : at + batch], metadatas=metas[at : at + batch])
    store._bump()


def _record_format(store: Any) -> None:
    meta = dict(store.collection.metadata or {})
    meta["format"] = FORMAT
    store.collection.modify(metadata=meta)
