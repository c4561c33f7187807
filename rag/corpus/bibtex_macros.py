"""BibTeX's `@string` macros and `#` concatenation, expanded under limits, and `%` comment
lines told from field text.

bibtexparser resolves a field that is one bare macro name, but leaves `a # " b"` as written and
does not expand macros inside @string definitions; and it expands without limit, so a small
file whose @strings concatenate each other (ten-fold, five levels deep) grows to gigabytes.
Here every expansion is bounded while it happens: a field that would grow past
MAX_FIELD_CHARS, nest deeper than MAX_DEPTH, refer to itself, or spend more than the file's
budget (its own size plus EXTRA_BUDGET characters) refuses its entry, with file and line.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

from rag.corpus.latex import BARE_PERCENT
from rag.corpus.limits import MAX_NAMES

MAX_FIELD_CHARS = 100_000  # one field after expansion (an abstract may hold 20,000)
MAX_DEPTH = 32  # @string definitions that refer to one another, nested
EXTRA_BUDGET = 1_000_000  # characters and pieces one file's expansion may cost beyond its size
_ENTRY_LINE = re.compile(r"[ \t]*@\s*[A-Za-z]+\s*[{(]")
_SPECIAL = re.compile(r'\\"|[{}")]')  # BibTeX counts \{ as a brace too


class Refused(Exception):
    """An entry whose macros cannot be expanded within the limits."""

    hint = "define the @string macros without loops or blow-up, or pass --skip-bad"


class TooManyNames(Refused):
    """An author or editor list over MAX_NAMES, refused before it is split into names (2.4
    million names took 2 GB and six minutes)."""

    hint = "a paper has at most a few thousand authors: check the entry's `and`s, or pass --skip-bad"


_AND = re.compile(r"\sand\s", re.IGNORECASE)


def names_checked(key: str, value: str) -> None:
    if key.lower() in ("author", "editor") and next(
            itertools.islice(_AND.finditer(value), MAX_NAMES - 1, None), None) is not None:
        raise TooManyNames(f"field `{key}` lists over {MAX_NAMES:,} names")


class RunOn(Refused):
    """A field whose value runs on into the next field: the comma between them is missing."""

    hint = "put a comma after each field's value, or pass --skip-bad"


def _split_top(value: str) -> list[str]:
    """Pieces of a `#` concatenation, outside braces and quotes."""
    pieces, depth, quoted, start = [], 0, False, 0
    for m in re.finditer(r'[{}"#]', value):
        ch, i = m.group(0), m.start()
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


def run_on(value: str) -> str | None:
    """The field a raw value runs on into (`{A}\n author = {B}`: the comma after `{A}` is
    missing), else None. BibTeX refuses such an entry; bibtexparser reads the two as one value,
    so the title became "A author = B" and the authors were lost without a word."""
    top, depth, quoted = [], 0, False
    for m in re.finditer(r'\\[{}"]|[{}"]|[^{}"\\]+|\\', value):
        token = m.group(0)
        if token in ("{", "\\{"):
            depth += 1
        elif token in ("}", "\\}"):
            depth = max(0, depth - 1)
        elif token == '"' and depth == 0:
            quoted = not quoted
        elif depth == 0 and not quoted:
            top.append(token)
    field = re.search(r"([A-Za-z][\w\-:.+]*)\s*=", "".join(top))
    return field.group(1) if field else None


class Expander:
    """Expands field values with one file's @string definitions, within one shared budget."""

    def __init__(self, strings: dict[str, str], file_size: int) -> None:
        self.strings = strings
        self.budget = file_size + EXTRA_BUDGET
        self._pieces: dict[str, list[str]] = {}

    def needed(self, value: str) -> bool:
        """A value that names a macro or concatenates: braced or quoted text, or a number, is not."""
        value = value.strip()
        if len(value) >= 2 and (value[0], value[-1]) in (("{", "}"), ('"', '"')) \
                and len(_split_top(value)) == 1:
            return False
        return not value.isdigit()

    def field(self, name: str, value: str) -> str:
        out: list[str] = []
        self._expand(name, value, (), out, [0])
        return "".join(out)

    def _split(self, macro: str) -> list[str]:
        if macro not in self._pieces:
            self._spend(len(self.strings[macro]))  # split once per macro, paid once
            self._pieces[macro] = _split_top(self.strings[macro])
        return self._pieces[macro]

    def _spend(self, cost: int) -> None:
        self.budget -= cost
        if self.budget < 0:
            raise Refused("@string expansion costs more than this file may spend "
                          f"(its size plus {EXTRA_BUDGET:,} characters)")

    def _expand(self, name: str, value: str, chain: tuple[str, ...], out: list[str],
                size: list[int]) -> None:
        for piece in _split_top(value) if not chain else self._split(chain[-1]):
            self._spend(1)
            piece = piece.strip()
            if len(piece) >= 2 and (piece[0], piece[-1]) in (("{", "}"), ('"', '"')):
                text = piece[1:-1]
            elif piece.lower() in self.strings and not piece.isdigit():
                macro = piece.lower()
                if macro in chain:
                    raise Refused(f"@string `{piece}` refers to itself ({' -> '.join([*chain, macro])})")
                if len(chain) >= MAX_DEPTH:
                    raise Refused(f"@string macros nest more than {MAX_DEPTH} deep in field `{name}`")
                self._expand(name, "", (*chain, macro), out, size)
                continue
            else:
                text = piece  # a number or an undefined name: as written, as bibtexparser does
            size[0] += len(text)
            if size[0] > MAX_FIELD_CHARS:
                raise Refused(f"field `{name}` grows past {MAX_FIELD_CHARS:,} characters "
                              "when its @string macros are expanded")
            self._spend(len(text))
            out.append(text)


