"""Answers from a paper's record rather than its abstract: authors, arXiv id, DOI, venue, year."""

from __future__ import annotations

from collections.abc import Callable

from rag.corpus.paper import Paper
from rag.corpus.paper import venue_note as paper_venue_note
from rag.corpus.text import short_label
from rag.question.patterns import ARXIV_ID, ASKS_AUTHORS, ASKS_DATE, BY_AUTHOR, META
from rag.relevance.features import RECORD_ASKS, record_fields
from rag.schema import Source

_FIELD_NAMES = {"authors": "authors", "arxiv_id": "arXiv id", "doi": "DOI", "venue": "venue",
                "date": "date"}
_VENUE_ASKS = ("venue", "published", "journal", "conference")


def metadata_answer(question: str, sources: list[Source],
                    summary: Callable[[Source], str]) -> str | None:
    """Authors, arXiv id, venue or year of a paper the question names; None if it asks none."""
    m = META.search(question)
    named = [s for s in sources if s.named] or sources[:1]
    if named and BY_AUTHOR.search(question):
        hits = [(a, s) for s in named for a in s.paper.authors
                if len(a) > 5 and a.lower() in question.lower()]
        if hits:
            # Each paper once, with the named authors who wrote it and what it does in its own
            # words: a title alone rarely names the system a reader knows the paper by.
            by_paper: dict[int, tuple[Source, list[str]]] = {}
            for a, s in hits:
                by_paper.setdefault(s.n, (s, []))[1].append(a)
            parts = []
            for s, who in by_paper.values():
                what = summary(s).removeprefix(f"{s.name}: ")
                are = "is an author" if len(who) == 1 else "are authors"
                parts.append(f"{' and '.join(who)} {are} of {s.paper.title or s.name} [{s.n}]. {what}")
            return " ".join(parts)
    if not named or not (m or ARXIV_ID.search(question)):
        return None
    ask = m.group(1).lower() if m else "arxiv"  # an id alone: answer with the paper it names
    s, p = named[0], named[0].paper
    if p.arxiv_id and p.arxiv_id in question:
        what = p.title or summary(s).split(f" [{s.n}]")[0]
        return f"arXiv:{p.arxiv_id} is {s.name}" + (f": {what}" if what != s.name else "") + f" [{s.n}]."
    # "Who wrote Horovod and vLLM?": each paper the question names, in the order named (it
    # answered for vLLM alone)
    q = question.lower()
    by_name = sorted((q.find(s.name.lower()), s.n, s) for s in named if s.name.lower() in q)
    facts = [f for _, _, s in by_name or [(0, named[0].n, named[0])] if (f := _record_fact(ask, s))]
    return " ".join(facts) or None


def _record_fact(ask: str, s: Source) -> str | None:
    """The sentence giving the field `ask` names from the record of `s`, if it has one."""
    p = s.paper
    venue_note = paper_venue_note(p)
    fact = None
    if ask.startswith(("author", "who", "written")) and p.authors:
        fact = f"{s.name} is by {', '.join(p.authors)}"
    elif ask.startswith("arxiv") and p.arxiv_id:
        fact = f"{s.name} is arXiv:{p.arxiv_id}"
    elif ask == "doi" and p.doi:
        fact = f"{s.name} has the DOI {p.doi}"
    elif ask in _VENUE_ASKS and (p.venue or p.journal_ref):
        fact = (f"{s.name} appeared at {p.journal_ref or p.venue}"
                + (f" {p.year}" if p.year and str(p.year) not in (p.journal_ref or "") else ""))
    elif ask in _VENUE_ASKS and venue_note:
        fact = f"{s.name}: {venue_note.rstrip('.')}"
    elif p.date or p.year:
        fact = f"{s.name} is dated {p.date or p.year}"
    return f"{fact} [{s.n}]." if fact else None


def record_gap(question: str, paper: Paper) -> str | None:
    """Why a question for a field of a named paper's record was declined, when the record has
    no such field ("Who wrote GPipe?" over a file of bare abstracts): said, with where the
    record was read from, so that the gap reads as the library's and not as a failure."""
    fields = record_fields(paper)
    missing = [_FIELD_NAMES[name] for name, pattern in RECORD_ASKS.items()
               if {"date": ASKS_DATE, "authors": ASKS_AUTHORS}.get(name, pattern).search(question)
               and not fields[name]]
    if not missing:
        return None
    name = short_label(paper.title, paper.label)
    return f"the record of {name} in this index has no {' or '.join(missing)} ({paper.source} gives none)"
