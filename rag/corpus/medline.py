"""MEDLINE text: what PubMed saves as "PubMed" format (`.txt`) and sends to a citation
manager (`.nbib`): records that start with `PMID- `, one `TAG - value` per line (the tag
padded to four characters), a value continued on lines indented by six spaces.

The fields are those of PubMed XML (rag.corpus.pubmed), so an article read from either is
the same record: the paper id is `PMID:N`, authors from `FAU` ("Last, First") or `AU`, a
collective name (`CN`) as an organisation, the year and date from `DP`, the journal (`JT`),
the DOI (`AID ... [doi]`), the PMC id and the MeSH headings (`MH`) as categories.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from rag.corpus.formats import _paper, gather
from rag.corpus.limits import MAX_RECORD_LINES, blocks, iter_lines
from rag.corpus.names import Name, authors_and_names, organisation, person
from rag.corpus.paper import Paper
from rag.errors import ParseError

LAYOUT = "medline"
NO_ABSTRACT = "MEDLINE records without an abstract"
_FIELD = re.compile(r"^([A-Z][A-Z0-9]{0,3}) {0,3}- (.*)$")
_MONTHS = {m: i for i, m in enumerate(["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"], 1)}


def detect(text: str) -> bool:
    """A file whose first line that is not blank is a `PMID- ` line."""
    first = next((ln for ln in iter_lines(text) if ln.strip()), "")
    return re.match(r"PMID- *\d", first) is not None


def _opens(line: str) -> bool:
    m = _FIELD.match(line)
    return bool(m and m.group(1) == "PMID")


def _records(text: str) -> Iterator[tuple[int, list[tuple[str, str]] | str]]:
    """(line, [(tag, value)]) per record, continuation lines joined to their value, one record
    at a time; for a record over MAX_RECORD_LINES lines, its PMID line instead."""
    for no, lines, first in blocks(text, _opens):
        if lines is None:
            yield no, first
            continue
        fields: list[tuple[str, str]] = []
        for line in lines:
            if not line.strip():
                continue
            m = _FIELD.match(line)
            if m:
                fields.append((m.group(1), m.group(2).strip()))
            elif line.startswith(" ") and fields:
                fields[-1] = (fields[-1][0], f"{fields[-1][1]} {line.strip()}")
        yield no, fields


def _date(dp: str) -> tuple[int | None, str | None]:
    """"2019 Aug 28" -> (2019, "2019-08-28"); "1998 Dec-1999 Jan" -> (1998, None)."""
    m = re.match(r"(\d{4})(?: ([A-Za-z]{3})(?: (\d{1,2}))?)?$", dp.strip())
    if m:
        month, day = _MONTHS.get((m.group(2) or "").lower()), m.group(3)
        return int(m.group(1)), f"{m.group(1)}-{month:02d}-{int(day):02d}" if month and day else None
    found = re.search(r"\b(\d{4})\b", dp)
    return (int(found.group(1)), None) if found else (None, None)


_INITIALS = re.compile(r"[A-Z]{1,4}")
_SUFFIX = re.compile(r"Jr|Sr|[2-9](?:nd|rd|th)|I{2,3}|IV")


def _short_name(au: str) -> Name:
    """An `AU` name, "LastName Initials [Suffix]": "van den Berg P", "King ML Jr". Split at
    its first space, the surname lost its other words ("den Berg P van")."""
    words = au.split()
    suffix = words.pop() if len(words) > 2 and _SUFFIX.fullmatch(words[-1]) else ""
    if len(words) > 1 and _INITIALS.fullmatch(words[-1]):
        return person(" ".join(words[:-1]), words[-1], suffix)
    return person(" ".join(words), "", suffix)


def _record_paper(fields: list[tuple[str, str]] | str, path: str, line: int) -> Paper | None:
    if isinstance(fields, str):
        raise ParseError(path, line, f"MEDLINE record ({' '.join(fields.split())[:30]}) of over "
                         f"{MAX_RECORD_LINES:,} lines: refused before it was read whole",
                         "a record has a few hundred lines: is this a MEDLINE file?")
    values: dict[str, list[str]] = {}
    for tag, value in fields:
        values.setdefault(tag, []).append(value)
    pmid = next(iter(values.get("PMID", [])), "").strip()
    if not pmid.isdigit():
        raise ParseError(path, line, f"MEDLINE record whose PMID is {pmid[:20]!r}, not a number")
    abstract = " ".join(values.get("AB", []))
    if not abstract.strip():
        return None
    names: list[Name] = []
    short_form_due = False  # the AU after an FAU is that author's short form
    for tag, value in fields:
        if tag == "CN":
            names.append(organisation(value))
        elif tag == "FAU":
            family, _, rest = value.partition(", ")
            given, _, suffix = rest.partition(", ")
            names.append(person(family, given, suffix))
            short_form_due = True
        elif tag == "AU" and short_form_due:
            short_form_due = False
        elif tag == "AU":  # records before 2002 have no FAU
            names.append(_short_name(value))
    authors, author_names = authors_and_names(names)
    year, date = _date(next(iter(values.get("DP", [])), ""))
    doi = next((v.rsplit(" ", 1)[0] for v in values.get("AID", []) if v.endswith("[doi]")), None)
    venue = next(iter(values.get("JT", [])), None) or next(iter(values.get("TA", [])), None)
    mesh = [re.sub(r"^\*", "", v).split("/", 1)[0].strip() for v in values.get("MH", [])]
    paper = _paper(abstract, title=" ".join(values.get("TI", [])) or None, authors=authors,
                   author_names=author_names, venue=venue, venue_kind="journal" if venue else None,
                   year=year, date=date, doi=doi, categories=[m for m in mesh if m], line=line)
    paper.paper_id = f"PMID:{pmid}"
    paper.ids = {"pmid": pmid, **({"pmcid": values["PMC"][0]} if values.get("PMC") else {})}
    return paper


def parse_medline(text: str, path: str) -> tuple[list[Paper], list[ParseError], dict[str, int]]:
    """Papers of a MEDLINE file, problems of its unreadable records, and how many records
    were left out for having no abstract."""
    return gather(_records(text), _record_paper, path, NO_ABSTRACT)
