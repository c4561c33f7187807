"""Prompt templates: files in prompts/, placeholders checked when loaded.

The templates live in the top-level prompts/ directory; rag/templates links to it, so they
are package data: importlib.resources finds them in a checkout, an editable install and a
wheel (`pip install .`, `pip install --user`) alike.
"""

from __future__ import annotations

import string
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


def fence(text: str) -> str:
    """Keep source text inside its fence: it must not open or close a <source> tag."""
    return text.replace("<source", "‹source").replace("</source", "‹/source")


def format_source(n: int, label: str, title: str | None, authors: list[str], venue_year: str,
                  abstract: str) -> str:
    lines = [
        f'<source n="{n}">',
        f"label: {fence(label)}",
        f"title: {fence(title or '(untitled)')}",
        f"authors: {fence(', '.join(authors) or 'unknown')}",
        f"venue/year: {venue_year or 'unknown'}",
        "abstract:",
        fence(abstract),
        "</source>",
    ]
    return "\n".join(lines)
