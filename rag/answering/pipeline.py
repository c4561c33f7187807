"""The one pipeline behind `rag ask`, `rag chat`, the HTTP API and the evals; it only
orchestrates the stages: question -> (condense a follow-up) -> choose sources -> write (a
model, or offline from the abstracts) -> check each unit (normalise, renumber, judge) -> Answer.

`stream()` yields the typed events of rag.schema as it goes; `answer()` drains it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Generator, Iterator
from typing import Any

from rag.answering import compare
from rag.answering.budget import fit
from rag.answering.check import Checker
from rag.answering.extractive import ExtractiveWriter
from rag.answering.followup import condense
from rag.answering.generate import messages
from rag.answering.metadata import record_gap
from rag.answering.names import CorpusNames
from rag.answering.sources import Selection, SourceChooser
from rag.answering.writing import Run, write_with_model
from rag.config import Settings
from rag.errors import LLMError
from rag.judge import Judge, OllamaJudge
from rag.llm import ModelClient, connect, server_kind
from rag.llm.guard import Deadline, DeadlinePassed
from rag.prompts import NO_ANSWER, templates
from rag.question import Question, read_question
from rag.retrieve import Filters, PaperHit, Retriever
from rag.schema import (
    Answer,
    AskOptions,
    DoneEvent,
    Event,
    NoticeEvent,
    SentenceCheck,
    SentenceEvent,
    Source,
    checked_question,
)

NEAREST = 3  # passages shown with an abstention: a few to judge the refusal by, not a reading list


class Pipeline:
    """Loads the retriever, judge and prompts once; answers many questions, from many threads."""

    def __init__(self, settings: Settings, retriever: Retriever | None = None) -> None:
        self.settings = settings
        self.retriever = retriever or Retriever(settings)
        self.templates = templates()
        self.judge = Judge(self.retriever.embedder)
        self.names = CorpusNames(self.retriever)
        # one fitted relevance model (rag.relevance) decides for both stages
        self.chooser = SourceChooser(self.retriever, self.judge)
        self.extractive = ExtractiveWriter(self.retriever, self.judge, self.chooser.relevance)
        self._clients: dict[tuple[str, str | None], ModelClient] = {}
        self._model_judges: dict[int, OllamaJudge] = {}
        self._lock = threading.Lock()

    def client(self, model: str | None = None, mode: str | None = None) -> ModelClient:
        """One client per server and model, reused across answers (its HTTP pool is
        thread-safe); `mode`: auto, ollama or openai (default: the settings')."""
        kind = server_kind(self.settings, mode or self.settings.llm)
        with self._lock:
            if (kind, model) not in self._clients:
                self._clients[kind, model] = connect(self.settings, kind, model)
            return self._clients[kind, model]

    def model_judge(self, client: ModelClient) -> OllamaJudge:
        """The judge that asks `client`'s model, one per client: a (claim, abstract) pair asked
        once is not asked again, by later answers or by the eval's citation scores."""
        with self._lock:
            if id(client) not in self._model_judges:
                self._model_judges[id(client)] = OllamaJudge(self.retriever.embedder, client)
            judge = self._model_judges[id(client)]
        judge.known_names = self.names.known
        return judge

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the model clients (their HTTP connections)."""
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
               history: list[dict[str, str]] | None = None, instructions: str | None = None,
               cancelled: threading.Event | None = None) -> Answer:
        for event in self.stream(question, options, history=history, instructions=instructions,
                                 cancelled=cancelled):
            if isinstance(event, DoneEvent):
                return event.answer
        raise AssertionError("the answer stream ended without its answer")  # pragma: no cover

    def read(self, text: str, standalone: str, filters: Filters, follow_up: bool = False) -> Question:
        """The question read once (rag.question), with the papers of the index it names."""
        named = self.names.mentioned(standalone)
        return read_question(text, standalone, named, [self.names.display(n) for n in named],
                             filters, follow_up)

    def stream(self, question: str, options: AskOptions | None = None, *,
               history: list[dict[str, str]] | None = None,
               instructions: str | None = None,
               cancelled: threading.Event | None = None) -> Generator[Event, None, None]:
        """Answer a question, yielding events as the answer is written and checked; the last
        event is DoneEvent(answer). Closing the iterator stops the work (and the model), and so
        does `cancelled` (the client left) at once, even while the model is being waited on."""
        started = time.perf_counter()
        # One deadline for every model call of this answer (the rewrite, the answer, the
        # model judge), held by a timer (rag.llm.guard) whatever the server sends.
        deadline = Deadline(self.settings.answer_timeout, cancelled)
        text = checked_question(question)
        opts = options or AskOptions()
        mode = opts.llm or self.settings.llm
        filters = opts.to_filters()
        self.refresh_names()
        if filters.active() and not self.retriever.filtered(self.retriever.snapshot(), filters)[0]:
            # Said as such: "the abstracts do not answer this" would read as a topic the corpus
            # lacks, when a mistyped venue or year left nothing to answer from.
            yield from self._nothing_passes(self.read(text, text, filters), filters, started)
            return
        client = self.client(opts.model, mode) if mode != "none" else None
        written = self.names.as_written(text)
        standalone = condense(written, history or [], self.names, self.templates["condense"],
                              client if mode in ("ollama", "openai") else None, deadline)
        asked = self.read(text, standalone, filters, follow_up=standalone != written)
        run = Run(asked, deadline=deadline)
        t0 = time.perf_counter()
        chosen = self.chooser.choose(asked, opts.k or self.settings.k, filters,
                                     with_model=client is not None)
        run.timings["retrieve"] = (time.perf_counter() - t0) * 1000
        if chosen.unmatched is not None:
            yield from self._nothing_passes(asked, chosen.unmatched, started, (
                f"No papers match the filters the question names: {chosen.unmatched.describe()}."))
            return
        plan = self._plan(asked, chosen, filters)
        if plan and not plan.sources and (said := plan.missing.said()):
            # every paper the question names is outside the filters or not in the index: said,
            # not a table of others
            yield from self._nothing_passes(asked, filters, started, said)
            return
        plan = plan if plan and plan.sources else None  # nothing to compare: declined as any question
        judge = self._judge(opts, client, mode, deadline)
        sources = plan.sources if plan else chosen.sources
        checker = self._checker(asked, chosen, sources, judge, opts.strict, plan, client)
        t1 = time.perf_counter()
        table = None
        if sources and client is not None:
            table, client = yield from self._model_or_offline(asked, client, mode, sources, checker,
                                                              run, plan, chosen, instructions)
        checked = yield from self._write(asked, plan, table, chosen, sources, checker, judge,
                                         opts.strict, client, run)
        yield from self._left_out(checker, run, judge)
        run.timings["generate"] = (time.perf_counter() - t1) * 1000 - checker.judge_ms
        run.timings["check"] = checker.judge_ms
        yield from self._conclude(asked, run, chosen, checker, sources, checked, filters, started)

    def _judge(self, opts: AskOptions, client: ModelClient | None, mode: str,
               deadline: Deadline) -> Judge | OllamaJudge:
        """rag's verifier, or with --judge model the answering model under the deadline."""
        if opts.judge in ("model", "ollama"):
            return self.model_judge(client or self.client(opts.model, mode)).within(deadline)
        return self.judge

    def _plan(self, asked: Question, chosen: Selection, filters: Filters) -> compare.Plan | None:
        """A comparison's rows. A comparison of papers the question names goes ahead whatever
        the relevance decision says of the question as a whole: the named papers are the ones
        to compare."""
        if asked.kind != "compare":  # papers side by side, a table
            return None
        return compare.plan(
            asked, chosen.sources, self.names, self.retriever,
            lambda: self.chooser.list_members(asked, filters) if chosen.sources else [],
            filters if filters.active() else None,
        )

    def _checker(self, asked: Question, chosen: Selection, sources: list[Source],
                 judge: Judge | OllamaJudge, strict: bool, plan: compare.Plan | None,
                 client: ModelClient | None) -> Checker:
        comparing = plan is not None
        header = [f"{len(sources)} of the {self.corpus_size()} abstracts match:"] \
            if chosen.list_question and sources and not comparing else []
        # A comparison's model lines are checked but not shown as they come: the table is.
        return Checker(sources, judge, strict and not comparing, prelude=header,
                       addresses=None if chosen.list_question or comparing else self._addresses(asked),
                       verified=client is not None)

    def _model_or_offline(self, asked: Question, client: ModelClient, mode: str,
                          sources: list[Source], checker: Checker, run: Run,
                          plan: compare.Plan | None, chosen: Selection, instructions: str | None,
                          ) -> Generator[Event, None, tuple[compare.Table | None, ModelClient | None]]:
        """The model's answer; with --llm auto, when the model cannot answer (not running, no
        model, a timeout, a reply not the server's), no model: the answer is written offline."""
        try:
            table = yield from self._with_model(asked, client, sources, checker, run, plan, chosen,
                                                instructions)
            return table, client
        except LLMError as exc:
            if mode in ("ollama", "openai"):
                raise
            run.answerer, checker.verified = "extractive", False
            yield run.notice(f"{exc.message}; answering offline from the abstracts "
                             f"(to use a model: {exc.hint})")
            return None, None

    def _with_model(self, asked: Question, client: ModelClient, sources: list[Source],
                    checker: Checker, run: Run, plan: compare.Plan | None, chosen: Selection,
                    instructions: str | None) -> Generator[Event, None, compare.Table | None]:
        """The model's answer, checked as it streams; a comparison's table from its lines."""
        def build(kept: list[Source]) -> list[dict[str, str]]:
            return compare.prompt(self.templates["compare"], self.templates["system"],
                                  NO_ANSWER, asked, kept) if plan \
                else messages(self.templates, asked, kept, instructions)

        fitted = run.fitted = fit(build, sources, _window(client, run.deadline), client.num_predict)
        if shrunk := fitted.notice():
            yield run.notice(shrunk)
        for event in write_with_model(client, fitted, checker, run, self.settings.answer_timeout):
            if not (plan and isinstance(event, SentenceEvent)):
                yield event
        if plan:
            checker.flush()
            return compare.model_table(asked, sources, checker)
        if chosen.list_question:
            # The model's last line is still pending until a line ends: end it, or the paper
            # it cites would be listed again below as missing.
            yield from checker.feed("\n")
            missing = [s for s in sources if s.n not in checker.cited()]
            if missing and checker.claims and not checker.abstaining \
                    and not run.incomplete:  # a cut answer ends where the model stopped
                # the model left out papers that match: say so, from their abstracts
                yield from checker.feed("Also matching:\n"
                                        + self.extractive.list_lines(asked, missing, chosen.rule))
        return None

    def _write(self, asked: Question, plan: compare.Plan | None, table: compare.Table | None,
               chosen: Selection, sources: list[Source], checker: Checker,
               judge: Judge | OllamaJudge, strict: bool, client: ModelClient | None,
               run: Run) -> Generator[Event, None, compare.Checked | None]:
        """The comparison's checked table, or the rest of the answer: written offline from the
        abstracts when no model wrote it, and what the model's answer failed to do said."""
        if plan:
            if table is None:
                table = compare.offline_table(asked, sources, self.retriever, self.judge)
            checked = compare.check_table(table, sources, judge, strict, plan.missing)
            yield from checked.events
            return checked
        if client is None or not sources:
            # A borderline question was to be the model's to judge; without it, declined
            text = self.extractive.write(asked, sources, chosen.rule) \
                if sources and not chosen.borderline else NO_ANSWER
            yield from checker.feed(text)
        yield from checker.flush()
        if client is not None and (off := checker.nothing_supported() or checker.not_addressing()):
            yield run.notice(off)
        return None

    def _conclude(self, asked: Question, run: Run, chosen: Selection, checker: Checker,
                  sources: list[Source], checked: compare.Checked | None, filters: Filters,
                  started: float) -> Iterator[Event]:
        """The answer; an abstention with its closest passages and what a named paper's record
        lacks."""
        answer = self._finish(run, chosen, checker, sources) if checked is None \
            else self._finish_table(run, chosen, checker, checked)
        if answer.abstained:
            hits = self.retriever.search(asked.standalone, NEAREST, filters)
            answer.nearest = self.nearest(asked.standalone, hits)
            if gap := self._record_gap(asked.standalone, hits):
                answer.notices.append(gap)
                yield NoticeEvent(gap)
        run.timings["total"] = (time.perf_counter() - started) * 1000
        yield DoneEvent(answer)

    def _addresses(self, asked: Question) -> Callable[[str, list[Source]], bool | None]:
        """Whether a unit of the answer addresses what is asked (rag.relevance.addresses)."""
        check = self.extractive.addressing
        return lambda text, cited: check.addresses(asked.standalone, text, [s.paper for s in cited])

    def _nothing_passes(self, asked: Question, filters: Filters, started: float,
                        text: str = "") -> Iterator[Event]:
        text = text or f"No papers match the filters: {filters.describe()}."
        yield SentenceEvent(text, SentenceCheck(text, [], True, 0.0, meta=True))
        run = Run(asked, notices=[text])
        elapsed = (time.perf_counter() - started) * 1000
        run.timings.update(retrieve=elapsed, generate=0.0, check=0.0, total=elapsed)
        yield DoneEvent(self._answer(run, Selection([], asked.list_question, 0), text=text,
                                     abstained=True, sources=[], sentences=[]))

    def _record_gap(self, question: str, hits: list[PaperHit]) -> str | None:
        """What the record of the one paper a declined question names (among `hits`, the
        closest papers) lacks of what it asks."""
        named = set(self.chooser.relevance.named(question, [h.paper for h in hits]))
        papers = [h.paper for h in hits if h.paper.paper_id in named]
        return record_gap(question, papers[0]) if len(papers) == 1 else None

    def nearest(self, question: str, hits: list[PaperHit]) -> list[dict[str, object]]:
        """The passages closest to a question the abstracts do not answer, so the user can
        judge the refusal: each paper's (`hits`: the closest papers) sentence nearest the
        question, best first."""
        if not hits:
            return []
        qvec = self.retriever.embed_query(question)
        out = []
        for h in hits:
            score, quote = max(self.extractive.sentence_scores(question, qvec, h.paper))
            out.append({"paper_id": h.paper.paper_id, "label": h.paper.label,
                        "title": h.paper.title, "quote": quote.strip(),
                        "score": round(score, 3), "relevance": round(h.relevance, 3)})
        return sorted(out, key=lambda d: -float(d["score"]))  # type: ignore[arg-type]

    @staticmethod
    def _left_out(checker: Checker, run: Run, judge: Judge | OllamaJudge) -> Iterator[Event]:
        """Say what the checker kept from the reader: --strict's unsupported sentences, and
        an answer of citation markers alone; and the sentences the model judge gave no
        verdict on."""
        if checker.strict_dropped:
            n = checker.strict_dropped
            yield run.notice(
                f"--strict left out {n} sentence{'s' if n > 1 else ''} the cited abstracts do not "
                "support" + ("; nothing supported was left, so the answer says the abstracts do "
                             "not answer it" if checker.abstained else ""))
        if checker.empty and not checker.claims:
            yield run.notice("the model wrote only citation markers, no claims: nothing of it is shown")
        if fell := getattr(judge, "fallbacks", None):  # the model judge gave no verdict: said
            yield run.notice(f"the model judge gave no verdict on {len(fell)} sentence(s) ({fell[0]}): "
                             "rag's own verifier judged them")

    def _finish(self, run: Run, chosen: Selection, checker: Checker, sources: list[Source]) -> Answer:
        by_n = {s.n: s for s in sources}
        used = sorted((new, by_n[old]) for old, new in checker.order.items())
        return self._answer(run, chosen, text=checker.text, abstained=checker.abstained,
                            sources=[Source(new, s.paper, s.relevance) for new, s in used],
                            sentences=checker.checks, dropped_citations=checker.dropped,
                            rewritten_citations=checker.rewrites)

    def _finish_table(self, run: Run, chosen: Selection, checker: Checker,
                      checked: compare.Checked) -> Answer:
        return self._answer(run, chosen, text="".join(e.delta for e in checked.events),
                            abstained=not checked.checks, sources=checked.sources,
                            sentences=checked.checks, dropped_citations=checker.dropped,
                            rewritten_citations=checker.rewrites, table=checked.table.to_public(),
                            matched=len(checked.table.rows))  # the papers compared

    def _answer(self, run: Run, chosen: Selection, *, text: str, **fields: Any) -> Answer:
        ending = run.ending
        return Answer(
            question=run.question, standalone_question=run.question.standalone, answer=text,
            answerer=run.answerer, incomplete=run.incomplete, error=run.error,
            notices=run.notices, list_question=chosen.list_question,
            matched=fields.pop("matched", chosen.matched),
            corpus_size=self.corpus_size(), timings_ms=run.timings,
            finish_reason=_finish_reason(run),
            usage=({"prompt_tokens": ending.prompt_tokens or 0,
                    "completion_tokens": ending.completion_tokens or 0}
                   if ending and ending.prompt_tokens is not None else None),
            budget=run.fitted.public() if run.fitted else None,
            **fields,
        )


def _window(client: ModelClient, deadline: Deadline) -> int | None:
    """The model's context, or None (rag's default) once the deadline has passed: the answer
    then ends as one the deadline stopped, not as an error."""
    try:
        return client.context_window(deadline)
    except DeadlinePassed:
        return None


def _finish_reason(run: Run) -> str:
    """"stop", "length" at the model's token limit, "error" when its stream broke off."""
    return "error" if run.error is not None else \
        "length" if run.stopped or (run.ending and run.ending.reason == "length") else "stop"
