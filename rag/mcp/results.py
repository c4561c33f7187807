"""What the MCP tools return (their output schemas) and the character budget they keep to.

A model reads a tool's result in its context window, so every result stays within
`max_chars` characters (the structured JSON, and the text block beside it): a list or search
that would exceed it returns what fits and says how many more there are and how to get them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal, TypeVar

from pydantic import BaseModel, Field

from rag.corpus.paper import Paper
from rag.schema import QuestionRead

# A result's size in characters unless the caller asks otherwise: about 2,000 tokens, a small
# share of any assistant's context. The bounds keep a result useful (one paper's record fits
# in the smallest) and finite (a safety limit, not a tuned figure).
DEFAULT_MAX_CHARS = 8000
MIN_MAX_CHARS, MAX_MAX_CHARS = 1000, 200_000

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


class PaperRef(BaseModel):
    """A paper as lists and references name it."""

    paper_id: str = Field(description="The index's id: pass it to get_paper or export_citations.")
    title: str | None = None
    label: str = Field("", description="The short name the paper goes by (e.g. 'GPipe').")
    year: int | None = None
    venue: str | None = None
    arxiv_id: str | None = None
    doi: str | None = None

    @classmethod
    def of(cls, p: Paper) -> PaperRef:
        return cls(paper_id=p.paper_id, title=p.title, label=p.label, year=p.year, venue=p.venue,
                   arxiv_id=p.arxiv_id, doi=p.doi)

    def line(self) -> str:
        ids = " ".join(x for x in (self.arxiv_id and f"arXiv:{self.arxiv_id}",
                                   self.doi and f"doi:{self.doi}") if x)
        name = self.label or self.title or self.paper_id
        bits = [name, self.title if self.title and self.title != name else None,
                str(self.year) if self.year else None, ids or None]
        return f"{self.paper_id}: " + " · ".join(b for b in bits if b)


class SearchHit(PaperRef):
    rank: int
    score: float = Field(description="Fused retrieval score (higher ranks first).")
    relevance: float = Field(description="Best cosine similarity of a passage to the query.")
    best_sentence: str = Field(description="The passage of the abstract that matched best.")


class SearchResult(BaseModel):
    query: str
    index: str
    results: list[SearchHit]
    more: int = Field(0, description="Hits left out to stay within max_chars.")
    hint: str | None = Field(None, description="How to get what was left out.")


class Reference(PaperRef):
    n: int = Field(description="The number the answer's [n] markers use.")


class Verdict(BaseModel):
    text: str
    citations: list[int] = Field(description="The [n] sources the sentence cites.")
    supported: bool = Field(description="Whether the cited abstracts support the sentence.")
    verdict: str = Field("", description="supported, contradicted (quote: the abstract's sentence "
                         "that contradicts it) or not_supported (the cited abstracts do not say it).")
    attributed: bool = Field(False, description="Its citation was added by rag (the model cited no "
                             "source that says it).")
    quote: str = Field("", description="The abstract's sentence that decided the verdict.")
    support: float = Field(description="The support judge's score.")
    addresses: bool | None = Field(None, description="Whether the sentence addresses what was asked "
                                   "(null: not judged).")


class Evidence(BaseModel):
    paper_id: str
    label: str = ""
    title: str | None = None
    quote: str
    score: float


class AskResult(BaseModel):
    question: QuestionRead = Field(description="How rag read the question: its kind, the papers it names.")
    answer: str = Field(description="The answer, citing the references as [n].")
    references: list[Reference]
    sentences: list[Verdict] = Field(description="A verdict for every sentence of the answer.")
    declined: bool = Field(description="True when the abstracts do not answer the question.")
    nearest: list[Evidence] = Field(
        description="When declined: the closest passages, to judge the refusal by.")
    answerer: str = Field(description="'extractive' (offline, from the abstracts) or 'ollama'.")
    notices: list[str] = []
    left_out: str | None = Field(None, description="What was cut to stay within max_chars.")


class PaperRecord(PaperRef):
    abstract: str
    authors: list[str] = []
    journal_ref: str | None = None
    date: str | None = None
    categories: list[str] = []
    source: str = Field("", description="The file the paper was ingested from.")
    truncated: bool = Field(False, description="The abstract was cut to stay within max_chars.")


class ExportResult(BaseModel):
    format: Literal["bibtex", "ris", "csl-json"]
    count: int = Field(description="Papers in `text`.")
    text: str = Field(description="The document a reference manager imports.")
    remaining_ids: list[str] = Field(
        [], description="Papers left out to stay within max_chars: export them in another call.")


class PaperPage(BaseModel):
    papers: list[PaperRef]
    total: int = Field(description="Papers matching the filters, on all pages.")
    next_cursor: str | None = Field(None, description="Pass as `cursor` for the next page; "
                                                      "absent on the last page.")


class SourceMatch(PaperRef):
    sentence: str = Field(description="The abstract's sentence holding the quote.")
    match: Literal["exact", "near"] = Field(
        description="exact: the quote is in the abstract word for word (ignoring case, "
                    "spacing and punctuation); near: the support judge finds it stated there.")
    score: float


class SourceResult(BaseModel):
    quote: str
    found: bool
    matches: list[SourceMatch]


class IngestResult(BaseModel):
    path: str
    papers: int
    new: int
    changed: int
    unchanged: int
    removed: int
    summary: str


class IndexInfo(BaseModel):
    index: str
    papers: int


# -- the budget -------------------------------------------------------------------------------


def size(model: BaseModel) -> int:
    return len(model.model_dump_json())


def fit(items: Sequence[T], build: Callable[[Sequence[T], int], M], budget: int) -> M:
    """`build(kept, left_out)` for the longest prefix of items whose result fits the budget
    (results grow with every item, so a binary search finds it)."""
    lo, hi = 0, len(items)
    if size(build(items, 0)) <= budget:
        return build(items, 0)
    while lo < hi:  # the largest n with size(build(items[:n])) <= budget
        mid = (lo + hi + 1) // 2
        if size(build(items[:mid], len(items) - mid)) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return build(items[:lo], len(items) - lo)


def quoted(text: str, limit: int = 100) -> str:
    """A caller's string as an error message quotes it: a 100,000-character id is no message."""
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}... ({len(text):,} characters)"


