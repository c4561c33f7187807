"""Fit the relevance models (rag/relevance/params.json) on the fit split of three corpora.

    nice -n 10 .venv/bin/python scripts/fit_relevance.py [--home /tmp/rag-relevance]
        [--scifact-home DIR] [--write] [--all-features] [--metadata-grid]

Builds what it needs under a scratch RAG_HOME (seeds/ as index `default`, 500 PubMedQA
abstracts as `pubmedqa`, SciFact's 5,183 as `scifact`, ~9 min once; reused), asks every
question of these sets of the index named:

    evals/questions.yaml                    seeds/     fact, list, metadata, unanswerable
    evals/pubmedqa/questions.yaml           pubmedqa   own question -> own abstract; MeSH lists
    evals/scifact/questions.yaml            scifact    claim -> abstracts with rationale sentences
    evals/cross/seeds-on-pubmedqa.yaml      pubmedqa   all unanswerable there
    evals/cross/pubmedqa-on-seeds.yaml      default    all unanswerable there

measures each through Relevance.measure (the path of every question at answer time, the
cross-encoder included; cached), and fits four logistic regressions on the fit split only
(numpy, L2 chosen by 5-fold cross-validation over questions): `member` (is this candidate in
the "which papers" list), `source` (does this paper answer the fact question), `answer` (does
the index answer the question at all) and `sentence` (does this sentence answer). Each corpus
and kind of question weighs the same, so 500 PubMedQA questions do not drown 100 seeds ones.

Features that transfer: each model's features are chosen by backward elimination on the
leave-one-corpus-out loss (fit on two corpora's fit questions, loss on the third's); a
feature that helps only on the corpus it was learned from goes. Decision thresholds: member
and source maximise mean F1 over the fit questions; answer is the highest bound at which no
corpus abstains on more than 5% of its answerable questions, and the bound used when a model
writes the answer the highest at which none loses more than 1%; all on out-of-fold
probabilities (5 folds over the fit questions), and the answer model learns from out-of-fold
paper probabilities, as it will meet them on unseen questions.

Prints the decisions' figures on the fit and the held-out split, and the transfer table: each
corpus's held-out figures with the models fitted on the other two corpora alone. `--write`
stores the params. The same decisions through the whole answering pipeline: `rag eval` with
each set and its index (evals/README.md). `--metadata-grid` instead prints, for each
candidate weight of the metadata ranking in retrieval (rag.retrieve.metadata.WEIGHT_PER_POINT),
how often `rag search` has the paper of a metadata question in its top 5, fit and held-out.
"""

from __future__ import annotations

import argparse
import json
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
from rag.relevance import rows as measured  # noqa: E402
from rag.relevance.features import (  # noqa: E402
    PAPER_FEATURES,
    QUESTION_FEATURES,
    SENTENCE_FEATURES,
)

SHARED = ROOT.parent / "shared" / "benchmarks"
CORPORA = {"default": ROOT / "seeds", "pubmedqa": SHARED / "pubmedqa" / "corpus.jsonl",
           "scifact": SHARED / "scifact" / "corpus.jsonl"}
RUNS = [("seeds", "evals/questions.yaml", "default"),
        ("pubmedqa", "evals/pubmedqa/questions.yaml", "pubmedqa"),
        ("cross", "evals/cross/seeds-on-pubmedqa.yaml", "pubmedqa"),
        ("cross", "evals/cross/pubmedqa-on-seeds.yaml", "default"),
        ("scifact", "evals/scifact/questions.yaml", "scifact")]  # the slowest index to build: last
# Retrieval pool sizes, and how many candidates the cross-encoder reads: caps on cost, not
# fitted decisions. ce_fact and ce_sentence_papers keep a fact question's cross-encoder work
# under 0.3 s on 2 cores, ce_list a list question's under 1.5 s (benchmarks/relevance_cost.py).
POOL = {"fact": 50, "list": 100, "list_divisor": 5, "list_max": 400,
        "ce_fact": 20, "ce_list": 60, "ce_sentence_papers": 3}
