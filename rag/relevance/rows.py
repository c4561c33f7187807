"""What one question looks like to the relevance models: a row of features per candidate
paper, one for the question as a whole, one per sentence of a paper (names in features.py).

`measure()` is the one path from (question, retrieved candidates) to those rows: the answering
core calls it through Relevance.decide and scripts/fit_relevance.py calls the same function,
so the models are fitted on exactly what they meet at question time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from rag.corpus.text import short_label
from rag.relevance.features import (
    CONTRIBUTION,
    WANTS_NUMBER,
    coverage,
    has_number,
    logit,
    missing_max,
    record_answers,
    terms,
    unknown_share,
)
from rag.relevance.reranker import PAPER_TOKENS, SENTENCE_TOKENS, paper_text
from rag.retrieve import PaperHit

if TYPE_CHECKING:
    from rag.relevance import Relevance

MAX_NAME = 30  # longer "names" are sentences (untitled papers' leads), not names


@dataclass
class CrossScores:
    """The cross-encoder's logits for one question: the candidates it read (the retriever's
    first few), and for a fact question the sentences of the few it rates best."""

    paper: dict[str, float] = field(default_factory=dict)
    sentences: dict[str, np.ndarray] = field(default_factory=dict)

    def paper_floor(self) -> float:
        return min(self.paper.values(), default=0.0)

    def best_sentence(self, pid: str) -> float | None:
        s = self.sentences.get(pid)
        return float(s.max()) if s is not None and len(s) else None


@dataclass
class Measured:
    text: str  # what was matched: the question, or a list question's topic
    qvec: np.ndarray
    hits: list[PaperHit]
    named: set[str]
    meta: dict[str, float]
    cross: CrossScores
    rows: list[dict[str, float]]


def cross_scores(rel: Relevance, text: str, hits: list[PaperHit], list_question: bool) -> CrossScores:
    """Read the retriever's first candidates with the cross-encoder (a capped number: its cost
    grows with what it reads), and for a fact question the sentences of the best few."""
    pool = rel.pool
    top = hits[: pool["ce_list" if list_question else "ce_fact"]]
    if not top:
        return CrossScores()
    scores = rel.reranker.score(text, [paper_text(h.paper.title, h.paper.abstract) for h in top],
                                PAPER_TOKENS)
    out = CrossScores({h.paper.paper_id: float(s) for h, s in zip(top, scores, strict=True)})
    if not list_question:
        for i in np.argsort(-scores)[: pool["ce_sentence_papers"]]:
            paper = top[int(i)].paper
            sents, _ = rel.judge.sentences(paper.abstract)
            out.sentences[paper.paper_id] = rel.reranker.score(text, sents, SENTENCE_TOKENS)
    return out


def measure(rel: Relevance, question: str, text: str, hits: list[PaperHit], list_question: bool,
            meta: dict[str, float]) -> Measured:
    named = set(rel.named(question, [h.paper for h in hits]))
    qvec = rel.retriever.embed_query(text)
    cross = cross_scores(rel, text, hits, list_question)
    m = Measured(text, qvec, hits, named, meta, cross, [])
    m.rows = paper_rows(rel, m)
    return m


def paper_rows(rel: Relevance, m: Measured) -> list[dict[str, float]]:
    """The features of each candidate paper for the question (or list topic) `m.text`."""
    st = rel.stats()
    snap = rel.retriever.snapshot()
    hits = m.hits
    rel.prime([h.paper for h in hits])
    asked = terms(m.text)
    unknown = unknown_share(asked, st)
    bm25: dict[str, float] = {}
    for cid, score in snap.bm25_ranking(m.text, 2000):
        pid = snap.chunk_paper.get(cid, "")
        bm25[pid] = max(bm25.get(pid, 0.0), score)
    top_bm25 = max((bm25.get(h.paper.paper_id, 0.0) for h in hits), default=0.0) or 1.0
    sent_cos, cov_sent, cov_best, cov_doc, spread = [], [], [], [], []
    for h in hits:
        sents, vecs = rel.judge.sentences(h.paper.abstract)
        sims = vecs @ m.qvec
        sent_terms = rel.sentence_terms(h.paper.abstract, sents)
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
        })
    best = max(sent_cos)
    top_spread = float(np.std(sorted(sent_cos, reverse=True)[:20])) + 0.02
    dense_rank = _ranks([h.relevance for h in hits])
    bm25_rank = _ranks([bm25.get(h.paper.paper_id, -1.0) for h in hits])
    cross = m.cross
    floor = cross.paper_floor()
    ce_best = max(cross.paper.values(), default=0.0)
    sent_scored = [v for pid in cross.sentences if (v := cross.best_sentence(pid)) is not None]
    sent_floor = min(sent_scored, default=floor)
    rows = []
    for i, h in enumerate(hits):
        pid = h.paper.paper_id
        rd, rb = np.log1p(dense_rank[i]), np.log1p(bm25_rank[i] if pid in bm25 else len(hits) + 1)
        ce = cross.paper.get(pid)
        ce_sent = cross.best_sentence(pid)
        rows.append({
            "cos_chunk": h.relevance, "cos_sent": sent_cos[i], "z_bg": st.z_background(sent_cos[i]),
            "z_top": st.z_top(sent_cos[i]), "z_self": st.z_self(sent_cos[i]),
            "rel_best": sent_cos[i] - best, "rel_best_z": (sent_cos[i] - best) / top_spread,
            **spread[i], "cov_doc": cov_doc[i], "cov_sent": cov_sent[i],
            "cov_best": cov_best[i], "bm25_rel": bm25.get(pid, 0.0) / top_bm25,
            "log_rank": float(np.log1p(i + 1)), "log_rank_dense": float(rd),
            "log_rank_bm25": float(rb), "rank_disagree": float(abs(rd - rb)),
            "named": float(pid in m.named), "meta": min(m.meta.get(pid, 0.0), 4.0) / 4.0,
            "unknown": unknown,
            # Candidates the cross-encoder did not read (past the cap) sit below all it read.
            "ce_paper": floor if ce is None else ce, "ce_unread": float(ce is None),
            "ce_rel": (floor if ce is None else ce) - ce_best,
            "ce_sent": sent_floor if ce_sent is None else ce_sent,
        })
    return rows


def question_row(rel: Relevance, question: str, m: Measured, probs: np.ndarray,
                 list_question: bool) -> dict[str, float]:
    """The features of the question as a whole, from its best candidates."""
    order = np.argsort(-probs)
    hits, rows = m.hits, m.rows
    top = hits[int(order[0])]
    cos = sorted((r["cos_sent"] for r in rows), reverse=True)
    aspect = m.text
    if top.paper.paper_id in m.named:  # judge what is asked, not the name
        name = short_label(top.paper.title, top.paper.label)
        aspect = re.sub(rf"(?i)(?<![\w-]){re.escape(name)}(?![\w-])", " ", m.text)
    avec = rel.retriever.embed_query(aspect) if aspect != m.text else m.qvec
    sents, vecs = rel.judge.sentences(top.paper.abstract)
    sims = vecs @ avec
    asked = terms(aspect)
    st = rel.stats()
    sent_terms = rel.sentence_terms(top.paper.abstract, sents)
    covs = [coverage(asked, t, st) for t in sent_terms]
    record = set().union(terms(top.paper.title or ""), *sent_terms)
    best_sent = sents[int(np.argmax(sims))]
    wants_number = bool(WANTS_NUMBER.search(question))
    first = rows[int(order[0])]
    ce = sorted(m.cross.paper.values(), reverse=True) or [0.0]
    sent_best = max((v for pid in m.cross.sentences if (v := m.cross.best_sentence(pid)) is not None),
                    default=None)
    if sent_best is None:  # a list question: the best candidate's sentences, with the topic
        sent_best = float(rel.reranker.score(m.text, sents, SENTENCE_TOKENS).max())
    return {
        "p_top": logit(float(probs[order[0]])),
        "p_second": logit(float(probs[order[1]])) if len(order) > 1 else logit(0.0),
        "z_top_best": st.z_top(cos[0]), "z_self_best": st.z_self(cos[0]),
        "gap": cos[0] - cos[1] if len(cos) > 1 else cos[0],
        "cov_aspect": max(covs) if asked else 1.0,
        "cov_aspect_doc": coverage(asked, record, st) if asked else 1.0,
        "miss_max": missing_max(asked, record, st), "cos_aspect": float(sims.max()),
        "named": float(bool(m.named)), "meta": max(r["meta"] for r in rows),
        # A record field answers only about a paper the question names ("When was POMP
        # created?"): any index's top paper has a date, whatever the question is about.
        "record": record_answers(question, top.paper)
        if top.paper.paper_id in m.named or first["meta"] > 0 else 0.0,
        "unknown": first["unknown"], "wants_number": float(wants_number),
        "number_in_best": float(wants_number and has_number(best_sent)),
        "is_list": float(list_question),
        "ce_top": ce[0], "ce_gap": ce[0] - ce[1] if len(ce) > 1 else 0.0,
        "ce_sent_top": sent_best,
    }


def sentence_rows(rel: Relevance, question: str, paper_abstract: str, qvec: np.ndarray,
                  ce_query: str) -> tuple[list[str], list[dict[str, float]]]:
    """The sentences of one abstract and the features of each for one question (`qvec`
    embeds `question`; the cross-encoder reads `ce_query`, the question as asked)."""
    sents, vecs = rel.judge.sentences(paper_abstract)
    st = rel.stats()
    asked = terms(question)
    sims = vecs @ qvec
    covs = [coverage(asked, t, st) for t in rel.sentence_terms(paper_abstract, sents)]
    ce = rel.reranker.score(ce_query, sents, SENTENCE_TOKENS)
    wants_number = bool(WANTS_NUMBER.search(question))
    best_cos, best_cov, best_ce = float(sims.max()), max(covs), float(ce.max())
    n = len(sents)
    rows = []
    for i, (sent, sim, cov) in enumerate(zip(sents, sims.tolist(), covs, strict=True)):
        number = has_number(sent)
        rows.append({
            "cos": sim, "rel_best": sim - best_cos, "cov": cov, "cov_rel": cov - best_cov,
            "number_match": float(wants_number and number),
            "number_missing": float(wants_number and not number),
            "position": i / max(1, n - 1), "is_last": float(i == n - 1 and n > 1),
            "is_first": float(i == 0), "ce": float(ce[i]), "ce_rel": float(ce[i]) - best_ce,
        })
    return sents, rows


def _ranks(values: list[float]) -> list[int]:
    """1-based rank of each value, largest first."""
    order = sorted(range(len(values)), key=lambda i: -values[i])
    out = [0] * len(values)
    for r, i in enumerate(order, 1):
        out[i] = r
    return out
