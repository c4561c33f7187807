"""A researcher's draft read for what it cites: the sentences that cite, with their citation
keys and line numbers, from Markdown (pandoc's `[@key]`, `[@key1; @key2]`, `[see @key, p. 3]`,
`@key` in text) or LaTeX (`\\cite{key}`, `\\citep`, `\\citet`, natbib's and biblatex's other
cite commands, several keys, optional notes). Sentences are split with the abstracts' splitter;
the citation commands are taken out of the sentence's text.

Written by hand: no library here reads citation keys out of pandoc Markdown or LaTeX prose
(pandoc itself is not a Python dependency; pylatexenc parses LaTeX but knows no citations).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from rag.corpus.text import clean_latex, split_sentences
from rag.errors import InputError

MAX_DRAFT_BYTES = 5_000_000  # a thesis is well under this; beyond it is not a draft
_TEX_CITE = re.compile(
    r"\\(?:[a-zA-Z]*cite[a-zA-Z]*|parencite|textcite|autocite|footcite)\*?"
    r"(?:\s*\[[^\]]*\]){0,2}\s*\{([^{}]+)\}")
_MD_GROUP = re.compile(r"\[([^\[\]]*@[^\[\]]*)\]")
_MD_KEY = re.compile(r"(?<![\w.])-?@(\w(?:[\w:.#$%&\-+?<>~/]*\w)?)")
_MD_BARE = re.compile(r"(?<![\w.\[])@([A-Za-z](?:[\w:.\-]*\w)?)")
_TEX_COMMENT = re.compile(r"(?<!\\)%.*$", re.M)
_TEX_ENVIRONMENTS = re.compile(r"\\begin\{(equation|align|figure|table|tabular|verbatim|lstlisting)\*?\}.*?"
                               r"\\end\{\1\*?\}", re.S)
_TEX_DROP = re.compile(r"\\(?:label|ref|eqref|url|footnote|input|include|bibliography\w*)\{[^{}]*\}")
_TEX_HEADING = re.compile(r"\\(?:sub)*section\*?\{[^{}]*\}|\\(?:chapter|paragraph|caption)\*?\{[^{}]*\}")
_MD_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
_MD_FRONT = re.compile(r"\A---\n.*?\n---\n", re.S)
_NARRATIVE = re.compile(r"\\(?:citet|citeauthor|textcite|Citet|Textcite)\b")
_PLACEHOLDER = "\ue010{}\ue011"  # a citation's place while the sentence is split
_PLACED = re.compile("\ue010(\\d+)\ue011")


@dataclass(frozen=True)
class Citing:
    """One sentence of a draft that cites: its text without the citations, its keys, its line."""

    text: str
    keys: list[str]
    line: int


def read_draft(path: Path) -> tuple[str, str]:
    """The draft's text and its kind ("latex" or "markdown"); refused by name when unreadable."""
    try:
        if path.stat().st_size > MAX_DRAFT_BYTES:
            raise InputError(f"{path}: {path.stat().st_size} bytes is too long for a draft "
                             f"(at most {MAX_DRAFT_BYTES})", "check one chapter at a time")
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or exc})",
                         "give the path of a Markdown or LaTeX draft") from None
    if b"\x00" in raw[:4096]:
        raise InputError(f"{path}: a binary file, not a draft", "give a Markdown (.md) or LaTeX (.tex) file")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise InputError(f"{path}:{line}: not UTF-8 text", "save the draft as UTF-8") from None
    latex = path.suffix.lower() in (".tex", ".latex", ".ltx") or bool(_TEX_CITE.search(text))
    return text, "latex" if latex else "markdown"


def _blank(m: re.Match[str]) -> str:
    """The match replaced by as many newlines as it held (line numbers stay right)."""
    return "\n" * m.group(0).count("\n")


def citing_sentences(text: str, kind: str) -> list[Citing]:
    """The sentences of a draft that cite, with their keys and line numbers, in order."""
    cites: list[list[str]] = []

    def place(keys: list[str], narrative: bool = False) -> str:
        """A citation's place; a narrative one ("as @key shows") is a noun of the sentence."""
        cites.append(keys)
        return ("the cited work " if narrative else "") + _PLACEHOLDER.format(len(cites) - 1)

    if kind == "latex":
        body = text.split("\\begin{document}", 1)
        text = ("\n" * body[0].count("\n") + body[1]) if len(body) == 2 else text
        text = text.split("\\end{document}", 1)[0]
        text = _TEX_COMMENT.sub("", text)
        text = _TEX_ENVIRONMENTS.sub(_blank, text)
        text = _TEX_CITE.sub(lambda m: place([k.strip() for k in m.group(1).split(",") if k.strip()],
                                             _NARRATIVE.match(m.group(0)) is not None), text)
        text = _TEX_HEADING.sub("", _TEX_DROP.sub("", text)).replace("~", " ")
    else:
        text = _MD_FRONT.sub(_blank, text)
        text = _MD_FENCE.sub(_blank, text)
        text = _MD_GROUP.sub(lambda m: place(_MD_KEY.findall(m.group(1))), text)
        text = _MD_BARE.sub(lambda m: place([m.group(1)], narrative=True), text)
    # a narrative citation that starts a sentence starts it with a capital
    text = re.sub(r"(^|[.!?]\s+|\n\s*)the cited work ", lambda m: m.group(1) + "The cited work ", text)
    out = []
    offset = 0
    for para in re.split(r"\n\s*\n", text):
        start = text.index(para, offset) if para else offset
        offset = start + len(para)
        if kind == "markdown" and para.lstrip().startswith(("#", "|", ">")):
            continue  # a heading, a table, a quotation: no claim of the author's
        at = 0
        for sentence in split_sentences(para):
            found = para.find(sentence[:20], at)
            at = found if found >= 0 else at
            line = text.count("\n", 0, start + at) + 1
            keys = [k for i in _PLACED.findall(sentence) for k in cites[int(i)]]
            if not keys:
                continue
            claim = _PLACED.sub("", sentence)
            claim = clean_latex(claim) if kind == "latex" else claim
            claim = re.sub(r"\s+([.,;:!?])", r"\1", " ".join(claim.split())).strip()
            out.append(Citing(claim, list(dict.fromkeys(keys)), line))
    return out
