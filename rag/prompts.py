"""Prompt templates: files in prompts/, placeholders checked when loaded.

The templates live in the top-level prompts/ directory; rag/templates links to it, so they
are package data: importlib.resources finds them in a checkout, an editable install and a
wheel (`pip install .`, `pip install --user`) alike.
"""

from __future__ import annotations

import re
import string
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from importlib.resources import files
from importlib.resources.abc import Traversable

from rag.errors import RagError

PROMPTS_DIR: Traversable = files("rag") / "templates"
NO_ANSWER = "The provided abstracts do not answer this question."

# Each template and exactly the placeholders it must use.
EXPECTED: dict[str, set[str]] = {
    "system": {"no_answer"},
    "answer": {"sources", "question", "no_answer", "n_sources"},
    "condense": {"history", "question"},
    "judge": {"abstract", "claim"},
    "compare": {"sources", "question", "n_sources", "rows", "aspect"},
}


@dataclass(frozen=True)
class Template:
    name: str
    path: Traversable
    text: str

    def render(self, **values: object) -> str:
        return self.text.format(**values)


def placeholders(text: str) -> set[str]:
    return {field for _, field, _, _ in string.Formatter().parse(text) if field is not None}


def load_template(name: str, directory: Traversable = PROMPTS_DIR) -> Template:
    path = directory / f"{name}.txt"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RagError(f"{path}: cannot read prompt template ({exc.strerror})",
                       "restore it from the repository") from None
    try:
        found = placeholders(text)
    except ValueError as exc:
        raise RagError(f"{path}: malformed template ({exc})", "use {name}; write {{ for a brace") from None
    expected = EXPECTED[name]
    unknown, missing = found - expected, expected - found
    if unknown or missing:
        parts = []
        if unknown:
            parts.append("unknown placeholder(s) " + ", ".join("{" + f + "}" for f in sorted(unknown)))
        if missing:
            parts.append("missing placeholder(s) " + ", ".join("{" + f + "}" for f in sorted(missing)))
        raise RagError(f"{path}: " + "; ".join(parts),
                       "allowed: " + ", ".join("{" + f + "}" for f in sorted(expected)))
    return Template(name, path, text)


@lru_cache
def templates(directory: Traversable = PROMPTS_DIR) -> dict[str, Template]:
    """All templates, validated together (called once at start-up)."""
    return {name: load_template(name, directory) for name in EXPECTED}


# Written by hand: no library neutralises look-alike tags. Zero-width and soft-hyphen
# characters are dropped and the text NFKC-normalised (full-width ＜ becomes <) before
# matching, so `</SOURCE>`, `< /source>`, `＜/ｓｏｕｒｃｅ>` and `</sou\u200brce>` are all caught.
_INVISIBLE = dict.fromkeys(map(ord, "\u00ad\u180e\u200b\u200c\u200d\u200e\u200f\u2060\ufeff"))
_TAG = re.compile(r"<(\s*/?\s*(?:source|claim|client_preferences)\b)", re.IGNORECASE)


def fence(text: str) -> str:
    """Keep untrusted text inside its fence: it must not open or close a tag the prompts use
    (<source>, <claim>, <client_preferences>), however it is spelled."""
    clean = unicodedata.normalize("NFKC", text).translate(_INVISIBLE)
    return _TAG.sub(r"‹\1", clean)


def _line(text: str) -> str:
    """A one-line field, fenced and kept on its line (it cannot fake an `abstract:` line)."""
    return " ".join(fence(text).split())


def format_source(n: int, label: str, title: str | None, authors: list[str], venue_year: str,
                  abstract: str) -> str:
    lines = [
        f'<source n="{n}">',
        f"label: {_line(label)}",
        f"title: {_line(title or '(untitled)')}",
        f"authors: {_line(', '.join(authors) or 'unknown')}",
        f"venue/year: {_line(venue_year or 'unknown')}",
        "abstract:",
        fence(abstract),
        "</source>",
    ]
    return "\n".join(lines)
