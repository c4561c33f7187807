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


def xml_elements(path: Path, source: str, stream: Stream, tags: frozenset[str], *,
                 no_entities: str, redo: str) -> Iterator[Any]:
    """Each element of `tags` as its end tag is read (iterparse: a file of any size in little
    memory), dropped from the tree once the caller has taken it. XML that cannot be read is a
    problem of the stream (`redo`: what to do, as "download the file again"); entity
    declarations and external references are refused (defusedxml; `no_entities`: the hint)."""
    from defusedxml import DefusedXmlException
    from defusedxml.ElementTree import ParseError as XmlError
    from defusedxml.ElementTree import iterparse

    try:
        with open_binary(path, source) as fh:
            root = None
            for event, elem in iterparse(fh, events=("start", "end")):
                if event == "start":
                    root = elem if root is None else root
                elif elem.tag in tags:
                    yield elem
                    if root is not None:
                        root.clear()  # the element and the root's reference to it
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


def _json_type(raw: bytes) -> type | None:
    """The type of the JSON value `raw` holds; None when it holds none."""
    try:
        return type(json.loads(raw))
    except (ValueError, RecursionError):
        return None


def json_records(path: Path, source: str, stream: Stream) -> Iterator[tuple[int, int, Any]]:
    """(line, n, record) for each record of a JSON Lines file, or of a file that is one JSON
    document (pretty-printed API output), where each record's line is the one it starts on.
    A line may hold an API response with several records: n numbers them (0 for a line of one)."""
    try:
        with open_binary(path, source) as fh:
            first, skipped = b"", 0
            for raw in fh:
                if not skipped:
                    raw = raw.removeprefix(BOM)
                if raw.strip():
                    first = raw
                    break
                skipped += 1
            ahead: list[bytes] = []
            if _json_type(first) is None:
                # One document over many lines, or JSON Lines whose first line is bad? The next
                # lines tell: in JSON Lines most are records of their own, in a document few are.
                ahead = list(itertools.islice(fh, 10))
                sample = [raw for raw in ahead if raw.strip()]
                if 2 * sum(_json_type(raw) is dict for raw in sample) <= len(sample):
                    yield from _document(first + b"".join(ahead), fh, skipped, source)
                    return
            no = 0
            for no, raw in enumerate(itertools.chain([first], ahead, fh), skipped + 1):
                if not raw.strip():
                    continue
                try:
                    value = json.loads(raw)
                except (ValueError, RecursionError) as exc:
                    stream.problems.append(ParseError(source, no, f"not valid JSON ({_why(exc)})",
                                                      "JSON Lines hold one complete object per line"))
                    if len(stream.problems) >= MAX_PROBLEMS:
                        stream.problems.append(ParseError(source, no, f"stopped after {MAX_PROBLEMS} bad lines"))
                        return
                    continue
                records = unwrap(value)
                for n, obj in enumerate(records, 1):
                    yield no, n if len(records) > 1 else 0, obj
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise damaged_gzip(source, exc) from None


def _document(begun: bytes, fh: IO[bytes], skipped: int, source: str) -> Iterator[tuple[int, int, Any]]:
    """The records of a file that is one JSON document (read whole: it is an API response)."""
    from rag.corpus import MAX_FILE_BYTES

    data = begun + fh.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise ParseError(source, None, "JSON document over the file size limit",
                         "give the records as JSON Lines, one per line")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ParseError(source, skipped + data[:exc.start].count(b"\n") + 1,
                         f"invalid UTF-8 byte 0x{data[exc.start]:02x}",
                         f"convert the file to UTF-8, e.g. `iconv -f latin1 -t utf-8 {source}`") from None
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