def one_line(text: str, limit: int = 2000) -> str:
    """A message as one line of at most `limit` characters: a caller's text quoted in it may
    hold line breaks (U+2028 too), and a 100,000-character value is no message."""
    text = " ".join(text.splitlines())
    return text if len(text) <= limit else text[: limit - 30] + f"... ({len(text):,} characters)"


def clip(text: str, budget: int, what: str = "text") -> str:
    """Text cut to the budget, saying so."""
    if len(text) <= budget:
        return text
    note = f"\n[{what} cut to fit max_chars]"
    return text[: max(0, budget - len(note))] + note


# -- the readable text block beside each structured result ------------------------------------


def text_of(result: BaseModel) -> str:
    """The result as a person (or a model) reads it."""
    if isinstance(result, SearchResult):
        lines = [f"{h.rank}. {h.line()}\n   {h.best_sentence}" for h in result.results]
        return "\n".join(lines or ["No papers match."]) + (f"\n[{result.hint}]" if result.hint else "")
    if isinstance(result, AskResult):
        parts = [result.answer]
        for s in result.sentences:
            if s.verdict == "contradicted":
                parts.append(f"Contradicted by its citation: {s.text} (the abstract says: {s.quote})")
        unsupported = [s.text for s in result.sentences if not s.supported and s.verdict != "contradicted"]
        if unsupported:
            parts.append("Not supported by their citations: " + " | ".join(unsupported))
        if result.declined and result.nearest:
            parts.append("Closest passages, which do not answer the question:\n" + "\n".join(
                f"- {e.label or e.paper_id} ({e.paper_id}): \"{e.quote}\"" for e in result.nearest))
        if result.references:
            parts.append("References\n" + "\n".join(f"[{r.n}] {r.line()}" for r in result.references))
        if result.left_out:
            parts.append(f"[{result.left_out}]")
        return "\n\n".join(parts)
    if isinstance(result, PaperRecord):
        head = result.line()
        meta = [f"authors: {', '.join(result.authors)}" if result.authors else "",
                f"venue: {result.journal_ref or result.venue}" if result.journal_ref or result.venue else "",
                f"date: {result.date}" if result.date else "", f"source: {result.source}"]
        return "\n".join([head, *(m for m in meta if m), "", result.abstract])
    if isinstance(result, ExportResult):
        rest = (f"\n[{len(result.remaining_ids)} more paper(s) left out to stay within max_chars: "
                f"{', '.join(result.remaining_ids)}]") if result.remaining_ids else ""
        return result.text + rest
    if isinstance(result, PaperPage):
        lines = [p.line() for p in result.papers]
        more = (f"[{len(result.papers)} of {result.total} papers; next page: cursor="
                f"{result.next_cursor!r}]") if result.next_cursor else f"[{result.total} papers in all]"
        return "\n".join([*lines, more])
    if isinstance(result, SourceResult):
        if not result.found:
            return "No abstract holds this sentence, exactly or nearly."
        return "\n".join(f"{m.match}: {m.line()}\n   \"{m.sentence}\"" for m in result.matches)
    if isinstance(result, IngestResult):
        return f"{result.path}: {result.summary}"
    return result.model_dump_json(indent=1)
