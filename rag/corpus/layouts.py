"""The layouts rag reads, and detection of a file's layout from its content (never its name)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from rag.corpus.formats import (
    _ARXIV_LINE,
    _AUTHORS,
    _CONF_ENTRY,
    _CREATED,
    Parsed,
    parse_abstract_lines,
    parse_arxiv_export,
    parse_arxiv_listing,
    parse_conference,
)
from rag.corpus.jsonl import parse_jsonl
from rag.corpus.limits import iter_lines

Parser = Callable[[str, str], Parsed]
LAYOUTS: dict[str, Parser] = {
    "jsonl": parse_jsonl,
    "abstract-lines": parse_abstract_lines,
    "conference-listing": parse_conference,
    "arxiv-export": parse_arxiv_export,
    "arxiv-listing": parse_arxiv_listing,
}
LAYOUT_HELP = (
    "known layouts: `Abstract:` lines; a conference listing (`#1 Title`, `Authors:`, abstract); "
    "an arXiv listing (abstract then `arXiv:ID`); arXiv export blocks (`arXiv:ID`, `Created:`); "
    "an arXiv API feed (Atom); "
    "JSON Lines with an `abstract` field; the arXiv metadata snapshot; BibTeX with `abstract` fields; "
    "a Zotero library (zotero.sqlite); CSL-JSON (Zotero, Better BibTeX, `rag papers --format csl-json`); "
    "RIS (Zotero, EndNote, Mendeley); "
    "PubMed/MEDLINE XML or text (.nbib); OpenAlex works; Semantic Scholar papers (API JSON or datasets); any of them gzipped"
)


def detect(text: str) -> str | None:
    """Name of the layout the content is in (never judged from the file name)."""
    def lines() -> Iterator[str]:  # read again for each question: a list of them took 7x the file
        return (ln.strip() for ln in iter_lines(text) if ln.strip())

    first = next(lines(), None)
    if first is None:
        return None
    if first.startswith("{"):
        return "jsonl"
    if first.startswith("Abstract:"):
        return "abstract-lines"
    if any(_CONF_ENTRY.match(ln) for ln in lines()) and any(_AUTHORS.match(ln) for ln in lines()):
        return "conference-listing"
    ids = any(_ARXIV_LINE.match(ln) for ln in lines())
    if ids and any(_CREATED.match(ln) for ln in lines()):
        return "arxiv-export"
    if ids:
        return "arxiv-listing"
    return None
