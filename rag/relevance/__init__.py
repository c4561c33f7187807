"""Relevance decisions from one fitted model: does the index answer this question, which
papers belong in a "which papers" list, which papers a fact is drawn from, which sentence
answers, which paper a question names.

Every number that decides is fitted by scripts/fit_relevance.py on the fit split of labelled
questions over three corpora from different fields (seeds/: ML systems; PubMedQA:
biomedicine; SciFact: biomedical claims) and stored in rag/relevance/params.json; the script
reports every figure on the held-out split too.

The interface the answering core calls (stable):

    rel = Relevance.load(retriever, judge)        # RelevanceParamsError if params are missing/bad
    hits = retriever.search(topic_or_question, rel.pool_size(list_question), filters)
    d = rel.decide(question, hits, list_question=..., topic=...)
    d.answerable, d.p_answerable                  # answer or abstain
    d.borderline                                  # answerable only as a model will answer
                                                  # (decide(..., with_model=True))
    d.members                                     # lists: every member (may exceed k, up to
                                                  # the pool, which grows with the index);
                                                  # facts: the papers to answer from, best first
    d.scores[paper_id]                            # P(member) for lists, P(answers) for facts
    d.named                                       # ids of papers the question names
    rel.best_sentences(text, paper, qvec)         # [(P(sentence answers), sentence)], best first

`qvec` is the embedding of `text` (`retriever.embed_query(text)`): for a fact question about
a named paper, pass the question without the paper's name, so that a sentence must match
what is asked rather than the name.
"""

from __future__ import annotations

import math
import random
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rag.corpus.paper import Paper
from rag.corpus.text import MAX_NAME, short_label, split_sentences
from rag.judge import Judge
from rag.relevance import stats as index_stats
from rag.relevance.features import (
    CONTRIBUTION,
    PAPER_FEATURES,
    QUESTION_FEATURES,
    SENTENCE_FEATURES,
    WANTS_NUMBER,
    Model,
    coverage,
    has_number,
    logit,
    missing_max,
    record_answers,
    sentence_rows,
    terms,
    unknown_share,
)
from rag.relevance.fitted import RelevanceParamsError as RelevanceParamsError  # raised by load()
from rag.relevance.fitted import read_fitted
from rag.retrieve import PaperHit, Retriever
from rag.retrieve import metadata as metadata_match

PARAMS_FORMAT = 1
PROBES = 64  # pseudo-questions a paper's `hub` is measured with
PROBE_SEED = 7


@dataclass(frozen=True)
class Decision:
    answerable: bool
    p_answerable: float
    members: list[PaperHit]
    scores: dict[str, float] = field(default_factory=dict)
    named: list[str] = field(default_factory=list)
    # Answerable only because a model will read the sources (decide(with_model=True)): below
    # the answer bound, which the offline answerer keeps.
    borderline: bool = False


def load_params(path: Path | None = None) -> dict[str, Any]:
    """The fitted parameters (rag/relevance/params.json unless `path`), checked."""
    return read_fitted(path, "params.json", "the fitted relevance parameters", "fit_relevance.py",
                       PARAMS_FORMAT, _checked_params)


def _checked_params(data: dict[str, Any]) -> dict[str, Any]:
    models = {k: Model.from_dict(data["models"][k]) for k in ("member", "source", "answer", "sentence")}
    for key, names in (("member", PAPER_FEATURES), ("source", PAPER_FEATURES),
                       ("answer", QUESTION_FEATURES), ("sentence", SENTENCE_FEATURES)):
        unknown = set(models[key].names) - set(names)
        if unknown:
            raise ValueError(f"model `{key}` uses unknown features {sorted(unknown)}")
    smallest = int(data.get("fitted", {}).get("smallest_index", 0))
    pool = {k: int(v) for k, v in data["pool"].items()}
    if set(pool) != {"fact", "list", "list_divisor", "list_max"} or min(pool.values()) < 1:
        raise ValueError("pool needs fact, list, list_divisor and list_max, each at least 1")
    return {"models": models, "pool": pool, "smallest_index": smallest}


