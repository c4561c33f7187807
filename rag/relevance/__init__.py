"""Relevance decisions from one fitted model: does the index answer this question, which
papers belong in a "which papers" list, which papers a fact is drawn from, which sentence
answers, which paper a question names.

Every number that decides is fitted by scripts/fit_relevance.py on the fit split of labelled
questions over three corpora from different fields (seeds/: ML systems; PubMedQA:
biomedicine; SciFact: biomedical claims), checked by fitting on two corpora and measuring on
the third, and stored in rag/relevance/params.json; the script reports every figure on the
held-out split too. The strongest features are a cross-encoder's (rag.relevance.reranker),
which reads the question together with each candidate paper and sentence.

The interface the answering core calls (stable):

    rel = Relevance.load(retriever, judge)        # RelevanceParamsError if params are missing/bad
    hits = retriever.search(topic_or_question, rel.pool_size(list_question), filters)
    d = rel.decide(question, hits, list_question=..., topic=..., with_model=...)
    d.answerable, d.p_answerable                  # answer or abstain (with a model writing the
                                                  # answer, only a clear no abstains before it)
    d.members                                     # lists: every member (may exceed k, up to
                                                  # the pool, which grows with the index);
                                                  # facts: the papers to answer from, best first
    d.scores[paper_id]                            # P(member) for lists, P(answers) for facts
    d.named                                       # ids of papers the question names
    rel.best_sentences(aspect, paper, qvec, asked) # [(P(sentence answers), sentence)], best first

`qvec` is the embedding of `aspect` (`retriever.embed_query(aspect)`): for a fact question about
a named paper, pass the question without the paper's name, so that a sentence must match
what is asked rather than the name; `asked` is the question as asked (the cross-encoder reads it).
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from rag.corpus.paper import Paper
from rag.corpus.text import short_label
from rag.errors import RagError
from rag.judge import Judge
from rag.relevance import rows as measured
from rag.relevance import stats as index_stats
from rag.relevance.features import (
    PAPER_FEATURES,
    QUESTION_FEATURES,
    SENTENCE_FEATURES,
    Model,
    terms,
)
from rag.relevance.reranker import Reranker, get_reranker
from rag.relevance.rows import MAX_NAME, Measured
from rag.retrieve import PaperHit, Retriever
from rag.retrieve import metadata as metadata_match

PARAMS_FORMAT = 2
POOL_KEYS = ("fact", "list", "list_divisor", "list_max", "ce_fact", "ce_list", "ce_sentence_papers")


class RelevanceParamsError(RagError):
    """The fitted parameters are missing or unreadable: the installation is broken."""


@dataclass(frozen=True)
class Decision:
    answerable: bool
    p_answerable: float
    members: list[PaperHit]
    scores: dict[str, float] = field(default_factory=dict)
    named: list[str] = field(default_factory=list)


def load_params(path: Path | None = None) -> dict[str, Any]:
    """The fitted parameters (rag/relevance/params.json unless `path`), checked."""
    where = str(path) if path else "rag/relevance/params.json"
    hint = ("reinstall rag, or refit the file with `python scripts/fit_relevance.py` "
            "(see evals/README.md)")
    try:
        text = path.read_text(encoding="utf-8") if path else \
            resources.files("rag.relevance").joinpath("params.json").read_text(encoding="utf-8")
    except OSError as exc:
        raise RelevanceParamsError(f"{where}: cannot read the fitted relevance parameters "
                                   f"({exc.strerror or exc})", hint) from None
    try:
        data = json.loads(text)
        if data.get("format") != PARAMS_FORMAT:
            raise ValueError(f"format {data.get('format')!r}, expected {PARAMS_FORMAT}")
        models = {k: Model.from_dict(data["models"][k]) for k in ("member", "source", "answer", "sentence")}
        for key, names in (("member", PAPER_FEATURES), ("source", PAPER_FEATURES),
                           ("answer", QUESTION_FEATURES), ("sentence", SENTENCE_FEATURES)):
            unknown = set(models[key].names) - set(names)
            if unknown:
                raise ValueError(f"model `{key}` uses unknown features {sorted(unknown)}")
        pool = {k: int(data["pool"][k]) for k in POOL_KEYS}
        if min(pool.values()) < 1:
            raise ValueError("pool sizes must be at least 1")
        with_model = float(data["answer_with_model"])
        if not 0.0 <= with_model <= 1.0:
            raise ValueError(f"answer_with_model {with_model} is not a probability")
        relative = [str(n) for n in data["index_relative"]]
        if set(relative) - set(QUESTION_FEATURES) - set(PAPER_FEATURES):
            raise ValueError(f"index_relative names unknown features {relative}")
        smallest = int(data["min_index_papers"])
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise RelevanceParamsError(f"{where}: the fitted relevance parameters are corrupt ({exc})",
                                   hint) from None
    return {"models": models, "pool": pool, "answer_with_model": with_model,
            "index_relative": relative, "min_index_papers": smallest}


class Relevance:
    def __init__(self, retriever: Retriever, judge: Judge, params: dict[str, Any],
                 reranker: Reranker | None = None) -> None:
        self.retriever = retriever
        self.judge = judge
        self.models: dict[str, Model] = params["models"]
        self.pool = params["pool"]
        self.answer_with_model: float = params.get("answer_with_model", 0.0)
        # Features measured against the other candidates or this index's own statistics, and
        # the smallest index the models were fitted on: in a smaller index they count as
        # their fitted mean (scripts/fit_relevance.py, INDEX_RELATIVE).
        self.index_relative: set[str] = set(params.get("index_relative", ()))
        self.min_index_papers: int = params.get("min_index_papers", 0)
        self._reranker = reranker
        self._stats: tuple[int, index_stats.IndexStats] | None = None
        self._terms: dict[str, list[set[str]]] = {}
        self._lock = threading.Lock()

    @property
    def reranker(self) -> Reranker:
        """The cross-encoder, loaded on first use (once per process)."""
        if self._reranker is None:
            from rag.embed import tokenizer_path

            s = self.retriever.settings
            self._reranker = get_reranker(tokenizer_path(s.model_cache), s.embed_threads)
        return self._reranker

    @classmethod
    def load(cls, retriever: Retriever, judge: Judge, path: Path | None = None) -> Relevance:
        return cls(retriever, judge, load_params(path))

    # -- what is normal in this index ------------------------------------------------------

    def stats(self) -> index_stats.IndexStats:
        snap = self.retriever.snapshot()
        with self._lock:
            if self._stats and self._stats[0] == snap.version:
                return self._stats[1]
        store = self.retriever.store
        papers = sorted(snap.papers.values(), key=lambda p: p.paper_id)
        path = (self.retriever.settings.home / "cache"
                / f"relevance-{store.name}-v{snap.version}-s{index_stats.STATS_FORMAT}.json")
        result = index_stats.cached(path, lambda: index_stats.compute(
            papers, store.sentences, self.retriever.embedder.embed))
        with self._lock:
            self._stats = (snap.version, result)
        return result

    def pool_size(self, list_question: bool) -> int:
        """How many papers to retrieve before deciding: lists look deeper in a larger index."""
        if not list_question:
            return self.pool["fact"]
        n = len(self.retriever.snapshot().papers)
        return min(max(self.pool["list"], n // self.pool["list_divisor"]), self.pool["list_max"])

    # -- measurements ----------------------------------------------------------------------

    def sentence_terms(self, abstract: str, sents: list[str]) -> list[set[str]]:
        with self._lock:
            hit = self._terms.get(abstract)
        if hit is None:
            hit = [terms(s) for s in sents]
            with self._lock:
                if len(self._terms) > 20000:
                    self._terms.clear()
                self._terms[abstract] = hit
        return hit

    def prime(self, papers: list[Paper]) -> None:
        """Load the stored sentence vectors of these papers into the judge's cache."""
        stored = self.retriever.store.sentences([p.paper_id for p in papers])
        for p in papers:
            if p.paper_id in stored:
                self.judge.prime(p.abstract, *stored[p.paper_id])

    def named(self, question: str, papers: list[Paper]) -> list[str]:
        q = question.lower()
        out = []
        for p in papers:
            name = short_label(p.title, p.label).lower()
            if 3 <= len(name) <= MAX_NAME and re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", q):
                out.append(p.paper_id)
        return out

    # -- decisions -------------------------------------------------------------------------

    def measure(self, question: str, hits: list[PaperHit], *, list_question: bool,
                topic: str) -> Measured:
        """Every candidate's features (what decide() weighs; scripts/fit_relevance.py too)."""
        snap = self.retriever.snapshot()
        meta = {m.paper_id: m.points for m in metadata_match.index_for(snap).match(question)}
        return measured.measure(self, question, topic if list_question else question, hits,
                                list_question, meta)

    def decide(self, question: str, hits: list[PaperHit], *, list_question: bool,
               topic: str, with_model: bool = False) -> Decision:
        """Answer or abstain, and which papers: see the module docstring. `with_model`: a model
        writes the answer and may itself say the abstracts do not answer, so only a question
        the answer model clearly declines is declined here."""
        if not hits:
            return Decision(False, 0.0, [], {}, [])
        m = self.measure(question, hits, list_question=list_question, topic=topic)
        model = self.models["member" if list_question else "source"]
        probs = model.probabilities(m.rows)
        qrow = measured.question_row(self, question, m, probs, list_question)
        if len(self.retriever.snapshot().papers) < self.min_index_papers:
            qrow = self.models["answer"].neutral(qrow, self.index_relative)
        p_answer = self.models["answer"].probability(qrow)
        scores = {h.paper.paper_id: float(p) for h, p in zip(hits, probs, strict=True)}
        named = m.named
        ranked = sorted(hits, key=lambda h: (-(h.paper.paper_id in named) * (not list_question),
                                             -scores[h.paper.paper_id]))
        bound = self.answer_with_model if with_model else self.models["answer"].threshold
        answerable = p_answer >= bound
        # A paper the question names by name is a source of a fact answer whatever its score
        # ("How do Skrull and DeepSpeed-Ulysses handle ...?" is answered from both).
        members = [h for h in ranked if scores[h.paper.paper_id] >= model.threshold
                   or (not list_question and h.paper.paper_id in named)] if answerable else []
        if answerable and not members:
            members = ranked[:1]
        named_ids = [h.paper.paper_id for h in ranked if h.paper.paper_id in named or m.meta.get(h.paper.paper_id)]
        return Decision(answerable, p_answer, members, scores, named_ids)

    def best_sentences(self, aspect: str, paper: Paper, qvec: np.ndarray,
                       asked: str | None = None) -> list[tuple[float, str]]:
        """The sentences of the paper's abstract with the probability that each answers the
        question, best first (`qvec` embeds `aspect`; `asked`: the question as asked)."""
        self.prime([paper])
        sents, rows = measured.sentence_rows(self, aspect, paper.abstract, qvec, asked or aspect)
        probs = self.models["sentence"].probabilities(rows)
        return sorted(zip(probs.tolist(), sents, strict=True), key=lambda t: -t[0])
