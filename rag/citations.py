"""Citation markers in answer text: parse, drop invalid ones, renumber, split into claims."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from rag.corpus.text import split_sentences

_GROUP = re.compile(r"\[(\s*\d+(?:\s*,\s*\d+)*\s*)\]")
_TRAILING = re.compile(r"([.!?])\s*((?:\[\s*\d+(?:\s*,\s*\d+)*\s*\]\s*)+)(?=\s|$)")
# "claim. [1]": markers after the full stop, moved before it by split_units and the checker.
TRAILING_MARKERS = _TRAILING
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")


@dataclass
class Unit:
    """One checkable piece of an answer: a sentence, or a list item."""

    text: str
    citations: list[int] = field(default_factory=list)
    bullet: str = ""  # the list marker it had, if any
    newline: bool = False  # starts a new line in the answer
    meta: bool = False  # a header such as "3 of the 60 abstracts match:", not a claim


def numbers_in(text: str) -> list[int]:
    out: list[int] = []
    for group in _GROUP.findall(text):
        for n in group.split(","):
            if int(n) not in out:
                out.append(int(n))
    return out


def normalize_citations(text: str, n_sources: int) -> tuple[str, list[dict[str, str]]]:
    """Citation styles other than [n] rewritten to [n] (the styles land with issue 13)."""
    return text, []


def clean_markers(text: str, valid: set[int]) -> tuple[str, int]:
    """Remove markers that point at no source; returns the text and how many were dropped."""
    dropped = 0

    def fix(m: re.Match[str]) -> str:
        nonlocal dropped
        nums = [int(n) for n in m.group(1).split(",")]
        keep = [n for n in nums if n in valid]
        dropped += len(nums) - len(keep)
        return "[" + ", ".join(str(n) for n in keep) + "]" if keep else ""

    text = _GROUP.sub(fix, text)
    return re.sub(r"[ \t]+([.,;:!?])", r"\1", text), dropped


def renumber(text: str, order: dict[int, int]) -> str:
    def fix(m: re.Match[str]) -> str:
        nums = sorted({order[int(n)] for n in m.group(1).split(",")})
        return "[" + ", ".join(str(n) for n in nums) + "]"

    return _GROUP.sub(fix, text)


def first_use_order(text: str) -> dict[int, int]:
    order: dict[int, int] = {}
    for n in numbers_in(text):
        order.setdefault(n, len(order) + 1)
    return order


def split_units(text: str) -> list[Unit]:
    # "claim. [1]" -> "claim [1]." so the marker stays with its sentence
    text = _TRAILING.sub(lambda m: " " + m.group(2).strip() + m.group(1), text)
    units: list[Unit] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        bullet = _BULLET.match(line)
        body = line[bullet.end():] if bullet else line
        pieces = [body.strip()] if bullet else split_sentences(body)
        for i, piece in enumerate(pieces):
            units.append(Unit(
                text=piece, citations=numbers_in(piece),
                bullet=bullet.group(0).strip() if bullet and i == 0 else "",
                newline=i == 0, meta=piece.rstrip().endswith(":") and not numbers_in(piece),
            ))
    return units


def join_units(units: list[Unit]) -> str:
    out = ""
    for u in units:
        piece = f"{u.bullet} {u.text}" if u.bullet else u.text
        if not out:
            out = piece
        elif u.newline:
            out += "\n" + piece
        else:
            out += " " + piece
    return out
