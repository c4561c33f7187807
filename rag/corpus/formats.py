"""One parser per abstract-dump layout, and detection of the layout from the content.

Each parser takes the decoded text and returns (papers, problems): a record that cannot be
read becomes a ParseError in `problems`, so the caller can report good and bad counts.
These layouts are hand-parsed because no library reads them: they are scraped listings.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from rag.corpus.paper import Paper, make_paper_id
from rag.corpus.text import clean_latex, make_label, strip_markup
from rag.errors import ParseError

Parsed = tuple[list[Paper], list[ParseError]]

# arXiv ids: new style YYMM.NNNNN (5 digits from 1501 on, 4 before) or old style cs/0112017.
_NEW_ID = re.compile(r"(\d{2})(\d{2})\.(\d{4,5})(v\d+)?")
_OLD_ID = re.compile(r"([a-z\-]+(?:\.[A-Z]{2})?/\d{7})(v\d+)?")
_ARXIV_LINE = re.compile(r"^arXiv:(\S.*)$")
_CONF_ENTRY = re.compile(r"^#(\d+)\s+(.+?)\s*$")
_CONF_TAGS = re.compile(r"(?:\s*\[[^\]]*\])+\s*$")
_AUTHORS = re.compile(r"^Authors?:\s*(.*)$")
_CREATED = re.compile(r"^Created:\s*(\d{4})-(\d{2})-(\d{2})\s*$")
_VENUE_HEADER = re.compile(r"^([A-Za-z][A-Za-z\-]*)[.\s](\d{4})$")


def split_arxiv_id(rest: str) -> tuple[str, str] | None:
    """Split `2403.07648Bridging...` into ('2403.07648', 'Bridging...'); None if no id."""
    m = _NEW_ID.match(rest)
    if m:
        yymm = int(m.group(1) + m.group(2))
        digits = 5 if yymm >= 1501 else 4
        if len(m.group(3)) < digits or not 1 <= int(m.group(2)) <= 12:
            return None
        ident = f"{m.group(1)}{m.group(2)}.{m.group(3)[:digits]}"
        end = m.start(3) + digits
        version = re.match(r"v\d+", rest[end:])
        if version:
            end += version.end()
        return ident, rest[end:]
    m = _OLD_ID.match(rest)
    if m:
        return m.group(1), rest[m.end() :]
    return None


def _paper(
    abstract: str, *, title: str | None = None, arxiv_id: str | None = None, line: int, **kw: Any
) -> Paper:
    abstract = clean_latex(" ".join(strip_markup(abstract).split()))
    title = clean_latex(" ".join(strip_markup(title).split())) if title else None
    title = title or None  # a blank title is no title
    return Paper(
        paper_id=make_paper_id(arxiv_id, title, abstract),
        abstract=abstract,
        title=title,
        label=make_label(title, abstract),
        arxiv_id=arxiv_id,
        line=line,
        **kw,
    )


def exported_id(paper: Paper, given: str | None) -> Paper:
    """The paper with the id rag's own export gave it (`rag-id`: written where the record's
    fields would make another, rag.export). An id made from the abstract is that of a paper
    without a title, which the export names by its label: it has no title again."""
    given = (given or "").strip()
    if given:
        if given == make_paper_id(None, None, paper.abstract):
            paper.title, paper.label = None, make_label(None, paper.abstract)
        paper.paper_id = given
    return paper


R = TypeVar("R")


def gather(records: Iterable[tuple[int, R]], to_paper: Callable[[R, str, int], Paper | None], path: str,
           no_abstract: str) -> tuple[list[Paper], list[ParseError], dict[str, int]]:
    """The papers of a file's records ((line, record)), the problems of those `to_paper`
    cannot read, and how many it left out (None: no abstract), counted under `no_abstract`
    (as a streaming reader's `Stream.take`)."""
    from rag.corpus.streams import Stream

    stream = Stream("", iter(()))
    papers = [paper for line, record in records
              if (paper := stream.take(no_abstract, to_paper, record, path, line)) is not None]
    return papers, stream.problems, stream.left_out


def _other_layout(line: str, layout: str) -> str | None:
    """What another layout's line looks like, if `line` clearly is one: a file holds one layout,
    and without this check such a line was silently glued onto the abstract before it."""
    if layout != "abstract-lines" and line.startswith("Abstract:"):
        return "an `Abstract:` line"
    if layout in ("abstract-lines", "conference-listing"):
        arxiv = _ARXIV_LINE.match(line)
        if arxiv and split_arxiv_id(arxiv.group(1)):
            return "an arXiv id line"
        if _CREATED.match(line):
            return "an arXiv export `Created:` line"
    if layout == "abstract-lines":
        if _CONF_ENTRY.match(line):
            return "a conference listing entry (`#N Title`)"
        if _AUTHORS.match(line):
            return "a conference listing `Authors:` line"
    if line.startswith("{") and line.endswith("}"):
        return "a JSON Lines record"
    return None


def _mixed(path: str, no: int, line: str, what: str, layout: str) -> ParseError:
    return ParseError(
        path, no, f"{what} (`{line[:40]}`) in a file in the {layout} layout",
        "a file holds one layout: split it into one file per layout",
    )


def parse_abstract_lines(text: str, path: str) -> Parsed:
    """Layout 1: one `Abstract:` line per paper; other non-blank lines continue it."""
    papers: list[Paper] = []
    problems: list[ParseError] = []
    current: tuple[int, list[str]] | None = None
    foreign = False  # inside a line of another layout: its continuation lines are not ours

    def close() -> None:
        if current is None:
            return
        start, body = current
        if body:
            papers.append(_paper(" ".join(body), line=start))
        else:
            problems.append(ParseError(path, start, "`Abstract:` line with no text"))

    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("Abstract:"):
            close()
            body = line[len("Abstract:") :].strip()
            current, foreign = (no, [body] if body else []), False
            continue
        what = _other_layout(line, "abstract-lines")
        if what:
            close()
            current, foreign = None, True
            problems.append(_mixed(path, no, line, what, "`Abstract:` lines"))
        elif current is not None:
            current[1].append(line)
        elif not foreign:
            problems.append(ParseError(path, no, "text before the first `Abstract:` line"))
    close()
    return papers, problems


def parse_conference(text: str, path: str) -> Parsed:
    """Layout 2: header (`MLSYS.2023`), then `#N Title [PDF]...`, `Authors: ...`, abstract."""
    venue = year = None
    papers: list[Paper] = []
    problems: list[ParseError] = []
    entry: dict[str, Any] | None = None

    def close() -> None:
        if entry is None:
            return
        abstract = " ".join(entry["body"])
        if not abstract:
            problems.append(
                ParseError(path, entry["line"], f"entry #{entry['n']} has a title but no abstract")
            )
            return
        papers.append(
            _paper(
                abstract, title=entry["title"], authors=entry["authors"], venue=venue, year=year,
                line=entry["line"],
            )
        )

    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        m = _CONF_ENTRY.match(line)
        if m:
            close()
            title = _CONF_TAGS.sub("", m.group(2)).strip()
            entry = {"n": m.group(1), "title": title, "authors": [], "body": [], "line": no,
                     "foreign": False}
            continue
        if entry is None:
            header = _VENUE_HEADER.match(line)
            if header:
                venue, year = header.group(1).upper(), int(header.group(2))
            continue
        if not line:
            continue
        authors = _AUTHORS.match(line)
        what = _other_layout(line, "conference-listing")
        if what == "an `Abstract:` line" and not entry["body"] and not entry["foreign"]:
            what = None  # `Abstract: ...` opening an entry's own abstract
        if what:
            entry["foreign"] = True
            problems.append(_mixed(path, no, line, what, "conference listing"))
        elif entry["foreign"]:
            continue  # the rest of another layout's record
        elif authors and not entry["authors"] and not entry["body"]:
            entry["authors"] = [a.strip() for a in authors.group(1).split(",") if a.strip()]
        else:
            entry["body"].append(line)
    close()
    for p in papers:
        p.position = 0  # set by the loader, in file order
    return papers, problems


def parse_arxiv_listing(text: str, path: str) -> Parsed:
    """Layout 3: abstract, optional comment lines, then `arXiv:ID[ - JOURNAL-REF]`.

    The next abstract may be glued to the id on the same line. An `arXiv:` mention inside a
    comment line is not an id: only a line that *starts* with `arXiv:` closes a paper.
    """
    papers: list[Paper] = []
    problems: list[ParseError] = []
    block: list[str] = []
    start = 1
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        m = _ARXIV_LINE.match(line)
        what = _other_layout(line, "arxiv-listing") if line and not m else None
        if what:
            problems.append(_mixed(path, no, line, what, "arXiv listing"))
            continue
        if not m:
            if line:
                if not block:
                    start = no
                block.append(line)
            continue
        split = split_arxiv_id(m.group(1))
        if split is None:
            problems.append(
                ParseError(path, no, f"`{line[:40]}` is not an arXiv id (expected arXiv:YYMM.NNNNN)")
            )
            block = []
            continue
        ident, rest = split
        journal_ref = None
        if rest.startswith((" - ", " -", "-")) or rest.strip() == "":
            journal_ref = rest.strip().lstrip("-").strip() or None
            rest = ""
        if not block:
            problems.append(ParseError(path, no, f"arXiv:{ident} follows no abstract"))
        else:
            papers.append(
                _paper(block[0], arxiv_id=ident, journal_ref=journal_ref, comments=block[1:],
                       line=start)
            )
        block = [rest.strip()] if rest.strip() else []
        start = no
    if block:
        problems.append(
            ParseError(path, start, "abstract at the end of the file has no `arXiv:ID` line after it")
        )
    return papers, problems


def parse_arxiv_export(text: str, path: str) -> Parsed:
    """Layout 4: blocks of abstract / comments / `arXiv:ID - doi: ...` + `Created: DATE`."""
    papers: list[Paper] = []
    problems: list[ParseError] = []
    blocks: list[tuple[int, list[str]]] = []
    current: list[str] = []
    start = 1
    for no, raw in enumerate(text.splitlines() + [""], 1):
        line = raw.strip()
        if line:
            if not current:
                start = no
            current.append(line)
        elif current:
            blocks.append((start, current))
            current = []
    pending: list[tuple[int, list[str]]] = []
    poisoned = False
    for start, lines in blocks:
        m = _ARXIV_LINE.match(lines[0])
        if not m:
            odd = [(i, ln, w) for i, ln in enumerate(lines)
                   if (w := _other_layout(ln, "arxiv-export"))]
            if odd:
                i, ln, what = odd[0]
                problems.append(_mixed(path, start + i, ln, what, "arXiv export"))
                pending, poisoned = [], True  # this record is reported: skip to its id line
            elif not poisoned:
                pending.append((start, lines))
            continue
        if poisoned:
            poisoned = False
            continue
        split = split_arxiv_id(m.group(1))
        if split is None or not pending:
            why = "is not an arXiv id" if split is None else "follows no abstract"
            problems.append(ParseError(path, start, f"`{lines[0][:40]}` {why}"))
            pending = []
            continue
        ident, rest = split
        rest = rest.strip().lstrip("-").strip()
        doi = journal_ref = None
        if rest.lower().startswith("doi:"):
            doi = rest[4:].strip()
        elif rest:
            journal_ref = rest
        date = year = None
        for extra in lines[1:]:
            created = _CREATED.match(extra)
            if created:
                date, year = "-".join(created.groups()), int(created.group(1))
        (abs_start, abs_lines), comments = pending[0], pending[1:]
        papers.append(
            _paper(" ".join(abs_lines), arxiv_id=ident, doi=doi, journal_ref=journal_ref,
                   date=date, year=year, comments=[" ".join(c) for _, c in comments],
                   line=abs_start)
        )
        pending = []
    if pending:  # one record (abstract and comment blocks), reported once
        problems.append(ParseError(path, pending[0][0], "block is followed by no `arXiv:ID` line"))
    return papers, problems
