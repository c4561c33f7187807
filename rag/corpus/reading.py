"""Reading abstract dumps into Paper records: file checks, layout detection, merging (what
`rag.corpus` gives, imported on first use)."""

from __future__ import annotations

import errno
import gzip
import io
import logging
import os
import re
import stat
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from rag.corpus import arxiv, bibtex, medline, ris, semantic_scholar
from rag.corpus.arxiv import Restrict
from rag.corpus.formats import split_arxiv_id
from rag.corpus.layouts import LAYOUT_HELP, LAYOUTS, detect
from rag.corpus.limits import MAX_ABSTRACT_CHARS
from rag.corpus.merge import merge_papers, where
from rag.corpus.paper import Paper, clean_doi, make_paper_id, real_date, sha
from rag.corpus.streams import damaged_gzip
from rag.errors import InputError, ParseError, Unreadable

__all__ = ["Paper", "FileResult", "Restrict", "read_all", "read_file", "expand_paths", "merge_papers", "unread_in", "where"]
log = logging.getLogger(__name__)


def _max_file_bytes() -> int:
    # rag.config validates RAG_MAX_FILE_MB and names it when bad (this layer may not import it);
    # here a bad value only must not crash the import.
    try:
        return max(1, int(os.environ.get("RAG_MAX_FILE_MB", "20"))) * 1024 * 1024
    except ValueError:
        return 20 * 1024 * 1024


MAX_FILE_BYTES = _max_file_bytes()
GZIP_MAGIC = b"\x1f\x8b"
SUFFIXES = {".txt", ".jsonl", ".json", ".ndjson", ".bib", ".ris", ".nbib", ".xml", ".gz", ".sqlite", ".pdf", ""}  # not .md: a README is no corpus


@dataclass
class FileResult:
    path: Path
    source: str  # as stored: relative to the working directory when inside it
    layout: str
    papers: list[Paper] = field(default_factory=list)
    problems: list[ParseError] = field(default_factory=list)
    digest: str = ""
    left_out: dict[str, int] = field(default_factory=dict)  # why -> how many records (no error)
    deleted: list[str] = field(default_factory=list)  # PMIDs a PubMed update file deletes
    note: str = ""  # what was read, when worth saying ("Zotero library, schema version 121")


def display_path(path: Path) -> str:
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.resolve().as_posix()


