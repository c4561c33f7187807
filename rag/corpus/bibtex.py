"""BibTeX (Zotero, the ACL Anthology, Google Scholar exports) through bibtexparser: entries,
@string macros, braces and LaTeX accents (its LatexDecodingMiddleware, pylatexenc), and names
split by BibTeX's own rules ("Last, First and ..." -> "First Last", the parts kept where that
string alone would be read otherwise: rag.corpus.names).

Entries without an abstract are no error: reference managers export every entry, and many
have none. They are counted and left out.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from rag.corpus.bibtex_macros import expansion, uncomment
from rag.corpus.formats import _paper, exported_id, split_arxiv_id
from rag.corpus.latex import decoder
from rag.corpus.limits import iter_lines
from rag.corpus.names import Name, authors_and_names, from_parts, name_parts, organisation
from rag.corpus.paper import Paper, preprint_server
from rag.errors import ParseError

LAYOUT = "bibtex"
_ENTRY_START = re.compile(r"@\s*[A-Za-z]+\s*[{(]")
_ARXIV_MENTION = re.compile(r"arXiv:\s*(\S+)", re.IGNORECASE)


def detect(text: str) -> bool:
    """A file whose first line that is not a `%` comment opens a BibTeX entry."""
    for line in iter_lines(text):
        line = line.strip()
        if line and not line.startswith("%"):
            return bool(_ENTRY_START.match(line))
    return False


def _latex_decoding() -> Any:
    from bibtexparser.middlewares import LatexDecodingMiddleware
    from bibtexparser.middlewares.names import NameParts
    from bibtexparser.model import MiddlewareErrorBlock

    class Decode(LatexDecodingMiddleware):
        """bibtexparser's LaTeX decoding, also of each split name's parts (its own decodes a
        field that holds one NameParts, not the list SplitNameParts leaves)."""

        def transform_entry(self, entry: Any, library: Any) -> Any:
            errors: list[str] = []
            for f in entry.fields:
                for n in f.value if isinstance(f.value, list) else []:
                    if isinstance(n, NameParts):
                        n.first, n.von, n.last, n.jr = (self._transform_all_strings(part, errors)
                                                        for part in (n.first, n.von, n.last, n.jr))
            if any(errors):
                return MiddlewareErrorBlock(block=entry, error=ValueError("; ".join(filter(None, errors))))
            return super().transform_entry(entry, library)

    return Decode(decoder=decoder(math_mode="verbatim"))


_EXTENDED_NAME = re.compile(r"\s*(?:family|given|prefix|suffix)\s*=", re.IGNORECASE)


def _plain_name(name: str) -> str:
    """A name in biblatex's extended format, as Better BibLaTeX writes one with a particle
    ("family=Gogh, given=Vincent, prefix=van, useprefix=true"), in BibTeX's "van Gogh,
    Vincent"; any other name as written. bibtexparser refused the whole entry ("too many
    commas") and the paper was lost."""
    if not _EXTENDED_NAME.match(name):
        return name
    parts: dict[str, str] = {}
    depth, start = 0, 0
    for i, ch in enumerate(name + ","):
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            key, _, value = name[start:i].partition("=")
            value = value.strip()
            braced = value.startswith("{") and value.endswith("}") and "}" not in value[1:-1]
            parts[key.strip().lower()] = value[1:-1] if braced else value
            start = i + 1
    family = " ".join(filter(None, [parts.get("prefix"), parts.get("family")]))
    if not parts.get("given"):
        return family
    return ", ".join(filter(None, [family, parts.get("suffix"), parts["given"]]))


def _extended_names() -> Any:
    from bibtexparser.middlewares.middleware import BlockMiddleware

    class ExtendedNames(BlockMiddleware):  # type: ignore[misc]
        """Each name of an author or editor list in biblatex's extended format as BibTeX's."""

        def transform_entry(self, entry: Any, library: Any) -> Any:
            for f in entry.fields:
                if f.key in ("author", "editor") and isinstance(f.value, list):
                    f.value = [_plain_name(n) if isinstance(n, str) else n for n in f.value]
            return entry

    return ExtendedNames()


def _library(text: str, refused: list[tuple[Any, str, str]]) -> Any:
    import bibtexparser

    # Its splitter logs each unreadable entry as a warning to stderr; the entry comes back to
    # us in failed_blocks and is reported once, with file and line (_failure).
    logging.getLogger("bibtexparser").setLevel(logging.ERROR)
    from bibtexparser.middlewares import (
        NormalizeFieldKeys,
        RemoveEnclosingMiddleware,
        SeparateCoAuthors,
        SplitNameParts,
    )

    # Macros are expanded (and bounded) by expansion(), which replaces bibtexparser's own
    # ResolveStringReferencesMiddleware: that one expands without limit.
    return bibtexparser.parse_string(uncomment(text), parse_stack=[
        # Field names in lower case first: the name splitters look for `author` only, so
        # BibDesk's and JabRef 3's `Author = {...}` was one name ("Jürgen and ... Smith John").
        NormalizeFieldKeys(),
        # Names are split before LaTeX is decoded: "Doe, Jane {\textbraceright}" is two parts,
        # "Doe, Jane }" is an unbalanced name.
        expansion(refused, len(text)), RemoveEnclosingMiddleware(), SeparateCoAuthors(),
        _extended_names(), SplitNameParts(), _latex_decoding(),
    ])


