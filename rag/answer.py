"""answer(): the one pipeline behind `rag ask`, `rag chat`, the HTTP API and the evals.

question -> (condense follow-up) -> retrieve -> Ollama or the offline extractive answerer
-> citations cleaned and renumbered -> every sentence checked by the judge -> Answer.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rag.citations import Unit, clean_markers, first_use_order, join_units, renumber, split_units
from rag.config import Settings
from rag.corpus.paper import Paper
from rag.corpus.text import short_label, split_sentences
from rag.errors import InputError, LLMError, LLMUnavailable, ModelNotFound
from rag.judge import Judge, OllamaJudge, content_words, strip_markers
from rag.llm import Ollama, StreamBroken
from rag.prompts import NO_ANSWER, format_source, templates
from rag.retrieve import Filters, PaperHit, Retriever

MAX_QUESTION = 2000
LIST_MAX_SOURCES = 30  # a "which papers" answer may cite more than k papers, up to this
# A paper is listed in a "which papers" answer when its best abstract sentence scores
# (cosine to the topic + LIST_OVERLAP x topic words found) at least max(LIST_MIN, LIST_FRAC x
# the best paper's score). Chosen on the 19 list questions of evals/questions.yaml, where
# chunk-level cosine alone gave precision 0.60 at recall 0.74 (see evals/README.md).
LIST_MIN, LIST_FRAC, LIST_OVERLAP = 0.45, 0.80, 0.2
# Best sentence score an offline fact answer needs; below it the abstracts "don't say".
FACT_MIN_SCORE = 0.45

_LIST_Q = re.compile(
    r"^\s*(?:which|what|list|name|find|show|are there|give me)\b.{0,40}?\b"
    r"(?:papers|systems|works|methods|approaches|frameworks|abstracts|studies|tools|"
    r"techniques|ones)\b", re.I,
)
_FOLLOW_UP = re.compile(r"\b(it|its|it's|they|them|their|this|that|these|those|he|she|the same)\b", re.I)
_QUESTION_STOP = content_words(
    "which what papers systems works methods approaches frameworks abstracts studies tools "
    "does do did paper system target targets about any report reports how much many"
)


_LIST_LEAD = re.compile(
    _LIST_Q.pattern + r"\s*(?:(?:are|is|that|which|do|does|in the corpus|here)\s+)*"
    r"(?:\w+\s+(?:on|about|with|to|for)\s+)?", re.I,
)
_BY_AUTHOR = re.compile(r"\b(write|writes|wrote|written|authors?|authored|by)\b", re.I)
_QUANTITY = re.compile(
    r"\bhow (?:much|many|fast|large|big|long|well)\b|\bspeed-?ups?\b|\bby how\b|\bwhat percentage\b|"
    r"\bfaster\b|\bimprove", re.I,
)
_META = re.compile(
    r"\b(arxiv(?:\s+id)?|doi|authors?|who wrote|written by|venue|published|journal|conference|"
    r"what year|which year|when was)\b", re.I,
)


# Words that ask nothing in particular: "What does X do?" asks for a summary of X.
_GENERIC = content_words(
    "what does do did work works working purpose goal goals main idea ideas about propose "
    "proposes proposed offer offers contribution contributions tell me describe summary summarise "
    "summarize explain overview key point points is are was were it its"
) | _QUESTION_STOP
_CONTRIBUTION = re.compile(r"\bwe (?:propose|present|introduce|design|develop|build)\b", re.I)


def _has_number(sentence: str) -> bool:
    return bool(re.search(r"\d", re.sub(r"\S*(?:https?://|www\.|github\.com)\S*", "", sentence)))


def is_list_question(q: str) -> bool:
    return bool(_LIST_Q.search(q))


def topic_of(q: str) -> str:
    """'which systems target long-sequence training?' -> 'target long-sequence training'."""
    return _LIST_LEAD.sub("", q).strip(" ?") or q


@dataclass
class Source:
    n: int
    paper: Paper
    relevance: float

    @property
    def name(self) -> str:
        return short_label(self.paper.title, self.paper.label)


@dataclass
class SentenceCheck:
    text: str
    citations: list[int]
    supported: bool
    support: float
    quote: str = ""
    reasons: list[str] = field(default_factory=list)


@dataclass
class Answer:
    question: str
    standalone_question: str
    answer: str
    abstained: bool
    answerer: str
    sources: list[Source]  # cited sources, renumbered 1..m in order of first use
    sentences: list[SentenceCheck]
    dropped_citations: int = 0
    incomplete: bool = False
    error: dict[str, str] | None = None  # why the answer is incomplete: {"message", "hint"}
    notices: list[str] = field(default_factory=list)
    list_question: bool = False
    matched: int = 0  # papers judged relevant
    corpus_size: int = 0
    timings_ms: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        quotes: dict[int, tuple[float, str]] = {}
        for s in self.sentences:
            for n in s.citations:
                if s.quote and s.support > quotes.get(n, (-1.0, ""))[0]:
                    quotes[n] = (s.support, s.quote)
        return {
            "question": self.question,
            "standalone_question": self.standalone_question,
            "answer": self.answer,
            "abstained": self.abstained,
            "answerer": self.answerer,
            "citations": [
                {
                    "n": s.n, "paper_id": s.paper.paper_id, "title": s.paper.title,
                    "label": s.paper.label, "authors": s.paper.authors, "venue": s.paper.venue,
                    "year": s.paper.year, "source": s.paper.source, "arxiv_id": s.paper.arxiv_id,
                    "quote": quotes.get(s.n, (0.0, ""))[1], "abstract": s.paper.abstract,
                }
                for s in self.sources
            ],
            "sentences": [
                {"text": s.text, "citations": s.citations, "supported": s.supported,
                 "support": s.support, "quote": s.quote}
                for s in self.sentences
            ],
            "dropped_citations": self.dropped_citations,
            "incomplete": self.incomplete,
            "error": self.error,
            "list_question": self.list_question,
            "matched": self.matched,
            "corpus_size": self.corpus_size,
            "notices": self.notices,
            "timings_ms": {k: round(v, 1) for k, v in self.timings_ms.items()},
        }


def reference_lines(sources: list[Source]) -> list[str]:
    return reference_lines_json(Answer_citations(sources))


def Answer_citations(sources: list[Source]) -> list[dict[str, Any]]:  # noqa: N802
    return [{"n": s.n, **s.paper.to_dict()} for s in sources]


def reference_lines_json(citations: list[dict[str, Any]]) -> list[str]:
    """'[1] Skrull. authors. venue year. arXiv:ID. source' for each cited paper."""
    lines = []
    for c in citations:
        p = Paper.from_dict({**c, "abstract": c.get("abstract", "")})
        s = Source(c["n"], p, 0.0)
        parts = [s.name]
        if p.title and p.title != s.name:
            parts.append(p.title)
        if p.authors:
            parts.append(", ".join(p.authors[:3]) + (" et al." if len(p.authors) > 3 else ""))
        venue = " ".join(str(x) for x in (p.venue, p.year) if x)
        if venue:
            parts.append(venue)
        if p.arxiv_id:
            parts.append(f"arXiv:{p.arxiv_id}")
        parts.append(p.source)
        lines.append(f"[{s.n}] " + ". ".join(parts))
    return lines


def record_header(s: Source) -> str:
    """The cited record's fields besides the abstract: a sentence may cite those too."""
    p = s.paper
    bits = [s.name, p.title or "", ", ".join(p.authors), p.venue or "", str(p.year or ""),
            f"arXiv:{p.arxiv_id}" if p.arxiv_id else "", p.doi or "", p.journal_ref or "",
            p.date or ""]
    return " ".join(b for b in bits if b)


