"""Files read as streams, whatever their size: gzip undone on the fly, the format told from
the first bytes of the content, and JSON read one line (or one API response) at a time.

What a streamed reader hands back is a `Stream`: the papers (a generator: only the caller
decides what is kept), and, filled while it is consumed, the problems, the records left out
and why, and the PMIDs a PubMed update file deletes.
"""

from __future__ import annotations

import codecs
import gzip
import itertools
import json
import re
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, cast

from rag.corpus.limits import (
    MAX_JSON_VALUES,
    MAX_RECORD_BYTES,
    MAX_XML_ELEMENTS,
    bounded_lines,
    json_values,
    megabytes,
)
from rag.corpus.paper import Paper
from rag.errors import ParseError

PEEK = 1 << 16
MAX_PROBLEMS = 1000  # a file that is not what it looked like stops here
SQLITE_MAGIC = b"SQLite format 3\x00"
BOM = codecs.BOM_UTF8  # text the way Windows tools save it: never a reason to misread a file


@dataclass
class Stream:
    layout: str
    papers: Iterator[Paper]
    problems: list[ParseError] = field(default_factory=list)
    left_out: dict[str, int] = field(default_factory=dict)
    deleted: list[str] = field(default_factory=list)  # PMIDs (PubMed DeleteCitation)
    note: str = ""  # what was read, said once ("Zotero schema 121")

    def leave_out(self, why: str, n: int = 1) -> None:
        self.left_out[why] = self.left_out.get(why, 0) + n

    def take(self, no_abstract: str, make: Callable[..., Paper | None], *record: Any) -> Paper | None:
        """The paper `make(*record)` reads from one record: a record it cannot read is a
        problem of the stream, one without an abstract (None) is left out, counted under
        `no_abstract`."""
        try:
            paper = make(*record)
        except ParseError as exc:
            self.problems.append(exc)
            return None
        if paper is None:
            self.leave_out(no_abstract)
        return paper

    @classmethod
    def of(cls, layout: str, produce: Callable[[Stream], Iterator[Paper]]) -> Stream:
        """A stream whose papers `produce` yields, reporting into the stream itself."""
        stream = cls(layout, iter(()))
        stream.papers = produce(stream)
        return stream


Make = Callable[[dict[str, Any], str, int], "Paper | None"]


def json_stream(layout: str, path: Path, source: str, accepts: Callable[[Any], bool], make: Make,
                what: str, empty: str) -> Stream:
    """The papers of a JSON file's records: a record `accepts` refuses is a problem (`what`
    names what was expected), one `make` turns into None is left out (`empty` says why)."""

    def produce(stream: Stream) -> Iterator[Paper]:
        for line, n, obj in json_records(path, source, stream):
            # a line holding a page of several records: the error names the record
            at = f"record {n} on this line: " if n else ""
            if obj is None:  # Semantic Scholar's /paper/batch answers an id it has no paper for so
                stream.leave_out("null records (ids the API found no paper for)")
                continue
            if not accepts(obj):
                stream.problems.append(ParseError(source, line, f"{at}not {what}"))
                continue
            try:
                paper = make(obj, source, line)
            except ParseError as exc:
                stream.problems.append(ParseError(source, line, at + exc.message.split(": ", 1)[-1], exc.hint)
                                       if at else exc)
                continue
            except (AttributeError, TypeError) as exc:  # a field of another JSON type
                stream.problems.append(ParseError(source, line, f"{at}{what} with a field of the wrong type ({exc})"))
                continue
            if paper is None:
                stream.leave_out(empty)
            else:
                yield paper

    return Stream.of(layout, produce)


def open_binary(path: Path, source: str) -> IO[bytes]:
    """The file's content, gunzipped when it is gzip (told from its first bytes)."""
    try:
        with path.open("rb") as fh:
            gz = fh.read(2) == b"\x1f\x8b"
        return cast(IO[bytes], gzip.open(path, "rb") if gz else path.open("rb"))
    except OSError as exc:
        raise ParseError(source, None, f"cannot read file ({exc.strerror})", "check its permissions") from None


def damaged_gzip(source: str, exc: BaseException) -> ParseError:
    return ParseError(source, None, f"damaged gzip file ({exc})", "download the file again")


class _Oversized(Exception):
    """A record past the caps of rag.corpus.limits, found while it is read."""


class _Metered:
    """The file as iterparse reads it (16 KB at a time), counting the bytes since the last
    record ended: expat builds a text node or a tag whole before any event comes, so a 200 MB
    element is only stopped here, as its bytes are read."""

    def __init__(self, fh: IO[bytes]) -> None:
        self.fh, self.done, self.record_from = fh, 0, 0

    def read(self, n: int = -1) -> bytes:
        data = self.fh.read(n if n >= 0 else PEEK)
        self.done += len(data)
        if self.done - self.record_from > MAX_RECORD_BYTES:
            raise _Oversized
        return data


