"""Request and response models of the HTTP API (they are what the OpenAPI schema documents).

Response models mirror the JSON the CLI prints (`rag ask --json`, `rag search --json`,
`rag papers --json`); they allow extra fields so that a field the pipeline adds later is passed
through rather than silently dropped.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator, model_validator
from pydantic_core import PydanticCustomError

from rag.corpus.paper import Paper
from rag.schema import MAX_K, MAX_QUESTION, AskOptions, QuestionRead
from rag.schema import FilterFields as _Filters

MAX_MESSAGES = 50
# OpenAI clients send the whole conversation every turn: a long one is trimmed to its last
# turns (rag condenses follow-ups from the last few), not refused. A count well above what the
# body limit (RAG_MAX_BODY_KB) lets through at its default; it bounds the work where it is raised.
MAX_OPENAI_MESSAGES = 100_000
OPENAI_HISTORY = 20  # /v1: the turns answered from; the limits below count only them there
MAX_MESSAGE_CHARS = 20_000  # earlier turns (answers) may be long; the question itself <= 2000
MAX_TOTAL_CHARS = 200_000  # all messages of one request together (bounds the work per request)


def _total_chars(texts: list[str]) -> None:
    if sum(map(len, texts)) > MAX_TOTAL_CHARS:
        raise ValueError(f"the messages are at most {MAX_TOTAL_CHARS} characters together")


class _Public(BaseModel):
    model_config = ConfigDict(extra="allow")


# -- errors ----------------------------------------------------------------------------------


class ErrorPublic(_Public):
    """Every failure: what went wrong and what to do about it."""

    error: str = Field(description="What went wrong.")
    hint: str = Field("", description="What to do about it.")
    type: str = Field("RagError", description="Error class (InputError, LLMUnavailable, ...).")


class FieldErrorPublic(_Public):
    loc: list[str | int] = Field(description="Where the bad value is, e.g. ['body', 'question'].")
    msg: str
    type: str


class ValidationErrorPublic(ErrorPublic):
    """A 422: the request breaks a limit; `fields` names the offending fields."""

    fields: list[str] = Field(description="Dotted names of the offending fields, e.g. 'question'.")
    detail: list[FieldErrorPublic]


# -- answers ---------------------------------------------------------------------------------


class _PaperRefPublic(_Public):
    """The fields that name a paper in citations and search hits."""

    paper_id: str
    title: str | None
    label: str
    authors: list[str]
    venue: str | None
    year: int | None
    arxiv_id: str | None
    source: str


class CitationPublic(_PaperRefPublic):
    n: int = Field(description="The number used by the [n] markers of the answer.")
    name: str = Field(description="What the answer calls the paper (e.g. 'GPipe').")
    doi: str | None = None
    quote: str = Field(description="The abstract sentence that best supports a claim citing it.")
    abstract: str


class SentencePublic(_Public):
    text: str
    citations: list[int]
    supported: bool = Field(description="Whether the cited abstracts support the sentence.")
    verdict: Literal["supported", "contradicted", "not_supported"] = Field(
        description="supported; contradicted (quote: the abstract's sentence that contradicts it); "
                    "not_supported (the cited abstracts do not say it).")
    attributed: bool = Field(False, description="Its citation was added by rag: the model cited no "
                             "source that says it, and this one does.")
    support: float
    quote: str
    addresses: bool | None = Field(None, description="Whether the sentence addresses what was asked "
                                   "(null: not judged, as a list's item).")


class CellPublic(_Public):
    text: str
    citations: list[int]
    supported: bool | None = Field(None, description="Whether the cited abstract supports the cell.")


class RowPublic(_Public):
    paper_id: str
    label: str
    cells: list[CellPublic]


class TablePublic(_Public):
    columns: list[str] = Field(description="What each cell of a row holds (the paper is the row).")
    rows: list[RowPublic]


class NearestPublic(_Public):
    paper_id: str
    label: str
    title: str | None
    quote: str = Field(description="The paper's sentence closest to the question.")
    score: float
    relevance: float


class ExportPublic(_Public):
    format: Literal["bibtex", "ris", "csl-json"]
    text: str = Field(description="The cited papers as one BibTeX, RIS or CSL-JSON document.")


class AnswerPublic(_Public):
    """The object `rag ask --json` prints."""

    question: QuestionRead = Field(description="How rag read the question.")
    standalone_question: str = Field(description="The question after condensing a follow-up.")
    answer: str = Field(description="The answer text with [n] citation markers.")
    abstained: bool
    answerer: str = Field(description="'extractive' (offline), 'ollama:<model>' or 'openai:<model>'.")
    citations: list[CitationPublic]
    sentences: list[SentencePublic]
    dropped_citations: int
    rewritten_citations: list[dict[str, str]] = Field(
        description="Citation markers the model wrote in another style, as rewritten: "
                    "[{\"from\": \"(Source 1)\", \"to\": \"[1]\"}].")
    incomplete: bool
    finish_reason: Literal["stop", "length", "error"] = Field(
        description="'length' when the model stopped at its token limit or rag stopped it (a "
                    "repetition loop, RAG_ANSWER_TIMEOUT; a notice says which), 'error' when its "
                    "stream broke off (`error` says why); the answer is incomplete in each.")
    error: dict[str, str] | None = Field(
        None, description="Why the answer is incomplete (the model's stream broke off): message, hint."
    )
    list_question: bool
    matched: int
    corpus_size: int
    notices: list[str]
    usage: dict[str, int] | None = Field(
        None, description="The model's prompt_tokens and completion_tokens (the server's counts).")
    budget: dict[str, Any] | None = Field(
        None, description="How the prompt was fitted to the model's context: context (tokens), "
        "prompt_tokens (rag's estimate), max_tokens (the answer's budget as sent), left_out and "
        "cut (sources left out, abstracts cut short); null offline.")
    timings_ms: dict[str, float]
    table: TablePublic | None = Field(
        None, description="A comparison question's table: one row per paper, cells cited.")
    nearest: list[NearestPublic] = Field(
        default_factory=list,
        description="When the answer abstains: the closest passages, which do not answer it.")
    export: ExportPublic | None = Field(
        None, description="The cited papers in the format `export` asked for (POST /ask).")


class _AnswerOptions(AskOptions):
    filters: _Filters | None = Field(None, description="venue/year/source/category/author (or give them at the top level).")

    def options(self) -> AskOptions:
        """The AskOptions of this request, filters given nested or at the top level."""
        values = self.model_dump(include=set(AskOptions.model_fields))
        nested = self.filters.model_dump(exclude_none=True) if self.filters else {}
        for key, value in nested.items():
            if values.get(key) is None:
                values[key] = value
        return AskOptions(**values)


class AskRequest(_AnswerOptions):
    """The options of `rag ask`; filters go at the top level or in `filters`."""

    question: str = Field(min_length=1, max_length=MAX_QUESTION)
    export: Literal["bibtex", "ris", "csl-json"] | None = Field(
        None, description="Also return the cited papers in this format (`export` in the answer).")

    @field_validator("question")
    @classmethod
    def _not_blank(cls, v: str) -> str:  # a 422 naming the field, as the empty question is
        if not v.strip():
            raise PydanticCustomError("string_too_short", "the question is empty")
        return v


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["user", "assistant", "system"]
    content: str = Field(max_length=MAX_MESSAGE_CHARS)


class ChatRequest(_AnswerOptions):
    messages: list[ChatMessage] = Field(
        min_length=1, max_length=MAX_MESSAGES,
        description="The conversation so far; the last message is the user's question.",
    )
    stream: bool = Field(False, description="Answer as server-sent events (token, final, error).")

    @model_validator(mode="after")
    def _not_huge(self) -> ChatRequest:
        _total_chars([m.content for m in self.messages])
        return self


# -- search and papers -----------------------------------------------------------------------


class SearchHitPublic(_PaperRefPublic):
    rank: int
    score: float
    relevance: float
    abstract: str
    matched: list[str]


class SearchResultsPublic(_Public):
    """The object `rag search --json` prints."""

    query: str
    index: str
    results: list[SearchHitPublic]


def _paper_model() -> type[BaseModel]:
    """PaperPublic, made from rag.corpus.Paper: the fields Paper.to_dict() returns, with the
    record's types and defaults, so that the schema never needs a second list kept in step."""
    hints = get_type_hints(Paper)
    spec: dict[str, Any] = {}
    for f in dataclasses.fields(Paper):
        if f.name in Paper.INTERNAL:
            continue
        if f.default is not dataclasses.MISSING:
            default: Any = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = Field(default_factory=f.default_factory)
        else:
            default = ...
        spec[f.name] = (hints[f.name], default)
    return create_model("PaperPublic", __base__=_Public, **spec)