class Pipeline:
    """Loads the retriever, judge and prompts once; answers many questions."""

    def __init__(self, settings: Settings, retriever: Retriever | None = None) -> None:
        self.settings = settings
        self.retriever = retriever or Retriever(settings)
        self.templates = templates()
        self.judge = Judge(self.retriever.embedder)
        self._names_version = -1
        self._lock = threading.Lock()

    # -- pieces ---------------------------------------------------------------------------

    def llm(self, model: str | None = None) -> Ollama:
        s = self.settings
        return Ollama(s.ollama_host, model or s.model, s.llm_timeout, s.num_ctx)

    def corpus_size(self) -> int:
        return len(self.retriever.snapshot().papers)

    def _refresh_names(self) -> None:
        snap = self.retriever.snapshot()
        with self._lock:
            if self._names_version != snap.version:
                self.judge.known_names = {
                    short_label(p.title, p.label).lower() for p in snap.papers.values()
                    if len(short_label(p.title, p.label)) <= 30
                }
                self._names_version = snap.version

    def condense(self, question: str, history: list[dict[str, str]], llm: Ollama | None) -> str:
        """Rewrite a follow-up into a stand-alone question using the conversation."""
        previous = [m["content"] for m in history if m.get("role") == "user"]
        if not previous:
            return question
        if llm is not None:
            convo = "\n".join(f"{m['role']}: {m['content']}" for m in history[-6:])
            prompt = self.templates["condense"].render(history=convo, question=question)
            try:
                rewritten = llm.complete([{"role": "user", "content": prompt}]).strip()
                if rewritten:
                    return rewritten.splitlines()[0].strip()
            except LLMError:
                pass
        # Offline: a follow-up that leans on the conversation gets the names of the papers the
        # last question was about (else its words), so retrieval finds the same papers.
        if not (_FOLLOW_UP.search(question) or len(question.split()) <= 4):
            return question
        self._refresh_names()
        answers = [m["content"] for m in history if m.get("role") == "assistant"]
        named: list[str] = []
        for text in (previous[-1], answers[-1] if answers else ""):
            found = [(m.start(), n) for n in self.judge.known_names
                     for m in [re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", text.lower())] if m]
            named = [n for _, n in sorted(found)][:2]
            if named:
                break
        if named:
            originals = {short_label(p.title, p.label).lower(): short_label(p.title, p.label)
                         for p in self.retriever.snapshot().papers.values()}
            return f"{question.rstrip('?')} ({', '.join(originals.get(n, n) for n in named)})?"
        return f"{previous[-1]} {question}"

    def lookup(self, question: str, filters: Filters | None) -> list[PaperHit]:
        """Papers the question points at by arXiv id or by an author's full name."""
        papers = self.retriever.snapshot().papers.values()
        q = question.lower()
        ids = set(re.findall(r"\b(\d{4}\.\d{4,5})\b", question))
        found = [p for p in papers if p.arxiv_id in ids]
        if not found and _BY_AUTHOR.search(question):
            found = [p for p in papers if any(len(a) > 5 and a.lower() in q for a in p.authors)]
        if filters and filters.active():
            found = [p for p in found if filters.accepts(p)]
        return [PaperHit(p, 1.0, 1.0) for p in found[:LIST_MAX_SOURCES]]

    def relevant(self, question: str, hits: list[PaperHit], threshold: float) -> list[PaperHit]:
        """Hits that are relevant enough, plus any paper the question names."""
        q = question.lower()
        out = []
        for h in hits:
            name = short_label(h.paper.title, h.paper.label).lower()
            named = len(name) >= 3 and re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", q)
            if named:
                h.relevance = max(h.relevance, 1.0)
            if h.relevance >= threshold:
                out.append(h)
        return sorted(out, key=lambda h: (-(h.relevance >= 1.0), -h.score))

    def prime(self, papers: list[Paper]) -> None:
        """Load the stored sentence vectors of these papers into the judge's cache."""
        stored = self.retriever.store.sentences([p.paper_id for p in papers])
        for p in papers:
            if p.paper_id in stored:
                self.judge.prime(p.abstract, *stored[p.paper_id])

    def list_members(self, question: str, filters: Filters | None) -> list[PaperHit]:
        """Every paper whose abstract has a sentence on the question's topic (not just top k)."""
        topic = topic_of(question)
        pool = self.retriever.search(topic, 60, filters)
        self.prime([h.paper for h in pool])
        qvec = self.retriever.embed_query(topic)
        words = content_words(topic) - _QUESTION_STOP
        scored = []
        for h in pool:
            sents, vecs = self.judge.sentences(h.paper.abstract)
            text_words = content_words(f"{h.paper.title or ''} {h.paper.abstract}")
            overlap = len(words & text_words) / len(words) if words else 0.0
            scored.append((float(np.max(vecs @ qvec)) + LIST_OVERLAP * overlap, h))
        if not scored:
            return []
        top = max(sc for sc, _ in scored)
        cut = max(LIST_MIN, LIST_FRAC * top)
        return [h for sc, h in sorted(scored, key=lambda t: -t[0]) if sc >= cut]

    # -- the offline answerer ----------------------------------------------------------

    def _sentence_scores(self, question: str, qvec: np.ndarray, paper: Paper) -> list[tuple[float, str]]:
        sents, vecs = self.judge.sentences(paper.abstract)
        qwords = content_words(question) - _QUESTION_STOP
        out = []
        for sent, sim in zip(sents, vecs @ qvec, strict=True):
            overlap = len(qwords & content_words(sent)) / len(qwords) if qwords else 0.0
            out.append((float(sim) + 0.25 * overlap, sent))
        return out

    def metadata_answer(self, question: str, sources: list[Source]) -> str | None:
        """Authors, arXiv id, venue or year of a paper the question names."""
        m = _META.search(question)
        named = [s for s in sources if s.relevance >= 1.0] or sources[:1]
        if named and _BY_AUTHOR.search(question):
            hits = [(a, s) for s in named for a in s.paper.authors
                    if len(a) > 5 and a.lower() in question.lower()]
            if hits:
                return " ".join(f"{a} is an author of {s.paper.title or s.name} [{s.n}]." for a, s in hits)
        if not named or not (m or re.search(r"\d{4}\.\d{4,5}", question)):
            return None
        if m is None:
            m = re.search(r"(arxiv)", "arxiv")  # an id alone: answer with the paper it names
            assert m is not None
        s, p, ask = named[0], named[0].paper, m.group(1).lower()
        facts = []
        if p.arxiv_id and p.arxiv_id in question:
            what = p.title or self.summary(s).split(f" [{s.n}]")[0]
            return f"arXiv:{p.arxiv_id} is {s.name}" + (f": {what}" if what != s.name else "") + f" [{s.n}]."
        venue_note = next((c for c in p.comments if re.search(
            r"\b(accepted|conference|journal|proceedings|workshop|symposium)\b", c, re.I)), None)
        if ask.startswith(("author", "who", "written")) and p.authors:
            facts.append(f"{s.name} is by {', '.join(p.authors)}")
        elif ask.startswith("arxiv") and p.arxiv_id:
            facts.append(f"{s.name} is arXiv:{p.arxiv_id}")
        elif ask == "doi" and p.doi:
            facts.append(f"{s.name} has the DOI {p.doi}")
        elif ask in ("venue", "published", "journal", "conference") and (p.venue or p.journal_ref):
            facts.append(f"{s.name} appeared at {p.journal_ref or p.venue}"
                         + (f" {p.year}" if p.year and str(p.year) not in (p.journal_ref or "") else ""))
        elif ask in ("venue", "published", "journal", "conference") and venue_note:
            facts.append(f"{s.name}: {venue_note.rstrip('.')}")
        elif p.date or p.year:
            facts.append(f"{s.name} is dated {p.date or p.year}")
        if not facts:
            return None
        return " ".join(f"{f} [{s.n}]." for f in facts)

    def list_header(self, sources: list[Source]) -> str:
        return f"{len(sources)} of the {self.corpus_size()} abstracts match:"

    def complete_list(self, question: str, sources: list[Source], text: str,
                      on_token: Callable[[str], None] | None) -> str:
        """A model's list answer, with the count and every relevant paper it left out."""
        from rag.citations import numbers_in

        cited = set(numbers_in(text))
        missing = [s for s in sources if s.n not in cited]
        header = self.list_header(sources)
        if missing:
            extra = self.extractive(question, missing, True).split("\n", 1)[1]
            addition = "\nAlso matching:\n" + extra
            if on_token:
                on_token(addition)
            text = text.rstrip() + addition
        return f"{header}\n{text.strip()}"

    @staticmethod
    def _subject(named: list[Source], question: str) -> list[Source]:
        """Of the papers a question names, the one it asks about: the first named."""
        q = question.lower()
        at = {s.n: q.find(s.name.lower()) for s in named}
        ranked = sorted((pos, s.n) for s in named if (pos := at[s.n]) >= 0)
        return [s for s in named if s.n == ranked[0][1]] if ranked else named[:1]

    def summary(self, source: Source) -> str:
        """For 'What does X do?': what the paper proposes and what it reports, in its words."""
        sents = split_sentences(source.paper.abstract)
        pick = [s for s in sents if _CONTRIBUTION.search(s) or source.name.lower() in s.lower()][:2]
        results = [s for s in sents if re.search(r"\d", s) and s not in pick][-1:]
        chosen = [s for s in sents if s in pick + results] or sents[:2]
        text = " ".join(strip_markers(s).rstrip(".") + f" [{source.n}]." for s in chosen)
        return text if source.name.lower() in text.lower() else f"{source.name}: {text}"

    def extractive(self, question: str, sources: list[Source], list_question: bool) -> str:
        if list_question:
            qvec = self.retriever.embed_query(topic_of(question))
            lines = [self.list_header(sources)]
            for s in sources:
                # The sentence that says what the paper contributes reads best in a list.
                score, sent = max(
                    (sc + 0.2 * bool(_CONTRIBUTION.search(se) or s.name.lower() in se.lower()), se)
                    for sc, se in self._sentence_scores(topic_of(question), qvec, s.paper)
                )
                lines.append(f"- {s.name}: {strip_markers(sent).rstrip('.')} [{s.n}].")
            return "\n".join(lines)
        meta = self.metadata_answer(question, sources)
        if meta:
            return meta
        # Judge sentences on what is asked, without the paper's name: a question that names a
        # system but asks what its abstract does not say must not match on the name alone.
        aspect = question
        for s in sources:
            if s.relevance >= 1.0:
                aspect = re.sub(rf"(?i)(?<![\w-]){re.escape(s.name)}(?![\w-])", " ", aspect)
        if not content_words(aspect) - _GENERIC:
            named = [s for s in sources if s.relevance >= 1.0]
            if named:
                return self.summary(named[0])
        qvec = self.retriever.embed_query(aspect)
        named = self._subject([s for s in sources if s.relevance >= 1.0], question)
        wants_number = bool(_QUANTITY.search(question))
        scored = [
            (score + (0.1 if wants_number and _has_number(sent) else 0.0), sent, s)
            for s in (named or sources[:3])
            for score, sent in self._sentence_scores(aspect, qvec, s.paper)
            if not wants_number or _has_number(sent)  # "how much" needs a number to answer it
        ]
        scored.sort(key=lambda t: -t[0])
        if not scored or scored[0][0] < FACT_MIN_SCORE:
            return NO_ANSWER
        best = scored[0][0]
        chosen = [t for t in scored if t[0] >= best - 0.08][:3]
        papers_used = {id(t[2]) for t in chosen[:1]}
        kept = []
        for t in chosen:
            if id(t[2]) in papers_used or len(papers_used) < 2:
                papers_used.add(id(t[2]))
                kept.append(t)
        # In the abstract's own order, so the sentences read as a passage.
        by_source: dict[int, list[tuple[float, str, Source]]] = {}
        for t in kept:
            by_source.setdefault(t[2].n, []).append(t)
        parts = []
        for _, items in sorted(by_source.items(), key=lambda kv: -max(t[0] for t in kv[1])):
            src = items[0][2]
            order = split_sentences(src.paper.abstract)
            items.sort(key=lambda t: order.index(t[1]) if t[1] in order else 0)
            text = " ".join(strip_markers(t[1]).rstrip(".") + f" [{src.n}]." for t in items)
            if src.name.lower() not in text.lower():
                text = f"{src.name}: {text}"
            parts.append(text)
        return " ".join(parts)

    # -- the whole pipeline -------------------------------------------------------------

    def answer(
        self,
        question: str,
        *,
        k: int | None = None,
        llm: str | None = None,
        model: str | None = None,
        strict: bool = False,
        filters: Filters | None = None,
        history: list[dict[str, str]] | None = None,
        judge: str = "default",
        on_token: Callable[[str], None] | None = None,
        on_notice: Callable[[str], None] | None = None,
    ) -> Answer:
        started = time.perf_counter()
        question = question.strip()
        if not question:
            raise InputError("the question is empty", "type a question")
        if len(question) > MAX_QUESTION:
            raise InputError(f"the question is {len(question)} characters; at most {MAX_QUESTION}",
                             "shorten it")
        k = k or self.settings.k
        mode = (llm or self.settings.llm).lower()
        if mode not in ("auto", "ollama", "none"):
            raise InputError(f"--llm {mode!r} is not one of auto, ollama, none", "use --llm none or ollama")
        notices: list[str] = []

        def notice(text: str) -> None:
            notices.append(text)
            if on_notice:
                on_notice(text)

        client = self.llm(model) if mode != "none" else None
        try:
            return self._answer(question, k, mode, strict, filters, history or [], judge,
                                client, on_token, notice, notices, started)
        finally:
            if client is not None:
                client.close()

    def _answer(self, question: str, k: int, mode: str, strict: bool, filters: Filters | None,
                history: list[dict[str, str]], judge: str, client: Ollama | None,
                on_token: Callable[[str], None] | None, notice: Callable[[str], None],
                notices: list[str], started: float) -> Answer:
        llm_client = client
        standalone = self.condense(question, history, client if mode == "ollama" else None)

        t0 = time.perf_counter()
        self._refresh_names()
        list_q = is_list_question(question)
        pool = self.retriever.search(standalone, max(k, 50), filters)
        relevant = self.lookup(standalone, filters) + self.relevant(standalone, pool, self.settings.min_relevance)
        first: dict[str, PaperHit] = {}
        for h in relevant:
            first.setdefault(h.paper.paper_id, h)
        relevant = list(first.values())
        if list_q:
            chosen = self.list_members(standalone, filters)[:LIST_MAX_SOURCES] if relevant else []
        else:
            chosen = relevant[:k]
        sources = [Source(i, h.paper, h.relevance) for i, h in enumerate(chosen, 1)]
        if not list_q:
            self.prime([s.paper for s in sources])
        timings = {"retrieve": (time.perf_counter() - t0) * 1000}

        t1 = time.perf_counter()
        answerer = "extractive"
        incomplete = False
        error = None
        text = NO_ANSWER
        if sources and client is not None:
            try:
                if list_q and on_token:  # the count comes first, as in the final answer
                    on_token(self.list_header(sources) + "\n")
                text = self._generate(client, standalone, sources, on_token)
                answerer = f"ollama:{client.model}"
            except StreamBroken as exc:
                text, incomplete, answerer = exc.partial, True, f"ollama:{client.model}"
                error = {"message": exc.message, "hint": exc.hint}
                notice(f"{exc.message} — the answer below is incomplete")
            except (LLMUnavailable, ModelNotFound) as exc:
                if mode == "ollama":
                    raise
                notice(f"{exc.message}; answering offline from the abstracts "
                       f"(to use a model: {exc.hint})")
                client = None
        if sources and client is None:
            text = self.extractive(standalone, sources, list_q)
            if on_token:
                on_token(text)
        elif not sources and on_token:
            on_token(text)
        elif list_q and NO_ANSWER.lower().rstrip(".") not in text.lower():
            text = self.complete_list(standalone, sources, text, on_token)
        timings["generate"] = (time.perf_counter() - t1) * 1000

        t2 = time.perf_counter()
        result = self._check(text, sources, strict, judge, llm_client)
        timings["check"] = (time.perf_counter() - t2) * 1000
        timings["total"] = (time.perf_counter() - started) * 1000
        result_text, used, checks, dropped, abstained = result
        return Answer(
            question=question, standalone_question=standalone, answer=result_text,
            abstained=abstained, answerer=answerer, sources=used, sentences=checks,
            dropped_citations=dropped, incomplete=incomplete, error=error, notices=notices,
            list_question=list_q, matched=len(relevant if not list_q else sources),
            corpus_size=self.corpus_size(), timings_ms=timings,
        )

    def _generate(self, client: Ollama, question: str, sources: list[Source],
                  on_token: Callable[[str], None] | None) -> str:
        blocks = "\n\n".join(
            format_source(s.n, s.name, s.paper.title, s.paper.authors,
                          " ".join(str(x) for x in (s.paper.venue, s.paper.year) if x),
                          s.paper.abstract)
            for s in sources
        )
        messages = [
            {"role": "system", "content": self.templates["system"].render(no_answer=NO_ANSWER)},
            {"role": "user", "content": self.templates["answer"].render(
                sources=blocks, question=question, no_answer=NO_ANSWER, n_sources=len(sources))},
        ]
        parts: list[str] = []
        for token in client.stream(messages):
            parts.append(token)
            if on_token:
                on_token(token)
        return "".join(parts)

    def _check(self, text: str, sources: list[Source], strict: bool, judge: str,
               client: Ollama | None) -> tuple[str, list[Source], list[SentenceCheck], int, bool]:
        if not sources or NO_ANSWER.lower().rstrip(".") in text.lower():
            return NO_ANSWER, [], [], 0, True
        text, dropped = clean_markers(text, {s.n for s in sources})
        order = first_use_order(text)
        text = renumber(text, order)
        by_n = {order[s.n]: Source(order[s.n], s.paper, s.relevance) for s in sources if s.n in order}
        checker = self.judge
        if judge == "ollama":
            owned = None if client else self.llm()
            try:
                checker = OllamaJudge(self.retriever.embedder, client or owned)
                return self._check_with(checker, text, by_n, strict, dropped)
            finally:
                if owned is not None:
                    owned.close()
        return self._check_with(checker, text, by_n, strict, dropped)

    def _check_with(self, checker: Judge, text: str, by_n: dict[int, Source], strict: bool,
                    dropped: int) -> tuple[str, list[Source], list[SentenceCheck], int, bool]:
        units = split_units(text)
        checks: list[SentenceCheck] = []
        kept: list[Unit] = []
        for unit in units:
            if unit.meta:
                kept.append(unit)
                continue
            cited = [by_n[n] for n in unit.citations if n in by_n]
            support = checker.check(unit.text, [(record_header(s), s.paper.abstract) for s in cited])
            checks.append(SentenceCheck(unit.text, unit.citations, support.supported,
                                        support.score, support.quote, support.reasons))
            if support.supported or not strict:
                kept.append(unit)
        if strict:
            checks = [c for c in checks if c.supported]
            if not checks:
                return NO_ANSWER, [], [], dropped, True
            text = join_units(kept)
            still = set().union(*(set(c.citations) for c in checks))
            if still != set(by_n):  # renumber again after dropping sentences
                order2 = first_use_order(text)
                text = renumber(text, order2)
                by_n = {order2[n]: Source(order2[n], s.paper, s.relevance)
                        for n, s in by_n.items() if n in order2}
                for c in checks:
                    c.citations = [order2[n] for n in c.citations if n in order2]
                    c.text = renumber(c.text, order2)
        used = [by_n[n] for n in sorted(by_n)]
        return text, used, checks, dropped, False


_pipelines: dict[tuple[str, str], Pipeline] = {}


def get_pipeline(settings: Settings) -> Pipeline:
    key = (settings.index, str(settings.home))
    if key not in _pipelines:
        _pipelines[key] = Pipeline(settings)
    return _pipelines[key]


def answer(question: str, settings: Settings, **kwargs: Any) -> Answer:
    """Answer a question over the index named in settings (see Pipeline.answer)."""
    return get_pipeline(settings).answer(question, **kwargs)


def _stderr_notice(text: str) -> None:
    print(text, file=sys.stderr)
