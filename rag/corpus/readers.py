"""The streamed readers, chosen from the content's first bytes (gunzipped): a Zotero
library, PubMed XML, an arXiv API feed, OpenAlex works, Semantic Scholar papers, CSL-JSON
items. Other files go to the text layouts, the arXiv snapshot, BibTeX, RIS and MEDLINE text
(rag.corpus.read_file)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from rag.corpus import arxiv_atom, csl, openalex, pubmed, semantic_scholar, zotero
from rag.corpus.streams import Stream, first_json, head, unwrap

LAYOUTS = (zotero.LAYOUT, pubmed.LAYOUT, arxiv_atom.LAYOUT, openalex.LAYOUT, semantic_scholar.LAYOUT, csl.LAYOUT)


def open_stream(path: Path, source: str, collection: str | None = None) -> Stream | None:
    """The reader for this file's content, started; None when it is for no streamed reader."""
    # O_NONBLOCK and a regular-file check: a file swapped for a FIFO must not hang the open
    with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            return None  # read_file's own checks say what it is
        if zotero.detect(fh.read(len(zotero.SQLITE_MAGIC))):
            return zotero.read(path, source, collection)
    data = head(path, source)
    if pubmed.detect(data):
        return pubmed.read(path, source)
    if arxiv_atom.detect(data):
        return arxiv_atom.read(path, source)
    stripped = data.lstrip()
    if not stripped.startswith((b"{", b"[")):
        return None
    first = first_json(stripped)
    sample = unwrap(first)[:1] if first is not None else []
    if first is None and stripped.startswith(b"{") and (b'"abstract_inverted_index"' in data
                                                       or b"openalex.org/W" in data):
        return openalex.read(path, source)  # a pretty-printed API response
    if first is None and (b'"paperId"' in data or b'"corpusid"' in data):
        return semantic_scholar.read(path, source)
    if sample and openalex.is_work(sample[0]):
        return openalex.read(path, source)
    if sample and semantic_scholar.is_record(sample[0]):
        return semantic_scholar.read(path, source)
    if csl.detect(stripped, unwrap(first) if isinstance(first, list) else []):
        return csl.read(path, source)
    return None
