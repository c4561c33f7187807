"""The arXiv API's Atom feed (`export.arxiv.org/api/query?...` saved to a file): one `entry`
per paper, read as a stream with defusedxml (no entity declarations, as in rag.corpus.pubmed).

Each entry gives the arXiv id (from `id`, http://arxiv.org/abs/ID with its version cut), the
title and `summary` (the abstract) with LaTeX made readable, the authors in order, the date
and year of the first version (`published`), `arxiv:doi`, `arxiv:journal_ref`,
`arxiv:comment`, and the categories (the primary one first). An entry without an arXiv id
(the API's error entry) is an error naming what it says.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rag.corpus.formats import _paper, split_arxiv_id
from rag.corpus.paper import Paper
from rag.corpus.streams import Stream, xml_elements
from rag.errors import ParseError

LAYOUT = "arxiv-atom"
_ATOM = "{http://www.w3.org/2005/Atom}"
_ARXIV = "{http://arxiv.org/schemas/atom}"


def detect(head: bytes) -> bool:
    return b"http://www.w3.org/2005/Atom" in head and b"arxiv" in head.lower() and b"<feed" in head


def _text(entry: Any, tag: str) -> str:
    return " ".join((entry.findtext(tag) or "").split())


def entry_paper(entry: Any, source: str, n: int) -> Paper | None:
    """A Paper from the n-th `entry`; None when it has no abstract."""
    ident = _text(entry, f"{_ATOM}id").rsplit("/abs/", 1)[-1]
    split = split_arxiv_id(ident)
    if split is None or split[1]:
        said = _text(entry, f"{_ATOM}summary") or _text(entry, f"{_ATOM}title") or ident
        raise ParseError(source, None, f"entry {n} is no arXiv paper ({said[:120]})",
                         "an arXiv API error entry: check the query that saved this feed")
    abstract = _text(entry, f"{_ATOM}summary")
    if not abstract:
        return None
    published = _text(entry, f"{_ATOM}published")[:10]
    primary = entry.find(f"{_ARXIV}primary_category")
    categories = [primary.get("term")] if primary is not None and primary.get("term") else []
    categories += [c.get("term") for c in entry.findall(f"{_ATOM}category") if c.get("term")]
    comment = _text(entry, f"{_ARXIV}comment")
    return _paper(abstract, title=_text(entry, f"{_ATOM}title") or None, arxiv_id=split[0],
                  authors=[a for a in (_text(e, f"{_ATOM}name") for e in entry.findall(f"{_ATOM}author")) if a],
                  year=int(published[:4]) if published[:4].isdigit() else None,
                  date=published or None, doi=_text(entry, f"{_ARXIV}doi") or None,
                  journal_ref=_text(entry, f"{_ARXIV}journal_ref") or None,
                  comments=[comment] if comment else [], categories=list(dict.fromkeys(categories)), line=0)


def read(path: Path, source: str) -> Stream:
    return Stream.of(LAYOUT, lambda stream: _papers(path, source, stream))


def _papers(path: Path, source: str, stream: Stream) -> Iterator[Paper]:
    tags = frozenset({f"{_ATOM}entry"})
    for n, elem in enumerate(xml_elements(
            path, source, stream, tags, redo="save the feed again",
            no_entities="arXiv feeds declare no entities: is this file from the arXiv API?",
            label=lambda entry: (entry.findtext(f"{_ATOM}id") or "").strip()[:80]), 1):
        paper = stream.take("arXiv feed entries without an abstract", entry_paper, elem, source, n)
        if paper is not None:
            yield paper
