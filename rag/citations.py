"""Citation markers in answer text: parse, normalise other styles, drop invalid ones, renumber."""

from __future__ import annotations

import re

_GROUP = re.compile(r"\[(\s*\d+(?:\s*,\s*\d+)*\s*)\]")
_TRAILING = re.compile(r"([.!?])\s*((?:\[\s*\d+(?:\s*,\s*\d+)*\s*\]\s*)+)(?=\s|$)")
# "claim. [1]": markers after the full stop, which the checker moves before it.
TRAILING_MARKERS = _TRAILING


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
