"""The words of a claim: content words, numbers, system-like names, negations and directions,
citation markers; and whether a claim is an abstract's own words. The one shelf of text
utilities that the judge's hard checks, relevance and the answering stages read a sentence by."""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections.abc import Sequence
from functools import lru_cache

_MARKER = re.compile(r"\s*\[\s*\d+(?:\s*,\s*\d+)*\s*\]")
_NUMBER = re.compile(r"(?<![A-Za-z\d.])(\d+(?:[.,]\d+)*)(?![A-WYZa-wyz\d])")
_NAME = re.compile(r"\b([A-Z][\w²³\-]*[A-Z0-9²][\w²³\-]*)\b")
_WORD = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_NEGATION = re.compile(r"\b(not|no|never|cannot|neither|nor|without|fails?|unable)\b|n't\b", re.I)
_STOP = frozenset(
    ["the", "a", "an", "and", "or", "of", "to", "in", "on", "for", "with", "by", "from", "as", "at", "is", "are", "was", "were", "be", "been", "being", "this", "that", "these", "those", "it", "its", "their", "they", "them", "we", "our", "us", "which", "who", "whom", "what", "when", "where", "how", "than", "then", "also", "such", "can", "could", "may", "might", "will", "would", "should", "into", "over", "under", "more", "most", "less", "very", "both", "each", "other", "using", "used", "use", "based", "via", "paper", "papers", "work", "works", "propose", "proposes", "proposed", "present", "presents", "introduce", "introduces", "show", "shows", "shown", "approach", "method", "system", "systems", "new", "novel"]
)


@lru_cache(maxsize=1)
def _stemmer():  # type: ignore[no-untyped-def]
    import Stemmer

    return Stemmer.Stemmer("english")


def content_words(text: str) -> set[str]:
    words = [w for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 2]
    return set(_stemmer().stemWords(words))


def numbers(text: str) -> set[str]:
    return {n.replace(",", "") for n in _NUMBER.findall(text)}


_NOT_SYSTEM_NAMES = {"doi", "arxiv", "mlsys", "acm", "ieee"}


def names(text: str) -> set[str]:
    return {n.lower().rstrip("s") for n in _NAME.findall(text)} - _NOT_SYSTEM_NAMES


# Opposite directions, as stems: a claim saying one where the sentence it matches says the
# other ("X is slower than Y" against "X outperforms Y") reverses that sentence.
_OPPOSITES = [
    ({"faster", "outperform", "speedup", "acceler"}, {"slower", "underperform", "slowdown"}),
    ({"improv", "better"}, {"degrad", "wors", "hurt"}),
    ({"increas", "grow", "higher", "more"}, {"decreas", "reduc", "lower", "less", "fewer", "shrink"}),
    ({"constant", "maintain", "preserv"}, {"grow", "increas", "degrad", "drop"}),
]


def polarity_conflict(claim: str, evidence: Sequence[str], negated: Sequence[str] = ()) -> str:
    """Why the claim reverses every one of its evidence sentences, or "".

    Written by hand (no library here does claim/evidence polarity without a model): the
    embedding and word overlap of "X never drops tokens" and "X drops tokens" are nearly equal.
    A negation ("not", "never", "without", ...) in the claim and in no sentence that shares its
    words, or opposite directions ("slower" against "outperforms", "increases" against
    "reduces") in every evidence sentence, reverse it. One evidence sentence that agrees is
    enough to pass, and a negated claim passes when any abstract sentence sharing its words
    (`negated`) negates too, which keeps paraphrases of several sentences at once from being
    flagged.
    """
    # Only this direction: an affirmative claim against negated evidence ("X drops tokens",
    # "X never drops tokens") flagged as many SciFact SUPPORT pairs as CONTRADICT ones.
    if (_NEGATION.search(claim) and not negated and evidence
            and not any(_NEGATION.search(s) for s in evidence)):
        return "negation not in the abstract"
    mine = _stems(claim)
    for up, down in _OPPOSITES:
        for said, other in ((up, down), (down, up)):
            if _has(mine, said) and evidence and all(
                    _has(_stems(s), other) and not _has(_stems(s), said) for s in evidence):
                return "direction opposite to the abstract"
    return ""


def _stems(text: str) -> list[str]:
    return _stemmer().stemWords(_WORD.findall(text.lower()))  # type: ignore[no-any-return]


def _has(stems: list[str], prefixes: set[str]) -> bool:
    return any(s.startswith(p) for s in stems for p in prefixes)


def strip_markers(text: str) -> str:
    return _MARKER.sub("", text).strip()


def claim_of(sentence: str) -> str:
    """What is judged of a sentence: its words without citation markers or a list bullet."""
    return strip_markers(sentence).lstrip("-*• ").strip()

_LABEL = re.compile(r"^([^:\n]{1,200}):\s+(?=\S)")  # "Name: claim", as a list line starts


def _squash(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).lower().split()).strip(" .;,\"'")


def unlabelled(claim: str, header: str) -> str:
    """The claim without a leading "Name: " that names its record (a list line's label)."""
    m = _LABEL.match(claim)
    if m and header and _squash(m.group(1)) in _squash(header):
        return claim[m.end():]
    return claim


def verbatim(claim: str, abstract: str) -> bool:
    """The claim, four words at least, is in the abstract word for word (case and spacing aside)."""
    said = _squash(claim)
    return len(said.split()) >= 4 and said in _squash(abstract)


_EDGE = re.compile(r"[^\w-]")


def spans(text: str, longest: int) -> list[str]:
    r"""Every part of `text` of at most `longest` characters that starts and ends at a word's
    edge as `(?<![\w-])` and `(?![\w-])` see it: what a name found in it by such a regex can
    be, to look up instead of running a regex of every name."""
    edge = _EDGE.match
    starts = [i for i in range(len(text)) if i == 0 or edge(text, i - 1)]
    ends = [i for i in range(1, len(text) + 1) if i == len(text) or edge(text, i)]
    out = []
    for s in starts:
        for e in ends[bisect.bisect_right(ends, s):]:  # the ends after this start (not all ends)
            if e - s > longest:
                break
            out.append(text[s:e])
    return out
