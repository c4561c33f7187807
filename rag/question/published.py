"""Where and when a question's papers appeared: "Which papers were published at AAAI 2023?" asks
for nothing else; "Which MLSys 2023 papers are about GNNs?" asks for a topic within a venue
and a year, which are then filters."""

from __future__ import annotations

import re
from collections.abc import Collection, Container

from rag.corpus.words import content_words
from rag.question.patterns import GENERIC

# Words of a question about where or when papers appeared that ask nothing of their topic.
_PUBLISHED_ASKS = content_words(
    "published publish appeared appear presented present accepted venue venues conference "
    "journal proceedings year years from collection corpus library index here have has list "
    "show name find give") | GENERIC
_YEARS = re.compile(r"(?<![\d.])(?:19|20)\d{2}(?![\d.])|'\d{2}\b")
# A question about where or when papers appeared names a year or says so.
PUBLISHED_CUE = re.compile(_YEARS.pattern + r"|\b(?:published|appeared|presented|accepted|venue|"
                           r"conference|journal|proceedings)\b", re.I)


def asks_only_for_published(question: str, venue_words: Collection[str], years: Collection[int]) -> bool:
    """"Which papers were published at AAAI 2023?", "Which papers are from 2022?": the
    question names a venue or a year and asks for nothing but the papers that appeared there
    or then (not "Which AAAI papers study federated learning?")."""
    rest = _YEARS.sub(" ", question)
    for word in venue_words:
        rest = re.sub(rf"(?i)(?<![\w-]){re.escape(word)}(?![\w-])", " ", rest)
    return bool(venue_words or years) and not content_words(rest) - _PUBLISHED_ASKS


# A year a list's papers appeared in, said beside its topic: after "from", "in", "since",
# "published" ... or right after a venue ("MLSys 2023", "ICCV'23").
_YEAR_AFTER = re.compile(r"\b(?:from|in|since|during|published|appeared|presented|accepted)\s+"
                         r"(?:in\s+)?(?:the\s+)?(?:year\s+)?((?:19|20)\d{2})(?![\d.])", re.I)


def publication_asked(question: str, venue_words: Container[str]) -> tuple[set[str], set[int]]:
    """Where and when the papers a list asks for appeared, when the question says so beside
    its topic ("Which MLSys 2023 papers are about GNNs?" -> {"mlsys"}, {2023}): a venue word
    of the index written as a name with two capitals at least ("MLSys", "AAAI", "ICCV'23"; a
    journal's ordinary words, "Oncology", never count), and a year after "from", "in",
    "published" ... or after such a venue. Empty sets when it names neither."""
    venues, years = set(), {int(y) for y in _YEAR_AFTER.findall(question)}
    for m in re.finditer(r"(?<![\w-])([A-Za-z][\w-]*)(?:'(\d{2})\b|\s+((?:19|20)\d{2})(?![\d.]))?", question):
        word = m.group(1)
        if sum(c.isupper() for c in word) >= 2 and word.lower() in venue_words:
            venues.add(word.lower())
            if m.group(2) or m.group(3):
                years.add(int(m.group(3)) if m.group(3) else 2000 + int(m.group(2)))
    return venues, years


def without_publication(question: str, venues: Collection[str]) -> str:
    """The question with where and when its papers appeared taken out ("Which MLSys 2023
    papers are about GNNs?" -> "Which papers are about GNNs?"): the venue words `venues`
    (as `publication_asked` found them) and the years said beside them."""
    asked = "|".join(sorted(map(re.escape, venues)))
    place = rf"(?:{asked})(?:'\d{{2}}\b)?(?:\s+(?:19|20)\d{{2}})?|" if asked else ""
    said = re.compile(r"(?:\b(?:were\s+|was\s+)?(?:published|appeared|presented|accepted)\s+)?"
                      r"(?:\b(?:at|in|from|since|during)\s+)?(?:the\s+)?(?:year\s+)?"
                      rf"(?<![\w-])(?:{place}(?:19|20)\d{{2}})(?![\w.-])", re.I)
    return " ".join(said.sub(" ", question).split())
