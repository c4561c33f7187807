"""`rag check`: a researcher's own claims and drafts checked against the papers they cite.

Each sentence of a draft that cites (rag.corpus.drafts reads them) is checked against the papers
its keys name (a key is a BibTeX, CSL-JSON or RIS citation key kept at ingest, or any id `rag
papers show` takes); a key that names no paper is said, never guessed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rag.corpus.drafts import citing_sentences
from rag.corpus.paper import Paper
from rag.judge import Judge, Support
from rag.schema import Source
from rag.verify import NOT_SUPPORTED, SUPPORTED


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
    for citing in citing_sentences(text, kind):
        sentence = DraftSentence(citing.text, citing.keys, citing.line)
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
