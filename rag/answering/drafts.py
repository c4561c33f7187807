"""`rag check`: a researcher's own claims and drafts checked against the papers they cite.

A draft is Markdown (pandoc's `[@key]`, `[@key1; @key2]`, `[see @key, p. 3]`, `@key` in
text) or LaTeX (`\\cite{key}`, `\\citep`, `\\citet`, natbib's and biblatex's other cite commands,
several keys, optional notes). Each sentence that cites is checked against the papers its keys
name (a key is a BibTeX, CSL-JSON or RIS citation key kept at ingest, or any id `rag papers
show` takes); a key that names no paper is said, never guessed. Sentences are split with the
abstracts' splitter; the citation commands are taken out of what is judged.

Written by hand: no library here reads citation keys out of pandoc Markdown or LaTeX prose
(pandoc itself is not a Python dependency; pylatexenc parses LaTeX but knows no citations).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag.corpus.paper import Paper
from rag.corpus.text import clean_latex, split_sentences
from rag.errors import InputError
from rag.judge import Judge, Support
from rag.schema import Source
from rag.verify import NOT_SUPPORTED, SUPPORTED

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


@dataclass
class DraftSentence:
    """One citing sentence of a draft and its verdict."""

    text: str  # as judged: without its citations
    keys: list[str]
    line: int
    verdict: str = NOT_SUPPORTED
    score: float = 0.0
    quote: str = ""
    paper_id: str | None = None  # the paper whose abstract decided it
    unknown_keys: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)

    def to_public(self) -> dict[str, Any]:
        return {"text": self.text, "keys": self.keys, "line": self.line, "verdict": self.verdict,
                "score": self.score, "quote": self.quote, "paper_id": self.paper_id,
                "unknown_keys": self.unknown_keys, "reasons": self.reasons}


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


def citing_sentences(text: str, kind: str) -> list[DraftSentence]:
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
            out.append(DraftSentence(claim, list(dict.fromkeys(keys)), line))
    return out


def judge_sentence(judge: Judge, sentence: DraftSentence, papers: list[Paper]) -> DraftSentence:
    """The verdict of one sentence against the papers its keys name."""
    if not papers:
        sentence.reasons = ["no cited key names a paper in the index"]
        return sentence
    support = judge.check(sentence.text, [(Source(1, p, 0.0).header(), p.abstract) for p in papers])
    _fill(sentence, support, papers)
    return sentence


def _fill(sentence: DraftSentence, support: Support, papers: list[Paper]) -> None:
    sentence.verdict, sentence.score, sentence.quote = support.verdict, support.score, support.quote
    sentence.reasons = support.reasons
    if support.source is not None:
        sentence.paper_id = papers[support.source].paper_id


def check_draft(judge: Judge, text: str, kind: str, find: Any) -> list[DraftSentence]:
    """Every citing sentence of the draft, judged; `find(key)` is the paper a key names or None."""
    out = []
    for sentence in citing_sentences(text, kind):
        papers: list[Paper] = []
        for key in sentence.keys:
            paper = find(key)
            if paper is None:
                sentence.unknown_keys.append(key)
            elif paper not in papers:
                papers.append(paper)
        out.append(judge_sentence(judge, sentence, papers))
    return out


def all_supported(sentences: Iterable[DraftSentence]) -> bool:
    return all(s.verdict == SUPPORTED and not s.unknown_keys for s in sentences)
