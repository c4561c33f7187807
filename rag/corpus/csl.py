"""CSL-JSON: what Zotero ("Export Library…", format CSL JSON), Better BibTeX, Mendeley and
pandoc write, and what `rag papers --format csl-json` exports: a list of items with `type`,
`title`, `abstract`, `author` (`family`, `given`, `non-dropping-particle`, `suffix`, or
`literal`), `issued.date-parts`, `container-title`, `DOI`, `URL`. Read as a stream.

An arXiv preprint is known by its `number` ("arXiv:2311.10418", Zotero's preprint items),
its arXiv DOI (10.48550/arXiv.ID) or an arxiv.org URL. Items without an abstract are counted
and left out, as reference managers export every item.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from rag.corpus.formats import _paper, exported_id, split_arxiv_id
from rag.corpus.names import Name, authors_and_names, organisation, person
from rag.corpus.paper import Paper, preprint_server
from rag.corpus.streams import Stream, json_stream
from rag.errors import ParseError

LAYOUT = "csl-json"
NO_ABSTRACT = "CSL-JSON items without an abstract"
_JOURNAL_TYPES = frozenset({"article-journal", "article-magazine", "article-newspaper"})
_ARXIV = re.compile(r"(?:arxiv:\s*|arxiv\.org/(?:abs|pdf)/|10\.48550/arxiv\.)(\S+?)(?:\.pdf)?$", re.IGNORECASE)


def is_item(obj: Any) -> bool:
    """An item of a CSL-JSON list: a `type` string and a title or an abstract (an item may
    have little more: `rag papers --format csl-json` writes no date it does not know)."""
    return isinstance(obj, dict) and isinstance(obj.get("type"), str) and ("title" in obj or "abstract" in obj)


def detect(data: bytes, sample: list[Any]) -> bool:
    """A list whose items carry the citation fields no other reader's records have: `issued`,
    `container-title`, names as `family`/`literal` objects (a pretty-printed list: the first
    bytes name one of the first two)."""
    if not data.lstrip().startswith(b"["):
        return False
    if not sample:
        return b'"issued"' in data or b'"container-title"' in data
    return any(is_item(i) and ("issued" in i or "container-title" in i or any(
        isinstance(n, dict) and ("family" in n or "literal" in n) for n in i.get("author") or [])) for i in sample)


def _text(item: dict[str, Any], key: str) -> str:
    value = item.get(key)
    return " ".join(value.split()) if isinstance(value, str) else ""


def _names(item: dict[str, Any]) -> list[Name]:
    names = []
    for n in item.get("author") or []:
        if not isinstance(n, dict):
            continue
        if isinstance(n.get("literal"), str):
            names.append(organisation(n["literal"]))
            continue
        family = " ".join(str(n.get(k) or "") for k in ("non-dropping-particle", "family")).strip()
        given = " ".join(str(n.get(k) or "") for k in ("given", "dropping-particle")).strip()
        if family or given:
            names.append(person(family or given, given if family else "", str(n.get("suffix") or "")))
    return names


def _issued(item: dict[str, Any]) -> tuple[int | None, str | None]:
    """Year and ISO date of `issued`: date-parts (Zotero writes the year as a string), or a
    `raw`/`literal` date ("2024-04-22", "March 2021": its year, "in press": no year)."""
    issued = item.get("issued")
    if not isinstance(issued, dict):
        return None, None
    parts = issued.get("date-parts")
    first = parts[0] if isinstance(parts, list) and parts and isinstance(parts[0], list) else []
    try:
        numbers = [int(str(x)) for x in first[:3]]
    except ValueError:
        numbers = []
    if not numbers:
        said = str(issued.get("raw") or issued.get("literal") or "")
        raw = re.match(r"\s*(\d{4})(?:-(\d{2})-(\d{2}))?", said)
        # citeproc-js reads a raw date as people write one ("March 2021", "Spring 2019"):
        # its year at least
        raw = raw or re.search(r"(?<!\d)(1[5-9]\d{2}|20\d{2})(?!\d)", said)
        numbers = [int(x) for x in raw.groups() if x] if raw else []
    year = numbers[0] if numbers and 1000 <= numbers[0] <= 9999 else None
    date = f"{numbers[0]:04d}-{numbers[1]:02d}-{numbers[2]:02d}" if year and len(numbers) == 3 else None
    return year, date


def _arxiv_id(item: dict[str, Any]) -> str | None:
    for key in ("number", "DOI", "URL", "archive_location"):
        m = _ARXIV.search(_text(item, key))
        split = split_arxiv_id(m.group(1)) if m else None
        if split and not split[1]:
            return split[0]
    return None


def item_paper(item: dict[str, Any], source: str, line: int) -> Paper | None:
    """A Paper from a CSL-JSON item; None when it has no abstract."""
    abstract = _text(item, "abstract")
    if not abstract:
        return None
    if not isinstance(item.get("author", []), list):
        raise ParseError(source, line, "field `author` should be a list of names")
    authors, author_names = authors_and_names(_names(item))
    year, date = _issued(item)
    venue = _text(item, "container-title") or None
    custom: dict[str, Any] = item["custom"] if isinstance(item.get("custom"), dict) else {}
    journal_ref = _text(custom, "journal-ref") or None
    if (venue and preprint_server(venue)) or venue == journal_ref:
        venue = None  # rag's export names a paper's journal ref as its container when it has no venue
    paper = _paper(abstract, title=_text(item, "title") or None, arxiv_id=_arxiv_id(item), authors=authors,
                   author_names=author_names, venue=venue,
                   venue_kind="journal" if venue and item["type"] in _JOURNAL_TYPES else None,
                   journal_ref=journal_ref, year=year, date=date, doi=_text(item, "DOI") or None, line=line)  # checked by read_file
    pmid = _text(item, "PMID")
    paper.ids = {"pmid": pmid} if pmid.isdigit() else {}
    if isinstance(item.get("id"), str) and item["id"].strip():
        paper.ids["key"] = item["id"].strip()  # the citation key (Zotero's, Better BibTeX's)
    return exported_id(paper, _text(custom, "rag-id"))


def read(path: Path, source: str) -> Stream:
    return json_stream(LAYOUT, path, source, is_item, item_paper,
                       "a CSL-JSON item (an object with `type` and `title` or `abstract`)", NO_ABSTRACT)