L2_GRID = (0.01, 0.1, 1.0, 10.0)
FALSE_ABSTENTION = 0.05  # the most false abstention the answer bound may cost, per corpus
# With a model writing the answer, only a clear "no" is declined before it is asked: the bound
# may cost at most this share of any corpus's answerable fit questions (the model itself says
# when the abstracts do not answer, and the checker judges what it says).
FALSE_ABSTENTION_WITH_MODEL = 0.01
EXTRACT_VERSION = 3  # bump when extract() changes: the cached features are then recomputed
PARAMS = ROOT / "rag" / "relevance" / "params.json"
# Measured against the other candidates or against this index's own word and score
# statistics: an index of one or a few papers has no others and no statistics to speak of, so
# their values there lie far outside anything the models were fitted on (a question about the
# one paper of a one-paper index was declined). rag.relevance counts them as their fitted mean
# (no evidence either way) in an index smaller than the smallest one fitted on (seeds/, 60).
# Leaving them out of the answer model instead cost seeds/ half its declined near misses.
INDEX_RELATIVE = ("p_second", "gap", "ce_gap", "z_top_best", "z_self_best", "miss_max", "unknown",
                  "cov_aspect", "cov_aspect_doc")  # the last two: IDF-weighted with this index's IDF
# `named` stays a candidate of the answer model although the fit sets' near misses ("What
# licence does MegaBlocks use?") all name papers, so that naming a paper reads as a near miss
# (weight -1.4) and a one-paper index declines "What speedup does Skrull report over
# DeepSpeed?". Leaving it out was tried: seeds/ held-out, unanswerable declined 0.875 -> 0.458
# and false abstention 0.092 -> 0.184. The sets need answerable named questions as hard as
# their near misses before it can go.
NOT_FOR_ANSWER: tuple[str, ...] = ()
FIELDS = ("seeds", "pubmedqa", "scifact")
FIELD_OF_INDEX = {"default": "seeds", "pubmedqa": "pubmedqa", "scifact": "scifact"}


def field_of(it: dict[str, Any]) -> str:
    """The corpus a question is asked of (a cross-corpus question belongs to the index it is
    asked of: leaving a corpus out leaves out its abstracts and every question over them)."""
    return FIELD_OF_INDEX[it["index"]]


def key_of(it: dict[str, Any]) -> str:
    return it["id"] + it["corpus"]


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


def relevance_for(settings: Settings) -> Any:
    from rag.judge import Judge
    from rag.relevance import Relevance
    from rag.retrieve import Retriever

    retriever = Retriever(settings)
    return Relevance(retriever, Judge(retriever.embedder), {"models": {}, "pool": POOL})


# -- what each question looks like to the relevance features ------------------------------


def extract(rel: Any, corpus: str, set_path: Path, splits: set[str]) -> list[dict[str, Any]]:
    """Per question: its candidates' features and labels, measured by Relevance.measure, the
    path every question takes at answer time (the pipeline's own list detection)."""
    from rag.answering.questions import is_list_question, topic_of

    questions = [q for q in load_set(ROOT / set_path) if q.split in splits and q.kind != "followup"]
    refs = resolve_refs(questions, rel.retriever.papers(), set_path, rel.retriever.settings.index)
    out = []
    for q in questions:
        question = q.turns[0]
        list_q = is_list_question(question)
        text = topic_of(question) if list_q else question
        hits = rel.retriever.search(text, rel.pool_size(list_q))
        if not hits:
            continue
        m = rel.measure(question, hits, list_question=list_q, topic=text)
        relevant = {refs[r] for r in q.papers}
        out.append({
            "id": q.id, "corpus": corpus, "kind": q.kind, "split": q.split, "near_miss": q.near_miss,
            "question": question, "list": list_q, "m": m, "hits": hits, "relevant": relevant,
            "facts": q.facts, "rows": m.rows,
            "labels": [float(h.paper.paper_id in relevant) for h in hits],
        })
    return out


def _is_answer(corpus: str, sentence: str, facts: list[str]) -> bool:
    s = normalise(sentence).rstrip(". ")
    alts = [normalise(a).rstrip(". ") for f in facts for a in f.split("|") if a.strip()]
    if corpus == "seeds":
        return any(a in s for a in alts)
    # PubMedQA conclusions and SciFact rationales are whole sentences; the two sentence
    # splitters may cut them a little differently.
    return any(a == s or (len(s) > 40 and s in a) or (len(a) > 40 and a in s) for a in alts)