def xml_elements(path: Path, source: str, stream: Stream, tags: frozenset[str], *,
                 no_entities: str, redo: str, label: Callable[[Any], str] | None = None) -> Iterator[Any]:
    """Each element of `tags` as its end tag is read (iterparse: a file of any size in little
    memory), dropped from the tree once the caller has taken it. XML that cannot be read is a
    problem of the stream (`redo`: what to do, as "download the file again"); entity
    declarations and external references are refused (defusedxml; `no_entities`: the hint).
    A record over MAX_RECORD_BYTES or MAX_XML_ELEMENTS is refused as it grows, and reading
    stops there (named by its place, and by `label`: what it says it is, as its PMID)."""
    from defusedxml import DefusedXmlException
    from defusedxml.ElementTree import ParseError as XmlError
    from defusedxml.ElementTree import iterparse

    n, current = 0, None  # records begun, and the one being read
    try:
        with open_binary(path, source) as fh:
            root = None
            meter, elements = _Metered(fh), 0
            for event, elem in iterparse(meter, events=("start", "end")):
                if event == "start":
                    root = elem if root is None else root
                    if elem.tag in tags:
                        n, current = n + 1, elem
                    elements += 1
                    if elements > MAX_XML_ELEMENTS:
                        raise _Oversized
                elif elem.tag in tags:
                    yield elem
                    if root is not None:
                        root.clear()  # the element and the root's reference to it
                    meter.record_from, elements, current = meter.done, 0, None
    except _Oversized:
        what = f"record {n + 1}" if current is None else (
            f"<{current.tag.rsplit('}', 1)[-1]}> number {n}")
        said = label(current) if current is not None and label else ""
        stream.problems.append(ParseError(
            source, None, f"{what}{f' ({said})' if said else ''} is over {megabytes(MAX_RECORD_BYTES)} or "
            f"{MAX_XML_ELEMENTS:,} elements: refused as it was read, and the file with it from there",
            f"a record is a few KB: {redo}"))
    except DefusedXmlException as exc:
        raise ParseError(source, None, f"XML with entity declarations or external references refused ({exc})",
                         no_entities) from None
    except XmlError as exc:
        line = getattr(exc, "position", (None,))[0]
        stream.problems.append(ParseError(source, line, f"XML that cannot be read ({exc})",
                                          f"{redo}; it may be truncated"))
    except (OSError, EOFError) as exc:
        stream.problems.append(damaged_gzip(source, exc))


def head(path: Path, source: str) -> bytes:
    """The first PEEK bytes of the content (gunzipped), without a UTF-8 byte-order mark."""
    try:
        with open_binary(path, source) as fh:
            return fh.read(PEEK).removeprefix(BOM)
    except (OSError, EOFError, zlib.error) as exc:
        raise damaged_gzip(source, exc) from None


def first_json(data: bytes) -> Any:
    """The first JSON value of `data`: its first non-blank line, or None."""
    for raw in data.splitlines():
        if raw.strip():
            try:
                return json.loads(raw.decode("utf-8-sig", "replace"))
            except (ValueError, RecursionError):
                return None
    return None


def _page_key(value: Any) -> str | None:
    """The member of an API response that lists its records: OpenAlex's `results`, Semantic
    Scholar's `data`."""
    if isinstance(value, dict):
        for key in ("results", "data"):
            if isinstance(value.get(key), list):
                return key
    return None


def unwrap(value: Any) -> list[Any]:
    """An API response's records: OpenAlex's `results`, Semantic Scholar's `data`, a list,
    or the object itself."""
    key = _page_key(value)
    if key is not None:
        return list(value[key])
    return value if isinstance(value, list) else [value]


def _why(exc: Exception) -> str:
    """What the json module found wrong, and at which column (the message names the line)."""
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg.removesuffix(' at')} at column {exc.colno}"  # "Unterminated string starting at"
    return str(exc)[:80]


_TOO_BIG = object  # the type _json_type gives a line over the caps: read as JSON Lines, refused there


def _json_type(raw: bytes | None) -> type | None:
    """The type of the JSON value `raw` holds; None when it holds none."""
    if raw is None or json_values(raw) > MAX_JSON_VALUES:
        return _TOO_BIG
    try:
        return type(json.loads(raw))
    except (ValueError, RecursionError):
        return None


def _oversized(source: str, no: int, raw: bytes | None) -> ParseError | None:
    """Why the line `raw` (None: over MAX_RECORD_BYTES, not read) is not parsed, if it is not."""
    if raw is None:
        size = f"over {megabytes(MAX_RECORD_BYTES)}"
    elif json_values(raw) > MAX_JSON_VALUES:
        size = f"over {MAX_JSON_VALUES:,} JSON values"
    else:
        return None
    return ParseError(source, no, f"line is {size}: refused before it was read whole",
                      "a record is a few KB: split an API page into JSON Lines, one record per line")


