"""How an answer reads as text: the notes after it and its reference list.

Works on the public JSON object (`Answer.to_public()`), so the CLI, the OpenAI-compatible
route and the thin client (which only has the server's JSON) format an answer the same way.
Imports nothing heavy: the thin client's start-up depends on it.
"""

from __future__ import annotations

import textwrap
from typing import Any

INCOMPLETE = "[answer incomplete: the model's stream broke off]"
TRUNCATED = "[answer incomplete: the model stopped at its token limit]"


def reference_lines(citations: list[dict[str, Any]]) -> list[str]:
    """'[1] GPipe. Title. authors. venue year. arXiv:ID. source' for each cited paper."""
    lines = []
    for c in citations:
        name = c.get("name") or c.get("label") or c["paper_id"]
        parts = [name]
        if c.get("title") and c["title"] != name:
            parts.append(c["title"])
        authors = c.get("authors") or []
        if authors:
            parts.append(", ".join(authors[:3]) + (" et al." if len(authors) > 3 else ""))
        venue = " ".join(str(x) for x in (c.get("venue"), c.get("year")) if x)
        if venue:
            parts.append(venue)
        if c.get("arxiv_id"):
            parts.append(f"arXiv:{c['arxiv_id']}")
        parts.append(c.get("source") or "")
        lines.append(f"[{c['n']}] " + " ".join(p if p.endswith(".") else p + "." for p in parts if p)
                     .removesuffix("."))
    return lines


def notes(result: dict[str, Any]) -> list[str]:
    """What the reader must know about the answer above: incomplete, claims contradicted (with
    the abstract's sentence) or unsupported, citations rag added or removed."""
    out = []
    if result.get("incomplete"):
        out.append(TRUNCATED if result.get("finish_reason") == "length" else INCOMPLETE)
    sentences = result["sentences"]
    contradicted = [s for s in sentences if s.get("verdict") == "contradicted"]
    for s in contradicted:
        out.append(f"[contradicted by its citation: {textwrap.shorten(s['text'], 70)} "
                   f"The abstract says: \"{textwrap.shorten(s.get('quote') or '', 160)}\"]")
    unsupported = [s for s in sentences if not s["supported"] and s not in contradicted]
    if unsupported:
        out.append(f"[{len(unsupported)} sentence(s) not supported by their citations: "
                   + "; ".join(textwrap.shorten(s["text"], 70) for s in unsupported) + "]")
    added = [s for s in sentences if s.get("attributed")]
    if added:
        out.append(f"[{len(added)} citation(s) added by rag, where the model cited no source "
                   "that says it: " + "; ".join(textwrap.shorten(s["text"], 70) for s in added) + "]")
    if result.get("dropped_citations"):
        out.append(f"[{result['dropped_citations']} citation(s) to no source removed]")
    return out


NEAREST_HEADER = "Closest passages, which do not answer the question:"


def nearest_lines(result: dict[str, Any]) -> list[str]:
    """An abstention's closest passages, so the reader can judge the refusal."""
    return [f"- {d.get('label') or d['paper_id']} ({d['paper_id']}): \"{d['quote']}\""
            for d in result.get("nearest") or []]


def tail(result: dict[str, Any], *, width: int | None = None, markdown: bool = False) -> str:
    """Everything after the answer text: notes, closest passages of an abstention, then the
    references (wrapped to width). `markdown`: for a client that renders the text as Markdown
    (the OpenAI-compatible endpoint's chat front ends), where lines one newline apart run
    together into one paragraph: each note and reference a paragraph of its own."""
    line = "\n\n" if markdown else "\n"
    parts = [line.join(notes(result))] if notes(result) else []
    if near := nearest_lines(result):
        if width:
            near = [textwrap.fill(n, width, subsequent_indent="  ") for n in near]
        parts.append(NEAREST_HEADER + "\n" + "\n".join(near))
    if result["citations"]:
        refs = reference_lines(result["citations"])
        if width:
            refs = [textwrap.fill(r, width, subsequent_indent="    ") for r in refs]
        parts.append("References" + line + line.join(refs))
    return "\n\n".join(parts)


def full_text(result: dict[str, Any], *, width: int | None = None) -> str:
    """The answer as a person reads it: text, notes, references."""
    rest = tail(result, width=width)
    return result["answer"] + ("\n\n" + rest if rest else "")
