"""Semantic Scholar: the Graph API's paper JSON (one paper, a list, or a page with `data`),
and the bulk datasets, whose `papers` and `abstracts` parts are separate JSON Lines files
joined on `corpusid` once every file of an ingest is read (`join`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rag.corpus.formats import _paper, split_arxiv_id
from rag.corpus.merge import norm_doi
from rag.corpus.paper import Paper, preprint_server
from rag.corpus.streams import Stream, json_stream
from rag.corpus.text import make_label, strip_markup
from rag.errors import ParseError

LAYOUT = "semantic-scholar"
NEEDS_ABSTRACT = "s2-paper"  # a `papers` dataset record, waiting for its abstract
ABSTRACT_ONLY = "s2-abstract"  # an `abstracts` dataset record


def is_record(obj: Any) -> bool:
    return isinstance(obj, dict) and ("paperId" in obj or "corpusid" in obj)


def _get(obj: dict[str, Any], *names: str) -> Any:
    """The first of the field's spellings present (the API writes camelCase, the datasets
    lower case)."""
    for n in names:
        if obj.get(n) is not None:
            return obj[n]
    return None


def record_paper(obj: dict[str, Any], source: str, line: int) -> Paper | None:
    """A Paper from an API paper or a dataset record; None for an API paper without an
    abstract. Dataset `papers` records come back without one, marked NEEDS_ABSTRACT."""
    corpus_id = _get(obj, "corpusId", "corpusid")
    ext = _get(obj, "externalIds", "externalids") or {}
    if not isinstance(ext, dict):
        raise ParseError(source, line, "field `externalIds` should be an object")
    corpus_id = str(corpus_id if corpus_id is not None else ext.get("CorpusId") or "").strip()
    dataset = "corpusid" in obj and "paperId" not in obj
    abstract = _get(obj, "abstract")
    if dataset and "title" not in obj and "externalids" not in obj:  # the abstracts dataset
        if not isinstance(abstract, str) or not abstract.strip() or not corpus_id:
            return None
        p = Paper(paper_id=f"s2:{corpus_id}", abstract=" ".join(strip_markup(abstract).split()), ids={"s2": corpus_id},
                  line=line, format=ABSTRACT_ONLY)
        return p
    if not dataset and not (isinstance(abstract, str) and abstract.strip()):
        return None
    arxiv = ext.get("ArXiv")
    split = split_arxiv_id(str(arxiv)) if arxiv else None
    arxiv_id = split[0] if split and not split[1] else None
    authors = [a["name"].strip() for a in obj.get("authors") or []
               if isinstance(a, dict) and isinstance(a.get("name"), str) and a["name"].strip()]
    fields = _get(obj, "s2FieldsOfStudy", "s2fieldsofstudy") or []
    cats = [f["category"] for f in fields if isinstance(f, dict) and isinstance(f.get("category"), str)]
    cats += [f for f in obj.get("fieldsOfStudy") or [] if isinstance(f, str)]
    venue = obj.get("venue") or ((obj.get("journal") or {}).get("name") if isinstance(obj.get("journal"), dict) else None)
    if not isinstance(venue, str) or preprint_server(venue):
        venue = None
    place = _get(obj, "publicationVenue", "publicationvenue")
    types = _get(obj, "publicationTypes", "publicationtypes")
    types = types if isinstance(types, list) else []
    # the venue's own type where the API gives it, else the paper's types (a conference paper
    # is often typed JournalArticle too, with Conference beside it)
    journal = (place.get("type") == "journal" if isinstance(place, dict) and place.get("type")
               else "JournalArticle" in types and "Conference" not in types)
    year = obj.get("year")
    date = _get(obj, "publicationDate", "publicationdate")
    paper = _paper(abstract if isinstance(abstract, str) and abstract.strip() else "-",
                   title=obj.get("title") or None, arxiv_id=arxiv_id, authors=authors,
                   venue=venue if isinstance(venue, str) and venue.strip() else None,
                   venue_kind="journal" if journal and isinstance(venue, str) and venue.strip() else None,
                   year=year if isinstance(year, int) and 1000 <= year <= 9999 else None,
                   date=date if isinstance(date, str) else None, doi=norm_doi(ext.get("DOI")),
                   categories=list(dict.fromkeys(cats)), line=line)
    paper.ids = {k: str(v) for k, v in (("s2", corpus_id), ("pmid", ext.get("PubMed")),
                                        ("pmcid", ext.get("PubMedCentral"))) if v}
    paper.paper_id = arxiv_id or (f"s2:{corpus_id}" if corpus_id else paper.paper_id)
    if dataset and not (isinstance(abstract, str) and abstract.strip()):
        paper.abstract, paper.format = "", NEEDS_ABSTRACT
    return paper


def read(path: Path, source: str) -> Stream:
    return json_stream(LAYOUT, path, source, is_record, record_paper,
                       "a Semantic Scholar paper (no `paperId` or `corpusid`)",
                       "Semantic Scholar papers without an abstract")


def join(results: list[Any]) -> None:
    """Give each dataset `papers` record the abstract of its `corpusid` from the `abstracts`
    records of the same ingest; what finds no partner is counted and left out."""
    abstracts = {p.ids["s2"]: p for r in results for p in r.papers if p.format == ABSTRACT_ONLY}
    wanted = {p.ids.get("s2") for r in results for p in r.papers if p.format == NEEDS_ABSTRACT}
    for r in results:
        kept = []
        for p in r.papers:
            why = None
            if p.format == ABSTRACT_ONLY:
                why = None if p.ids["s2"] in wanted else "Semantic Scholar abstracts without a paper record"
            elif p.format == NEEDS_ABSTRACT:
                partner = abstracts.get(p.ids.get("s2", ""))
                if partner is None:
                    why = "Semantic Scholar papers whose abstract is in none of the files read"
                else:
                    p.abstract, p.format = partner.abstract, LAYOUT
                    p.label = make_label(p.title, p.abstract)
                    kept.append(p)
            else:
                kept.append(p)
            if why:
                r.left_out[why] = r.left_out.get(why, 0) + 1
        r.papers = kept
