"""OpenAlex works: the snapshot's parts (JSON Lines, gzipped) and the API's JSON (one work,
or a page with `results`), read as a stream.

OpenAlex stores no abstract text, only `abstract_inverted_index` (word -> positions); the
abstract is those words put back in position order. Works without one are counted and
left out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rag.corpus.formats import _paper, split_arxiv_id
from rag.corpus.limits import MAX_ABSTRACT_CHARS, MAX_POSITIONS
from rag.corpus.merge import norm_doi
from rag.corpus.paper import Paper, preprint_server
from rag.corpus.streams import Stream, json_stream
from rag.errors import ParseError

LAYOUT = "openalex"
NO_ABSTRACT = "OpenAlex works without an abstract"


def is_work(obj: Any) -> bool:
    return isinstance(obj, dict) and (
        "abstract_inverted_index" in obj or str(obj.get("id", "")).startswith("https://openalex.org/W"))


def rebuild_abstract(index: Any, source: str = "", line: int = 0) -> str:
    """The words of an inverted index in position order (a word at several positions
    appears at each). More positions than an abstract may have words are refused before
    the abstract is put together (200 million of them took 2.5 GB and 43 s)."""
    if not isinstance(index, dict):
        return ""
    positions = sum(len(p) for p in index.values() if isinstance(p, list))
    if positions > MAX_POSITIONS:
        raise ParseError(source, line, f"`abstract_inverted_index` holds {positions:,} positions: an abstract "
                         f"of at most {MAX_ABSTRACT_CHARS:,} characters has at most {MAX_POSITIONS:,} words",
                         "is this an OpenAlex work? its abstract is refused before it is put together")
    at: dict[int, str] = {}
    for word, positions in index.items():
        if isinstance(positions, list):
            for pos in positions:
                if isinstance(pos, int) and not isinstance(pos, bool):
                    at[pos] = str(word)
    return " ".join(at[i] for i in sorted(at))


def _arxiv(work: dict[str, Any]) -> str | None:
    """arXiv id from the work's locations (`arxiv.org/abs/ID` landing pages) or its DOI."""
    urls = [str((loc or {}).get("landing_page_url") or "") for loc in work.get("locations") or []
            if isinstance(loc, dict)]
    doi = norm_doi(work.get("doi")) or ""
    if doi.startswith("10.48550/arxiv."):
        urls.append("arxiv.org/abs/" + doi.removeprefix("10.48550/arxiv."))
    for url in urls:
        if "arxiv.org/abs/" in url:
            split = split_arxiv_id(url.split("arxiv.org/abs/", 1)[1])
            if split:
                return split[0]
    return None


def _venue(work: dict[str, Any]) -> tuple[str | None, bool]:
    """The name of the work's venue and whether it is a journal: the primary location's source,
    else the first other location's, passing over repositories (arXiv, PubMed Central), where
    a work is deposited, not published."""
    for loc in [work.get("primary_location"), *(work.get("locations") or [])]:
        source = loc.get("source") if isinstance(loc, dict) else None
        if not isinstance(source, dict):
            continue
        name, kind = source.get("display_name"), source.get("type")
        if isinstance(name, str) and name.strip() and kind != "repository" and not preprint_server(name):
            return name, kind == "journal"
    return None, False


def work_paper(work: dict[str, Any], source: str, line: int) -> Paper | None:
    """A Paper from an OpenAlex work; None when it has no abstract."""
    abstract = rebuild_abstract(work.get("abstract_inverted_index"), source, line)
    if not abstract.strip():
        return None
    ident = str(work.get("id") or "").rsplit("/", 1)[-1]
    if not ident:
        raise ParseError(source, line, "OpenAlex work without an `id`")
    authors = []
    for a in work.get("authorships") or []:
        name = ((a or {}).get("author") or {}).get("display_name") if isinstance(a, dict) else None
        if isinstance(name, str) and name.strip():
            authors.append(name.strip())
    venue, journal = _venue(work)
    ids = {"openalex": ident}
    pmid = str((work.get("ids") or {}).get("pmid") or "").rstrip("/").rsplit("/", 1)[-1]
    if pmid.isdigit():
        ids["pmid"] = pmid
    topics = [t.get("display_name") for t in (work.get("topics") or work.get("concepts") or [])
              if isinstance(t, dict) and t.get("display_name")]
    year = work.get("publication_year")
    date = work.get("publication_date")
    arxiv = _arxiv(work)
    doi = norm_doi(work.get("doi"))
    paper = _paper(abstract, title=work.get("display_name") or work.get("title") or None, arxiv_id=arxiv,
                   authors=authors, venue=venue if isinstance(venue, str) else None,
                   venue_kind="journal" if journal and venue else None,
                   year=year if isinstance(year, int) and 1000 <= year <= 9999 else None,
                   date=date if isinstance(date, str) else None, doi=doi,
                   categories=[str(t) for t in topics], line=line)
    paper.paper_id = arxiv or f"openalex:{ident}"
    paper.ids = ids
    return paper


def read(path: Path, source: str) -> Stream:
    return json_stream(LAYOUT, path, source, is_work, work_paper,
                       "an OpenAlex work (no `id` or `abstract_inverted_index`)", NO_ABSTRACT)
