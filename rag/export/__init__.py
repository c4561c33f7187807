"""Citation export: Paper records as BibTeX, RIS or CSL-JSON, for a reference manager.

bibtexparser writes the BibTeX, pylatexenc escapes LaTeX, rispy writes RIS; CSL-JSON is plain
JSON. Names come in the parts their reader kept, else split by BibTeX's own First/von/Last/Jr
rules (rag.corpus.names), for all three formats.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import bibtexparser
import rispy
from bibtexparser.middlewares import AddEnclosingMiddleware
from bibtexparser.model import Entry, Field
from pylatexenc.latexencode import (
    RULE_DICT,
    RULE_REGEX,
    UnicodeToLatexConversionRule,
    UnicodeToLatexEncoder,
)

from rag.corpus.names import Name, paper_names
from rag.corpus.paper import Paper, clean_doi, make_paper_id, real_date
from rag.corpus.ris import JOURNAL_REF_NOTE, RAG_ID_NOTE
from rag.errors import InputError
from rag.export.keys import cite_keys

__all__ = ["EXTENSIONS", "FORMATS", "MEDIA_TYPES", "PART_PAPERS", "cite_keys", "export", "export_parts",
           "format_for_path", "latex", "save", "select", "to_bibtex", "to_csl_json", "to_ris", "write_export"]

log = logging.getLogger(__name__)
MEDIA_TYPES = {
    "bibtex": "text/x-bibtex",
    "ris": "application/x-research-info-systems",
    "csl-json": "application/vnd.citationstyles.csl+json",
}
FORMATS = tuple(MEDIA_TYPES)
EXTENSIONS = {".bib": "bibtex", ".ris": "ris", ".json": "csl-json"}

# pylatexenc's defaults, plus what they leave for a LaTeX or BibTeX reader to misread:
# "--" and "``" would become dashes and curly quotes, and so would a plain '"'; "\{" still
# counts as a brace to BibTeX, whose fields must balance, so braces are spelled as macros.
# Characters with no LaTeX form (CJK) stay UTF-8, which biber and bibtexparser read as such.
_LATEX = UnicodeToLatexEncoder(
    conversion_rules=[
        UnicodeToLatexConversionRule(RULE_DICT, {
            ord("{"): r"\textbraceleft", ord("}"): r"\textbraceright", ord('"'): r"\textquotedbl"}),
        UnicodeToLatexConversionRule(RULE_REGEX, [(re.compile(r"([-`'])(?=[-`'])"), r"\1{}")]),
        "defaults",
    ],
    replacement_latex_protection="braces-all",
    unknown_char_policy="keep",
    unknown_char_warning=False,
)


# Runs the encoder leaves as they are: ASCII it maps to itself, and a -, ` or ' that is not
# one of a pair (its rule above looks at the next character), never just before a non-ASCII
# character (a combining accent joins the character before it). pylatexenc works a character
# at a time in Python: a 2,000-paper BibTeX export took 17 s, 4.3 s with only the rest
# encoded, the same text (tests/test_export.py checks it), while /health waits on the GIL.
_PLAIN = re.compile(r"(?:[A-Za-z0-9 !()*+,./:;=?@\[\]|]|(?<![-`'])[-`'](?![-`']))+(?![^\x00-\x7f])")


def latex(text: str) -> str:
    flat, out, at = _flat(text), [], 0
    for run in _PLAIN.finditer(flat):
        if run.start() > at:
            out.append(_LATEX.unicode_to_latex(flat[at:run.start()]))
        out.append(run.group())
        at = run.end()
    if at < len(flat):
        out.append(_LATEX.unicode_to_latex(flat[at:]))
    return "".join(out)


def _flat(text: str) -> str:
    # BibTeX, RIS and citeproc all treat a run of whitespace as one space; a newline would
    # even end an RIS field, so every value is one line.
    return " ".join(text.split())


# -- what kind of publication -----------------------------------------------------------------


def _kind(p: Paper) -> str:
    """A venue is a conference (MLSys, ICML, ...) unless its reader knew it for a journal; a
    journal ref alone is a journal; else an arXiv preprint, or an untyped record."""
    if p.venue:
        return "journal" if p.venue_kind == "journal" else "conference"
    if p.journal_ref:
        return "journal"
    return "preprint" if p.arxiv_id else "other"


def _container(p: Paper) -> str | None:
    """The proceedings or journal the paper is in."""
    return p.venue or p.journal_ref


def _note(p: Paper) -> str | None:
    """The journal ref, when the venue took the container's place and the ref says more."""
    return p.journal_ref if p.venue and p.journal_ref and p.journal_ref != p.venue else None


