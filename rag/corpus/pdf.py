"""A paper's PDF: its title, authors, year, DOI or arXiv id and abstract, from its first pages.

The text and its layout (each line's position and font size) come from pdfminer.six (MIT),
which places words by their characters' positions: PDFs that position each glyph (many
journals') read with their spaces, where a content-stream reader runs words together. What a
paper's first page *means* is read here by hand, since no library here does it without a
model (GROBID is a Java service): the title is the largest type near the top of page one (or
the document's own title, when the page holds it), the abstract what follows an "Abstract"
heading in its column, up to the next heading, or, without a heading, the first paragraph of
prose after the title and authors.

Bounded like the other readers: at most RAG_MAX_FILE_MB, the first `PAGES` pages, at most
`MAX_SECONDS` of layout analysis; a PDF that cannot be read, has no text (a scan) or no
abstract is refused with the reason, by name.
"""

from __future__ import annotations

import re
import time
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag.corpus.paper import Paper, make_paper_id
from rag.corpus.text import make_label
from rag.errors import Unreadable

LAYOUT = "pdf"
MAGIC = b"%PDF-"
PAGES = 2  # an abstract is on the first page, or runs onto the second
MAX_SECONDS = 20.0  # of layout analysis per file (a page of a real paper takes ~0.15 s)
MAX_CHARS = 60_000  # per page: a dense page of a paper holds ~8,000
MIN_WORDS, MAX_WORDS = 30, 600  # an abstract's length, in words

_HEADING = re.compile(r"^\s*(?:a\s?b\s?s\s?t\s?r\s?a\s?c\s?t|summary)\b\s*([:.—–-])?\s*", re.I)
# What ends an abstract: the next section, keywords and the like, a licence or a footnote.
_STOP = re.compile(
    r"^\s*(?:(?:\d+|[IVX]+)\s*\.?\s+)?(?:introduction|background(?=\s*$)|keywords?|key\s*words|"
    r"index\s+terms|ccs\s+concepts|general\s+terms|acm\s+reference|subjects?|"
    r"significance(?:\s+statement)?)\b"
    r"|^\s*(?:©|\(c\)|copyright\b|\*?\s*corresponding\s+author|preprint\s+submitted|"
    r"e-?mail\s*:|received\s*:?\s+\d|accepted\s*:?\s+\d|this\s+article\s+is\s+licensed)", re.I)
_RIGHTS = re.compile(r"\ball\s+rights\s+reserved\b|\bpublished\s+by\s+elsevier\b|©\s*(?:19|20)\d\d", re.I)
_NOT_PROSE = re.compile(r"@|\buniversity\b|\binstitute\b|\bdepartment\b|\bcreative\s+commons\b|"
                        r"\blicen[cs]e\b|©|\bcopyright\b|\bdoi\.org\b|https?://|\bcorrespond", re.I)
_DOI = re.compile(r"\b(10\.\d{4,9}/[^\s\"<>()]+[^\s\"<>().,;:])")
_ARXIV = re.compile(r"\barXiv\s*:\s*(\d{4}\.\d{4,5}|[a-z-]+(?:\.[A-Z]{2})?/\d{7})(?:v\d+)?", re.I)
_STAMP = re.compile(r"^\s*arXiv\s*:", re.I)  # arXiv's margin stamp, in large type
_YEAR = re.compile(r"(?<!\d)(19[89]\d|20[0-4]\d)(?!\d)")
_MARKS = re.compile(r"[\d*∗†‡§¶#⇑,]+$")  # affiliation and note marks after an author's name
_AUTHOR = re.compile(r"^[A-Z][\w'’.-]*(?:\s+[A-Z][\w'’.-]*){1,4}$")
_CID = re.compile(r"\(cid:\d+\)")  # a glyph the PDF maps to no character (often ©)
_INNER_HYPHEN = re.compile(r"(\w)- (?=[a-z])(\w)")  # "Post- transcriptional" set with a space
_LABEL = re.compile(r"^(?:background|methods?|results?|conclusions?|objectives?|aims?|purpose|"
                    r"findings|interpretation|context|design|motivation|availability)\b\s*[:.]?\s+[A-Z]", re.I)
_ORG = re.compile(r"\b(?:inc|ltd|llc|corp|gmbh|lab|labs|laboratory|research|preprint|team|group|school|"
                  r"college|hospital|cent(?:er|re)|faculty|academy|sciences?|engineering)\b\.?", re.I)
_BAD_META = re.compile(r"^(?:untitled|microsoft word|document\d*|paper\d*)\b|\.(?:pdf|docx?|tex|dvi)$", re.I)


