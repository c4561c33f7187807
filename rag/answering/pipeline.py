"""The one pipeline behind `rag ask`, `rag chat`, the HTTP API and the evals; it only
orchestrates the stages:

question -> (condense a follow-up) -> choose sources -> write (Ollama, or offline from the
abstracts) -> check each unit (normalise, renumber, judge) -> Answer.

`stream()` yields the typed events of rag.schema as it goes; `answer()` drains it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field

from rag.answering.check import Checker
from rag.answering.extractive import ExtractiveWriter
from rag.answering.followup import condense
from rag.answering.generate import Ending, messages, model_text
from rag.answering.names import CorpusNames
from rag.answering.sources import Selection, SourceChooser
from rag.config import Settings
from rag.errors import InputError, LLMUnavailable, ModelNotFound
from rag.judge import Judge, OllamaJudge
from rag.llm import Ollama, StreamBroken
from rag.prompts import NO_ANSWER, templates
from rag.retrieve import Retriever
from rag.schema import (
    MAX_QUESTION,
    Answer,
    AskOptions,
    DoneEvent,
    Event,
    NoticeEvent,
    ProgressEvent,
    Source,
    TokenEvent,
)


@dataclass
class _Run:
    """What one answer accumulates besides its text."""

    question: str
    standalone: str
    notices: list[str] = field(default_factory=list)
    answerer: str = "extractive"
    incomplete: bool = False
    error: dict[str, str] | None = None
    ending: Ending | None = None
    timings: dict[str, float] = field(default_factory=dict)


class Pipeline:
    """Loads the retriever, judge and prompts once; answers many questions, from many threads."""

    def __init__(self, settings: Settings, retriever: Retriever | None = None) -> None:
        self.settings = settings
        self.retriever = retriever or Retriever(settings)
        self.templates = templates()
        self.judge = Judge(self.retriever.embedder)
        self.names = CorpusNames(self.retriever)
        self.chooser = SourceChooser(self.retriever, self.judge, settings.min_relevance)
        self.extractive = ExtractiveWriter(self.retriever, self.judge)
        self._clients: dict[str, Ollama] = {}
        self._lock = threading.Lock()

    def client(self, model: str | None = None) -> Ollama:
        """One Ollama client per model, reused across answers (its HTTP pool is thread-safe)."""
        name = model or self.settings.model
        with self._lock:
            if name not in self._clients:
                s = self.settings
                self._clients[name] = Ollama(s.ollama_host, name, s.llm_timeout, s.num_ctx)
            return self._clients[name]

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the Ollama clients (their HTTP connections)."""
        with self._lock:
            for c in self._clients.values():
                c.close()
            self._clients.clear()

    def refresh_names(self) -> None:
        """Let the judge know every paper's name, including papers ingested since the last call."""
        self.names.refresh()
        self.judge.known_names = self.names.known

    def corpus_size(self) -> int:
        return len(self.retriever.snapshot().papers)

    def answer(self, question: str, options: AskOptions | None = None, *,
               history: list[dict[str, str]] | None = None, instructions: str | None = None) -> Answer:
        for event in self.stream(question, options, history=history, instructions=instructions):
            if isinstance(event, DoneEvent):
                return event.answer
        raise AssertionError("the answer stream ended without its answer")  # pragma: no cover

    def stream(self, question: str, options: AskOptions | None = None, *,
               history: list[dict[str, str]] | None = None,
               instructions: str | None = None) -> Generator[Event, None, None]:
        """Answer a question, yielding events as the answer is written and checked; the last
        event is DoneEvent(answer). Closing the iterator stops the work (and the model)."""
        started = time.perf_counter()
        question = question.strip()
        if not question:
            raise InputError("the question is empty", "type a question")
        if len(question) > MAX_QUESTION:
            raise InputError(f"the question is {len(question)} characters; at most {MAX_QUESTION}",
                             "shorten it")
        opts = options or AskOptions()
        mode = opts.llm or self.settings.llm
        filters = opts.to_filters()
        client = self.client(opts.model) if mode != "none" else None
        self.refresh_names()
        standalone = condense(question, history or [], self.names, self.templates["condense"],
                              client if mode == "ollama" else None)
        run = _Run(question, standalone)

        t0 = time.perf_counter()
        chosen = self.chooser.choose(standalone, opts.k or self.settings.k, filters)
        run.timings["retrieve"] = (time.perf_counter() - t0) * 1000
        judge = self.judge
        if opts.judge == "ollama":
            judge = OllamaJudge(self.retriever.embedder, client or self.client())
            judge.known_names = self.names.known
        header = [f"{len(chosen.sources)} of the {self.corpus_size()} abstracts match:"] \
            if chosen.list_question and chosen.sources else []
        checker = Checker(chosen.sources, judge, opts.strict, prelude=header)

        t1 = time.perf_counter()
        if chosen.sources and client is not None:
            try:
                yield from self._write_with_model(client, chosen, checker, run, instructions)
            except (LLMUnavailable, ModelNotFound) as exc:
                if mode == "ollama":
                    raise
                run.answerer = "extractive"
                message = (f"{exc.message}; answering offline from the abstracts "
                           f"(to use a model: {exc.hint})")
                run.notices.append(message)
                yield NoticeEvent(message)
                client = None
        if client is None or not chosen.sources:
            text = self.extractive.write(standalone, chosen.sources, chosen.list_question) \
                if chosen.sources else NO_ANSWER
            yield from checker.feed(text)
        yield from checker.flush()
        run.timings["generate"] = (time.perf_counter() - t1) * 1000 - checker.judge_ms
        run.timings["check"] = checker.judge_ms
        run.timings["total"] = (time.perf_counter() - started) * 1000
        yield DoneEvent(self._finish(run, chosen, checker))

    def _write_with_model(self, client: Ollama, chosen: Selection, checker: Checker, run: _Run,
                          instructions: str | None) -> Iterator[Event]:
        prompt = messages(self.templates, run.standalone, chosen.sources, instructions)
        run.answerer = f"ollama:{client.model}"
        try:
            for item in model_text(client, prompt):
                if isinstance(item, Ending):
                    run.ending = item
                elif isinstance(item, ProgressEvent):
                    yield item
                else:
                    yield TokenEvent(item)
                    yield from checker.feed(item)
        except StreamBroken as exc:  # what came was fed to the checker as it came
            run.incomplete, run.error = True, {"message": exc.message, "hint": exc.hint}
            message = f"{exc.message} — the answer is incomplete"
            run.notices.append(message)
            yield NoticeEvent(message)
            return
        if run.ending and run.ending.reason == "length":
            run.incomplete = True
            message = ("the model stopped at its token limit (RAG_NUM_PREDICT) — the answer "
                       "is incomplete")
            run.notices.append(message)
            yield NoticeEvent(message)
        if chosen.list_question and not checker.abstaining and checker.claims:
            missing = [s for s in chosen.sources if s.n not in checker.cited()]
            if missing:  # the model left out papers that match: say so, from their abstracts
                yield from checker.feed("\nAlso matching:\n"
                                        + self.extractive.list_lines(run.standalone, missing))

    def _finish(self, run: _Run, chosen: Selection, checker: Checker) -> Answer:
        by_n = {s.n: s for s in chosen.sources}
        used = sorted((new, by_n[old]) for old, new in checker.order.items())
        ending = run.ending
        return Answer(
            question=run.question, standalone_question=run.standalone, answer=checker.text,
            abstained=checker.abstained, answerer=run.answerer,
            sources=[Source(new, s.paper, s.relevance) for new, s in used],
            sentences=checker.checks, dropped_citations=checker.dropped,
            incomplete=run.incomplete, error=run.error, notices=run.notices,
            list_question=chosen.list_question, matched=chosen.matched,
            corpus_size=self.corpus_size(), timings_ms=run.timings,
            finish_reason="length" if ending and ending.reason == "length" else "stop",
            usage=({"prompt_tokens": ending.prompt_tokens or 0,
                    "completion_tokens": ending.completion_tokens or 0}
                   if ending and ending.prompt_tokens is not None else None),
            rewritten_citations=checker.rewrites,
        )
