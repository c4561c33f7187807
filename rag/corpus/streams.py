"""Files read as streams, whatever their size: gzip undone on the fly, the format told from
the first bytes of the content, and JSON read one line (or one API response) at a time.

What a streamed reader hands back is a `Stream`: the papers (a generator: only the caller
decides what is kept), and, filled while it is consumed, the problems, the records left out
and why, and the PMIDs a PubMed update file deletes.
"""

from __future__ import annotations

import codecs
import gzip
import json
import zlib
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
        for line, obj in json_records(path, source, stream):
            if not accepts(obj):
                stream.problems.append(ParseError(source, line, f"not {what}"))
                continue
            try:
                paper = make(obj, source, line)
            except ParseError as exc:
                stream.problems.append(exc)
                continue
            except (AttributeError, TypeError) as exc:  # a field of another JSON type
                stream.problems.append(ParseError(source, line, f"{what} with a field of the wrong type ({exc})"))
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


def head(path: Path, source: str) -> bytes:
    """The first PEEK bytes of the content (gunzipped), without a UTF-8 byte-order mark."""
    try:
        with open_binary(path, source) as fh:
            return fh.read(PEEK).removeprefix(BOM)
    except (OSError, EOFError, zlib.error) as exc:
        raise ParseError(source, None, f"damaged gzip file ({exc})", "download the file again") from None


def first_json(data: bytes) -> Any:
    """The first JSON value of `data`: its first non-blank line, or None."""
    for raw in data.splitlines():
        if raw.strip():
            try:
                return json.loads(raw.decode("utf-8-sig", "replace"))
            except (ValueError, RecursionError):
                return None
    return None


def unwrap(value: Any) -> list[Any]:
    """An API response's records: OpenAlex's `results`, Semantic Scholar's `data`, a list,
    or the object itself."""
    if isinstance(value, dict):
        for key in ("results", "data"):
            if isinstance(value.get(key), list):
                return list(value[key])
        return [value]
    if isinstance(value, list):
        return value
    return [value]


def json_records(path: Path, source: str, stream: Stream) -> Iterator[tuple[int, Any]]:
    """(line, record) for each record of a JSON Lines file (a line may hold an API response
    with many), or of a file that is one JSON document (pretty-printed API output)."""
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
            try:
                json.loads(first)
                whole = False
            except (ValueError, RecursionError):
                whole = True
            if whole:  # one document over many lines: read whole, it is an API response
                from rag.corpus import MAX_FILE_BYTES

                rest = fh.read(MAX_FILE_BYTES + 1)
                if len(first) + len(rest) > MAX_FILE_BYTES:
                    raise ParseError(source, None, "JSON document over the file size limit",
                                     "give the records as JSON Lines, one per line")
                try:
                    doc = json.loads(first + rest)
                except (ValueError, RecursionError) as exc:
                    raise ParseError(source, None, f"not valid JSON ({str(exc)[:80]})") from None
                for obj in unwrap(doc):
                    yield 1, obj
                return
            no = 0
            for no, raw in enumerate(_lines(first, fh), skipped + 1):
                if not raw.strip():
                    continue
                try:
                    value = json.loads(raw)
                except (ValueError, RecursionError) as exc:
                    stream.problems.append(ParseError(source, no, f"not valid JSON ({str(exc)[:80]})",
                                                      "JSON Lines hold one complete object per line"))
                    if len(stream.problems) >= MAX_PROBLEMS:
                        stream.problems.append(ParseError(source, no, f"stopped after {MAX_PROBLEMS} bad lines"))
                        return
                    continue
                for obj in unwrap(value):
                    yield no, obj
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise ParseError(source, None, f"damaged gzip file ({exc})", "download the file again") from None


def _lines(first: bytes, fh: IO[bytes]) -> Iterator[bytes]:
    yield first
    yield from fh
