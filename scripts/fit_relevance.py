"""Fit the relevance models (rag/relevance/params.json) on the fit split of three corpora.

    nice -n 10 .venv/bin/python scripts/fit_relevance.py [--home /tmp/rag-relevance]
        [--scifact-home DIR] [--write] [--decline-only] [--transfer]
        [--drop-features A,B] [--without-own CORPORA] [--index-effects answer]
        [--resample N] [--metadata-grid]

Builds what it needs under a scratch RAG_HOME (seeds/ as index `default`, 500 PubMedQA
abstracts as `pubmedqa`, SciFact's 5,183 as `scifact`, ~9 min once; reused), asks every
question of these sets of the index named, fit split only:

    evals/questions.yaml                    seeds/     fact, list, metadata, unanswerable
    evals/pubmedqa/questions.yaml           pubmedqa   own question -> own abstract; MeSH lists
    evals/scifact/questions.yaml            scifact    claim -> abstracts with rationale sentences
    evals/cross/seeds-on-pubmedqa.yaml      pubmedqa   all unanswerable there
    evals/cross/pubmedqa-on-seeds.yaml      default    all unanswerable there

and fits four logistic regressions (numpy, L2 chosen by 5-fold cross-validation over
questions): `member` (is this candidate in the "which papers" list), `source` (does this
paper answer the fact question), `answer` (does the index answer the question at all) and
`sentence` (does this sentence answer). Each corpus and kind of question weighs the same, so
500 PubMedQA questions do not drown 100 seeds ones. Decision thresholds: member and source
maximise mean F1 over the fit questions; answer is the highest bound at which no corpus
abstains on more than 5% of its answerable questions (the false-abstention bound set for it);
all three on out-of-fold probabilities (5 folds over the fit questions), and the answer model
learns from out-of-fold paper probabilities, as it will meet them on unseen questions. The
answer model's second, lower bound, `decline` (with a model, a question is declined before the
call only below it), is the highest at which no corpus has more than DECLINE_WITH_MODEL of its
answerable fit questions below it; `--decline-only` fits just that bound, as a full fit would,
and reports the shipped models with it.
Prints the decisions' figures on the fit and the held-out split; `--write` stores the params.
The same decisions through the whole answering pipeline, per corpus and split: `rag eval`
with each set and its index (evals/README.md). `--metadata-grid` instead prints, for each
candidate weight of the metadata ranking in retrieval (rag.retrieve.metadata.WEIGHT_PER_POINT),
how often `rag search` has the paper of a metadata question in its top 5, fit and held-out.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rag.config import Settings  # noqa: E402
from rag.eval.metrics import normalise  # noqa: E402
from rag.eval.sets import load_set, resolve_refs  # noqa: E402
from rag.relevance.features import (  # noqa: E402
    PAPER_FEATURES,
    QUESTION_FEATURES,
    SENTENCE_FEATURES,
    WANTS_NUMBER,
    sentence_rows,
    terms,
)

SHARED = ROOT.parent / "shared" / "benchmarks"
CORPORA = {"default": ROOT / "seeds", "pubmedqa": SHARED / "pubmedqa" / "corpus.jsonl",
           "scifact": SHARED / "scifact" / "corpus.jsonl"}
RUNS = [("seeds", "evals/questions.yaml", "default"),
        ("pubmedqa", "evals/pubmedqa/questions.yaml", "pubmedqa"),
        ("scifact", "evals/scifact/questions.yaml", "scifact"),
        ("cross", "evals/cross/seeds-on-pubmedqa.yaml", "pubmedqa"),
        ("cross", "evals/cross/pubmedqa-on-seeds.yaml", "default")]
POOL = {"fact": 50, "list": 100, "list_divisor": 5, "list_max": 400}
L2_GRID = (0.01, 0.1, 1.0, 10.0)
FALSE_ABSTENTION = 0.05  # the most false abstention the answer bound may cost, per corpus
# With a model, a question is declined before the call only below a lower bound, `decline`:
# one at which at most this share of any corpus's answerable fit questions falls; between it
# and the answer bound the model is asked, and told to say when the abstracts do not answer.
DECLINE_WITH_MODEL = 0.01
EXTRACT_VERSION = 2  # bump when extract() changes: the cached features are then recomputed
PARAMS = ROOT / "rag" / "relevance" / "params.json"
INDEX_EFFECTS: set[str] = set()  # models fitted with an intercept per index (--index-effects)
MEMBER_ONLY: set[str] = set()  # the member model's features when given (--member-features)


# -- indexes ------------------------------------------------------------------------------


def settings_for(index: str, home: Path, scifact_home: Path | None) -> Settings:
    where = scifact_home if index == "scifact" and scifact_home else home
    return Settings(home=where, index=index, seeds=ROOT / "seeds", llm="none")


def ensure_index(settings: Settings) -> None:
    from rag.ingest import ingest

    # Incremental: an index already built is only checked (and upgraded to the current
    # store format), nothing is embedded again.
    print(f"index {settings.index} under {settings.home} ...", file=sys.stderr)
    ingest([CORPORA[settings.index]], settings, show_progress=False)


def relevance_for(settings: Settings, params: dict[str, Any] | None = None) -> Any:
    from rag.judge import Judge
    from rag.relevance import Relevance
    from rag.retrieve import Retriever

    retriever = Retriever(settings)
    return Relevance(retriever, Judge(retriever.embedder), params or {"models": {}, "pool": POOL})


# -- what each question looks like to the relevance features ------------------------------


def extract(rel: Any, corpus: str, set_path: Path, splits: set[str]) -> list[dict[str, Any]]:
    """Per question: its candidates' features and labels (the pipeline's own list detection)."""
    from rag.question.patterns import is_list_question, topic_of
    from rag.retrieve import metadata as metadata_match

    questions = [q for q in load_set(ROOT / set_path) if q.split in splits and q.kind != "followup"]
    refs = resolve_refs(questions, rel.retriever.papers(), set_path, rel.retriever.settings.index)
    snap = rel.retriever.snapshot()
    out = []
    for q in questions:
        question = q.turns[0]
        list_q = is_list_question(question)
        text = topic_of(question) if list_q else question
        hits = rel.retriever.search(text, rel.pool_size(list_q))
        if not hits:
            continue
        meta = {m.paper_id: m.points for m in metadata_match.index_for(snap).match(question)}
        named = set(rel.named(question, [h.paper for h in hits]))
        qvec = rel.retriever.embed_query(text)
        relevant = {refs[r] for r in q.papers}
        out.append({
            "id": q.id, "corpus": corpus, "kind": q.kind, "split": q.split, "near_miss": q.near_miss,
            "question": question, "text": text, "list": list_q, "qvec": qvec, "hits": hits,
            "named": named, "relevant": relevant, "facts": q.facts,
            "rows": rel.paper_rows(text, qvec, hits, meta, named),
            "labels": [float(h.paper.paper_id in relevant) for h in hits],
        })
    return out


# -- logistic regression ------------------------------------------------------------------


def fit_logistic(x: np.ndarray, y: np.ndarray, w: np.ndarray, l2: float,
                 free: int = 0) -> tuple[np.ndarray, float]:
    """Weighted L2-regularised logistic regression by Newton's method (x standardised). The
    last `free` columns (an index's own intercept) are not regularised."""
    n, d = x.shape
    xb = np.hstack([x, np.ones((n, 1))])
    beta = np.zeros(d + 1)
    reg = np.full(d + 1, l2)
    reg[d - free:] = 0.0
    w = w / w.sum()
    for _ in range(50):
        p = 1 / (1 + np.exp(-np.clip(xb @ beta, -40, 40)))
        grad = xb.T @ (w * (p - y)) + reg * beta
        hess = (xb * (w * p * (1 - p))[:, None]).T @ xb + np.diag(reg) + 1e-9 * np.eye(d + 1)
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.abs(step).max() < 1e-8:
            break
    return beta[:-1], float(beta[-1])


def log_loss(x: np.ndarray, y: np.ndarray, w: np.ndarray, coef: np.ndarray, bias: float) -> float:
    p = np.clip(1 / (1 + np.exp(-np.clip(x @ coef + bias, -40, 40))), 1e-9, 1 - 1e-9)
    return float(-(w * (y * np.log(p) + (1 - y) * np.log(1 - p))).sum() / w.sum())


def fit_model(names: tuple[str, ...], rows: list[dict[str, float]], y: list[float], w: list[float],
              groups: list[str], l2: float | None = None,
              domains: list[str] | None = None) -> dict[str, Any]:
    """Standardise, pick L2 by 5-fold CV over question groups, fit on all; no threshold yet.

    `domains` (the index each row was asked of): fit each index its own intercept beside the
    weights, and ship their mean. How often an index's questions are answerable is a fact
    about how its question set was built (PubMedQA's are all answerable, seeds/ holds the
    near misses); without its own intercept a feature that marks the set (naming a paper,
    asking "how many") learns that base rate instead of what it says within a set."""
    x = np.array([[r[n] for n in names] for r in rows], dtype=np.float64)
    ya, wa = np.asarray(y), np.asarray(w)
    mean, scale = x.mean(0), x.std(0)
    scale[scale < 1e-9] = 1.0
    xs = (x - mean) / scale
    levels = sorted(set(domains))[1:] if domains else []
    if levels:
        assert domains is not None
        xs = np.hstack([xs, np.array([[float(d == v) for v in levels] for d in domains])])
    uniq = sorted(set(groups))
    fold = {g: i % 5 for i, g in enumerate(np.random.default_rng(12).permutation(uniq))}
    folds = np.array([fold[g] for g in groups])
    best = None if l2 is None else (0.0, l2)
    for lam in L2_GRID if l2 is None else ():
        loss = 0.0
        for k in range(5):
            tr, te = folds != k, folds == k
            if not te.any() or len(set(ya[tr])) < 2:
                continue
            coef, bias = fit_logistic(xs[tr], ya[tr], wa[tr], lam, len(levels))
            loss += log_loss(xs[te], ya[te], wa[te], coef, bias) * wa[te].sum()
        if best is None or loss < best[0]:
            best = (loss, lam)
    assert best is not None
    coef, bias = fit_logistic(xs, ya, wa, best[1], len(levels))
    if levels:  # an unseen index gets the mean of the fitted ones' intercepts
        bias += float(coef[len(names):].sum()) / (len(levels) + 1)
        coef = coef[:len(names)]
    return {"names": list(names), "mean": mean.tolist(), "scale": scale.tolist(),
            "coef": coef.tolist(), "bias": bias, "threshold": 0.5, "l2": best[1], "n": len(rows)}


def probs(model: dict[str, Any], rows: list[dict[str, float]]) -> np.ndarray:
    from rag.relevance.features import Model

    return Model.from_dict(model).probabilities(rows)


def out_of_fold(names: tuple[str, ...], part: list[dict[str, Any]], l2: float, data: Any,
                rows_of: Any, domains_of: Any = None) -> dict[str, np.ndarray]:
    """Question key -> what a model fitted without that question's fold (5 folds over
    questions) says of it. Thresholds are chosen on these, and the answer model learns from
    them: in-sample probabilities of the fit questions are overconfident, and a bound or a
    weight chosen on them does not hold on questions the model has not seen."""
    keys = sorted({it["id"] + it["corpus"] for it in part})
    fold = {g: i % 5 for i, g in enumerate(np.random.default_rng(12).permutation(keys))}
    out: dict[str, np.ndarray] = {}
    for k in range(5):
        train = [it for it in part if fold[it["id"] + it["corpus"]] != k]
        model = fit_model(names, *data(train), l2=l2, domains=domains_of(train) if domains_of else None)
        for it in part:
            if fold[it["id"] + it["corpus"]] == k:
                out[it["id"] + it["corpus"]] = probs(model, rows_of(it))
    return out


def weights(items: list[dict[str, Any]], key: Any) -> dict[str, float]:
    """Question id -> weight: every group (corpus, kind) weighs the same in total."""
    by_group: dict[str, list[str]] = defaultdict(list)
    for it in items:
        by_group[key(it)].append(it["id"] + it["corpus"])
    return {qid: 1.0 / len(ids) for ids in by_group.values() for qid in ids}


def paper_data(items: list[dict[str, Any]]) -> tuple[list[dict[str, float]], list[float], list[float], list[str]]:
    qw = weights(items, lambda it: f"{it['corpus']}-{it['kind']}")
    rows, y, w, g = [], [], [], []
    for it in items:
        pos = sum(it["labels"])
        neg = len(it["labels"]) - pos
        for row, label in zip(it["rows"], it["labels"], strict=True):
            share = 0.5 / pos if label else (0.5 if pos else 1.0) / neg
            rows.append(row)
            y.append(label)
            w.append(qw[it["id"] + it["corpus"]] * share)
            g.append(it["id"] + it["corpus"])
    return rows, y, w, g


# -- thresholds ---------------------------------------------------------------------------


def f1(chosen: set[str], relevant: set[str]) -> float:
    hit = len(chosen & relevant)
    return 2 * hit / (len(chosen) + len(relevant)) if hit else 0.0


def best_member_threshold(items: list[dict[str, Any]], p_of: Any) -> float:
    """The bound on P(member) that maximises mean F1 over answerable fit questions, given
    each question's (out-of-fold) probabilities `p_of(item)`."""
    scored = [(it, p_of(it)) for it in items if it["relevant"]]
    grid = np.linspace(0.05, 0.95, 91)

    def mean_f1(t: float) -> float:
        vals = []
        for it, p in scored:
            chosen = {h.paper.paper_id for h, pi in zip(it["hits"], p, strict=True) if pi >= t}
            if not chosen:
                chosen = {it["hits"][int(np.argmax(p))].paper.paper_id}
            vals.append(f1(chosen, it["relevant"]))
        return float(np.mean(vals))

    return float(max(grid, key=mean_f1))


def answer_threshold(p: np.ndarray, y: np.ndarray, corpora: list[str],
                     limit: float = FALSE_ABSTENTION) -> float:
    """The highest bound on P(answerable) (the most abstention on unanswerable questions) at
    which no corpus abstains on more than `limit` of its answerable fit questions: the
    bound set on false abstention for the answer bound, DECLINE_WITH_MODEL for the bound
    below which a question is declined before a model is asked (`decline`)."""
    best = 0.0
    for t in np.linspace(0.01, 0.98, 98):
        rates = [float((p[(y == 1) & (np.array(corpora) == c)] < t).mean())
                 for c in sorted(set(corpora)) if ((y == 1) & (np.array(corpora) == c)).any()]
        if max(rates) <= limit:
            best = float(t)
    return round(best, 2)


# -- the question as a whole, and sentences -----------------------------------------------


def add_question_rows(rel: Any, items: list[dict[str, Any]], models: dict[str, Any],
                      oof: dict[str, np.ndarray]) -> None:
    """The question-level features, from out-of-fold paper probabilities for fit questions."""
    for it in items:
        p = oof.get(it["id"] + it["corpus"])
        if p is None:
            p = probs(models["member" if it["list"] else "source"], it["rows"])
        it["paper_probs"] = p
        it["qrow"] = rel.question_row(it["question"], it["text"], it["qvec"], it["hits"],
                                      it["rows"], p, it["named"], it["list"])


def answer_data(part: list[dict[str, Any]]) -> tuple[list[Any], list[float], list[float], list[str]]:
    qw = weights(part, lambda it: f"{it['corpus']}-{it['kind']}")
    return ([it["qrow"] for it in part], [float(bool(it["relevant"])) for it in part],
            [qw[it["id"] + it["corpus"]] for it in part], [it["id"] + it["corpus"] for it in part])


def fit_models(rels: dict[str, Any], items: list[dict[str, Any]], fit: list[dict[str, Any]],
               fit_sents: list[dict[str, Any]], dropped: frozenset[str] = frozenset()
               ) -> dict[str, Any]:
    """The four models and their bounds from the `fit` questions and sentences only, each
    without the `dropped` features. Sets every item's question row (`qrow`) as these models
    see it: from out-of-fold paper probabilities for the fit questions, as the answer model
    learns them."""
    paper_names = tuple(n for n in PAPER_FEATURES if n not in dropped)
    question_names = tuple(n for n in QUESTION_FEATURES if n not in dropped)
    sentence_names = tuple(n for n in SENTENCE_FEATURES if n not in dropped)
    models: dict[str, Any] = {}
    oof: dict[str, np.ndarray] = {}
    for name, pick in (("member", lambda it: it["list"]), ("source", lambda it: not it["list"])):
        part = [it for it in fit if pick(it)]
        names = tuple(n for n in paper_names if n in MEMBER_ONLY) if name == "member" and MEMBER_ONLY \
            else paper_names
        models[name] = fit_model(names, *paper_data(part))
        held = out_of_fold(names, part, models[name]["l2"], paper_data, lambda it: it["rows"])
        oof.update(held)
        models[name]["threshold"] = best_member_threshold(
            [it for it in part if it["relevant"]], lambda it, h=held: h[it["id"] + it["corpus"]])
    for index, rel in rels.items():
        add_question_rows(rel, [it for it in items if it["index"] == index], models, oof)
    domains_of = (lambda part: [it["index"] for it in part]) if "answer" in INDEX_EFFECTS else None
    answer = fit_model(question_names, *answer_data(fit), domains=domains_of(fit) if domains_of else None)
    held = out_of_fold(question_names, fit, answer["l2"], answer_data, lambda it: [it["qrow"]],
                       domains_of)
    _, ya, _, _ = answer_data(fit)
    oof_answer = np.array([held[it["id"] + it["corpus"]][0] for it in fit])
    answer["threshold"] = answer_threshold(oof_answer, np.array(ya), [it["corpus"] for it in fit])
    answer["decline"] = min(answer["threshold"], answer_threshold(
        oof_answer, np.array(ya), [it["corpus"] for it in fit], DECLINE_WITH_MODEL))
    models["answer"] = answer
    models["sentence"] = fit_model(sentence_names, *sentence_fit_data(fit_sents))
    return models


FIELDS = {"default": "seeds", "pubmedqa": "pubmedqa", "scifact": "scifact"}


def resampled(rels: dict[str, Any], items: list[dict[str, Any]], sents: list[dict[str, Any]],
              dropped: frozenset[str], runs: int, share: float = 0.8
              ) -> dict[tuple[str, str], list[float]]:
    """Each held-out decision figure of `runs` refits, each on a random `share` of every
    corpus's fit questions (seeded 0, 1, ...; without replacement, so that no question sits in
    two cross-validation folds): how much a figure moves with the fit questions it was fitted
    on alone, the noise a change of features or vectors is judged against."""
    fit = [it for it in items if it["split"] == "fit"]
    out: dict[tuple[str, str], list[float]] = defaultdict(list)
    for seed in range(runs):
        rng = random.Random(seed)
        keep: set[str] = set()
        for corpus in sorted({it["corpus"] for it in fit}):
            keys = sorted({it["id"] + it["corpus"] for it in fit if it["corpus"] == corpus})
            keep.update(rng.sample(keys, round(share * len(keys))))
        models = fit_models(rels, items, [it for it in fit if it["id"] + it["corpus"] in keep],
                            [s for s in sents if s["split"] == "fit" and s["id"] + s["corpus"] in keep],
                            dropped)
        for key, figs in decision_figures(items, sents, models).items():
            if key.endswith(" heldout"):
                for name, (value, _) in figs.items():
                    out[(key, name)].append(value)
    return out


def transfer_table(rels: dict[str, Any], items: list[dict[str, Any]], sents: list[dict[str, Any]],
                   figures: dict[str, dict[str, Any]], dropped: frozenset[str] = frozenset()
                   ) -> list[tuple[str, str, float, float, float, int]]:
    """Leave one corpus out: (corpus, figure, fit, held-out, left-out, n) for each corpus's
    held-out questions, `figures` being those of the models fitted on all three, and left-out
    those of models fitted on the other two corpora's fit questions alone. A corpus goes with
    its abstracts: a cross-corpus question counts for the corpus whose index it is asked of.
    Resets every item's `qrow` (call it last)."""
    rows = []
    for index, corpus in FIELDS.items():
        fit = [it for it in items if it["split"] == "fit" and it["index"] != index]
        fit_s = [s for s in sents if s["split"] == "fit" and s["corpus"] != corpus]
        loco = fit_models(rels, items, fit, fit_s, dropped)
        held = [it for it in items if it["split"] == "heldout" and it["corpus"] == corpus]
        held_s = [s for s in sents if s["split"] == "heldout" and s["corpus"] == corpus]
        left = decision_figures(held, held_s, loco).get(f"{corpus} heldout", {})
        for fig, (value, n) in left.items():
            rows.append((corpus, fig, figures.get(f"{corpus} fit", {}).get(fig, (float("nan"), 0))[0],
                         figures[f"{corpus} heldout"][fig][0], value, n))
    return rows


def _is_answer(corpus: str, sentence: str, facts: list[str]) -> bool:
    s = normalise(sentence).rstrip(". ")
    alts = [normalise(a).rstrip(". ") for f in facts for a in f.split("|") if a.strip()]
    if corpus == "seeds":
        return any(a in s for a in alts)
    # PubMedQA conclusions and SciFact rationales are whole sentences; the two sentence
    # splitters may cut them a little differently.
    return any(a == s or (len(s) > 40 and s in a) or (len(a) > 40 and a in s) for a in alts)


def sentence_data(rel: Any, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per answerable fact question: each sentence of each paper that answers it, labelled."""
    import re

    from rag.corpus.text import short_label

    out = []
    for it in items:
        if it["list"] or not it["relevant"] or not it["facts"] or it["kind"] == "metadata":
            continue
        papers = [h.paper for h in it["hits"] if h.paper.paper_id in it["relevant"]]
        for paper in papers:
            aspect = it["question"]
            if paper.paper_id in it["named"]:
                name = short_label(paper.title, paper.label)
                aspect = re.sub(rf"(?i)(?<![\w-]){re.escape(name)}(?![\w-])", " ", aspect)
            sents, vecs = rel.judge.sentences(paper.abstract)
            labels = [float(_is_answer(it["corpus"], s, it["facts"])) for s in sents]
            if not any(labels) or all(labels):
                continue
            rows = sentence_rows(terms(aspect), vecs @ rel.retriever.embed_query(aspect),
                                 rel._sentence_terms(paper.abstract, sents), sents,
                                 bool(WANTS_NUMBER.search(it["question"])), rel.stats())
            out.append({"id": it["id"], "corpus": it["corpus"], "kind": it["kind"],
                        "split": it["split"], "rows": rows, "labels": labels})
    return out


def sentence_fit_data(items: list[dict[str, Any]]) -> tuple[list[dict[str, float]], list[float], list[float], list[str]]:
    qw = weights(items, lambda it: it["corpus"])
    rows, y, w, g = [], [], [], []
    for it in items:
        pos = sum(it["labels"])
        neg = len(it["labels"]) - pos
        for row, label in zip(it["rows"], it["labels"], strict=True):
            rows.append(row)
            y.append(label)
            w.append(qw[it["id"] + it["corpus"]] * (0.5 / pos if label else 0.5 / neg))
            g.append(it["id"] + it["corpus"])
    return rows, y, w, g


# -- figures ------------------------------------------------------------------------------


def decision_figures(items: list[dict[str, Any]], sents: list[dict[str, Any]],
                     models: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per (corpus, split): the decisions' own figures (no answer text involved)."""
    from rag.relevance.features import Model

    answer = Model.from_dict(models["answer"])
    out: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    scored: dict[str, list[tuple[float, float]]] = defaultdict(list)  # (P(answer), answerable)
    for it in items:
        key = f"{it['corpus']} {it['split']}"
        model = models["member" if it["list"] else "source"]
        p_answer = answer.probability(it["qrow"])
        scored[key].append((p_answer, float(bool(it["relevant"]))))
        answered = p_answer >= answer.threshold
        asks_model = float(not answered and p_answer >= answer.decline)  # with a model only
        if not it["relevant"]:
            kind = "own removed" if it["id"].endswith("~without-own") else "unanswerable"
            out[key][f"abstains ({kind})"].append(float(not answered))
            out[key][f"model asked ({kind})"].append(asks_model)
            continue
        out[key]["false abstention"].append(float(not answered))
        out[key]["declined before a model"].append(float(p_answer < answer.decline))
        p = it["paper_probs"]
        ranked = sorted(zip(it["hits"], p, strict=True), key=lambda t: -t[1])
        chosen = {h.paper.paper_id for h, pi in ranked if pi >= model["threshold"]} or {ranked[0][0].paper.paper_id}
        if not answered:
            chosen = set()
        if it["list"]:
            # ranking alone: average precision, and the F1 of the best cut of this ranking (the
            # most any bound on P(member) could reach)
            flags = [h.paper.paper_id in it["relevant"] for h, _ in ranked]
            hits_at = np.cumsum(flags)
            out[key]["list AP"].append(float(sum(hits_at[i] / (i + 1) for i, f in enumerate(flags) if f))
                                       / len(it["relevant"]))
            out[key]["list F1, best cut"].append(
                float(max(2 * h / (k + len(it["relevant"])) for k, h in enumerate(hits_at, 1))))
            hit = len(chosen & it["relevant"])
            out[key]["list recall"].append(hit / len(it["relevant"]))
            if chosen:
                out[key]["list precision"].append(hit / len(chosen))
        else:
            out[key]["top paper answers"].append(float(ranked[0][0].paper.paper_id in it["relevant"]))
    sentence = Model.from_dict(models["sentence"])
    for s in sents:
        p = sentence.probabilities(s["rows"])
        out[f"{s['corpus']} {s['split']}"]["top sentence answers"].append(s["labels"][int(np.argmax(p))])
    for key, pairs in scored.items():  # ranking alone, whatever the threshold
        p_y = np.array(pairs)
        if 0 < p_y[:, 1].sum() < len(p_y):
            out[key]["answerable ROC AUC"] = [auc(p_y[:, 0], p_y[:, 1])] * len(p_y)  # mean = AUC, n = questions
    return {k: {m: (float(np.mean(v)), len(v)) for m, v in sorted(d.items())} for k, d in sorted(out.items())}


def auc(p: np.ndarray, y: np.ndarray) -> float:
    pos, neg = p[y == 1], p[y == 0]
    if not len(pos) or not len(neg):
        return float("nan")
    return float((pos[:, None] > neg[None, :]).mean() + 0.5 * (pos[:, None] == neg[None, :]).mean())


def print_curve(items: list[dict[str, Any]], answer: dict[str, Any]) -> None:
    """Held-out answerable questions declined, per corpus, and unanswerable ones declined (seeds/
    and cross-corpus), at each answer bound: how one ranking trades the two."""
    part = [it for it in items if it["split"] == "heldout"]
    p = probs(answer, [it["qrow"] for it in part])
    groups = [(f"{c} FA", lambda it, c=c: it["corpus"] == c and bool(it["relevant"]))
              for c in ("seeds", "pubmedqa", "scifact")]
    groups += [(f"{c} declined", lambda it, c=c: it["corpus"] == c and not it["relevant"])
               for c in ("seeds", "cross")]
    print("\nheld-out, per answer bound (the fitted one is "
          f"{answer['threshold']:.2f}):\n{'bound':>6}" + "".join(f"{g[0]:>15}" for g in groups))
    masks = [np.array([member(it) for it in part]) for _, member in groups]
    for t in np.arange(0.30, 0.91, 0.05):
        cells = [float((p[sel] < t).mean()) if sel.any() else float("nan") for sel in masks]
        print(f"{t:>6.2f}" + "".join(f"{v:>15.3f}" for v in cells))


def without_own(rel: Any, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Near misses made from answerable fact questions: the same question with the papers
    that answer it taken out of its candidates, as if the index lacked them. Every corpus
    gets questions of its own field that its index does not answer (PubMedQA's and SciFact's
    sets have none of their own: their unanswerable questions come from the other field)."""
    from rag.retrieve import metadata as metadata_match

    snap = rel.retriever.snapshot()
    out = []
    for it in items:
        if it["list"] or not it["relevant"] or it["kind"] == "metadata":
            continue
        hits = [h for h in it["hits"] if h.paper.paper_id not in it["relevant"]]
        if not hits:
            continue
        meta = {m.paper_id: m.points for m in metadata_match.index_for(snap).match(it["question"])
                if m.paper_id not in it["relevant"]}
        named = it["named"] - it["relevant"]
        out.append({**it, "id": it["id"] + "~without-own", "kind": "own-removed", "near_miss": True,
                    "hits": hits, "named": named, "relevant": set(),
                    "rows": rel.paper_rows(it["text"], it["qvec"], hits, meta, named),
                    "labels": [0.0] * len(hits)})
    return out


def extracted(rels: dict[str, Any], cache: Path) -> list[dict[str, Any]]:
    """Every question's candidates and features; kept in `cache` while the code that computes
    them and the sets are unchanged (extraction is most of the run)."""
    import hashlib
    import pickle

    sources = sorted((ROOT / "rag" / "relevance").glob("*.py")) + sorted(
        (ROOT / "rag" / "retrieve").glob("*.py")) + [ROOT / "rag" / "answering" / "questions.py"] + [
        ROOT / s for _, s, _ in RUNS]  # questions.py: which questions are lists, and their topics
    key = hashlib.sha1(b"".join(p.read_bytes() for p in sources) + bytes([EXTRACT_VERSION])).hexdigest()
    try:
        with cache.open("rb") as fh:
            stored_key, items = pickle.load(fh)
        if stored_key == key:
            return items  # type: ignore[no-any-return]
    except (OSError, ValueError, EOFError, pickle.UnpicklingError):
        pass
    items = []
    for corpus, set_path, index in RUNS:
        t0 = time.perf_counter()
        got = extract(rels[index], corpus, Path(set_path), {"fit", "heldout"})
        for it in got:
            it["index"] = index
        items += got
        print(f"{set_path} on {index}: {len(got)} questions, {time.perf_counter() - t0:.0f} s",
              file=sys.stderr)
    with cache.open("wb") as fh:
        pickle.dump((key, items), fh)
    return items


def metadata_grid(rel: Any) -> None:
    """Top-5 recall of `rag search` on seeds/ metadata questions per weight of the metadata
    ranking (the weight is chosen on the fit rows; held-out shown for the report)."""
    from rag.retrieve import metadata as metadata_match

    path = ROOT / "evals" / "questions.yaml"
    questions = [q for q in load_set(path) if q.kind == "metadata"]
    refs = resolve_refs(questions, rel.retriever.papers(), path, "default")
    shipped = metadata_match.WEIGHT_PER_POINT
    for weight in (0.0, 0.5, 1.0, 2.0, 4.0):
        metadata_match.WEIGHT_PER_POINT = weight
        cells = []
        for split in ("fit", "heldout"):
            part = [q for q in questions if q.split == split]
            found = [len({refs[r] for r in q.papers} & {h.paper.paper_id for h in rel.retriever.search(
                q.turns[0], 5)}) / len(q.papers) for q in part]
            cells.append(f"{split} {np.mean(found):.3f} ({len(part)})")
        print(f"weight {weight:<4} " + "  ".join(cells) + ("  <- shipped" if weight == shipped else ""))
    metadata_match.WEIGHT_PER_POINT = shipped


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, default=Path("/tmp/rag-relevance"))
    ap.add_argument("--scifact-home", type=Path, help="where the scifact index lives (default --home)")
    ap.add_argument("--write", action="store_true", help=f"write {PARAMS.relative_to(ROOT)}")
    ap.add_argument("--decline-only", action="store_true",
                    help="keep the shipped models: fit only the answer model's `decline` bound "
                         "(as a full fit would), report the shipped models with it, and with "
                         "--write add it to the shipped parameters")
    ap.add_argument("--transfer", action="store_true",
                    help="also print the leave-one-corpus-out table (three more fits)")
    ap.add_argument("--drop-features", default="", metavar="A,B",
                    help="fit the models without these features (e.g. position,is_last, "
                         "named or z_bg)")
    ap.add_argument("--without-own", default="", metavar="CORPUS,...",
                    help="add near misses in these corpora (seeds, pubmedqa, scifact): each "
                         "answerable fact question without the papers that answer it among its "
                         "candidates (an experiment; not shipped)")
    ap.add_argument("--index-effects", default="", metavar="MODEL,...",
                    help="fit these models (answer) with an intercept per index, shipping "
                         "their mean (fit_model's `domains`)")
    ap.add_argument("--member-features", default="", metavar="A,B",
                    help="fit the list member model on these paper features alone (an experiment)")
    ap.add_argument("--curve", action="store_true",
                    help="also print, per answer bound, each corpus's held-out false abstention "
                         "and the abstention on unanswerable questions (the trade the bound picks)")
    ap.add_argument("--resample", type=int, default=0, metavar="N",
                    help="also refit N times, each on a random 80%% of the fit questions, and "
                         "print each held-out figure's mean, SD and range (the refit noise)")
    ap.add_argument("--metadata-grid", action="store_true",
                    help="only print `rag search` top-5 on metadata questions per metadata weight")
    args = ap.parse_args()
    if args.metadata_grid:
        settings = settings_for("default", args.home, None)
        ensure_index(settings)
        metadata_grid(relevance_for(settings))
        return
    started = time.perf_counter()
    INDEX_EFFECTS.update(m for m in args.index_effects.split(",") if m)
    MEMBER_ONLY.update(m for m in args.member_features.split(",") if m)
    if MEMBER_ONLY - set(PAPER_FEATURES):
        raise SystemExit(f"--member-features: not a paper feature: {sorted(MEMBER_ONLY - set(PAPER_FEATURES))}")
    rels: dict[str, Any] = {}
    for _, _, index in RUNS:
        if index not in rels:
            settings = settings_for(index, args.home, args.scifact_home)
            ensure_index(settings)
            rels[index] = relevance_for(settings)
    items = extracted(rels, args.home / "fit-relevance-features.pickle")
    own_removed = {c for c in args.without_own.split(",") if c}
    if own_removed - set(FIELDS.values()):
        raise SystemExit(f"--without-own: not a corpus: {sorted(own_removed - set(FIELDS.values()))}")
    for index, rel in rels.items():
        items += without_own(rel, [it for it in items if it["index"] == index
                                   and it["corpus"] in own_removed])
    sents: list[dict[str, Any]] = []
    for index, rel in rels.items():
        sents += sentence_data(rel, [it for it in items if it["index"] == index])
    dropped = frozenset(n for n in args.drop_features.split(",") if n)
    unknown = dropped - set(SENTENCE_FEATURES) - set(QUESTION_FEATURES) - set(PAPER_FEATURES)
    if unknown:
        raise SystemExit(f"--drop-features: not a feature of any model: {sorted(unknown)}")
    models = fit_models(rels, items, [it for it in items if it["split"] == "fit"],
                        [s for s in sents if s["split"] == "fit"], dropped)
    answer = models["answer"]
    shipped = json.loads(PARAMS.read_text(encoding="utf-8"))
    if args.decline_only:
        # The bound is chosen as a full fit chooses it, on out-of-fold probabilities of the fit
        # questions; the shipped models' figures are then reported with it (held-out questions
        # are new to both).
        shipped["models"]["answer"]["decline"] = min(answer["decline"], shipped["models"]["answer"]["threshold"])
        models = shipped["models"]
        for index, rel in rels.items():
            add_question_rows(rel, [it for it in items if it["index"] == index], models, {})
    for name, m in models.items():
        top = sorted(zip(m["names"], m["coef"], strict=True), key=lambda t: -abs(t[1]))[:6]
        decline = f"  decline {m['decline']:.2f}" if "decline" in m else ""
        print(f"{name:<9} threshold {m['threshold']:.2f}{decline}  l2 {m['l2']}  rows {m['n']}  "
              + ", ".join(f"{n} {c:+.2f}" for n, c in top))
    for split in ("fit", "heldout"):
        part = [it for it in items if it["split"] == split and not it["list"]]
        print(f"answerable-vs-not ROC AUC, {split}: "
              f"{auc(probs(models['answer'], [it['qrow'] for it in part]), np.array([float(bool(it['relevant'])) for it in part])):.3f}")
    if args.curve:
        print_curve(items, models["answer"])
    print(f"\n{'corpus split':<18}{'figure':<26}{'value':>7}{'n':>6}")
    figures = decision_figures(items, sents, models)
    for key, figs in figures.items():
        for name, (value, n) in figs.items():
            print(f"{key:<18}{name:<26}{value:>7.3f}{n:>6}")
    # in a smaller index, words are weighed as in one of this size (rag.relevance.Relevance.stats)
    smallest = min(len(r.retriever.papers()) for r in rels.values())
    if args.write and args.decline_only:
        shipped["fitted"]["smallest_index"] = smallest
        PARAMS.write_text(json.dumps(shipped, indent=1) + "\n", encoding="utf-8")
        print(f"wrote the decline bound into {PARAMS.relative_to(ROOT)}")
    elif args.write:
        params = {"format": 1, "pool": POOL, "models": models,
                  "fitted": {"by": "scripts/fit_relevance.py", "date": time.strftime("%Y-%m-%d"),
                             "questions": {f"{c} {s}": sum(it["corpus"] == c and it["split"] == s for it in items)
                                           for c in ("seeds", "pubmedqa", "scifact", "cross") for s in ("fit", "heldout")},
                             "sentences_questions": len([s for s in sents if s["split"] == "fit"]),
                             "smallest_index": smallest}}
        PARAMS.write_text(json.dumps(params, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {PARAMS.relative_to(ROOT)}")
    if args.transfer:
        print("\nleave one corpus out: held-out questions of each corpus, models fitted on all "
              "three (held) and on the other two alone (left); * marks a left-out figure more "
              "than 0.10 worse than held")
        print(f"{'corpus':<10}{'figure':<26}{'fit':>7}{'held':>7}{'left':>7}{'n':>6}")
        for c, fig, f, h, left, n in transfer_table(rels, items, sents, figures, dropped):
            worse = left > h + 0.10 if fig in ("false abstention", "declined before a model") else left < h - 0.10
            print(f"{c:<10}{fig:<26}{f:>7.3f}{h:>7.3f}{left:>7.3f}{n:>6}{' *' if worse else ''}")
    if args.resample:
        print(f"\nrefit noise: held-out figures of {args.resample} refits, each on 80% of the fit "
              "questions")
        print(f"{'corpus split':<18}{'figure':<26}{'all':>7}{'mean':>7}{'sd':>7}{'min':>7}{'max':>7}")
        for (key, name), values in resampled(rels, items, sents, dropped, args.resample).items():
            v = np.array(values)
            print(f"{key:<18}{name:<26}{figures[key][name][0]:>7.3f}{v.mean():>7.3f}"
                  f"{v.std(ddof=1) if len(v) > 1 else 0.0:>7.3f}{v.min():>7.3f}{v.max():>7.3f}")
    print(f"{time.perf_counter() - started:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
