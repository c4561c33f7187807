"""What one record of any reader may be, checked before the record is built.

A reader holds one record at a time, so its memory is what one record costs. Built first and
measured after, a record could cost gigabytes: a 384 KB gzipped PubMed file holding one 200 MB
element took 2.3 GB before its abstract was refused, and a 400 KB OpenAlex line of 200 million
inverted-index positions 2.5 GB. So each record is measured as it is read (its bytes, and the
values, elements, lines or positions it holds) and refused, named, past these caps.

The caps sit far above real records: an abstract is at most MAX_ABSTRACT_CHARS, and the rest of
a record (authors, affiliations, references) reaches a few MB only for papers of thousands of
authors. A record just under every cap costs under 200 MB to build, the reader included
(benchmarks/reader_memory.py runs the bombs and prints each one's peak).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import IO

MAX_ABSTRACT_CHARS = 20_000
MAX_RECORD_BYTES = 8 << 20  # a JSON line, an XML record element
MAX_JSON_VALUES = 1_000_000  # in a line or a document: an API page of 200 works has about 400,000
MAX_XML_ELEMENTS = 200_000  # in a record: a PubMed article of 5,000 authors has about 45,000
MAX_RECORD_LINES = 100_000  # of a MEDLINE or RIS record: 5,000 authors take about 25,000
MAX_NAMES = 20_000  # in a BibTeX author or editor list: the longest on record has 15,025
# An OpenAlex inverted index: each position is a word of the abstract, and the words are joined
# by spaces, so more positions than this make an abstract over MAX_ABSTRACT_CHARS in spaces alone.
MAX_POSITIONS = MAX_ABSTRACT_CHARS + 1
_PEEK = 1 << 16


def megabytes(n: int) -> str:
    return f"{n / (1 << 20):g} MB"


def json_values(raw: bytes | str) -> int:
    """At least as many as the values json.loads would build from `raw`, counted without
    building them: every value but the first comes after a comma, a colon or an opening
    bracket (a comma inside a string is counted too)."""
    if isinstance(raw, str):
        return 1 + raw.count(",") + raw.count(":") + raw.count("[") + raw.count("{")
    return 1 + raw.count(b",") + raw.count(b":") + raw.count(b"[") + raw.count(b"{")


def bounded_lines(fh: IO[bytes], cap: int = MAX_RECORD_BYTES) -> Iterator[bytes | None]:
    """Each line of `fh`; None for a line over `cap` bytes, which is read past in pieces and
    never held whole (a gzipped 400 MB line took 2.5 GB to hold and parse)."""
    while raw := fh.readline(cap + 1):
        if len(raw) <= cap or raw.endswith(b"\n"):
            yield raw
            continue
        while (rest := fh.readline(_PEEK)) and not rest.endswith(b"\n"):
            pass
        yield None


# str.splitlines' line boundaries, one line at a time: the list of a 20 MB file's short lines
# costs seven times the file.
_LINE = re.compile(r"([^\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]*)(?:\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029])?")


def iter_lines(text: str) -> Iterator[str]:
    """The lines of `text` as str.splitlines gives them, without the list."""
    at, end = 0, len(text)
    while at < end:
        m = _LINE.match(text, at)
        assert m is not None  # the pattern matches at any position
        yield m.group(1)
        at = m.end()


def blocks(text: str, opens: Callable[[str], bool]) -> Iterator[tuple[int, list[str] | None, str]]:
    """(line number, lines, first line) of each block of `text` that begins at a line `opens`
    accepts (lines before the first are passed over), read one block at a time; lines is None
    for a block over MAX_RECORD_LINES lines, which is never held whole."""
    start, first = 0, ""
    block: list[str] | None = None
    for no, line in enumerate(iter_lines(text), 1):
        if opens(line):
            if start:
                yield start, block, first
            start, block, first = no, [], line
        if block is not None:
            block.append(line)
            if len(block) > MAX_RECORD_LINES:
                block = None
    if start:
        yield start, block, first
