"""Scores of one answer and their means, over a whole set and per split (fit / held-out)."""

from __future__ import annotations

import math
import re
import unicodedata
from typing import Any

from rag.eval.sets import SPLITS, Question

# name -> "min" (higher is better) or "max" (lower is better); the order of the summary table.
METRICS: dict[str, str] = {
    "recall@1": "min", "recall@5": "min", "recall@10": "min", "mrr": "min", "ndcg@10": "min",
    "metadata_recall@5": "min",
    "citation_validity": "min", "citation_recall": "min", "citation_precision": "min",
    "faithfulness": "min", "fact_recall": "min", "list_completeness": "min",
    "list_precision": "min", "abstention_accuracy": "min", "false_abstention_rate": "max",
    # A model's answers (null offline): it wrote past its budget or the deadline (rag did not
    # stop it); its prompt and answer did not fit the context; a sentence the labelled set
    # (labels.jsonl beside the set) calls unsupported was shown as supported. stopped_rate:
    # rag stopped a model repeating itself (what the model did, not a failure of rag's).
    "runaway_rate": "max", "prompt_over_budget_rate": "max", "unsupported_shown_rate": "max",
    "stopped_rate": "max",
    # With a model: the share of an answer's claim sentences whose citation rag added (the
    # model cited none that says it); the share of answerable questions the model was asked
    # (not declined before it read the sources).
    "attributed_rate": "min", "model_asked_rate": "min",
}
_GROUP = re.compile(r"\[(\s*\d+(?:\s*,\s*\d+)*\s*)\]")
_DASHES = str.maketrans({c: "-" for c in "\u2010\u2011\u2012\u2013\u2014\u2212"} | {"\u00d7": "x"})


def normalise(text: str) -> str:
    """For fact matching: NFKC, lower case, × -> x, unicode dashes -> '-', spaces collapsed."""
    text = unicodedata.normalize("NFKC", text).lower().translate(_DASHES)
    return re.sub(r"\s+", " ", text)


def fact_found(fact: str, answer: str) -> bool:
    text = normalise(answer)
    return any(normalise(alt.strip()) in text for alt in fact.split("|"))


def retrieval_scores(ranked: list[str], relevant: set[str]) -> dict[str, float]:
    first = next((i for i, pid in enumerate(ranked, 1) if pid in relevant), None)
    dcg = sum(1 / math.log2(i + 1) for i, pid in enumerate(ranked[:10], 1) if pid in relevant)
    idcg = sum(1 / math.log2(i + 1) for i in range(1, min(10, len(relevant)) + 1))
    out = {f"recall@{k}": len(set(ranked[:k]) & relevant) / len(relevant) for k in (1, 5, 10)}
    return {**out, "mrr": 1 / first if first else 0.0, "ndcg@10": dcg / idcg}


def citation_scores(ans: Any, checker: Any) -> dict[str, Any]:
    """ALCE-style citation recall and precision of one answer, judged by `checker`.

    Recall: share of claim sentences whose cited abstracts, taken together, support them (a
    sentence without citations counts as unsupported). Precision: share of citations that are
    part of a supporting set and either support their sentence alone or are needed (the other
    citations alone do not support it). "Together" = the cited records concatenated.
    """
    by_n = {s.n: s for s in ans.sources}
    cache: dict[tuple[str, tuple[int, ...]], bool] = {}

    def supported(text: str, ns: tuple[int, ...]) -> bool:
        if (text, ns) not in cache:
            srcs = [by_n[n] for n in ns]
            record = (" ".join(s.header() for s in srcs), " ".join(s.paper.abstract for s in srcs))
            cache[text, ns] = bool(checker.check(text, [record]).supported)
        return cache[text, ns]

    recall, precise, cites = [], 0, 0
    for sent in ans.sentences:
        ns = tuple(n for n in sent.citations if n in by_n)
        if not ns:
            recall.append(False)
            continue
        # One citation: the answer's own verdict, by the same judge (not asked twice).
        joint = bool(sent.supported) if len(ns) == 1 else supported(sent.text, ns)
        recall.append(joint)
        cites += len(ns)
        for n in ns:
            rest = tuple(m for m in ns if m != n)
            if joint and (len(ns) == 1 or supported(sent.text, (n,))
                          or not supported(sent.text, rest)):
                precise += 1
    return {"citation_recall": sum(recall) / len(recall) if recall else None,
            "citation_precision": precise / cites if cites else None}


def credited(ans: Any) -> list[str]:
    """The papers a list answer names: cited by a sentence the judge found supported, or by
    one that names the paper. A marker with nothing of the paper around it names nothing."""
    by_n = {s.n: s for s in ans.sources}
    out: list[str] = []
    for sent in ans.sentences:
        text = sent.text.lower()
        for n in sent.citations:
            src = by_n.get(n)
            if src is None or src.paper.paper_id in out:
                continue
            names = [x.lower() for x in (src.name, src.paper.title, src.paper.label) if x and len(x) >= 3]
            if sent.supported or any(x in text for x in names):
                out.append(src.paper.paper_id)
    return out


