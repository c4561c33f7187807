"""The arXiv metadata snapshot (arxiv-metadata-oai-snapshot.json): one JSON object per paper
and line, read as a stream so that a file of millions of lines never sits in memory whole;
and the --category/--since restriction applied while it is read.

The records are plain JSON (the json module reads them); what is ours is the mapping of its
fields to a Paper: the first version's date, names from `authors_parsed`, LaTeX made
readable with pylatexenc.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import IO, Any

from rag.corpus.formats import _paper, split_arxiv_id
from rag.corpus.latex import BARE_PERCENT, LatexError, decode, decoder
from rag.corpus.limits import bounded_lines
from rag.corpus.names import Name, authors_and_names, person
from rag.corpus.paper import Paper, category_keys, real_date
from rag.corpus.streams import BOM, damaged_gzip, open_binary
from rag.errors import InputError, ParseError

LAYOUT = "arxiv-snapshot"
MAX_PROBLEMS = 1000  # a file that is not a snapshot after all stops here, not after 2M lines
MAX_LINE_BYTES = 1 << 20  # one record: a safety cap, far above an abstract's 20,000 characters
_PEEK = 1 << 20
_SPLIT_INITIALS = re.compile(r"\.\s+-(?=\w)")
_TILDE = "\ue000"  # "~100 GPUs" means about 100 in an abstract, not LaTeX's non-breaking space


@dataclass(frozen=True)
class Restrict:
    """Which records `rag ingest --category C --since DATE` keeps."""

    categories: tuple[str, ...] = ()
    since: str | None = None  # 2023, 2023-06 or 2023-06-01: the first version's date from then on

    @classmethod
    def parse(cls, categories: tuple[str, ...] | list[str] = (), since: str | None = None) -> Restrict:
        since = (since or "").strip() or None
        if since and not real_date(since):
            raise InputError(f"--since {since!r} is not a date", "use 2023, 2023-06 or 2023-06-01")
        if any(not c.strip() for c in categories):
            raise InputError("--category is empty", "name an arXiv category such as cs.DC, or leave "
                             "the option out to keep every category")
        return cls(tuple(c.strip() for c in categories), since)

    def active(self) -> bool:
        return bool(self.categories or self.since)

    def describe(self) -> str:
        parts = [f"--category {c}" for c in self.categories]
        return " ".join(parts + ([f"--since {self.since}"] if self.since else []))

    def keeps(self, categories: list[str], date: str | None, year: int | None) -> bool:
        if self.categories:
            keys = category_keys(categories)
            if not any(c.lower() in keys for c in self.categories):
                return False
        if self.since:
            when = date or (str(year) if year else None)
            return when is not None and when[: len(self.since)] >= self.since
        return True

    def accepts(self, paper: Paper) -> bool:
        return self.keeps(paper.categories, paper.date, paper.year)


_latex: Any = None


def readable(text: str) -> str:
    """Accents and text macros decoded (Schr\\"odinger -> Schrödinger, {\\em x} -> x), math
    left for clean_latex, whitespace (the snapshot's hard line breaks) made single spaces.
    Raises LatexError for text the decoder cannot read."""
    global _latex
    text = " ".join(text.split())
    if "\\" in text or "{" in text:
        if _latex is None:
            # Math stays as written: clean_latex turns $x^2$ into x², which pylatexenc would not.
            _latex = decoder(math_mode="verbatim", strict_latex_spaces=True)
        text = BARE_PERCENT.sub(r"\\%", text.replace("~", _TILDE))
        text = " ".join(decode(_latex, text).replace(_TILDE, "~").split())
    return text


def first_version_date(versions: Any) -> str | None:
    """YYYY-MM-DD of the first version (`created` is an RFC 2822 date); later versions and
    `update_date` are revisions, not when the paper appeared."""
    if not isinstance(versions, list):
        return None

    def number(v: dict[str, Any]) -> int:
        m = re.fullmatch(r"v(\d+)", str(v.get("version", "")))
        return int(m.group(1)) if m else 1 << 30

    first = min((v for v in versions if isinstance(v, dict)), key=number, default=None)
    created = first.get("created") if first else None
    if not isinstance(created, str):
        return None
    try:
        return parsedate_to_datetime(created).date().isoformat()
    except (TypeError, ValueError):
        return None


def _year_of_id(ident: str) -> int | None:
    """math/0703001 -> 2007: an old-style id carries its year and month too."""
    m = re.search(r"/(\d{2})\d{5}$", ident)
    if not m:
        return None
    yy = int(m.group(1))
    return 1900 + yy if yy >= 91 else 2000 + yy


def _authors(obj: dict[str, Any]) -> tuple[list[str], list[Name]]:
    """The display strings, and the parts where those alone would be read wrong."""
    parsed = obj.get("authors_parsed")
    if isinstance(parsed, list) and all(isinstance(a, list) for a in parsed):
        names = []
        for parts in parsed:  # [last, first, suffix]
            last, first, suffix = (readable(p) for p in ([*map(str, parts), "", "", ""])[:3])
            # the snapshot's parser writes hyphenated initials apart ("C. -P."; `authors` has C.-P.)
            names.append(person(last, _SPLIT_INITIALS.sub(".-", first), suffix))
        return authors_and_names(names)
    text = obj.get("authors")
    if isinstance(text, str):
        return [readable(a) for a in re.split(r",\s*|\s+and\s+", text) if a.strip()], []
    return [], []


_FIELDS: dict[str, tuple[type, ...]] = {
    "id": (str,), "abstract": (str,), "title": (str, type(None)), "categories": (str, type(None)),
    "doi": (str, type(None)), "journal-ref": (str, type(None)), "comments": (str, type(None)),
    "versions": (list, type(None)), "authors_parsed": (list, type(None)),
}


def _check(obj: Any, path: str, no: int) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise ParseError(path, no, f"expected a JSON object, got {type(obj).__name__}")
    for key, types in _FIELDS.items():
        if key in obj and not isinstance(obj[key], types):
            names = " or ".join("null" if t is type(None) else t.__name__ for t in types)
            raise ParseError(path, no, f"field `{key}` should be {names}, got {type(obj[key]).__name__}")
    if "id" not in obj or not str(obj.get("abstract") or "").strip():
        raise ParseError(path, no, "arXiv snapshot record without `id` or `abstract`")
    return obj


def snapshot_paper(obj: dict[str, Any], path: str, no: int, categories: list[str],
                   date: str | None) -> Paper:
    ident = obj["id"].strip()
    split = split_arxiv_id(ident)
    if split is None or split[1]:
        raise ParseError(path, no, f"field `id` {ident[:40]!r} is not an arXiv id",
                         "expected YYMM.NNNNN or an old-style id such as math/0703001")
    year = int(date[:4]) if date else _year_of_id(split[0])
    comments = readable(obj.get("comments") or "")
    authors, author_names = _authors(obj)
    return _paper(
        readable(obj["abstract"]), title=readable(obj.get("title") or "") or None,
        arxiv_id=split[0], authors=authors, author_names=author_names, doi=(obj.get("doi") or "").strip() or None,
        journal_ref=readable(obj.get("journal-ref") or "") or None,
        comments=[comments] if comments else [], date=date, year=year, categories=categories,
        line=no,
    )


def is_snapshot_line(line: str) -> bool:
    """A first line that is an arXiv snapshot record (not any JSON Lines file with an id)."""
    try:
        obj = json.loads(line)
    except ValueError:
        return False
    return isinstance(obj, dict) and "id" in obj and ("versions" in obj or "authors_parsed" in obj)


def is_snapshot(path: Path) -> bool:
    """Judged from the first non-blank line, read alone: the file may be gigabytes."""
    try:
        with open_binary(path, str(path)) as fh:
            if fh.read(len(BOM)) != BOM:
                fh.seek(0)
            while raw := fh.readline(_PEEK):  # bounded: a binary file may have no newline
                if raw.strip():
                    return raw.lstrip().startswith(b"{") and is_snapshot_line(
                        raw.decode("utf-8-sig", "replace"))
    except (OSError, EOFError, zlib.error, ParseError):
        return False  # read_file says why
    return False


def read_snapshot(path: Path, source: str, restrict: Restrict | None = None
                  ) -> tuple[list[Paper], list[ParseError], dict[str, int]]:
    """The papers of a snapshot file, read line by line; only kept records are held."""
    papers: list[Paper] = []
    problems: list[ParseError] = []
    outside = 0
    for no, obj in _records(path, source):
        try:
            if isinstance(obj, ParseError):
                raise obj
            _check(obj, source, no)
            cats = (obj.get("categories") or "").split()
            date = first_version_date(obj.get("versions"))
            if restrict and restrict.active():
                year = int(date[:4]) if date else _year_of_id(str(obj["id"]))
                if not restrict.keeps(cats, date, year):
                    outside += 1
                    continue
            papers.append(snapshot_paper(obj, source, no, cats, date))
        except ParseError as exc:
            problems.append(exc)
        except LatexError as exc:
            problems.append(ParseError(source, no, str(exc), "fix the record's LaTeX, or pass --skip-bad"))
        if len(problems) >= MAX_PROBLEMS:
            problems.append(ParseError(source, no, f"stopped reading after {MAX_PROBLEMS} bad lines",
                                       "is this an arXiv metadata snapshot (JSON Lines)?"))
            break
    left_out = {f"records outside {restrict.describe()}": outside} if outside and restrict else {}
    return papers, problems, left_out


def _lines(fh: IO[bytes]) -> Iterator[tuple[int, bytes | None]]:
    """(line number, bytes) of each line; None for a line over MAX_LINE_BYTES, which is read
    past in pieces and never held whole (a 1 GB line took 2.2 GB of memory)."""
    return enumerate(bounded_lines(fh, MAX_LINE_BYTES), 1)


def _records(path: Path, source: str) -> Iterator[tuple[int, Any | ParseError]]:
    """Each non-blank line's JSON value, or the ParseError that says why it has none."""
    try:
        with open_binary(path, source) as fh:
            yield from _values(fh, source)
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise damaged_gzip(source, exc) from None


def _values(fh: IO[bytes], source: str) -> Iterator[tuple[int, Any | ParseError]]:
    for no, raw in _lines(fh):
        if raw is None:
            yield no, ParseError(source, no, f"line is over {MAX_LINE_BYTES // 2**20} MB",
                                 "a snapshot record is a few KB: is this an arXiv snapshot?")
            continue
        if no == 1:
            raw = raw.removeprefix(BOM)
        if not raw.strip():
            continue
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield no, ParseError(source, no, f"invalid UTF-8 byte 0x{raw[exc.start]:02x}",
                                 f"convert the file to UTF-8, e.g. `iconv -f latin1 -t utf-8 {source}`")
            continue
        try:
            yield no, json.loads(line)
        except (ValueError, RecursionError) as exc:
            yield no, ParseError(source, no, f"not valid JSON ({str(exc)[:80]})",
                                 "the snapshot holds one complete JSON object per line")