@dataclass
class _Line:
    text: str
    size: float
    x0: float
    x1: float
    top: float  # distance from the page's top (pdfminer's y grows upwards)
    page: int
    box: int  # the text box it belongs to
    bare: str = ""  # the text without its superscripts (the marks after authors' names)


def detect(head: bytes) -> bool:
    return MAGIC in head[:1024]


def _lines(path: Path, source: str) -> tuple[list[_Line], dict[str, Any], float, str]:
    """Every horizontal line of the first pages, in reading order, the document's info, the
    page height and the text set sideways (arXiv's margin stamp)."""
    from pdfminer.layout import LAParams, LTChar, LTTextBoxHorizontal, LTTextLineHorizontal
    from pdfminer.pdfdocument import PDFDocument
    from pdfminer.pdfinterp import PDFPageInterpreter, PDFResourceManager
    from pdfminer.pdfpage import PDFPage
    from pdfminer.pdfparser import PDFParser

    started = time.monotonic()
    out: list[_Line] = []
    info: dict[str, Any] = {}
    height = 792.0
    sideways: list[str] = []
    with path.open("rb") as fh:
        parser = PDFParser(fh)
        doc = PDFDocument(parser)
        for entry in doc.info or []:
            info.update({k: v for k, v in entry.items() if isinstance(k, str)})
        manager = PDFResourceManager(caching=True)
        device = _bounded()(manager, laparams=LAParams())
        device.source, device.started = source, started
        interpreter = PDFPageInterpreter(manager, device)
        box_no = 0
        for page_no, page in enumerate(PDFPage.create_pages(doc)):
            if page_no >= PAGES:
                break
            if time.monotonic() - started > MAX_SECONDS:
                raise Unreadable(source, None, f"the PDF's first pages took over {MAX_SECONDS:g} s to lay out",
                                 "add the paper from its BibTeX or Zotero entry instead")
            interpreter.process_page(page)
            layout = device.get_result()
            if page_no == 0:
                height = float(layout.height) or height
            for element in layout:
                if not isinstance(element, LTTextBoxHorizontal):
                    continue
                box_no += 1
                for line in element:
                    if not isinstance(line, LTTextLineHorizontal):
                        continue
                    chars = [c for c in line if isinstance(c, LTChar) and c.upright]
                    sideways += [c.get_text() for c in line if isinstance(c, LTChar) and not c.upright]
                    text = _clean(line.get_text())
                    if not chars or not text:
                        continue
                    size = sorted(c.size for c in chars)[len(chars) // 2]
                    bare = _clean("".join(c.get_text() for c in line if not isinstance(c, LTChar)
                                          or c.size >= 0.75 * size))
                    out.append(_Line(text, round(size, 1), line.x0, line.x1,
                                     float(layout.height) - line.y1, page_no, box_no, bare))
    return out, info, height, "".join(sideways)


def _bounded() -> type:
    """pdfminer's page aggregator, stopped (Unreadable) past MAX_SECONDS or MAX_CHARS a page:
    a hostile PDF's content stream is refused while it is read, not after."""
    from pdfminer.converter import PDFPageAggregator

    class Bounded(PDFPageAggregator):  # type: ignore[misc]
        source, started, chars = "", 0.0, 0

        def begin_page(self, page: Any, ctm: Any) -> None:
            self.chars = 0
            super().begin_page(page, ctm)

        def render_char(self, *args: Any, **kwargs: Any) -> float:
            self.chars += 1
            if self.chars > MAX_CHARS:
                raise Unreadable(self.source, None, f"a page of the PDF holds over {MAX_CHARS:,} characters",
                                 "add the paper from its BibTeX or Zotero entry instead")
            if self.chars % 2000 == 0 and time.monotonic() - self.started > MAX_SECONDS:
                raise Unreadable(self.source, None, f"the PDF's first pages took over {MAX_SECONDS:g} s to read",
                                 "add the paper from its BibTeX or Zotero entry instead")
            return super().render_char(*args, **kwargs)  # type: ignore[no-any-return]

    return Bounded


def _clean(text: str) -> str:
    text = _CID.sub("", unicodedata.normalize("NFKC", text).replace("\u00ad", ""))
    return _INNER_HYPHEN.sub(r"\1-\2", " ".join(text.split()))


def _meta(info: dict[str, Any], key: str) -> str:
    value = info.get(key)
    if isinstance(value, bytes):
        from pdfminer.utils import decode_text

        value = decode_text(value)
    return _clean(value) if isinstance(value, str) else ""


def _squash(text: str) -> str:
    return re.sub(r"[\W_]+", "", text.lower())


def _title(lines: list[_Line], info: dict[str, Any], height: float) -> tuple[str, list[_Line]]:
    """The title and the lines it was read from (none: the document's own title)."""
    start = min((ln.page for ln in lines), default=0)  # the first page with text on it
    first = [ln for ln in lines if ln.page == start and ln.top < 0.6 * height and not _STAMP.match(ln.text)]
    for size in sorted({ln.size for ln in first}, reverse=True):
        group = [ln for ln in first if abs(ln.size - size) < 0.6]
        # the largest type's first run of lines close together, of a few words at least
        run = [group[0]]
        for ln in group[1:]:
            if ln.top - run[-1].top > 2.5 * size:
                break
            run.append(ln)
        text = " ".join(ln.text for ln in run)
        if len(text.split()) >= 3 and len(text) <= 400:
            text = _body(run)
            meta = _meta(info, "Title")
            # the document's own title where it is the page's (its spacing is the author's,
            # the page's may be set letter by letter)
            if meta and not _BAD_META.search(meta) and len(meta.split()) >= 3 and \
                    (_squash(meta) in _squash(text) or _squash(text) in _squash(meta)):
                return meta, run
            return text, run
    meta = _meta(info, "Title")
    return (meta if meta and not _BAD_META.search(meta) and len(meta.split()) >= 2 else ""), []


def _body(lines: list[_Line]) -> str:
    """Lines as running text: a word broken at a line's end is joined again."""
    out = ""
    for ln in lines:
        if out.endswith("-") and ln.text[:1].islower():
            out = out[:-1] + ln.text
        elif out.endswith("-") and out[-2:-1].isalpha() and ln.text[:1].isupper():
            out += ln.text  # "Restriction-" / "Modification"
        else:
            out = f"{out} {ln.text}" if out else ln.text
    return out.strip()


def _words(text: str) -> int:
    return len(text.split())


def _ended(text: str) -> bool:
    return _words(text) >= MIN_WORDS and text.rstrip()[-1:] in ".!?)]"


def _stops(text: str) -> bool:
    """Does this line begin what follows an abstract (a section, keywords, a licence)?"""
    squashed = re.sub(r"\s+", "", text.lower())
    return bool(_STOP.match(text) or _RIGHTS.search(text)) or squashed.startswith(("graphicalabstract", "keywords"))


def _after_heading(lines: list[_Line]) -> str:
    """The abstract under an "Abstract" heading: the lines of the heading's column below it,
    to the next heading (or the length an abstract has at most)."""
    for i, head in enumerate(lines):
        m = _HEADING.match(head.text)
        if not m or (not m.group(1) and head.text[m.end():][:1].islower()):
            continue  # "Abstract interpretation is ...": a sentence, not the heading
        body: list[_Line] = []
        rest = head.text[m.end():].strip()
        if rest:
            body.append(_Line(rest, head.size, head.x0, head.x1, head.top, head.page, head.box))
        left, right = head.x0, max(head.x1, head.x0 + 120)
        for ln in lines[i + 1:]:
            same_column = ln.x0 < right and ln.x1 > left - 20 or ln.page > head.page
            if not same_column or (ln.page == head.page and ln.top < head.top - 1):
                continue
            if _stops(ln.text) and body:
                break
            if body and ln.box != body[-1].box and _ended(_body(body)) and not _LABEL.match(ln.text):
                break  # the abstract's paragraph ended with its box: what follows is another
            if _stops(ln.text) or (not body and _words(ln.text) <= 2 and not ln.text.endswith(".")):
                continue  # a section's number or heading set beside the abstract's
            body.append(ln)
            right = max(right, ln.x1)
            left = min(left, ln.x0)
            if _words(_body(body)) >= MAX_WORDS:
                break
        text = _body(body)
        if _words(text) >= MIN_WORDS // 2:
            return text
    return ""


def _first_prose(lines: list[_Line], title_lines: list[_Line]) -> str:
    """Without a heading: the first text box after the title that reads as a paragraph."""
    after = max((ln.box for ln in title_lines), default=0)
    boxes: dict[int, list[_Line]] = {}
    for ln in lines:
        if ln.box > after:
            boxes.setdefault(ln.box, []).append(ln)
    for box in boxes.values():
        text = _body(box)
        if _words(text) >= MIN_WORDS and not _NOT_PROSE.search(text[:300]) and not _stops(text) \
                and text.count(".") >= 2:
            return text
    return ""


def _authors(lines: list[_Line], title_lines: list[_Line]) -> list[str]:
    """The names on the lines just below the title (up to the first line that is not names)."""
    if not title_lines:
        return []
    at = lines.index(title_lines[-1]) + 1
    names: list[str] = []
    for ln in lines[at: at + 8]:
        if _HEADING.match(ln.text) or _words(ln.text) > 40:
            break
        if _NOT_PROSE.search(ln.text) or _ORG.search(ln.text):  # an affiliation: names end
            if names:
                break
            continue
        # Read without the superscripts ("Xiao Fan^a"), unless they were all that parted the
        # names ("Yichen He*1 Guanhua Huang*1").
        bare, marked = _names_in(ln.bare or ln.text), _names_in(ln.text)
        found = marked if len(marked) > len(bare) or (
            len(marked) >= len(bare) and any(len(n.split()) >= 4 for n in bare)) else bare
        if not found:
            if names:
                break
            continue
        names += found
    return names[:50]


def _names_in(text: str) -> list[str]:
    parts = [_MARKS.sub("", p).strip(" ,*") for p in re.split(r",|;|\band\b|&|(?<=\w)[\d∗*†‡§¶]+\s+", text)]
    return [p for p in parts if _AUTHOR.match(p) and not _ORG.search(p) and not p.isupper()]


def _cut(text: str) -> str:
    """At most MAX_WORDS words, ended at a sentence."""
    words = text.split()
    if len(words) <= MAX_WORDS:
        return text
    short = " ".join(words[:MAX_WORDS])
    end = short.rfind(". ")
    return short[: end + 1] if end > 0 else short


def read_pdf(path: Path, source: str) -> list[Paper]:
    """The paper of one PDF; ParseError (naming the file) when it has none to give."""
    from pdfminer.pdfparser import PDFSyntaxError
    from pdfminer.psparser import PSException

    try:
        lines, info, height, sideways = _lines(path, source)
    except Unreadable:
        raise
    except (PDFSyntaxError, PSException) as exc:
        raise Unreadable(source, None, f"not a readable PDF ({type(exc).__name__}: {str(exc)[:80]})",
                         "open it in a PDF viewer to check it, or add the paper from its BibTeX entry") from None
    except RecursionError:
        raise Unreadable(source, None, "the PDF nests its objects too deeply to read",
                         "add the paper from its BibTeX or Zotero entry instead") from None
    except Exception as exc:  # noqa: BLE001 - pdfminer raises many kinds for a broken or hostile file
        if "encrypt" in type(exc).__name__.lower() or "password" in str(exc).lower():
            raise Unreadable(source, None, "the PDF is encrypted", "save a copy without a password") from None
        raise Unreadable(source, None, f"not a readable PDF ({type(exc).__name__}: {str(exc)[:80]})",
                         "open it in a PDF viewer to check it, or add the paper from its BibTeX entry") from None
    if sum(_words(ln.text) for ln in lines) < 3:
        raise Unreadable(source, None, "the PDF has no text to read on its first pages (a scan?)",
                         "run OCR on it first (e.g. `ocrmypdf`), or add the paper from its BibTeX entry")
    title, title_lines = _title(lines, info, height)
    abstract = _after_heading(lines) or _first_prose(lines, title_lines)
    if not abstract:
        raise Unreadable(source, None, "no abstract found on the PDF's first pages",
                         "add the paper from its BibTeX or Zotero entry, which carries the abstract")
    abstract = _cut(abstract)
    text = " ".join(ln.text for ln in lines if ln.page <= lines[0].page + 1)
    listed = [m.group(1) for key in info for m in _DOI.finditer(_meta(info, key)) if "doi" in key.lower()]
    doi = next(iter(listed), None) or next((m.group(1) for m in _DOI.finditer(text)), None)
    arxiv = _ARXIV.search(text) or _ARXIV.search(sideways) or _ARXIV.search(sideways[::-1])
    arxiv_id = arxiv.group(1) if arxiv else None
    year = int("20" + arxiv_id[:2]) if arxiv_id and arxiv_id[:4].isdigit() else None
    if year is None:
        years = [int(y) for y in _YEAR.findall(" ".join(ln.text for ln in lines[:60]))]
        year = max(years) if years else None
    return [Paper(paper_id=make_paper_id(arxiv_id, title or None, abstract), abstract=abstract,
                  title=title or None, label=make_label(title or None, abstract),
                  authors=_authors(lines, title_lines), arxiv_id=arxiv_id, doi=doi, year=year, line=1)]