def _own_id(p: Paper) -> str | None:
    """The paper id, where a reader would make another from the exported fields: a paper
    without a title is exported under its label, an id may be given (JSON Lines `id`) or
    told apart from another paper's. rag's readers take it back (formats.exported_id)."""
    return None if p.paper_id == make_paper_id(p.arxiv_id, p.title or p.label, p.abstract) else p.paper_id


def _url(p: Paper) -> str | None:
    if p.arxiv_id:
        return f"https://arxiv.org/abs/{p.arxiv_id}"
    return f"https://doi.org/{doi}" if (doi := _doi(p)) else None


def _date_parts(p: Paper) -> list[int]:
    """[year, month, day] of a real date (an index from before dates were checked may hold
    2023-13-45), else [year]."""
    m = re.fullmatch(r"(\d{4})-(\d{2})-(\d{2})", p.date or "")
    if m and real_date(m.group(0)) and (not p.year or int(m.group(1)) == p.year):
        return [int(g) for g in m.groups()]
    return [p.year] if p.year else []


def _doi(p: Paper) -> str | None:
    """The DOI, if it is one: it is written verbatim (BibTeX) or as one line (RIS)."""
    return clean_doi(p.doi) if p.doi else None


# -- BibTeX -----------------------------------------------------------------------------------

_BIBTEX_TYPES = {"conference": "inproceedings", "journal": "article", "preprint": "misc", "other": "misc"}


def _bibtex_name(n: Name) -> str:
    """"von Last, Jr, First"; an organisation, and a family name BibTeX would split
    ("Ramón y Cajal"), in braces."""
    if "literal" in n:
        text = f"{{{latex(n['literal'])}}}"
    else:
        family = latex(n.get("family", ""))
        if "," in family or any(w[:1].islower() for w in family.split()[1:]):
            family = f"{{{family}}}"
        head = " ".join(filter(None, [latex(n.get("non-dropping-particle", "")), family]))
        given, suffix = latex(n.get("given", "")), latex(n.get("suffix", ""))
        text = ", ".join([head, suffix, given] if suffix else [head, given] if given else [head])
    # A bare "and" inside one name would split it in two.
    return re.sub(r"(?<!\S)and(?!\S)", "{and}", text)


# A word in capitals (GPU, U.S.) or with a capital inside it (ByteScheduler, BERT-style; not
# Large-Scale) is braced, as Zotero and Better BibTeX write it, so that a style that sets
# titles in sentence case keeps it as it is.
_WORD = re.compile(r"\w+(?:[-'’.]\w+)*")
_WORD_PART = re.compile(r"[-'’.]")


def _protected(word: str) -> bool:
    letters = [c for c in word if c.isalpha()]
    return (len(letters) > 1 and all(c.isupper() for c in letters)) or any(
        c.isupper() for part in _WORD_PART.split(word) for c in part[1:])


def _bibtex_title(title: str) -> str:
    title, out, at = _flat(title), [], 0
    for m in _WORD.finditer(title):
        word = _LATEX.unicode_to_latex(m.group())
        out += [_LATEX.unicode_to_latex(title[at:m.start()]), f"{{{word}}}" if _protected(m.group()) else word]
        at = m.end()
    return "".join(out) + _LATEX.unicode_to_latex(title[at:])


def _bibtex_entry(p: Paper, key: str) -> Entry:
    kind = _kind(p)
    fields: list[tuple[str, str | None]] = [
        ("author", " and ".join(_bibtex_name(n) for n in paper_names(p.authors, p.author_names)) or None),
        ("title", _bibtex_title(p.title or p.label)),
        ("booktitle", latex(container) if kind == "conference" and (container := _container(p)) else None),
        ("journal", latex(container) if kind == "journal" and (container := _container(p)) else None),
        ("year", str(p.year) if p.year else None),
        ("date", "-".join(f"{x:02d}" for x in parts) if len(parts := _date_parts(p)) == 3 else None),
        # doi, eprint and url are verbatim fields for biblatex: escaping "_" there would
        # corrupt them, so they are written as they are, and only when checked (_doi; an
        # arXiv id is checked by every reader).
        ("doi", _doi(p)),
        ("eprint", p.arxiv_id),
        ("archivePrefix", "arXiv" if p.arxiv_id else None),
        ("url", _url(p)),
        ("note", latex(note) if (note := _note(p)) else None),
        # The journal ref in a field of its own too, which styles do not print and rag reads
        # back as the journal ref (the note and the container are read as no such thing);
        # and the paper id, where the fields would make another (_own_id).
        ("journal-ref", latex(p.journal_ref) if p.journal_ref else None),
        ("rag-id", latex(own) if (own := _own_id(p)) else None),
        ("abstract", latex(p.abstract)),
    ]
    return Entry(_BIBTEX_TYPES[kind], key, [Field(k, v) for k, v in fields if v])