def json_records(path: Path, source: str, stream: Stream) -> Iterator[tuple[int, int, Any]]:
    """(line, n, record) for each record of a JSON Lines file, or of a file that is one JSON
    document (pretty-printed API output), where each record's line is the one it starts on.
    A line may hold an API response with several records: n numbers them (0 for a line of one).
    A line over the caps of rag.corpus.limits is a problem, never read whole."""
    try:
        with open_binary(path, source) as fh:
            lines = enumerate(bounded_lines(fh), 1)
            first: tuple[int, bytes | None] = (0, b"")
            for no, raw in lines:
                if no == 1 and raw is not None:
                    raw = raw.removeprefix(BOM)
                if raw is None or raw.strip():
                    first = (no, raw)
                    break
            ahead: list[tuple[int, bytes | None]] = []
            if first[0] and _json_type(first[1]) is None:
                # One document over many lines, or JSON Lines whose first line is bad? The next
                # lines tell: in JSON Lines most are records of their own, in a document few are.
                size = 0
                for no, raw in itertools.islice(lines, 10):
                    ahead.append((no, raw))
                    size += MAX_RECORD_BYTES if raw is None else len(raw)
                    if size > MAX_RECORD_BYTES:
                        break
                sample = [_json_type(raw) for _, raw in ahead if raw is None or raw.strip()]
                if 2 * sum(t in (dict, _TOO_BIG) for t in sample) <= len(sample):
                    begun = [raw for _, raw in [first, *ahead] if raw is not None]
                    yield from _document(begun, fh, first[0] - 1, source)
                    return
            for no, raw in itertools.chain([first] if first[0] else [], ahead, lines):
                if raw is not None and not raw.strip():
                    continue
                refused = _oversized(source, no, raw)
                try:
                    if refused:
                        raise refused
                    value = json.loads(cast(bytes, raw))
                except (ValueError, RecursionError, ParseError) as exc:
                    stream.problems.append(exc if isinstance(exc, ParseError) else ParseError(
                        source, no, f"not valid JSON ({_why(exc)})", "JSON Lines hold one complete object per line"))
                    if len(stream.problems) >= MAX_PROBLEMS:
                        stream.problems.append(ParseError(source, no, f"stopped after {MAX_PROBLEMS} bad lines"))
                        return
                    continue
                records = unwrap(value)
                for n, obj in enumerate(records, 1):
                    yield no, n if len(records) > 1 else 0, obj
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise damaged_gzip(source, exc) from None


def _document(begun: list[bytes], fh: IO[bytes], skipped: int, source: str) -> Iterator[tuple[int, int, Any]]:
    """The records of a file that is one JSON document (read whole: it is an API response)."""
    from rag.corpus import MAX_FILE_BYTES

    size = sum(len(b) for b in begun)
    data = b"".join(begun) + fh.read(MAX_FILE_BYTES + 1 - size) if size <= MAX_FILE_BYTES else b""
    if not data or len(data) > MAX_FILE_BYTES:
        raise ParseError(source, None, "JSON document over the file size limit",
                         "give the records as JSON Lines, one per line")
    if json_values(data) > MAX_JSON_VALUES:
        raise ParseError(source, None, f"JSON document of over {MAX_JSON_VALUES:,} values: refused "
                         "before it was read whole", "give the records as JSON Lines, one per line")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ParseError(source, skipped + data[:exc.start].count(b"\n") + 1,
                         f"invalid UTF-8 byte 0x{data[exc.start]:02x}",
                         f"convert the file to UTF-8, e.g. `iconv -f latin1 -t utf-8 {source}`") from None
    del data  # the text holds it: what the parse builds may take its room
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(source, skipped + exc.lineno, f"not valid JSON ({_why(exc)})",
                         "the file is one JSON document (an API response), cut short or damaged: "
                         "download it again") from None
    except (ValueError, RecursionError) as exc:
        raise ParseError(source, None, f"JSON that cannot be read ({str(exc)[:80]})") from None
    starts = _record_starts(text, doc)
    line, at, lines = skipped + 1, 0, []
    for start in starts:
        line += text.count("\n", at, start)
        at = start
        lines.append(line)
    starting = Counter(lines)  # several records that start on one line are numbered
    for n, (line, obj) in enumerate(zip(lines, unwrap(doc), strict=True), 1):
        yield line, n if starting[line] > 1 else 0, obj


_WS = re.compile(r"[ \t\n\r]*")


def _record_starts(text: str, doc: Any) -> list[int]:
    """Where each record of unwrap(doc) starts in `text`, the valid JSON it was read from.
    By hand over json's own raw_decode: json.loads reports no positions, and a record's line
    is what an error or a merge names."""
    decoder = json.JSONDecoder()

    def skip(i: int) -> int:
        m = _WS.match(text, i)
        return m.end() if m else i

    def members(i: int) -> Iterator[tuple[Any, int]]:
        """(key or index, start) of each member of the object or array at text[i]."""
        close, n = ("}" if text[i] == "{" else "]"), 0
        i = skip(i + 1)
        while text[i] != close:
            key = n
            if close == "}":
                key, i = decoder.raw_decode(text, i)
                i = skip(skip(i) + 1)  # past the colon
            yield key, i
            _, i = decoder.raw_decode(text, i)
            n, i = n + 1, skip(i)
            if text[i] == ",":
                i = skip(i + 1)

    top = skip(0)
    key = _page_key(doc)
    if isinstance(doc, list):
        return [start for _, start in members(top)]
    if key is None:
        return [top]
    at = [start for k, start in members(top) if k == key][-1]  # the last, as json.loads keeps
    return [start for _, start in members(at)]
