"""The values that travel between the answering stages and out to the faces.

`AskOptions` is what a caller asks for (the CLI builds it, the API request models extend it,
the thin client sends it); `Answer` is the one finished answer, whose `to_public()` is the
documented JSON object of `rag ask --json`, `POST /ask` and the evals; the `*Event` classes
are what `Pipeline.stream()` yields while it works.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field
from pydantic_core import PydanticCustomError

from rag.corpus.paper import Paper
from rag.corpus.text import short_label
from rag.question import KINDS, Question

if TYPE_CHECKING:
    from rag.retrieve import Filters, PaperHit

MAX_QUESTION = 2000
MAX_K = 50


def checked_question(text: str, hint: str = "type a question") -> str:
    """The question stripped; InputError when it is empty or over MAX_QUESTION characters."""
    from rag.errors import InputError

    text = text.strip()
    if not text:
        raise InputError("the question is empty", hint)
    if len(text) > MAX_QUESTION:
        raise InputError(f"the question is {len(text)} characters; at most {MAX_QUESTION}", "shorten it")
    return text


def _short_year(v: str | int | None) -> str | int | None:
    if isinstance(v, str) and len(v) > 20:
        raise ValueError("a year or range is at most 20 characters")
    return v


def _not_bool(v: Any) -> Any:
    if isinstance(v, bool):  # JSON true is no year (pydantic would read it as 1)
        raise PydanticCustomError("int_type", "Input should be a year, not true or false")
    return v


def _not_blank(v: Any) -> Any:
    if isinstance(v, str) and not v.strip():  # was taken for no filter, silently
        raise PydanticCustomError("string_too_short", "the filter is empty (leave it out to keep every paper)")
    return v


NotBlank = AfterValidator(_not_blank)  # a filter's value: an empty one is refused
YearFilter = Annotated[str | int | None, BeforeValidator(_not_bool), AfterValidator(_short_year), NotBlank,
                       Field(description="A year or range: 2023, 2022-2023, 2022-, -2023.")]


class AskOptions(BaseModel):
    """How to answer: the same fields on the command line, in API requests and in the client."""

    model_config = ConfigDict(extra="forbid")

    k: int | None = Field(None, ge=1, le=MAX_K, description="Papers to answer from (default 8).")
    llm: Literal["auto", "ollama", "openai", "none"] | None = Field(
        None, description="auto: the model server if it answers, else offline; none: offline; "
        "ollama: only Ollama; openai: only the OpenAI-compatible server (RAG_OPENAI_BASE_URL)."
    )
    model: str | None = Field(None, min_length=1, max_length=200, description="Model name.")
    strict: bool = Field(False, description="Drop sentences their citations do not support.")
    judge: Literal["default", "model", "ollama"] = Field(
        "default", description="Support judge: the embedding judge, or the answering model "
        "(model; ollama is the same).")
    venue: Annotated[str | None, NotBlank] = Field(
        None, max_length=200, description="Venue/journal ref contains this.")
    year: YearFilter = None
    source: Annotated[str | None, NotBlank] = Field(
        None, max_length=500, description="Source file path contains this.")
    category: Annotated[str | None, NotBlank] = Field(
        None, max_length=100, description="arXiv category, e.g. cs.DC (papers that carry it).")
    author: Annotated[str | None, NotBlank] = Field(
        None, max_length=200, description="Only papers with this author: a surname or full name (Hwang, C. Hwang).")

    def to_filters(self) -> Filters:
        from rag.retrieve import Filters

        return Filters.parse(self.venue, self.year, self.source, category=self.category, author=self.author)

    def for_request(self) -> dict[str, Any]:
        """The fields a caller set, as a JSON request body carries them."""
        return self.model_dump(exclude_defaults=True)


class FilterFields(BaseModel):
    """The filters of an API request given apart (`"filters": {...}`), and of an OpenAI one."""

    model_config = ConfigDict(extra="forbid")

    venue: Annotated[str | None, NotBlank] = Field(None, max_length=200, description="Venue/journal ref contains this.")
    year: YearFilter = None
    source: Annotated[str | None, NotBlank] = Field(None, max_length=500, description="Only papers read from a file whose path contains this (any of a merged paper's files).")
    category: Annotated[str | None, NotBlank] = Field(None, max_length=100, description="arXiv category, e.g. cs.DC.")
    author: Annotated[str | None, NotBlank] = Field(None, max_length=200, description="An author's surname or full name.")


@dataclass(frozen=True)
class Source:
    """A paper the answer may cite, under the number its [n] markers use."""

    n: int
    paper: Paper
    relevance: float
    named: bool = False  # the question names it (by name, or by a field of its record)

    @property
    def name(self) -> str:
        return short_label(self.paper.title, self.paper.label)

    def header(self) -> str:
        """The record's fields besides the abstract, which a sentence may cite too: one
        sentence per kind of field, each led by the paper's name ("Petals: Alexander Borzunov,
        ..., Colin Raffel."), so that the judge compares "Petals is by ..." with the authors and
        "Gopher appeared at MLSys 2023" with the venue (cosine 0.90 and 0.84), not with the
        whole record (0.21 for the authors: the title's words outweigh the names). Comments
        ("Accepted by ACM Multimedia 2023") are fields too."""
        p = self.paper
        groups = [[p.title or ""], [", ".join(p.authors)], [p.venue or "", str(p.year or "")],
                  [f"arXiv:{p.arxiv_id}" if p.arxiv_id else "", p.doi or "", p.journal_ref or "",
                   p.date or ""], ["; ".join(p.comments)]]
        fields = [" ".join(b for b in g if b) for g in groups]
        return " ".join(f"{self.name}: {f.rstrip('.')}." for f in fields if f) or self.name


@dataclass
class SentenceCheck:
    """One unit of the final answer (a sentence or list item) and what the judge found."""

    text: str
    citations: list[int]
    supported: bool
    support: float
    quote: str = ""
    reasons: list[str] = field(default_factory=list)
    meta: bool = False  # a header such as "3 of the 60 abstracts match:", not a claim
    # Does it address what the question asks (rag.relevance.addresses)? None: not judged (a
    # list's item, a header, a question about a record's fields).
    addresses: bool | None = None
    # "supported", "contradicted" (quote: the sentence that contradicts it) or "not_supported"
    # (the cited abstracts do not say it, or it cites nothing); defaults to what `supported` says.
    verdict: str = ""
    attributed: bool = False  # its citation was added by rag: the writer cited nothing that says it

    def __post_init__(self) -> None:
        if not self.verdict:
            self.verdict = "supported" if self.supported else "not_supported"
        self.supported = self.verdict == "supported"

    def to_public(self) -> dict[str, Any]:
        return {"text": self.text, "citations": self.citations, "supported": self.supported,
                "verdict": self.verdict, "attributed": self.attributed,
                "support": self.support, "quote": self.quote, "addresses": self.addresses}


class QuestionRead(BaseModel):
    """How rag read the question (rag.question.Question): `question` in `rag ask --json`,
    `/ask` and MCP's ask result."""

    text: str = Field(description="The question as asked.")
    standalone: str = Field(description="As answered: a follow-up made stand-alone.")
    kind: Literal[KINDS] = Field(description=(  # type: ignore[valid-type]
        "compare, list, definition (what a name stands for), metadata (a field of a paper's "
        "record), figure (it gives a figure), count (how many), summary (what a named paper "
        "does) or fact."))
    names: list[str] = Field(description="The papers of the index it names.")
    topic: str = Field(description="A list question's topic: what its papers are to be about.")
    aspect: str = Field(description="A comparison's: in what respect the papers are compared.")
    figure: str | None = Field(description="A figure it gives, such as '2.5x'.")
    record: str | None = Field(description="The field of a paper's record it asks for: authors, "
                                           "date, venue, doi or arxiv_id.")
    follow_up: bool = Field(description="It was rewritten to stand alone from the conversation.")
    filters: dict[str, str | int] = Field(description="The filters it was asked with.")


@dataclass
class Answer:
    question: Question
    standalone_question: str
    answer: str
    abstained: bool
    answerer: str
    sources: list[Source]  # cited sources, numbered 1..m in order of first use
    sentences: list[SentenceCheck]  # the checked claims (headers are not among them)
    dropped_citations: int = 0
    incomplete: bool = False
    error: dict[str, str] | None = None  # why the answer is incomplete: {"message", "hint"}
    notices: list[str] = field(default_factory=list)
    list_question: bool = False
    matched: int = 0  # papers judged relevant
    corpus_size: int = 0
    timings_ms: dict[str, float] = field(default_factory=dict)
    finish_reason: str = "stop"  # "length": the model hit its token limit; "error": its stream broke off
    usage: dict[str, int] | None = None  # the model's prompt/completion token counts
    budget: dict[str, Any] | None = None  # the prompt as fitted (rag.answering.budget.Fitted.public())
    rewritten_citations: list[dict[str, str]] = field(default_factory=list)
    table: dict[str, Any] | None = None  # a comparison's table (rag.answering.tables.Table.to_public())
    # An abstention's closest passages {paper_id, label, title, quote, score, relevance}.
    nearest: list[dict[str, Any]] = field(default_factory=list)

    def to_public(self) -> dict[str, Any]:
        """The documented JSON object (docs/reference/json.md)."""
        quotes: dict[int, tuple[float, str]] = {}
        for s in self.sentences:
            for n in s.citations:
                if s.quote and s.support > quotes.get(n, (-1.0, ""))[0]:
                    quotes[n] = (s.support, s.quote)
        return {
            "question": self.question.to_public(),
            "standalone_question": self.standalone_question,
            "answer": self.answer,
            "abstained": self.abstained,
            "answerer": self.answerer,
            "citations": [
                {"n": s.n, "name": s.name, **{k: v for k, v in s.paper.to_dict().items() if k in _CITED},
                 "quote": quotes.get(s.n, (0.0, ""))[1]}
                for s in self.sources
            ],
            "sentences": [s.to_public() for s in self.sentences],
            "dropped_citations": self.dropped_citations,
            "rewritten_citations": self.rewritten_citations,
            "incomplete": self.incomplete,
            "finish_reason": self.finish_reason,
            "error": self.error,
            "list_question": self.list_question,
            "matched": self.matched,
            "corpus_size": self.corpus_size,
            "notices": self.notices,
            "usage": self.usage,
            "budget": self.budget,
            "timings_ms": {k: round(v, 1) for k, v in self.timings_ms.items()},
            "table": self.table,
            "nearest": self.nearest,
        }


# The paper fields a citation carries (the rest are in GET /papers/{id}).
_CITED = ("paper_id", "title", "label", "authors", "venue", "year", "source", "arxiv_id", "doi",
          "abstract")


def search_public(query: str, index: str, hits: list[PaperHit]) -> dict[str, Any]:
    """The object `rag search --json` prints and GET /search returns."""
    return {"query": query, "index": index, "results": [
        {"rank": h.rank, "paper_id": h.paper.paper_id, "title": h.paper.title,
         "label": h.paper.label, "authors": h.paper.authors, "venue": h.paper.venue,
         "year": h.paper.year, "arxiv_id": h.paper.arxiv_id, "source": h.paper.source,
         "score": round(h.score, 6), "relevance": round(h.relevance, 4),
         "abstract": h.paper.abstract, "matched": h.matched}
        for h in hits]}


# -- what Pipeline.stream() yields --------------------------------------------------------


@dataclass(frozen=True)
class NoticeEvent:
    """Something the user should know (answering offline, the stream broke off)."""

    message: str
    kind: Literal["notice"] = "notice"


@dataclass(frozen=True)
class ProgressEvent:
    """Work under way with nothing to show yet ("thinking"): a face may show a spinner."""

    stage: str
    kind: Literal["progress"] = "progress"


@dataclass(frozen=True)
class TokenEvent:
    """Raw text from the writer, before its citations are checked: for progress only.
    Faces show SentenceEvent.delta, which is what the final answer says."""

    text: str
    kind: Literal["token"] = "token"


@dataclass(frozen=True)
class SentenceEvent:
    """One unit of the final answer, cleaned, renumbered and checked. The answer text is the
    concatenation of every `delta` (the unit with the separator that precedes it)."""

    delta: str
    check: SentenceCheck
    kind: Literal["sentence"] = "sentence"

    def to_public(self) -> dict[str, Any]:
        return {**self.check.to_public(), "delta": self.delta, "meta": self.check.meta}


@dataclass(frozen=True)
class DoneEvent:
    answer: Answer
    kind: Literal["done"] = "done"


Event = NoticeEvent | ProgressEvent | TokenEvent | SentenceEvent | DoneEvent