class Relevance:
    def __init__(self, retriever: Retriever, judge: Judge, params: dict[str, Any]) -> None:
        self.retriever = retriever
        self.judge = judge
        self.models: dict[str, Model] = params["models"]
        self.pool = params["pool"]
        # The fewest papers of an index the models were fitted on (fit_relevance.py writes
        # it): a smaller one is made up to this size with the fitted corpora (stats.padded).
        self.smallest_index: int = params.get("smallest_index", 0)
        self._stats: tuple[int, index_stats.IndexStats] | None = None
        self._terms: dict[str, list[set[str]]] = {}
        self._probes: tuple[int, list[str], np.ndarray] | None = None
        self._lock = threading.Lock()

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
        path = (self.retriever.settings.home / "cache"
                / f"relevance-{store.name}-v{snap.version}-s{index_stats.STATS_FORMAT}.json")
        result = index_stats.cached(path, lambda: index_stats.compute(
            sorted(snap.papers.values(), key=lambda p: p.paper_id), store.sentences,
            lambda texts: self.retriever.embedder.embed(texts)))
        index_stats.prune(path.parent, rf"relevance-{re.escape(store.name)}-v\d+-s\d+\.json", path)
        if result.papers < self.smallest_index:
            result = index_stats.padded(result, self.smallest_index)
        with self._lock:
            self._stats = (snap.version, result)
        return result

    def probes(self) -> tuple[list[str], np.ndarray]:
        """Pseudo-questions of this index (the titles, or first sentences, of a fixed sample
        of up to PROBES papers: their ids) and their vectors, for how near a paper comes to
        questions about anything (`hub()`). Embedded once per index version."""
        snap = self.retriever.snapshot()
        with self._lock:
            if self._probes and self._probes[0] == snap.version:
                return self._probes[1], self._probes[2]
        path = (self.retriever.settings.home / "cache"
                / f"probes-{self.retriever.store.name}-v{snap.version}-p{PROBES}.npz")
        owners, vecs = index_stats.cached_probes(path, lambda: self._probe(snap))
        index_stats.prune(path.parent, rf"probes-{re.escape(self.retriever.store.name)}-v\d+-p\d+\.npz", path)
        with self._lock:
            self._probes = (snap.version, owners, vecs)
        return owners, vecs

    def _probe(self, snap: Any) -> tuple[list[str], np.ndarray]:
        ids = sorted(snap.papers)
        sample = random.Random(PROBE_SEED).sample(ids, min(PROBES, len(ids)))
        papers = snap.papers.many(sample)
        # a paper without a title asks with its first sentence, as in index_stats.compute
        texts = [p.title or (split_sentences(p.abstract) or [""])[0] for p in (papers[i] for i in sample)]
        vecs = self.retriever.embedder.embed(texts) if sample else np.zeros((0, 1), dtype=np.float32)
        return sample, vecs

    def pool_size(self, list_question: bool) -> int:
        """How many papers to retrieve before deciding: lists look deeper in a larger index."""
        if not list_question:
            return self.pool["fact"]
        n = len(self.retriever.snapshot().papers)
        return min(max(self.pool["list"], n // self.pool["list_divisor"]), self.pool["list_max"])

    # -- measurements ----------------------------------------------------------------------

    def _sentence_terms(self, abstract: str, sents: list[str]) -> list[set[str]]:
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
        """Load the stored sentence vectors of these papers into the judge's cache (a read of
        the store per answer stage: those it holds already are not read again)."""
        papers = [p for p in papers if not self.judge.primed(p.abstract)]
        if not papers:
            return
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

    def paper_rows(self, text: str, qvec: np.ndarray, hits: list[PaperHit],
                   meta: dict[str, float], named: set[str]) -> list[dict[str, float]]:
        """The features of each candidate paper for the question (or list topic) `text`."""
        st = self.stats()
        snap = self.retriever.snapshot()
        self.prime([h.paper for h in hits])
        asked = terms(text)
        unknown = unknown_share(asked, st)
        bm25: dict[str, float] = {}
        for cid, score in snap.bm25_ranking(text, 2000):
            pid = snap.chunk_paper.get(cid, "")
            bm25[pid] = max(bm25.get(pid, 0.0), score)
        top_bm25 = max((bm25.get(h.paper.paper_id, 0.0) for h in hits), default=0.0) or 1.0
        owners, probe_vecs = self.probes()
        owner_ids = np.asarray(owners)  # once, not per candidate (hub)
        sent_cos, cov_sent, cov_best, cov_doc, spread = [], [], [], [], []
        for h in hits:
            sents, vecs = self.judge.sentences(h.paper.abstract)
            sims = vecs @ qvec
            sent_terms = self._sentence_terms(h.paper.abstract, sents)
            covs = [coverage(asked, t, st) for t in sent_terms]
            sent_cos.append(float(sims.max()))
            cov_sent.append(max(covs))
            cov_best.append(covs[int(np.argmax(sims))])
            title = terms(h.paper.title or "")
            cov_doc.append(coverage(asked, set().union(title, *sent_terms), st))
            # How much of the abstract is about it: a paper on the topic says so in several
            # sentences, and in the one that states its contribution; a passing mention once.
            name = short_label(h.paper.title, h.paper.label).lower()
            own = [c for c, sent in zip(sims.tolist(), sents, strict=True)
                   if CONTRIBUTION.search(sent) or (len(name) <= MAX_NAME and name in sent.lower())]
            spread.append({
                "cos_mean3": float(np.sort(sims)[-3:].mean()), "cos_mean": float(sims.mean()),
                "contrib_cos": max(own) if own else float(sims.mean()),
                "term_frac": sum(bool(asked & t) for t in sent_terms) / len(sent_terms),
                "hub": hub(h.paper.paper_id, vecs, owner_ids, probe_vecs),
            })
        best = max(sent_cos)
        top_spread = float(np.std(sorted(sent_cos, reverse=True)[:20])) + 0.02
        dense_rank = _ranks([h.relevance for h in hits])
        bm25_rank = _ranks([bm25.get(h.paper.paper_id, -1.0) for h in hits])
        rows = []
        for i, h in enumerate(hits):
            pid = h.paper.paper_id
            rd, rb = np.log1p(dense_rank[i]), np.log1p(bm25_rank[i] if pid in bm25 else len(hits) + 1)
            rows.append({
                "cos_chunk": h.relevance, "cos_sent": sent_cos[i], "z_bg": st.z_background(sent_cos[i]),
                "z_top": st.z_top(sent_cos[i]), "z_self": st.z_self(sent_cos[i]),
                "rel_best": sent_cos[i] - best, "rel_best_z": (sent_cos[i] - best) / top_spread,
                **spread[i], "cov_doc": cov_doc[i], "cov_sent": cov_sent[i],
                "cov_best": cov_best[i], "bm25_rel": bm25.get(pid, 0.0) / top_bm25,
                "log_rank": float(np.log1p(i + 1)), "log_rank_dense": float(rd),
                "log_rank_bm25": float(rb), "rank_disagree": float(abs(rd - rb)),
                "named": float(pid in named), "meta": min(meta.get(pid, 0.0), 4.0) / 4.0,
                "unknown": unknown,
            })
        return rows

    def question_row(self, question: str, text: str, qvec: np.ndarray, hits: list[PaperHit],
                     rows: list[dict[str, float]], probs: np.ndarray, named: set[str],
                     list_question: bool) -> dict[str, float]:
        """The features of the question as a whole, from its best candidates (`text` is what
        was matched: the question, or a list question's topic; `qvec` embeds it)."""
        order = np.argsort(-probs)
        top = hits[int(order[0])]
        cos = sorted((r["cos_sent"] for r in rows), reverse=True)
        aspect = text
        if top.paper.paper_id in named:  # judge what is asked, not the name
            name = short_label(top.paper.title, top.paper.label)
            aspect = re.sub(rf"(?i)(?<![\w-]){re.escape(name)}(?![\w-])", " ", text)
        avec = self.retriever.embed_query(aspect) if aspect != text else qvec
        sents, vecs = self.judge.sentences(top.paper.abstract)
        sims = vecs @ avec
        asked = terms(aspect)
        st = self.stats()
        sent_terms = self._sentence_terms(top.paper.abstract, sents)
        covs = [coverage(asked, t, st) for t in sent_terms]
        record = set().union(terms(top.paper.title or ""), *sent_terms)
        best_sent = sents[int(np.argmax(sims))]
        wants_number = bool(WANTS_NUMBER.search(question))
        first = rows[int(order[0])]
        return {
            "p_top": logit(float(probs[order[0]])),
            # With one candidate there is no second one to compare with: unmeasured (NaN),
            # which the model counts as its fitted mean (features.Model.standardised).
            "p_second": logit(float(probs[order[1]])) if len(order) > 1 else math.nan,
            "z_top_best": st.z_top(cos[0]), "z_self_best": st.z_self(cos[0]),
            "gap": cos[0] - cos[1] if len(cos) > 1 else math.nan,
            "cov_aspect": max(covs) if asked else 1.0,
            "cov_aspect_doc": coverage(asked, record, st) if asked else 1.0,
            "miss_max": missing_max(asked, record, st), "cos_aspect": float(sims.max()),
            "named": float(bool(named)), "meta": max(r["meta"] for r in rows),
            # A record field answers only about a paper the question names ("When was BLOOM
            # created?"): any index's top paper has a date, whatever the question is about.
            "record": record_answers(question, top.paper)
            if top.paper.paper_id in named or first["meta"] > 0 else 0.0,
            "unknown": first["unknown"], "wants_number": float(wants_number),
            "number_in_best": float(wants_number and has_number(best_sent)),
            "is_list": float(list_question),
        }

    # -- decisions -------------------------------------------------------------------------

    def decide(self, question: str, hits: list[PaperHit], *, list_question: bool,
               topic: str, with_model: bool = False) -> Decision:
        """Answer or abstain, and which papers: see the module docstring. `with_model`: a
        model will write the answer, told to say when the sources do not answer, and its
        answer is checked, so every question with candidates is answerable (a question below
        the answer bound is `borderline`)."""
        if not hits:
            return Decision(False, 0.0, [], {}, [])
        qrow, probs, named, meta = self.measure(question, hits, list_question=list_question, topic=topic)
        model = self.models["member" if list_question else "source"]
        p_answer = self.models["answer"].probability(qrow)
        scores = {h.paper.paper_id: float(p) for h, p in zip(hits, probs, strict=True)}
        ranked = sorted(hits, key=lambda h: (-(h.paper.paper_id in named) * (not list_question),
                                             -scores[h.paper.paper_id]))
        bounds = self.models["answer"]
        # Gate loosely: with a model, no fitted bound declines before it has read the best
        # sources; its answer is checked sentence by sentence, and one with nothing supported
        # ends as an abstention (rag.answering.check). "borderline": the offline answerer would
        # have declined, so a fallback to it without the model declines.
        borderline = with_model and p_answer < bounds.threshold
        answerable = p_answer >= bounds.threshold or borderline
        # A paper the question names by name is a source of a fact answer whatever its score
        # ("How do GPipe and Colossal-AI handle ...?" is answered from both).
        members = [h for h in ranked if scores[h.paper.paper_id] >= model.threshold
                   or (not list_question and h.paper.paper_id in named)] if answerable else []
        if answerable and not members:
            members = ranked if with_model and not list_question else ranked[:1]
        named_ids = [h.paper.paper_id for h in ranked if h.paper.paper_id in named or meta.get(h.paper.paper_id)]
        return Decision(answerable, p_answer, members, scores, named_ids, borderline)

    def measure(self, question: str, hits: list[PaperHit], *, list_question: bool, topic: str
                ) -> tuple[dict[str, float], np.ndarray, set[str], dict[str, float]]:
        """What `decide` weighs: the question's features, each candidate's probability (of
        the member or source model), the papers the question names and its metadata matches."""
        text = topic if list_question else question
        snap = self.retriever.snapshot()
        meta = {m.paper_id: m.points for m in metadata_match.index_for(snap).match(question)}
        named = set(self.named(question, [h.paper for h in hits]))
        qvec = self.retriever.embed_query(text)
        rows = self.paper_rows(text, qvec, hits, meta, named)
        probs = self.models["member" if list_question else "source"].probabilities(rows)
        qrow = self.question_row(question, text, qvec, hits, rows, probs, named, list_question)
        return qrow, probs, named, meta

    def best_sentences(self, question: str, paper: Paper, qvec: np.ndarray) -> list[tuple[float, str]]:
        """The sentences of the paper's abstract with the probability that each answers the
        question (`qvec` embeds `question`), best first."""
        self.prime([paper])
        sents, vecs = self.judge.sentences(paper.abstract)
        rows = sentence_rows(terms(question), vecs @ qvec, self._sentence_terms(paper.abstract, sents),
                             sents, bool(WANTS_NUMBER.search(question)), self.stats())
        probs = self.models["sentence"].probabilities(rows)
        return sorted(zip(probs.tolist(), sents, strict=True), key=lambda t: -t[0])


def hub(paper_id: str, vecs: np.ndarray, owners: list[str] | np.ndarray, probes: np.ndarray) -> float:
    """The mean, over the index's pseudo-questions (`Relevance.probes`: `owners` are the papers
    they were drawn from) not drawn from this paper, of its best sentence's cosine (`vecs`: its
    sentence vectors): a paper close to questions about anything (a "hub", as in
    nearest-neighbour search in high dimensions: Radovanovic et al., JMLR 2010) is not on a
    topic because it is close to it. NaN with under two such pseudo-questions."""
    keep = np.asarray(owners) != paper_id
    if keep.sum() < 2:
        return math.nan
    return float((vecs @ probes.T).max(axis=0)[keep].mean())


def _ranks(values: list[float]) -> list[int]:
    """1-based rank of each value, largest first."""
    order = sorted(range(len(values)), key=lambda i: -values[i])
    out = [0] * len(values)
    for r, i in enumerate(order, 1):
        out[i] = r
    return out