def to_bibtex(papers: list[Paper], keys: dict[str, str] | None = None) -> str:
    keys = keys or cite_keys(papers)
    library = bibtexparser.Library([_bibtex_entry(p, keys[p.paper_id]) for p in papers])
    # In place: the default stack deep-copies every entry first (and warns on large exports).
    stack = [AddEnclosingMiddleware(allow_inplace_modification=True, default_enclosing="{",
                                    reuse_previous_enclosing=False, enclose_integers=False)]
    return bibtexparser.write_string(library, unparse_stack=stack)


# -- RIS --------------------------------------------------------------------------------------

_RIS_TYPES = {"conference": "CONF", "journal": "JOUR", "preprint": "UNPB", "other": "GEN"}


def _ris_name(n: Name) -> str:
    """RIS wants "Last, First, Suffix" (an organisation as it is named)."""
    head = n.get("literal") or " ".join(filter(None, [n.get("non-dropping-particle"), n.get("family")]))
    return ", ".join(filter(None, [head, n.get("given"), n.get("suffix")]))


def _ris_record(p: Paper, key: str) -> dict[str, Any]:
    kind = _kind(p)
    parts = _date_parts(p)
    record: dict[str, Any] = {
        "type_of_reference": _RIS_TYPES[kind],
        "id": key,
        "authors": [_ris_name(n) for n in paper_names(p.authors, p.author_names)],
        "title": _flat(p.title or p.label),
        "year": str(p.year) if p.year else None,
        "date": "/".join(f"{x:02d}" for x in parts) + "/" if len(parts) == 3 else None,
        # T2 is the container of both (Zotero, EndNote); JO the journal's name (Mendeley)
        "secondary_title": _flat(_container(p) or "") if kind in ("conference", "journal") else None,
        "journal_name": _flat(_container(p) or "") if kind == "journal" else None,
        # "Journal-ref:" as arXiv labels it, so that rag reads it back as the journal ref
        "notes": [f"{label} {_flat(value)}" for label, value in ((JOURNAL_REF_NOTE, p.journal_ref),
                                                                  (RAG_ID_NOTE, _own_id(p))) if value],
        "doi": _doi(p),
        "urls": [url] if (url := _url(p)) else [],
        "abstract": _flat(p.abstract),
    }
    # Every value one line: a line break in any field would end it, and an "ER  -" after it
    # would start a record of its own.
    return {k: [_flat(x) for x in v] if isinstance(v, list) else _flat(v)
            for k, v in record.items() if v}


class _RisWriter(rispy.RisWriter):
    def set_header(self, count: int) -> str:
        return ""  # rispy numbers the records ("1."); RIS readers expect TY first


def to_ris(papers: list[Paper], keys: dict[str, str] | None = None) -> str:
    keys = keys or cite_keys(papers)
    return str(rispy.dumps([_ris_record(p, keys[p.paper_id]) for p in papers], implementation=_RisWriter))


# -- CSL-JSON ---------------------------------------------------------------------------------

_CSL_TYPES = {"conference": "paper-conference", "journal": "article-journal", "preprint": "article",
              "other": "article"}


def _csl_item(p: Paper, key: str) -> dict[str, Any]:
    kind = _kind(p)
    parts = _date_parts(p)
    item: dict[str, Any] = {
        "id": key,
        "type": _CSL_TYPES[kind],
        "title": _flat(p.title or p.label),
        "author": [{k: _flat(v) for k, v in n.items()} for n in paper_names(p.authors, p.author_names)],
        "issued": {"date-parts": [parts]} if parts else None,
        "container-title": _flat(_container(p) or "") if kind in ("conference", "journal") else None,
        "note": _flat(note) if (note := _note(p)) else None,
        "number": f"arXiv:{p.arxiv_id}" if kind == "preprint" else None,
        "publisher": "arXiv" if kind == "preprint" else None,
        "DOI": _doi(p),
        "URL": _url(p),
        "abstract": _flat(p.abstract),
        # CSL's place for data with no variable of its own, which citeproc does not print
        "custom": {k: _flat(v) for k, v in (("journal-ref", p.journal_ref), ("rag-id", _own_id(p))) if v},
    }
    return {k: v for k, v in item.items() if v}