def expand_paths(paths: list[Path]) -> list[Path]:
    """Files named directly, and the dump files inside named directories, in a stable order."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir() and (p / "zotero.sqlite").is_file():  # a Zotero data directory
            out.append(p / "zotero.sqlite")
        elif p.is_dir():
            found = sorted(
                f for f in p.rglob("*")
                if f.is_file() and not f.name.startswith(".") and f.suffix.lower() in SUFFIXES
            )
            if not found:
                raise InputError(f"{p}: directory holds no abstract files", "point at .txt or .jsonl files")
            out.extend(found)
        elif p.exists():
            out.append(p)
        elif p.is_symlink():  # exists() is False for a dangling link and for a loop alike
            try:
                p.stat()
            except OSError as exc:
                why = "symbolic link loop" if exc.errno == errno.ELOOP else "dangling symbolic link"
                raise InputError(f"{p}: {why}", "point at the file itself") from None
        else:
            raise InputError(f"{p}: no such file or directory", "check the path")
    return out


def unread_in(paths: list[Path]) -> list[str]:
    """The files inside named folders that `expand_paths` leaves out for their kind (a .md, a
    .docx), each with the reason: a folder ingest names every file it did not read."""
    out = []
    for p in paths:
        if p.is_dir() and not (p / "zotero.sqlite").is_file():
            for f in sorted(p.rglob("*")):
                hidden = any(part.startswith(".") for part in f.relative_to(p).parts)
                if f.is_file() and not hidden and f.suffix.lower() not in SUFFIXES:
                    out.append(f"{display_path(f)}: not read ({f.suffix} files hold no format rag reads)")
    return out


def _decode(data: bytes, source: str) -> str:
    if not data.strip():
        raise ParseError(source, None, "file is empty", "point at a file with abstracts in it")
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise ParseError(
            source, None, "file is UTF-16 text, not UTF-8",
            f"convert it, e.g. `iconv -f utf-16 -t utf-8 {source}`",
        )
    if b"\x00" in data[:65536]:
        raise ParseError(source, None, "file is binary, not text", LAYOUT_HELP)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ParseError(
            source, line, f"invalid UTF-8 byte 0x{data[exc.start]:02x} at byte {exc.start}",
            f"convert the file to UTF-8, e.g. `iconv -f latin1 -t utf-8 {source}`",
        ) from None


def read_file(path: Path, restrict: Restrict | None = None, collection: str | None = None) -> FileResult:
    """Parse one file, keeping the records `restrict` keeps (and, in a Zotero library, those
    in `collection`). Raises ParseError for a file that cannot be read at all."""
    from rag.corpus.readers import open_stream

    source = display_path(path)
    _regular(path, source)  # before anything opens it: opening a FIFO blocks
    if _is_pdf(path):
        from rag.corpus import pdf

        _within_limit(path, source)
        return _finish(FileResult(path, source, pdf.LAYOUT), pdf.read_pdf(path, source), [], restrict)
    stream = open_stream(path, source, collection)
    if stream is not None:
        papers = list(stream.papers)
        result = FileResult(path, source, stream.layout, left_out=stream.left_out,
                            deleted=stream.deleted, note=stream.note)
        return _finish(result, papers, stream.problems, restrict)
    if arxiv.is_snapshot(path):  # streamed: no size limit, only the kept records in memory
        papers, problems, left_out = arxiv.read_snapshot(path, source, restrict)
        return _finish(FileResult(path, source, arxiv.LAYOUT, left_out=left_out), papers,
                       problems, restrict)
    text = _read_text(path, source)
    if bibtex.detect(text):
        papers, problems, no_abstract = bibtex.parse_bibtex(text, source)
        return _finish(FileResult(path, source, bibtex.LAYOUT, digest=sha(text), left_out=no_abstract),
                       papers, problems, restrict)
    for reader, parse in ((ris, ris.parse_ris), (medline, medline.parse_medline)):
        if reader.detect(text):
            papers, problems, no_abstract = parse(text, source)
            return _finish(FileResult(path, source, reader.LAYOUT, digest=sha(text), left_out=no_abstract),
                           papers, problems, restrict)
    layout = detect(text)
    if layout is None:
        raise ParseError(source, None, "content is in no known layout", LAYOUT_HELP)
    papers, problems = LAYOUTS[layout](text, source)
    return _finish(FileResult(path, source, layout, digest=sha(text)), papers, problems, restrict)


def _is_pdf(path: Path) -> bool:
    from rag.corpus import pdf

    try:
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as fh:
            return stat.S_ISREG(os.fstat(fh.fileno()).st_mode) and pdf.detect(fh.read(1024))
    except OSError:
        return False  # said by the reader that opens it next


def _within_limit(path: Path, source: str) -> None:
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise ParseError(source, None, f"file is {size / 2**20:.0f} MB; the limit is {MAX_FILE_BYTES // 2**20} MB",
                         "split it into smaller files, or raise RAG_MAX_FILE_MB")


def _regular(path: Path, source: str) -> None:
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise ParseError(source, None, f"cannot read file ({exc.strerror})", "check the path") from None
    if not stat.S_ISREG(mode):
        raise ParseError(source, None, "cannot read file: not a regular file (a FIFO, device, socket or directory)",
                         "give a regular file holding abstracts")


def _read_text(path: Path, source: str) -> str:
    try:
        # O_NONBLOCK: a file swapped for a FIFO after the check above must not hang the open;
        # the read is capped by bytes read, since st_size is 0 for /dev/zero and pipes.
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise ParseError(source, None, "not a regular file", "give a regular file")
            if st.st_size > MAX_FILE_BYTES:
                raise ParseError(
                    source, None, f"file is {st.st_size / 2**20:.0f} MB; the limit is "
                    f"{MAX_FILE_BYTES // 2**20} MB", "split it into smaller files, or raise RAG_MAX_FILE_MB")
            data = fh.read(MAX_FILE_BYTES + 1)
        if data[:2] == GZIP_MAGIC:  # a .bib.gz, a .txt.gz: read as the streamed formats are
            data = _gunzip(data, source)
        if len(data) > MAX_FILE_BYTES:
            raise ParseError(
                source, None, f"file is over the limit of {MAX_FILE_BYTES // 2**20} MB",
                "split it into smaller files, or raise RAG_MAX_FILE_MB",
            )
    except OSError as exc:
        raise ParseError(source, None, f"cannot read file ({exc.strerror})", "check its permissions") from None
    return _decode(data, source)


def _gunzip(data: bytes, source: str) -> bytes:
    """The content of gzip `data`, at most one byte over the file size limit (a gzip bomb
    stops there)."""
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as gz:
            content = gz.read(MAX_FILE_BYTES + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise damaged_gzip(source, exc) from None
    if b"\x00" in content[:65536]:
        raise ParseError(source, None, "gzip-compressed file whose content is binary, not text",
                         "unpack it first (a .tar.gz is an archive of files)")
    return content


def _finish(result: FileResult, papers: list[Paper], problems: list[ParseError],
            restrict: Restrict | None) -> FileResult:
    source = result.source
    at = str(result.path.resolve())
    for i, paper in enumerate(papers, 1):
        paper.source, paper.position, paper.located = source, i, {source: at}
        paper.format = paper.format or result.layout
        if len(paper.abstract) > MAX_ABSTRACT_CHARS:
            problems.append(ParseError(
                source, paper.line,
                f"abstract is {len(paper.abstract):,} characters; at most {MAX_ABSTRACT_CHARS:,} expected",
                "is this really one abstract? check the file's layout",
            ))
    papers = [p for p in papers if len(p.abstract) <= MAX_ABSTRACT_CHARS]
    for paper in papers:
        _checked_fields(paper)
        infer_metadata(paper)
    if restrict and restrict.active() and result.layout != arxiv.LAYOUT:
        kept = [p for p in papers if restrict.accepts(p)]
        if len(kept) < len(papers):
            result.left_out[f"records outside {restrict.describe()}"] = len(papers) - len(kept)
        papers = kept
    if not papers and not problems and not result.left_out and not result.deleted:
        problems.append(ParseError(source, None, "no abstracts found", LAYOUT_HELP))
    result.papers, result.problems = papers, sorted(problems, key=lambda e: e.line or 0)
    return result


def _checked_fields(paper: Paper) -> None:
    """A DOI that is no DOI, or a date that is no date, is dropped with a warning: written
    verbatim into an export, such a value added fields or records to it."""
    if paper.doi and (doi := clean_doi(paper.doi)) != paper.doi:
        if doi is None:
            log.warning("%s: DOI %r is not a DOI (10.PREFIX/SUFFIX, no spaces or braces); left out",
                        where(paper), paper.doi[:80])
        paper.doi = doi
    if paper.date and not real_date(paper.date):
        log.warning("%s: date %r is not a date (YYYY-MM-DD); left out", where(paper), paper.date[:40])
        paper.date = None


# Bounded: with `*` a long run of capitals in a comment line took quadratic time.
_VENUE = re.compile(r"\b([A-Z][A-Za-z]{0,20}[A-Z][A-Za-z\-]{0,20})\s?'?(\d{4}|\d{2})\b")


def infer_metadata(paper: Paper) -> None:
    """Fill venue, year and arXiv id from what the record already says (journal ref,
    comments, an arXiv DOI, the arXiv id)."""
    arxiv_doi = re.match(r"10\.48550/arxiv\.(.+)$", paper.doi or "", re.IGNORECASE)
    split = split_arxiv_id(arxiv_doi.group(1)) if arxiv_doi and not paper.arxiv_id else None
    if split and not split[1]:  # a preprint known by its DOI alone (Zotero's BibTeX of a preprint)
        if paper.paper_id == make_paper_id(None, paper.title, paper.abstract):
            paper.paper_id = split[0]  # the id is the arXiv id whenever one is known
        paper.arxiv_id = split[0]
    if not paper.venue:
        for text in filter(None, [paper.journal_ref, *paper.comments]):
            m = _VENUE.search(text)
            if m and m.group(1) not in {"arXiv", "ACM", "IEEE"}:
                paper.venue = m.group(1).upper()
                yy = m.group(2)
                if not paper.year:
                    paper.year = int(yy) if len(yy) == 4 else 2000 + int(yy)
                break
    # the id's YYMM: 2301.00001 is January 2023 (new-style ids began in 2007), old-style
    # hep-th/9901001 January 1999 (they ran from 1991 to 2007)
    ym = paper.arxiv_id and (re.match(r"(\d{2})\d{2}\.", paper.arxiv_id) or re.search(r"/(\d{2})\d{5}$", paper.arxiv_id))
    if not paper.year and ym:
        yy = int(ym.group(1))
        paper.year = yy + (1900 if yy >= 91 else 2000)


def read_all(paths: list[Path], skip_bad: bool, restrict: Restrict | None = None,
             collection: str | None = None) -> tuple[list[FileResult], list[str], list[str]]:
    """Parse every file first; bad input stops everything unless skip_bad. Also: the files
    not read, each with the reason (of a kind rag does not read, a PDF with no abstract)."""
    results: list[FileResult] = []
    skipped: list[str] = []
    unread = unread_in(paths)
    files = list(expand_paths(paths))
    for path in files:
        try:
            result = read_file(path, restrict, collection)
        except Unreadable as exc:
            if len(files) == 1:
                raise
            unread.append(exc.message)  # named and passed over: the folder's others are read
            continue
        except ParseError as exc:
            if not skip_bad and len(files) > 1:
                # one unreadable file (a README.txt among the exports) stops the whole folder:
                # say how to ingest the others without it
                exc.hint = "; or ".join(filter(None, [exc.hint, (
                    f"pass --skip-bad to ingest the other {len(files) - 1} file(s) without it")]))
            if not skip_bad:
                raise
            skipped.append(str(exc))
            continue
        if result.problems:
            if not skip_bad:
                first = result.problems[0]
                raise ParseError(
                    result.source, first.line,
                    f"{len(result.papers)} good and {len(result.problems)} bad record(s); first: "
                    + first.message.split(": ", 1)[-1],
                    "fix the file, or pass --skip-bad to ingest the good records only",
                )
            skipped.extend(str(p) for p in result.problems)
        results.append(result)
    if collection and not any(r.layout == "zotero" for r in results):
        raise InputError(f"--collection {collection!r} names a Zotero collection, and no Zotero "
                         "library was among the files", "point at zotero.sqlite or the Zotero data directory")
    semantic_scholar.join(results)  # dataset papers meet their abstracts from other files
    return results, skipped, unread
