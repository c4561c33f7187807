"""The indexes a store holds (by name, with their paper counts), and what a read of one that
is not there says: an index is a collection named after it and a fingerprint of the settings
that built it (rag.store.format), beside that collection's `-paper-sentences`."""

from __future__ import annotations

import re
import shlex
from typing import Any

from rag.config import Settings
from rag.errors import IndexStoreError, InputError
from rag.store.format import fingerprint, vector_kinds

_INDEX_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,40}$")


def collection_name(settings: Settings) -> str:
    if not _INDEX_NAME.match(settings.index):
        raise InputError(
            f"index name {settings.index!r} is not allowed",
            "use letters, digits, '-' and '_' (at most 41 characters), e.g. --index scifact",
        )
    return f"{settings.index}-{fingerprint(settings)}"


def collection_names(client: Any) -> list[str]:
    return [getattr(c, "name", str(c)) for c in client.list_collections()]


def built_with_others(settings: Settings, names: list[str], own: str = "") -> bool:
    """Does this index name hold a collection of another fingerprint among `names` than its
    `own` (rag.store.format.fingerprint: other chunk sizes, or vectors made another way)?"""
    pattern = re.compile(rf"{re.escape(settings.index)}-[0-9a-f]{{8}}")
    return any(n != own and pattern.fullmatch(n) for n in names)


def index_sizes(client: Any, settings: Settings) -> dict[str, int]:
    """The indexes of this store that these settings read (either kind of chunk vectors, as
    `vector_kinds` weighs them) and their paper counts, by name."""
    suffixes = [f"-{fingerprint(kind)}" for kind in vector_kinds(settings)]
    out: dict[str, int] = {}
    for name in collection_names(client):
        for suffix in suffixes:
            index = name.removesuffix(suffix)
            if index != name:  # of two kinds, the one with papers (as rag.store reads it)
                papers = client.get_collection(f"{name}-paper-sentences", embedding_function=None)
                out[index] = max(papers.count(), out.get(index, 0))
    return dict(sorted(out.items()))


def built_otherwise(settings: Settings, client: Any, own: str = "") -> IndexStoreError:
    """An index that holds papers under another fingerprint than these settings': built with
    other chunk settings, or by an earlier rag whose chunking has changed since
    (rag.store.format.CHUNK_RECIPE). Its rebuild names the files it was built from, as its
    records keep them: after an upgrade, the user may not remember them."""
    files = built_from(settings, client, own)
    named = " ".join(shlex.quote(f) for f in files[:MAX_FILES_NAMED]) or "PATH"
    more = f" (and {len(files) - MAX_FILES_NAMED} more files it was built from)" \
        if len(files) > MAX_FILES_NAMED else ""
    return IndexStoreError(
        f"the index '{settings.index}' was built with other chunk settings (or by an earlier "
        "version of rag), and has no papers under these",
        f"rebuild it with these: `rag ingest {named} --index {settings.index}`{more}, or set "
        "RAG_CHUNK_SIZE, RAG_CHUNK_OVERLAP and RAG_CHUNK_VECTORS as when it was built to read it")


MAX_FILES_NAMED = 5


def built_from(settings: Settings, client: Any, own: str = "") -> list[str]:
    """The files the index's collections of other fingerprints were built from (each paper's
    first chunk keeps its `source_path`)."""
    pattern = re.compile(rf"{re.escape(settings.index)}-[0-9a-f]{{8}}")
    files: set[str] = set()
    for name in collection_names(client):
        if name != own and pattern.fullmatch(name):
            collection = client.get_collection(name, embedding_function=None)
            # in pages: a first chunk's metadata holds its paper's whole record
            for start in range(0, collection.count(), PAGE):
                got = collection.get(where={"chunk": 0}, include=["metadatas"], limit=PAGE, offset=start)
                metas = got["metadatas"] or []
                files.update(str(m["source_path"]) for m in metas if m.get("source_path"))
                if len(metas) < PAGE:
                    break
    return sorted(files)


PAGE = 5000


def missing(settings: Settings, client: Any, names: list[str]) -> IndexStoreError:
    """A read of an index with no collection under these settings (a mistyped --index, or
    one built with other chunk settings), naming the indexes that hold papers."""
    if built_with_others(settings, names):
        return built_otherwise(settings, client)
    known = [index for index, papers in index_sizes(client, settings).items() if papers]
    listed = f"the indexes are: {', '.join(known)}" if known else "no index holds papers yet"
    return IndexStoreError(
        f"there is no index '{settings.index}' in {settings.chroma_url or settings.index_dir} ({listed})",
        f"fill it with `rag ingest PATH --index {settings.index}`, or name one that exists")