def expansion(refused: list[tuple[Any, str, str]], file_size: int) -> Any:
    """A bibtexparser middleware that expands every entry's macros and concatenations (before
    its enclosing-removal runs), and takes out each entry that breaks a limit, noting why in
    `refused` (and what to do), as is an entry with a comma missing between two fields
    (run_on). A bare `%` is escaped, so that the LaTeX decoder keeps it as text."""
    from bibtexparser.library import Library
    from bibtexparser.middlewares.middleware import LibraryMiddleware

    class Expand(LibraryMiddleware):
        def transform(self, library: Library) -> Library:
            strings = {s.key.lower(): str(s.value) for s in library.strings}
            expander = Expander(strings, file_size)
            for entry in list(library.entries):
                try:
                    for f in entry.fields:
                        if isinstance(f.value, str):
                            names_checked(f.key, f.value)
                        if isinstance(f.value, str) and (after := run_on(f.value)):
                            raise RunOn(f"no comma after field `{f.key}` (line {f.start_line + 1}), "
                                        f"before field `{after}`")
                        if isinstance(f.value, str) and expander.needed(f.value):
                            f.value = "{" + expander.field(f.key, f.value) + "}"
                        if isinstance(f.value, str):  # a `%` in a field is a percent sign,
                            f.value = BARE_PERCENT.sub(r"\\%", f.value)  # not LaTeX's comment
                except Refused as exc:
                    refused.append((entry, str(exc), exc.hint))
                    library.remove(entry)
            return library

    return Expand()


def uncomment(text: str) -> str:
    """Lines starting with `%` outside entries blanked: biber and reference managers read them
    as comments (a commented-out entry is no paper); bibtexparser would parse one as an entry.
    Inside an entry's braces or quotes such a line is field text ("% 5 points over baseline").
    Blanked, not removed: line numbers in messages stay the file's."""
    lines = text.split("\n")
    depth, quoted, paren = 0, False, False  # brace depth, inside "...", inside @type( ... )
    for i, line in enumerate(lines):
        inside = depth > 0 or quoted or paren
        if not inside and line.lstrip(" \t").startswith("%"):
            lines[i] = ""
            continue
        if inside and _ENTRY_LINE.match(line):
            inside = False  # an unbalanced entry ends where the next begins, as bibtexparser reads it
        start = 0
        if not inside:
            m = _ENTRY_LINE.match(line)
            if m is None:
                continue
            paren, start, quoted = m.group(0).endswith("("), m.end(), False
            depth = 0 if paren else 1
        for m in _SPECIAL.finditer(line, start):
            ch = m.group(0)
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth = max(0, depth - 1)
            elif ch == '"' and depth == (0 if paren else 1):
                quoted = not quoted
            elif ch == ")" and paren and depth == 0 and not quoted:
                paren = False
    return "\n".join(lines)
