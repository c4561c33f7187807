"""PubMed/MEDLINE XML (the baseline and update files, `.xml` or `.xml.gz`): one
`PubmedArticleSet` per file, read as a stream.

defusedxml's iterparse reads it: an entity declaration or an external entity is refused
(no billion laughs, no file reads), the DOCTYPE line PubMed writes is allowed. Each
`PubmedArticle` is turned into a Paper when its end tag arrives and then cleared, with the
root's reference to it, so memory holds one article whatever the file's size.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rag.corpus.formats import _paper
from rag.corpus.names import Name, authors_and_names, organisation, person
from rag.corpus.paper import Paper
from rag.corpus.streams import Stream, xml_elements
from rag.corpus.text import script
from rag.errors import ParseError

LAYOUT = "pubmed-xml"
_TAGS = frozenset({"PubmedArticle", "PubmedBookArticle", "DeleteCitation"})
_MONTHS = {m: i for i, m in enumerate(
    ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"], 1)}


def detect(head: bytes) -> bool:
    return b"<PubmedArticleSet" in head or b"<!DOCTYPE PubmedArticleSet" in head


def _text(elem: Any) -> str:
    """The element's text with its inline markup (<i>, <b>, MathML) flattened, and what
    <sup>/<sub> or MathML's msup/msub raise or lower kept so: 10<sup>3</sup> is 10³, not 103."""
    return " ".join(_flat(elem).split()) if elem is not None else ""


def _flat(elem: Any) -> str:
    parts = [elem.text or ""]
    for child in elem:
        tag = child.tag.rsplit("}", 1)[-1] if isinstance(child.tag, str) else ""  # MathML's namespace
        if tag in ("sup", "sub"):
            parts.append(script(" ".join(_flat(child).split()), "^" if tag == "sup" else "_"))
        elif tag in ("msup", "msub", "msubsup") and len(child) >= 2:
            base, *marks = (" ".join(_flat(c).split()) for c in child)
            kinds = {"msup": "^", "msub": "_", "msubsup": "_^"}[tag]
            parts.append(base + "".join(script(m, k) for m, k in zip(marks, kinds, strict=False)))
        else:
            parts.append(_flat(child))
        parts.append(child.tail or "")
    return "".join(parts)


def _abstract(article: Any) -> str:
    """Structured abstracts keep their labels: "BACKGROUND: ... METHODS: ..."."""
    parts = []
    for piece in article.findall("Abstract/AbstractText"):
        text = _text(piece)
        label = (piece.get("Label") or "").strip()
        if text:
            parts.append(f"{label}: {text}" if label else text)
    return " ".join(parts)


def _date(pub: Any) -> tuple[int | None, str | None]:
    """(year, YYYY-MM-DD when the day is given) from PubDate, or the first year of a
    MedlineDate ("1998 Dec-1999 Jan")."""
    if pub is None:
        return None, None
    year = pub.findtext("Year")
    if year and year.strip().isdigit():
        y = int(year)
        month = (pub.findtext("Month") or "").strip().lower()[:3]
        m = _MONTHS.get(month) or (int(month) if month.isdigit() else None)
        day = (pub.findtext("Day") or "").strip()
        date = f"{y:04d}-{m:02d}-{int(day):02d}" if m and day.isdigit() else None
        return y, date
    found = re.search(r"\b(\d{4})\b", pub.findtext("MedlineDate") or "")
    return (int(found.group(1)), None) if found else (None, None)


def _authors(article: Any) -> list[Name]:
    names = []
    for a in article.findall("AuthorList/Author"):
        collective = _text(a.find("CollectiveName"))
        if collective:
            names.append(organisation(collective))
            continue
        names.append(person(a.findtext("LastName") or "", a.findtext("ForeName") or a.findtext("Initials") or "",
                            a.findtext("Suffix") or ""))
    return names


def article_paper(elem: Any, source: str, n: int) -> Paper | None:
    """A Paper from the n-th `PubmedArticle` element, None when it has no abstract."""
    citation = elem.find("MedlineCitation")
    pmid = (citation.findtext("PMID") or "").strip() if citation is not None else ""
    if not pmid:
        raise ParseError(source, None, f"PubmedArticle number {n} has no PMID")
    article = citation.find("Article")
    abstract = _abstract(article) if article is not None else ""
    if not abstract:
        return None
    ids: dict[str, str] = {"pmid": pmid}
    doi = None
    for aid in elem.findall("PubmedData/ArticleIdList/ArticleId"):  # not the references' ids
        kind, value = aid.get("IdType"), (aid.text or "").strip()
        if kind == "doi" and value:
            doi = value
        elif kind == "pmc" and value:
            ids["pmcid"] = value
    if doi is None:
        for loc in article.findall("ELocationID"):
            if loc.get("EIdType") == "doi" and (loc.text or "").strip():
                doi = loc.text.strip()
    year, date = _date(article.find("Journal/JournalIssue/PubDate"))
    mesh = [_text(d) for d in citation.findall("MeshHeadingList/MeshHeading/DescriptorName")]
    authors, author_names = authors_and_names(_authors(article))
    venue = _text(article.find("Journal/Title")) or None
    paper = _paper(abstract, title=_text(article.find("ArticleTitle")) or None, authors=authors,
                   author_names=author_names, venue=venue, venue_kind="journal" if venue else None,
                   year=year, date=date, doi=doi,
                   categories=[m for m in mesh if m], line=0)
    paper.paper_id = f"PMID:{pmid}"
    paper.ids = ids
    return paper


def _label(elem: Any) -> str:
    """The PMID of a record still being read, once its element is."""
    pmid = (elem.findtext("MedlineCitation/PMID") or "").strip()
    return f"PMID {pmid[:20]}" if pmid else ""


def read(path: Path, source: str) -> Stream:
    return Stream.of(LAYOUT, lambda stream: _papers(path, source, stream))


def _papers(path: Path, source: str, stream: Stream) -> Iterator[Paper]:
    n = 0
    for elem in xml_elements(path, source, stream, _TAGS, redo="download the file again",
                             no_entities="PubMed files declare no entities: is this file from PubMed?",
                             label=_label):
        if elem.tag == "PubmedBookArticle":
            stream.leave_out("PubMed book records")
        elif elem.tag == "DeleteCitation":
            stream.deleted.extend((p.text or "").strip() for p in elem.findall("PMID"))
        else:
            n += 1
            paper = stream.take("PubMed articles without an abstract", article_paper, elem, source, n)
            if paper is not None:
                yield paper