def model_scores(ans: Any, timeout: float, labels: dict[tuple[str, str], bool]) -> dict[str, Any]:
    """The guarantees a model's answer keeps (null offline): see METRICS."""
    budget, usage = ans.budget, ans.usage or {}
    if not budget:
        return {}
    seconds = ans.timings_ms.get("generate", 0.0) / 1000
    stopped = any("was stopped" in n for n in ans.notices)
    over = budget.get("max_tokens") is not None and usage.get("completion_tokens", 0) > budget["max_tokens"]
    window = budget.get("context")
    prompt = usage.get("prompt_tokens")
    by_n = {s.n: s.paper.paper_id for s in ans.sources}
    shown_wrong = any(
        labels.get((label_key(s.text), by_n.get(n, ""))) is False
        for s in ans.sentences if s.supported for n in s.citations)
    return {"runaway_rate": float(over or seconds > timeout), "stopped_rate": float(stopped),
            "prompt_over_budget_rate": float(bool(window and prompt is not None
                                                  and prompt + (budget.get("max_tokens") or 0) > window)),
            "unsupported_shown_rate": float(shown_wrong) if labels else None}


def label_key(sentence: str) -> str:
    """A sentence as labels.jsonl keys it: markers, case and spacing aside."""
    return " ".join(_GROUP.sub(" ", sentence).lower().split())


def score_answer(q: Question, ans: Any, ranked: list[str], refs: dict[str, str],
                 checker: Any, *, timeout: float = math.inf,
                 labels: dict[tuple[str, str], bool] | None = None,
                 with_model: bool = False) -> dict[str, Any]:
    relevant = {refs[r] for r in q.papers}
    cited = [s.paper.paper_id for s in ans.sources]
    m: dict[str, Any] = dict.fromkeys(METRICS)
    if relevant:
        m.update(retrieval_scores(ranked, relevant))
        if q.kind == "metadata":  # `rag search` finds the paper by its record's fields
            m["metadata_recall@5"] = m["recall@5"]
    if ans.sentences:
        m["faithfulness"] = sum(s.supported for s in ans.sentences) / len(ans.sentences)
        m.update(citation_scores(ans, checker))
    markers = sum(len(g.split(",")) for g in _GROUP.findall(ans.answer)) if not ans.abstained else 0
    if markers + ans.dropped_citations:
        m["citation_validity"] = markers / (markers + ans.dropped_citations)
    if q.facts:
        m["fact_recall"] = sum(fact_found(f, ans.answer) for f in q.facts) / len(q.facts)
    if q.kind == "list":
        m["list_completeness"] = len(set(credited(ans)) & relevant) / len(relevant)
        m["list_precision"] = len(set(cited) & relevant) / len(cited) if cited else None
    m.update(model_scores(ans, timeout, labels or {}))
    if with_model and ans.sentences:
        m["attributed_rate"] = sum(bool(getattr(s, "attributed", False)) for s in ans.sentences) / len(ans.sentences)
    if with_model and q.kind != "unanswerable":
        m["model_asked_rate"] = float(ans.budget is not None)
    if q.kind == "unanswerable":
        m["abstention_accuracy"] = float(ans.abstained)
    else:
        m["false_abstention_rate"] = float(ans.abstained)
    return {
        "id": q.id, "kind": q.kind, "split": q.split, "turns": q.turns, "near_miss": q.near_miss,
        "standalone_question": ans.standalone_question, "answer": ans.answer,
        "abstained": ans.abstained, "answerer": ans.answerer, "papers": sorted(relevant),
        "cited": cited, "retrieved": ranked[:10], "markers": markers,
        "dropped_citations": ans.dropped_citations,
        "missing_facts": [f for f in q.facts if not fact_found(f, ans.answer)],
        "sentences": [{"text": s.text, "citations": s.citations, "supported": s.supported,
                       "verdict": s.verdict, "attributed": s.attributed,
                       "support": s.support, "reasons": s.reasons} for s in ans.sentences],
        "metrics": m, "ms": round(ans.timings_ms.get("total", 0.0), 1),
        "finish_reason": ans.finish_reason, "incomplete": ans.incomplete, "usage": ans.usage,
        "budget": ans.budget, "notices": ans.notices,
        "seconds": round(ans.timings_ms.get("total", 0.0) / 1000, 2),
    }


def aggregate(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Mean of each metric over the questions it applies to; citation validity is pooled."""
    out: dict[str, dict[str, Any]] = {}
    for name in METRICS:
        vals = [r["metrics"][name] for r in rows if r["metrics"].get(name) is not None]
        out[name] = {"value": sum(vals) / len(vals) if vals else None, "n": len(vals)}
    markers = sum(r["markers"] for r in rows)
    dropped = sum(r["dropped_citations"] for r in rows)
    out["citation_validity"] = {"value": markers / (markers + dropped) if markers + dropped else None,
                                "n": markers + dropped}
    return out


def by_split(rows: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """The metrics of each split that has questions (a set without splits has none)."""
    return {s: aggregate(part) for s in SPLITS if (part := [r for r in rows if r.get("split") == s])}