PaperPublic = _paper_model()


class PaperListPublic(_Public):
    """The object `rag papers --json` prints."""

    papers: list[PaperPublic]  # type: ignore[valid-type]  # a model made at import


class VenuePublic(_Public):
    venue: str
    papers: int


class VenueListPublic(_Public):
    """The venues of the index's papers, by name, each with its count (the page's filter)."""

    venues: list[VenuePublic]


# -- health ----------------------------------------------------------------------------------


class OllamaStatusPublic(_Public):
    host: str
    model: str
    reachable: bool
    model_present: bool
    error: str | None = None


class HealthPublic(_Public):
    status: Literal["ok", "error"] = Field(description="error: the index cannot be read (see index_error).")
    index_error: str | None = None
    version: str
    index: str
    papers: int
    chunks: int
    embedding_model: str
    llm: str = Field(description="The default answerer mode (auto, ollama, openai, none).")
    ollama: OllamaStatusPublic
    openai: OllamaStatusPublic | None = Field(
        None, description="The OpenAI-compatible server (host: RAG_OPENAI_BASE_URL), when one is set.")
    auth_required: bool


# -- OpenAI-compatible -----------------------------------------------------------------------


class OpenAIContentPart(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: str
    text: str | None = None


class OpenAIMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[OpenAIContentPart] | None = None

    def text(self) -> str:
        if isinstance(self.content, list):
            return "\n".join(p.text or "" for p in self.content if p.type == "text")
        return self.content or ""


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: bool = False


class ChatCompletionRequest(_Filters):
    """OpenAI's chat completion request; OpenAI fields rag has no use for (temperature, ...)
    are ignored, those it cannot honour (n > 1, tools) are refused."""

    model_config = ConfigDict(extra="allow")

    model: str = Field("rag", description="'rag', 'rag-offline' or 'rag:<ollama model>'.")
    messages: list[OpenAIMessage] = Field(min_length=1, max_length=MAX_OPENAI_MESSAGES)
    stream: bool | None = Field(False, description="null: false, as OpenAI takes it.")
    stream_options: StreamOptions | None = None
    n: int | None = Field(None, description="Only 1 is supported.")
    k: int | None = Field(None, ge=1, le=MAX_K, description="rag extension: papers to answer from.")
    strict: bool = Field(False, description="rag extension: drop unsupported sentences.")
    # The lengths of the messages answered from are checked by the route (older turns are
    # trimmed, whatever their length), which names the message at fault.


class AssistantMessagePublic(_Public):
    role: Literal["assistant"]
    content: str


class ChoicePublic(_Public):
    index: int
    message: AssistantMessagePublic
    finish_reason: str


class UsagePublic(_Public):
    """Ollama's own counts when a model answered; offline, counted with the embedding
    model's WordPiece tokenizer."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatCompletionPublic(_Public):
    """An OpenAI chat completion, plus `references` (the cited papers) and `rag` (the answer)."""

    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[ChoicePublic]
    usage: UsagePublic
    references: list[CitationPublic] = Field(description="The papers the [n] markers cite.")
    rag: dict[str, Any] = Field(description="answerer, abstained, incomplete, notices, sentences.")


class ModelPublic(_Public):
    id: str
    object: Literal["model"]
    created: int
    owned_by: str


class ModelListPublic(_Public):
    object: Literal["list"]
    data: list[ModelPublic]
