"""JSON Lines: one object per paper (`abstract`, or the BEIR layout `_id`/`title`/`text`).

Read with the standard library's json one line at a time, so a bad line becomes a ParseError
naming its line instead of failing the whole file.
"""

from __future__ import annotations

import json
import re
from typing import Any

from rag.corpus.formats import Parsed, _paper, split_arxiv_id
from rag.corpus.limits import MAX_JSON_VALUES, MAX_RECORD_BYTES, iter_lines, json_values, megabytes
from rag.corpus.paper import Paper
from rag.errors import ParseError

_JSON_FIELDS: dict[str, tuple[type, ...]] = {
    "abstract": (str,), "text": (str,), "title": (str, type(None)), "id": (str, int, type(None)),
    "_id": (str, int, type(None)), "year": (int, str, type(None)), "venue": (str, type(None)),
    "authors": (list, str, type(None)), "arxiv_id": (str, type(None)), "doi": (str, type(None)),
    "date": (str, type(None)), "journal_ref": (str, type(None)),
}


def _json_record(obj: Any, path: str, no: int) -> Paper:
    if not isinstance(obj, dict):
        raise ParseError(path, no, f"expected a JSON object, got {type(obj).__name__}")
    for key, types in _JSON_FIELDS.items():
        if key in obj and not isinstance(obj[key], types):
            names = " or ".join(t.__name__ for t in types)
            raise ParseError(path, no, f"field `{key}` should be {names}, got {type(obj[key]).__name__}")
    abstract = obj.get("abstract") or obj.get("text")
    if not abstract or not abstract.strip():
        raise ParseError(path, no, "record has no `abstract` (or BEIR `text`) field",
                         'each line needs at least {"abstract": "..."}')
    authors = obj.get("authors") or []
    if isinstance(authors, str):
        authors = [a.strip() for a in authors.split(",") if a.strip()]
    if not all(isinstance(a, str) for a in authors):
        raise ParseError(path, no, "field `authors` should be a list of strings")
    year = obj.get("year")
    if isinstance(year, str):
        # ASCII digits only: "²".isdigit() is true but int("²") raised ValueError
        if not re.fullmatch(r"[0-9]{1,9}", year.strip()):
            raise ParseError(path, no, f"field `year` should be a number, got {year[:20]!r}")
        year = int(year)
    if isinstance(year, bool) or (year is not None and not 1000 <= year <= 9999):
        # a huge int would also overflow the index's integer metadata
        raise ParseError(path, no, f"field `year` should be a four-digit year, got {year!r}")
    arxiv = obj.get("arxiv_id")
    if arxiv:
        split = split_arxiv_id(arxiv.removeprefix("arXiv:"))
        if split is None or split[1]:
            raise ParseError(path, no, f"field `arxiv_id` {arxiv!r} is not an arXiv id")
        arxiv = split[0]
    paper = _paper(abstract, title=obj.get("title") or None, arxiv_id=arxiv, authors=authors,
                   venue=obj.get("venue"), year=year, doi=obj.get("doi"), date=obj.get("date"),
                   journal_ref=obj.get("journal_ref"), line=no)
    given = obj["id"] if obj.get("id") is not None else obj.get("_id")  # null: as if missing
    if given is not None and str(given).strip():
        paper.paper_id = str(given).strip()
    return paper


def parse_jsonl(text: str, path: str) -> Parsed:
    """JSON Lines: one object per paper (`abstract`, or the BEIR layout `_id`/`title`/`text`)."""
    papers: list[Paper] = []
    problems: list[ParseError] = []
    for no, line in enumerate(iter_lines(text), 1):
        if not line.strip():
            continue
        if len(line) > MAX_RECORD_BYTES or json_values(line) > MAX_JSON_VALUES:
            size = megabytes(MAX_RECORD_BYTES) if len(line) > MAX_RECORD_BYTES else f"{MAX_JSON_VALUES:,} JSON values"
            problems.append(ParseError(path, no, f"line is over {size}: refused before it was read",
                                       "a record is a few KB: is this one paper per line?"))
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(ParseError(path, no, f"not valid JSON ({exc.msg} at column {exc.colno})",
                                       "JSON Lines hold one complete JSON object per line"))
            continue
        except (ValueError, RecursionError) as exc:  # a 5,000-digit number; [[[[... nested
            problems.append(ParseError(path, no, f"JSON that cannot be read ({str(exc)[:80]})"))
            continue
        try:
            papers.append(_json_record(obj, path, no))
        except ParseError as exc:
            problems.append(exc)
    return papers, problems