def sentence_data(rel: Any, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per answerable fact question: each sentence of each paper that answers it, labelled,
    with the features Relevance.best_sentences computes (the question without the paper's
    name for the embedding, as asked for the cross-encoder)."""
    import re

    from rag.corpus.text import short_label

    out = []
    for it in items:
        if it["list"] or not it["relevant"] or not it["facts"] or it["kind"] == "metadata":
            continue
        papers = [h.paper for h in it["hits"] if h.paper.paper_id in it["relevant"]]
        for paper in papers:
            aspect = it["question"]
            if paper.paper_id in it["m"].named:
                name = short_label(paper.title, paper.label)
                aspect = re.sub(rf"(?i)(?<![\w-]){re.escape(name)}(?![\w-])", " ", aspect)
            sents, rows = measured.sentence_rows(rel, aspect, paper.abstract,
                                                 rel.retriever.embed_query(aspect), it["question"])
            labels = [float(_is_answer(it["corpus"], s, it["facts"])) for s in sents]
            if not any(labels) or all(labels):
                continue
            out.append({"id": it["id"], "corpus": it["corpus"], "kind": it["kind"],
                        "index": it["index"], "split": it["split"], "rows": rows, "labels": labels})
    return out


def extracted(rels: dict[str, Any], home: Path,
              reverse: bool = False) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every question's candidates and features, and the labelled sentences; kept under
    `home`, one file per set, while the code that computes them and the sets are unchanged
    (extraction is most of the run: the cross-encoder reads every candidate). `rels` maps an
    index name to its Relevance, made (and the index built) on first use. `reverse`: the
    sets in the other order, for a second process beside a first (one core each)."""
    import hashlib
    import pickle

    sources = sorted((ROOT / "rag" / "relevance").glob("*.py")) + sorted(
        (ROOT / "rag" / "retrieve").glob("*.py")) + [ROOT / s for _, s, _ in RUNS] + [
        ROOT / "rag" / "relevance" / "reranker" / "model.onnx"]
    key = hashlib.sha1(b"".join(p.read_bytes() for p in sources) + bytes([EXTRACT_VERSION])
                       + json.dumps(POOL, sort_keys=True).encode()).hexdigest()
    items, sents = [], []
    for corpus, set_path, index in (RUNS[::-1] if reverse else RUNS):
        cache = home / f"fit-features-{index}-{Path(set_path).stem}-{corpus}.pickle"
        try:
            with cache.open("rb") as fh:
                stored_key, got, got_s = pickle.load(fh)
            if stored_key == key:
                items += got
                sents += got_s
                continue
        except (OSError, ValueError, EOFError, pickle.UnpicklingError):
            pass
        t0 = time.perf_counter()
        got = extract(rels[index], corpus, Path(set_path), {"fit", "heldout"})
        for it in got:
            it["index"] = index
        got_s = sentence_data(rels[index], got)
        with cache.open("wb") as fh:
            pickle.dump((key, got, got_s), fh)
        items += got
        sents += got_s
        print(f"{set_path} on {index}: {len(got)} questions, {time.perf_counter() - t0:.0f} s",
              file=sys.stderr)
    return items, sents


class Indexes(dict):  # type: ignore[type-arg]
    """Index name -> its Relevance, the index built (or checked) on first use."""

    def __init__(self, home: Path, scifact_home: Path | None) -> None:
        super().__init__()
        self.home, self.scifact_home = home, scifact_home

    def __missing__(self, index: str) -> Any:
        settings = settings_for(index, self.home, self.scifact_home)
        rel = relevance_for(settings)
        if not rel.retriever.snapshot().papers:  # built once; a built index is used as it is
            ensure_index(settings)
            rel = relevance_for(settings)
        self[index] = rel
        return rel


# -- logistic regression ------------------------------------------------------------------


def fit_logistic(x: np.ndarray, y: np.ndarray, w: np.ndarray, l2: float) -> tuple[np.ndarray, float]:
    """Weighted L2-regularised logistic regression by Newton's method (x standardised)."""
    n, d = x.shape
    xb = np.hstack([x, np.ones((n, 1))])
    beta = np.zeros(d + 1)
    reg = np.full(d + 1, l2)
    reg[-1] = 0.0
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


def log_loss(p: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    p = np.clip(p, 1e-9, 1 - 1e-9)
    return float(-(w * (y * np.log(p) + (1 - y) * np.log(1 - p))).sum() / w.sum())


def fit_model(names: tuple[str, ...] | list[str], rows: list[dict[str, float]], y: list[float],
              w: list[float], groups: list[str], l2: float | None = None) -> dict[str, Any]:
    """Standardise, pick L2 by 5-fold CV over question groups, fit on all; no threshold yet."""
    x = np.array([[r[n] for n in names] for r in rows], dtype=np.float64)
    ya, wa = np.asarray(y), np.asarray(w)
    mean, scale = x.mean(0), x.std(0)
    scale[scale < 1e-9] = 1.0
    xs = (x - mean) / scale
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
            coef, bias = fit_logistic(xs[tr], ya[tr], wa[tr], lam)
            p = 1 / (1 + np.exp(-np.clip(xs[te] @ coef + bias, -40, 40)))
            loss += log_loss(p, ya[te], wa[te]) * wa[te].sum()
        if best is None or loss < best[0]:
            best = (loss, lam)
    assert best is not None
    coef, bias = fit_logistic(xs, ya, wa, best[1])
    return {"names": list(names), "mean": mean.tolist(), "scale": scale.tolist(),
            "coef": coef.tolist(), "bias": bias, "threshold": 0.5, "l2": best[1], "n": len(rows)}


def probs(model: dict[str, Any], rows: list[dict[str, float]]) -> np.ndarray:
    from rag.relevance.features import Model

    return Model.from_dict(model).probabilities(rows)


def out_of_fold(names: list[str], part: list[dict[str, Any]], l2: float, data: Any,
                rows_of: Any) -> dict[str, np.ndarray]:
    """Question key -> what a model fitted without that question's fold (5 folds over
    questions) says of it. Thresholds are chosen on these, and the answer model learns from
    them: in-sample probabilities of the fit questions are overconfident, and a bound or a
    weight chosen on them does not hold on questions the model has not seen."""
    keys = sorted({key_of(it) for it in part})
    fold = {g: i % 5 for i, g in enumerate(np.random.default_rng(12).permutation(keys))}
    out: dict[str, np.ndarray] = {}
    for k in range(5):
        model = fit_model(names, *data([it for it in part if fold[key_of(it)] != k]), l2=l2)
        for it in part:
            if fold[key_of(it)] == k:
                out[key_of(it)] = probs(model, rows_of(it))
    return out


def weights(items: list[dict[str, Any]], key: Any) -> dict[str, float]:
    """Question key -> weight: every group (corpus, kind) weighs the same in total."""
    by_group: dict[str, list[str]] = defaultdict(list)
    for it in items:
        by_group[key(it)].append(key_of(it))
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
            w.append(qw[key_of(it)] * share)
            g.append(key_of(it))
    return rows, y, w, g


def sentence_fit_data(items: list[dict[str, Any]]) -> tuple[list[dict[str, float]], list[float], list[float], list[str]]:
    qw = weights(items, lambda it: it["corpus"])
    rows, y, w, g = [], [], [], []
    for it in items:
        pos = sum(it["labels"])
        neg = len(it["labels"]) - pos
        for row, label in zip(it["rows"], it["labels"], strict=True):
            rows.append(row)
            y.append(label)
            w.append(qw[key_of(it)] * (0.5 / pos if label else 0.5 / neg))
            g.append(key_of(it))
    return rows, y, w, g


# -- features that transfer ---------------------------------------------------------------


def transfer_loss(names: list[str], items: list[dict[str, Any]], data: Any, l2: float) -> float:
    """Mean over the three corpora of the log loss on that corpus's fit questions of a model
    fitted on the other two corpora's fit questions."""
    losses = []
    for c in FIELDS:
        train = [it for it in items if field_of(it) != c]
        test = [it for it in items if field_of(it) == c]
        if not test or not train:
            continue
        ytr = data(train)[1]
        rows, y, w, _ = data(test)
        if len(set(ytr)) < 2:
            continue
        model = fit_model(names, *data(train), l2=l2)
        losses.append(log_loss(probs(model, rows), np.asarray(y), np.asarray(w)))
    return float(np.mean(losses))


def select_features(name: str, names: tuple[str, ...], items: list[dict[str, Any]],
                    data: Any) -> list[str]:
    """Backward elimination on transfer: drop the feature whose removal most lowers the
    leave-one-corpus-out loss, while one does. A feature that helps only on the corpus it
    was learned from (where a benchmark's answers sit, how its questions are phrased) raises
    that loss and goes."""
    l2 = fit_model(names, *data(items))["l2"]
    kept = list(names)
    best = transfer_loss(kept, items, data, l2)
    print(f"{name}: transfer loss with all {len(kept)} features {best:.4f}", file=sys.stderr)
    while len(kept) > 1:
        trials = [(transfer_loss([n for n in kept if n != f], items, data, l2), f) for f in kept]
        loss, drop = min(trials)
        if loss >= best:
            break
        kept.remove(drop)
        best = loss
        print(f"{name}: dropped {drop:<16} transfer loss {loss:.4f}", file=sys.stderr)
    return kept


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


def answer_threshold(p: np.ndarray, y: np.ndarray, corpora: list[str], most: float) -> float:
    """The highest bound on P(answerable) (the most abstention on unanswerable questions) at
    which no corpus abstains on more than `most` of its answerable fit questions."""
    best = 0.0
    c = np.array(corpora)
    for t in np.linspace(0.0, 0.98, 99):
        rates = [float((p[(y == 1) & (c == k)] < t).mean()) for k in sorted(set(corpora))
                 if ((y == 1) & (c == k)).any()]
        if max(rates) <= most:
            best = float(t)
    return best


# -- fitting every model ------------------------------------------------------------------


def question_rows(rels: dict[str, Any], items: list[dict[str, Any]], models: dict[str, Any],
                  oof: dict[str, np.ndarray] | None = None) -> dict[str, tuple[np.ndarray, dict[str, float]]]:
    """Question key -> (its candidates' probabilities, its question-level features); from
    out-of-fold paper probabilities where given (fit questions), else from `models`."""
    out = {}
    for it in items:
        p = (oof or {}).get(key_of(it))
        if p is None:
            p = probs(models["member" if it["list"] else "source"], it["rows"])
        out[key_of(it)] = (p, measured.question_row(rels[it["index"]], it["question"], it["m"], p, it["list"]))
    return out


def answer_data(part: list[dict[str, Any]], qrows: dict[str, Any]) -> Any:
    qw = weights(part, lambda it: f"{it['corpus']}-{it['kind']}")
    return ([qrows[key_of(it)][1] for it in part], [float(bool(it["relevant"])) for it in part],
            [qw[key_of(it)] for it in part], [key_of(it) for it in part])


def fit_all(rels: dict[str, Any], fit: list[dict[str, Any]], sents: list[dict[str, Any]],
            names: dict[str, list[str]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The four models and their bounds, from these fit questions and sentences only; and
    the fit questions' rows as the answer model learnt them (from out-of-fold paper
    probabilities)."""
    models: dict[str, Any] = {}
    oof: dict[str, np.ndarray] = {}
    for name, pick in (("member", lambda it: it["list"]), ("source", lambda it: not it["list"])):
        part = [it for it in fit if pick(it)]
        models[name] = fit_model(names[name], *paper_data(part))
        held = out_of_fold(names[name], part, models[name]["l2"], paper_data, lambda it: it["rows"])
        oof.update(held)
        models[name]["threshold"] = best_member_threshold(
            [it for it in part if it["relevant"]], lambda it, h=held: h[key_of(it)])
    qrows = question_rows(rels, fit, models, oof)
    answer = fit_model(names["answer"], *answer_data(fit, qrows))
    held = out_of_fold(names["answer"], fit, answer["l2"], lambda part: answer_data(part, qrows),
                       lambda it: [qrows[key_of(it)][1]])
    p = np.array([held[key_of(it)][0] for it in fit])
    y = np.array([float(bool(it["relevant"])) for it in fit])
    fields = [field_of(it) for it in fit]
    answer["threshold"] = answer_threshold(p, y, fields, FALSE_ABSTENTION)
    models["answer"] = answer
    models["answer_with_model"] = answer_threshold(p, y, fields, FALSE_ABSTENTION_WITH_MODEL)
    models["sentence"] = fit_model(names["sentence"], *sentence_fit_data(sents))
    return models, qrows


# -- figures ------------------------------------------------------------------------------


def decision_figures(rels: dict[str, Any], items: list[dict[str, Any]], sents: list[dict[str, Any]],
                     models: dict[str, Any], by: Any = lambda it: f"{it['corpus']} {it['split']}") -> dict[str, dict[str, Any]]:
    """Per group (corpus and split by default): the decisions' own figures (no answer text)."""
    from rag.relevance.features import Model

    answer = Model.from_dict(models["answer"])
    qrows = question_rows(rels, items, models)
    out: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for it in items:
        key = by(it)
        model = models["member" if it["list"] else "source"]
        p, qrow = qrows[key_of(it)]
        answered = answer.probability(qrow) >= answer.threshold
        if not it["relevant"]:
            out[key]["abstains (unanswerable)"].append(float(not answered))
            continue
        out[key]["false abstention"].append(float(not answered))
        ranked = sorted(zip(it["hits"], p, strict=True), key=lambda t: -t[1])
        chosen = {h.paper.paper_id for h, pi in ranked if pi >= model["threshold"]} or {ranked[0][0].paper.paper_id}
        if not answered:
            chosen = set()
        if it["list"]:
            hit = len(chosen & it["relevant"])
            out[key]["list recall"].append(hit / len(it["relevant"]))
            if chosen:
                out[key]["list precision"].append(hit / len(chosen))
        else:
            out[key]["top paper answers"].append(float(ranked[0][0].paper.paper_id in it["relevant"]))
    sentence = Model.from_dict(models["sentence"])
    for s in sents:
        p = sentence.probabilities(s["rows"])
        out[by(s)]["top sentence answers"].append(s["labels"][int(np.argmax(p))])
    return {k: {m: (float(np.mean(v)), len(v)) for m, v in sorted(d.items())} for k, d in sorted(out.items())}


def auc(p: np.ndarray, y: np.ndarray) -> float:
    pos, neg = p[y == 1], p[y == 0]
    if not len(pos) or not len(neg):
        return float("nan")
    return float((pos[:, None] > neg[None, :]).mean() + 0.5 * (pos[:, None] == neg[None, :]).mean())


def transfer_table(rels: dict[str, Any], items: list[dict[str, Any]], sents: list[dict[str, Any]],
                   names: dict[str, list[str]], models: dict[str, Any]) -> list[tuple[str, str, float, float, float, int]]:
    """(corpus, figure, fit, held-out, left-out, n held-out): each corpus's figures on its fit
    and held-out questions with the models fitted on all three corpora, and on its held-out
    questions with models fitted on the other two corpora's fit questions alone."""
    by = lambda it: f"{field_of(it)} {it['split']}"  # noqa: E731
    shipped = decision_figures(rels, items, sents, models, by)
    rows = []
    for c in FIELDS:
        fit = [it for it in items if it["split"] == "fit" and field_of(it) != c]
        fit_s = [s for s in sents if s["split"] == "fit" and field_of(s) != c]
        loco, _ = fit_all(rels, fit, fit_s, names)
        held = [it for it in items if it["split"] == "heldout" and field_of(it) == c]
        held_s = [s for s in sents if s["split"] == "heldout" and field_of(s) == c]
        left = decision_figures(rels, held, held_s, loco, by).get(f"{c} heldout", {})
        for fig, (value, n) in left.items():
            rows.append((c, fig, shipped.get(f"{c} fit", {}).get(fig, (float("nan"), 0))[0],
                         shipped[f"{c} heldout"][fig][0], value, n))
    return rows


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
    ap.add_argument("--all-features", action="store_true",
                    help="keep every feature (no selection by leave-one-corpus-out loss)")
    ap.add_argument("--reselect", nargs="+", choices=("member", "source", "answer", "sentence"),
                    help="select features again for these models only; the others keep the "
                         "features the current params.json has")
    ap.add_argument("--extract-only", action="store_true",
                    help="only extract (and cache) the features; with --reverse, from the last set")
    ap.add_argument("--reverse", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--metadata-grid", action="store_true",
                    help="only print `rag search` top-5 on metadata questions per metadata weight")
    args = ap.parse_args()
    if args.metadata_grid:
        settings = settings_for("default", args.home, None)
        ensure_index(settings)
        metadata_grid(relevance_for(settings))
        return
    started = time.perf_counter()
    rels = Indexes(args.home, args.scifact_home)
    items, sents = extracted(rels, args.home, args.reverse)
    if args.extract_only:
        return
    print(f"extracted in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    fit = [it for it in items if it["split"] == "fit"]
    fit_s = [s for s in sents if s["split"] == "fit"]
    answer_features = tuple(n for n in QUESTION_FEATURES if n not in NOT_FOR_ANSWER)
    names = {"member": list(PAPER_FEATURES), "source": list(PAPER_FEATURES),
             "answer": list(answer_features), "sentence": list(SENTENCE_FEATURES)}
    if args.reselect:  # the other models keep the features params.json has
        shipped = json.loads(PARAMS.read_text(encoding="utf-8"))["models"]
        names.update({k: shipped[k]["names"] for k in names if k not in args.reselect})
    if not args.all_features:
        for name, pick in (("member", lambda it: it["list"]), ("source", lambda it: not it["list"])):
            if not args.reselect or name in args.reselect:
                names[name] = select_features(name, PAPER_FEATURES, [it for it in fit if pick(it)], paper_data)
        if not args.reselect or "answer" in args.reselect:
            _, oof_rows = fit_all(rels, fit, fit_s, names)  # question rows from out-of-fold papers
            names["answer"] = select_features("answer", answer_features, fit,
                                              lambda part: answer_data(part, oof_rows))
        if not args.reselect or "sentence" in args.reselect:
            names["sentence"] = select_features("sentence", SENTENCE_FEATURES, fit_s, sentence_fit_data)
    models, _ = fit_all(rels, fit, fit_s, names)
    with_model = models.pop("answer_with_model")
    for name, m in models.items():
        top = sorted(zip(m["names"], m["coef"], strict=True), key=lambda t: -abs(t[1]))[:8]
        print(f"{name:<9} threshold {m['threshold']:.2f}  l2 {m['l2']}  rows {m['n']}  "
              + ", ".join(f"{n} {c:+.2f}" for n, c in top))
        dropped = [n for n in {"member": PAPER_FEATURES, "source": PAPER_FEATURES,
                               "answer": QUESTION_FEATURES, "sentence": SENTENCE_FEATURES}[name]
                   if n not in m["names"]]
        print(f"{'':<9} dropped (do not transfer): {', '.join(dropped) or 'none'}")
    print(f"answer bound with a model writing the answer: {with_model:.2f}")
    qrows = question_rows(rels, items, models)
    for split in ("fit", "heldout"):
        part = [it for it in items if it["split"] == split and not it["list"]]
        p = probs(models["answer"], [qrows[key_of(it)][1] for it in part])
        print(f"answerable-vs-not ROC AUC, {split}: "
              f"{auc(p, np.array([float(bool(it['relevant'])) for it in part])):.3f}")
    print(f"\n{'corpus split':<18}{'figure':<26}{'value':>7}{'n':>6}")
    for key, figs in decision_figures(rels, items, sents, models).items():
        for name, (value, n) in figs.items():
            print(f"{key:<18}{name:<26}{value:>7.3f}{n:>6}")
    print("\nTransfer: fitted on all three corpora (fit / held-out) and on the other two alone "
          "(left-out, on the same held-out questions)")
    print(f"{'corpus':<10}{'figure':<26}{'fit':>7}{'held':>7}{'left':>7}{'n':>6}")
    for c, fig, f, h, left, n in transfer_table(rels, items, sents, names, models):
        flag = "  <- more than 0.10 below held-out" if (
            (left < h - 0.10) if fig != "false abstention" else (left > h + 0.10)) else ""
        print(f"{c:<10}{fig:<26}{f:>7.3f}{h:>7.3f}{left:>7.3f}{n:>6}{flag}")
    if args.write:
        smallest = min(len(rels[index].retriever.snapshot().papers) for _, _, index in RUNS)
        params = {"format": 2, "pool": POOL, "models": models, "answer_with_model": with_model,
                  "index_relative": list(INDEX_RELATIVE), "min_index_papers": smallest,
                  "fitted": {"by": "scripts/fit_relevance.py", "date": time.strftime("%Y-%m-%d"),
                             "questions": {f"{c} {s}": sum(it["corpus"] == c and it["split"] == s for it in items)
                                           for c in ("seeds", "pubmedqa", "scifact", "cross") for s in ("fit", "heldout")},
                             "sentences_questions": len(fit_s)}}
        PARAMS.write_text(json.dumps(params, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {PARAMS.relative_to(ROOT)}")
    print(f"{time.perf_counter() - started:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