def to_csl_json(papers: list[Paper], keys: dict[str, str] | None = None) -> str:
    keys = keys or cite_keys(papers)
    return json.dumps([_csl_item(p, keys[p.paper_id]) for p in papers], indent=2, ensure_ascii=False) + "\n"


# -- entry points -----------------------------------------------------------------------------

_WRITERS: dict[str, Callable[[list[Paper], dict[str, str]], str]] = {
    "bibtex": to_bibtex, "ris": to_ris, "csl-json": to_csl_json,
}
# Between the parts of a document written in parts: what the writer puts between records.
_JOINS = {"bibtex": "\n\n", "ris": "\n", "csl-json": ",\n"}
PART_PAPERS = 200  # papers per part of an export streamed in parts (rag serve)


def select(papers: list[Paper], ids: Iterable[str]) -> list[Paper]:
    """The papers with these ids, in the order named (all of them when none is named)."""
    ids = list(dict.fromkeys(ids))
    if not ids:
        return papers
    by_id = {p.paper_id: p for p in papers}
    if missing := [i for i in ids if i not in by_id]:
        raise InputError(f"no paper with id {', '.join(map(repr, missing))} in the index",
                         "list the ids with `rag papers`")
    return [by_id[i] for i in ids]


def export(papers: list[Paper], fmt: str, index_papers: Iterable[Paper] = ()) -> str:
    """The papers as one BibTeX, RIS or CSL-JSON document, in the order given; keys are
    chosen among `index_papers` too (every paper of their index: cite_keys)."""
    if fmt not in _WRITERS:
        raise InputError(f"unknown export format {fmt!r}", f"use one of: {', '.join(FORMATS)}")
    return _WRITERS[fmt](papers, cite_keys(papers, index_papers))


def export_parts(papers: list[Paper], fmt: str, size: int | None = None,
                 index_papers: Iterable[Paper] = ()) -> list[Callable[[], str]]:
    """The same document as `export`, in parts of `size` papers, each written when called
    (so a server can stream a large export and write each part off its event loop):
    "".join(part() for part in export_parts(...)) == export(...). Keys are chosen over all
    the papers at once, as `export` does."""
    size = size or PART_PAPERS
    if fmt not in _WRITERS or len(papers) <= size:
        return [lambda: export(papers, fmt, index_papers)]
    keys, writer, join = cite_keys(papers, index_papers), _WRITERS[fmt], _JOINS[fmt]
    chunks = [papers[i : i + size] for i in range(0, len(papers), size)]

    def part(i: int) -> str:
        text = writer(chunks[i], keys)
        if fmt == "csl-json":  # the items of "[\n  {...},\n  {...}\n]\n", without the brackets
            text = ("[\n" if i == 0 else "") + text[2:-3] + ("\n]\n" if i == len(chunks) - 1 else "")
        return text + (join if i < len(chunks) - 1 else "")

    return [lambda i=i: part(i) for i in range(len(chunks))]  # type: ignore[misc]


def format_for_path(path: Path) -> str:
    """The format a file name asks for: .bib, .ris or .json; checked with its folder before
    anything is answered, so a typo in the folder does not cost the answer."""
    fmt = EXTENSIONS.get(path.suffix.lower())
    if fmt is None:
        choices = ", ".join(f"{ext} ({name})" for ext, name in EXTENSIONS.items())
        raise InputError(f"{path}: cannot tell the export format from the extension {path.suffix!r}",
                         f"name the file with one of: {choices}")
    folder = Path(path).parent
    if not folder.is_dir():
        raise InputError(f"{path}: the folder {folder} does not exist", "create it first, or name another file")
    if Path(path).is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"{path}: cannot write the export there", "name a file in a folder you can write to")
    return fmt


def write_export(papers: list[Paper], path: Path, index_papers: Iterable[Paper] = ()) -> str:
    """Write the papers to path in the format its extension names; returns that format."""
    path = Path(path)
    fmt = format_for_path(path)
    save(path, export(papers, fmt, index_papers))
    return fmt


def save(path: Path, text: str) -> None:
    """Write an export document whole or not at all (a temporary file renamed into place),
    with a clear error where it cannot be written; replacing a file says so."""
    path = Path(path)
    existed = path.exists()
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise InputError(f"{path}: cannot write the export ({exc.strerror or exc})",
                         "check that the folder exists and is writable") from None
    if existed:
        log.warning("replaced the earlier %s", path)
