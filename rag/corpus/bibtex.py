"""BibTeX (Zotero, the ACL Anthology, Google Scholar exports) through bibtexparser: entries,
@string macros, braces and LaTeX accents (its LatexDecodingMiddleware, pylatexenc), and names
split by BibTeX's own rules ("Last, First and ..." -> "First Last").

Entries without an abstract are no error: reference managers export every entry, and many
have none. They are counted and left out.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from rag.corpus.formats import _paper, split_arxiv_id
from rag.corpus.paper import Paper
from rag.errors import ParseError

LAYOUT = "bibtex"
_ENTRY_START = re.compile(r"@\s*[A-Za-z]+\s*[{(]")
_ARXIV_MENTION = re.compile(r"arXiv:\s*(\S+)", re.IGNORECASE)
_DOI_PREFIX = re.compile(r"^(?:https?://(?:dx\.)?doi\.org/|doi:\s*)", re.IGNORECASE)


def detect(text: str) -> bool:
    """A file whose first line that is not a `%` comment opens a BibTeX entry."""
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("%"):
            return bool(_ENTRY_START.match(line))
    return False


def _uncomment(text: str) -> str:
    # biber and reference managers read a line starting with % as a comment (a commented-out
    # entry is not a paper); bibtexparser parses it as an entry. Blanked, not removed: the
    # line numbers in messages stay the file's.
    return re.sub(r"(?m)^[ \t]*%.*$", "", text)


def _split_top(value: str) -> list[str]:
    """Pieces of a `#` concatenation, outside braces and quotes."""
    pieces, depth, quoted, start = [], 0, False, 0
    for i, ch in enumerate(value):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == '"' and depth == 0:
            quoted = not quoted
        elif ch == "#" and depth == 0 and not quoted:
            pieces.append(value[start:i])
            start = i + 1
    return [*pieces, value[start:]]


def _unenclose(piece: str, strings: dict[str, str], depth: int = 0) -> str:
    piece = piece.strip()
    if len(piece) >= 2 and (piece[0], piece[-1]) in (("{", "}"), ('"', '"')):
        return piece[1:-1]
    if piece.isdigit() or depth > 8:
        return piece
    if piece.lower() in strings:
        return "".join(_unenclose(p, strings, depth + 1) for p in _split_top(strings[piece.lower()]))
    return piece


def _concatenation() -> Any:
    from bibtexparser.library import Library
    from bibtexparser.middlewares.middleware import LibraryMiddleware

    class Concatenate(LibraryMiddleware):
        """BibTeX's `#` concatenation (`journal = pvldb # " 16(4)"`), which bibtexparser leaves
        as written; resolved before its own @string and enclosing middlewares run."""

        def transform(self, library: Library) -> Library:
            strings = {s.key.lower(): str(s.value) for s in library.strings}
            for entry in library.entries:
                for f in entry.fields:
                    if isinstance(f.value, str) and "#" in f.value:
                        pieces = _split_top(f.value)
                        if len(pieces) > 1:
                            f.value = "{" + "".join(_unenclose(p, strings) for p in pieces) + "}"
            return library

    return Concatenate()


def _library(text: str) -> Any:
    import bibtexparser

    # Its splitter logs each unreadable entry as a warning to stderr; the entry comes back to
    # us in failed_blocks and is reported once, with file and line (_failure).
    logging.getLogger("bibtexparser").setLevel(logging.ERROR)
    from bibtexparser.middlewares import (
        LatexDecodingMiddleware,
        MergeNameParts,
        RemoveEnclosingMiddleware,
        ResolveStringReferencesMiddleware,
        SeparateCoAuthors,
        SplitNameParts,
    )

    return bibtexparser.parse_string(_uncomment(text), parse_stack=[
        _concatenation(), ResolveStringReferencesMiddleware(), RemoveEnclosingMiddleware(),
        LatexDecodingMiddleware(), SeparateCoAuthors(), SplitNameParts(), MergeNameParts("first"),
    ])


def _failure(block: Any, path: str) -> ParseError:
    from bibtexparser.model import DuplicateBlockKeyBlock

    line = block.start_line + 1
    if isinstance(block, DuplicateBlockKeyBlock):
        return ParseError(path, line, f"a second entry with the key `{block.key}`",
                          "give each entry its own key")
    error = getattr(block, "error", None)
    why = getattr(error, "abort_reason", None) or str(error or "") or "unreadable entry"
    return ParseError(path, line, f"BibTeX entry that cannot be read ({' '.join(why.split())[:160]})",
                      "check that its braces and quotes are balanced")


def _arxiv_id(fields: dict[str, str]) -> str | None:
    """`eprint` of an arXiv entry, or Google Scholar's journal = {arXiv preprint arXiv:ID}."""
    prefix = (fields.get("archiveprefix") or fields.get("eprinttype") or "").lower()
    candidates = [fields["eprint"]] if fields.get("eprint") and prefix in ("arxiv", "") else []
    for key in ("journal", "note", "howpublished"):
        m = _ARXIV_MENTION.search(fields.get(key, ""))
        if m:
            candidates.append(m.group(1))
    for c in candidates:
        split = split_arxiv_id(c.strip().removeprefix("arXiv:").removeprefix("arxiv:"))
        if split and not split[1].strip(" .,;"):
            return split[0]
    return None


def _entry_paper(entry: Any, path: str) -> Paper | None:
    fields = {f.key.lower(): f.value for f in entry.fields}
    authors = fields.pop("author", [])
    fields = {k: str(v) for k, v in fields.items()}
    abstract = fields.get("abstract", "")
    if not abstract.strip():
        return None
    names = [a.strip() for a in (authors if isinstance(authors, list) else [authors])]
    year_text = fields.get("year") or fields.get("date", "")
    year = re.search(r"\b(\d{4})\b", year_text)
    date = fields.get("date") if re.fullmatch(r"\d{4}-\d{2}-\d{2}", fields.get("date", "")) else None
    doi = _DOI_PREFIX.sub("", fields.get("doi", "").strip()) or None
    venue = fields.get("journal") or fields.get("booktitle")
    if venue and _ARXIV_MENTION.search(venue):
        venue = None  # "arXiv preprint arXiv:…" is no venue
    primary = fields.get("primaryclass", "").strip()
    return _paper(
        abstract, title=fields.get("title"), arxiv_id=_arxiv_id(fields),
        authors=[n for n in names if n and n.lower() != "others"], venue=venue,
        year=int(year.group(1)) if year else None, date=date, doi=doi,
        categories=[primary] if primary else [], line=entry.start_line + 1,
    )


def parse_bibtex(text: str, path: str) -> tuple[list[Paper], list[ParseError], dict[str, int]]:
    """Papers of a BibTeX file, problems of its unreadable entries, and how many entries
    were left out for having no abstract."""
    library = _library(text)
    papers: list[Paper] = []
    problems = [_failure(b, path) for b in library.failed_blocks]
    no_abstract = 0
    for entry in library.entries:
        paper = _entry_paper(entry, path)
        if paper is None:
            no_abstract += 1
        else:
            papers.append(paper)
    return papers, problems, {"BibTeX entries without an abstract": no_abstract} if no_abstract else {}
