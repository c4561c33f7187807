"""RIS (Zotero, EndNote, Mendeley, and `rag papers --format ris`) through rispy: one record
per `TY  -` ... `ER  -` block.

Authors are `AU`/`A1` lines as "Last, First[, Suffix]"; a name with no comma is written as an
organisation ("Google Research"). The venue is `T2` (the journal or proceedings: Zotero,
EndNote), else `JO`/`JF`/`JA` (Mendeley); a `JOUR` record's venue is a journal. Records
without an abstract (`AB`, or EndNote's older `N2`) are counted and left out.
"""

from __future__ import annotations

import re
from typing import Any

from rag.corpus.formats import _paper, exported_id, gather, split_arxiv_id
from rag.corpus.limits import MAX_RECORD_LINES, blocks, iter_lines
from rag.corpus.names import Name, authors_and_names, organisation, person
from rag.corpus.paper import Paper, preprint_server
from rag.errors import ParseError

LAYOUT = "ris"
NO_ABSTRACT = "RIS records without an abstract"
_TY = re.compile(r"^TY  - ")
_ER = re.compile(r"^ER  -")
_JOURNAL_TYPES = frozenset({"JOUR", "JFULL", "MGZN", "NEWS", "EJOUR"})
_ARXIV = re.compile(r"(?:arxiv:\s*|arxiv\.org/(?:abs|pdf)/)(\S+?)(?:\.pdf)?$", re.IGNORECASE)
JOURNAL_REF_NOTE = "Journal-ref:"  # an `N1` note that is the journal ref, labelled as arXiv labels it
RAG_ID_NOTE = "rag-id:"  # an `N1` note of rag's own export: the paper's id (formats.exported_id)


# The lines Wiley's and Cochrane's exports write before a record, as RefMan's "direct export"
# did ("Record #1 of 611", "Provider: John Wiley & Sons, Ltd", "Content: text/plain; ..."):
# such a file was "content is in no known layout". rispy passes over them after an `ER`.
_HEADER = re.compile(r"^(?:Record #\d+ of \d+|Provider:|Database:|Content:)")


def detect(text: str) -> bool:
    """A file whose first line that is not blank, nor a header of the record, opens an RIS
    record (`TY  - `)."""
    first = next((ln for ln in iter_lines(text) if ln.strip() and not _HEADER.match(ln)), "")
    return _TY.match(first) is not None


def _first(record: dict[str, Any], *keys: str) -> str:
    for key in keys:
        value = record.get(key)
        value = value[0] if isinstance(value, list) and value else value
        if isinstance(value, str) and value.strip():
            return " ".join(value.split())
    return ""


def _name(text: str) -> Name:
    family, _, rest = text.partition(",")
    if not rest:
        return organisation(text)
    given, _, suffix = rest.partition(",")
    return person(family, given, suffix)


def _arxiv_id(record: dict[str, Any]) -> str | None:
    for text in [*(record.get("urls") or []), *(record.get("notes") or []), _first(record, "accession_number")]:
        m = _ARXIV.search(str(text).strip())
        split = split_arxiv_id(m.group(1)) if m else None
        if split and not split[1]:
            return split[0]
    return None


def _record_paper(record: dict[str, Any], path: str, line: int) -> Paper | None:
    abstract = _first(record, "abstract", "notes_abstract")
    if not abstract:
        return None
    names = [_name(" ".join(a.split())) for a in [*record.get("authors", []), *record.get("first_authors", [])]
             if isinstance(a, str) and a.strip()]
    authors, author_names = authors_and_names(names)
    year = re.match(r"\s*(\d{4})", _first(record, "year", "publication_year"))
    date = re.match(r"\s*(\d{4})[/-](\d{2})[/-](\d{2})", _first(record, "date", "publication_year"))
    venue = _first(record, "secondary_title", "journal_name", "alternate_title3", "alternate_title2") or None
    if venue and preprint_server(venue):
        venue = None
    journal_ref = _labelled_note(record, JOURNAL_REF_NOTE)
    if venue == journal_ref:
        venue = None  # rag's export names a paper's journal ref as its journal when it has no venue
    journal = venue and record.get("type_of_reference") in _JOURNAL_TYPES
    paper = _paper(abstract, title=_first(record, "title", "primary_title") or None, arxiv_id=_arxiv_id(record),
                   authors=authors, author_names=author_names, venue=venue,
                   venue_kind="journal" if journal else None, journal_ref=journal_ref,
                   year=int(year.group(1)) if year else None, date="-".join(date.groups()) if date else None,
                   doi=_first(record, "doi") or None, line=line)  # the DOI and date are checked by read_file
    if key := _first(record, "id"):
        paper.ids["key"] = key  # the record's `ID` tag: its citation key in the reference manager
    return exported_id(paper, _labelled_note(record, RAG_ID_NOTE))


def _labelled_note(record: dict[str, Any], label: str) -> str | None:
    """The rest of the first `N1` note that starts with `label`."""
    return next((n.removeprefix(label).strip() for n in record.get("notes") or []
                 if isinstance(n, str) and n.startswith(label)), None) or None


def parse_ris(text: str, path: str) -> tuple[list[Paper], list[ParseError], dict[str, int]]:
    """Papers of an RIS file, problems of its unreadable records, and how many records were
    left out for having no abstract. Each `TY` block is read on its own: rispy reads a
    record with no `ER` line and the record after it as one, and the second was lost."""
    records = ((no, lines) for no, lines, _ in blocks(text, lambda ln: _TY.match(ln) is not None))
    return gather(records, _block_paper, path, NO_ABSTRACT)


def _block_paper(block: list[str] | None, path: str, line: int) -> Paper | None:
    import rispy

    if block is None:
        raise ParseError(path, line, f"RIS record of over {MAX_RECORD_LINES:,} lines: refused before it was "
                         "read whole", "a record has a few hundred lines: end each record with `ER  - `")

    if not any(_ER.match(ln) for ln in block):
        raise ParseError(path, line, "RIS record with no `ER  - ` line ending it",
                         "end each record with `ER  - `, or pass --skip-bad")
    try:
        [record] = rispy.loads("\n".join(block), skip_unknown_tags=True)
        return _record_paper(record, path, line)
    except (OSError, ValueError, TypeError, AttributeError) as exc:  # rispy raises IOError
        raise ParseError(path, line, f"RIS record that cannot be read ({' '.join(str(exc).split())[:160]})") from None