def _failure(block: Any, path: str) -> ParseError:
    from bibtexparser.model import DuplicateBlockKeyBlock, MiddlewareErrorBlock

    line = block.start_line + 1
    if isinstance(block, DuplicateBlockKeyBlock):
        return ParseError(path, line, f"a second entry with the key `{block.key}`",
                          "give each entry its own key")
    if isinstance(block, MiddlewareErrorBlock):  # the LaTeX decoder or name splitter failed
        why = " ".join(str(block.error).split())[:160] or "LaTeX nested too deeply"
        return ParseError(path, line, f"BibTeX entry whose fields cannot be read ({why})",
                          "check the entry's braces and LaTeX commands, or pass --skip-bad")
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


def _name(parts: Any) -> Name:
    """A name's parts; a name braced whole ("{Google Research}": one last-name word with a
    space in it, nothing else) is an organisation."""
    if isinstance(parts, str):
        parts = name_parts(parts)
    if not (parts.first or parts.von or parts.jr) and len(parts.last) == 1 and " " in parts.last[0].strip():
        return organisation(parts.last[0])
    return from_parts(parts)


def _entry_paper(entry: Any, path: str) -> Paper | None:
    fields = {f.key.lower(): f.value for f in entry.fields}
    authors = fields.pop("author", [])
    fields = {k: str(v) for k, v in fields.items()}
    abstract = fields.get("abstract", "")
    if not abstract.strip():
        return None
    names = [_name(a) for a in (authors if isinstance(authors, list) else [authors])]
    authors, author_names = authors_and_names([n for n in names if n.get("family", "").lower() != "others"])
    year_text = fields.get("year") or fields.get("date", "")
    year = re.search(r"\b(\d{4})\b", year_text)
    date = fields.get("date") if re.fullmatch(r"\d{4}-\d{2}-\d{2}", fields.get("date", "")) else None
    doi = fields.get("doi", "").strip() or None  # checked (and doi.org links cut) by read_file
    # biblatex (Zotero's and Better BibTeX's BibLaTeX exports) names the journal `journaltitle`
    journal_name = fields.get("journal") or fields.get("journaltitle")
    venue = journal_name or fields.get("booktitle")
    journal_ref = fields.get("journal-ref", "").strip() or None  # written by rag's own export
    if venue and (_ARXIV_MENTION.search(venue) or preprint_server(venue)):
        venue = None  # "arXiv preprint arXiv:…", "ArXiv" is no venue
    if venue == journal_ref:
        venue = None  # rag's export names a paper's journal ref as its journal when it has no venue
    journal = bool(venue) and venue == journal_name
    primary = fields.get("primaryclass", "").strip()
    paper = _paper(
        abstract, title=fields.get("title"), arxiv_id=_arxiv_id(fields),
        authors=authors, author_names=author_names, venue=venue, venue_kind="journal" if journal else None,
        year=int(year.group(1)) if year else None, date=date, doi=doi, journal_ref=journal_ref,
        categories=[primary] if primary else [], line=entry.start_line + 1,
    )
    paper.ids = {"key": entry.key}  # the citation key: `rag check` drafts and `rag papers show KEY`
    return exported_id(paper, fields.get("rag-id"))


# What names the crossref'd entry itself, not the volume its children appeared in: its DOI
# would make every paper of a proceedings one paper.
_OWN_FIELDS = frozenset({"title", "abstract", "doi", "url", "eprint", "eprinttype", "archiveprefix",
                         "primaryclass", "note", "howpublished", "ids", "crossref", "xref", "keywords"})


def _crossrefs(entries: list[Any]) -> set[str]:
    """Give each entry with a `crossref` the fields it lacks from the entry it names (booktitle,
    year, publisher, editor ...; the volume's title as the booktitle), as BibTeX and biber do;
    returns the keys (lower-case) of the entries named so."""
    from bibtexparser.model import Field

    by_key = {e.key.lower(): e for e in entries}
    targets = set()
    for entry in entries:
        ref = next((str(f.value).strip().lower() for f in entry.fields if f.key.lower() == "crossref"), "")
        parent = by_key.get(ref)
        if parent is None or parent is entry:
            continue
        targets.add(ref)
        have = {f.key.lower() for f in entry.fields}
        for f in parent.fields:
            if f.key.lower() not in have | _OWN_FIELDS:
                entry.set_field(Field(f.key, f.value))
        title = next((f.value for f in parent.fields if f.key.lower() == "title"), None)
        if title and not have & {"booktitle", "journal"} and not any(
                f.key.lower() in ("booktitle", "journal") for f in parent.fields):
            entry.set_field(Field("booktitle", title))
    return targets


def parse_bibtex(text: str, path: str) -> tuple[list[Paper], list[ParseError], dict[str, int]]:
    """Papers of a BibTeX file, problems of its unreadable entries, and how many entries
    were left out for having no abstract."""
    refused: list[tuple[Any, str, str]] = []
    library = _library(text, refused)
    papers: list[Paper] = []
    problems = [_failure(b, path) for b in library.failed_blocks]
    problems += [ParseError(path, entry.start_line + 1, f"BibTeX entry refused: {why}", hint)
                 for entry, why, hint in refused]
    no_abstract = 0
    targets = _crossrefs(library.entries)
    for entry in library.entries:
        paper = _entry_paper(entry, path)
        if paper is None:
            no_abstract += entry.key.lower() not in targets  # a volume only cited for its fields
        else:
            papers.append(paper)
    return papers, problems, {"BibTeX entries without an abstract": no_abstract} if no_abstract else {}
