"""Calibrate and validate the citation-support judge (rag.judge.Judge) — not CI.

    .venv/bin/python benchmarks/judge_calibration.py [--data DIR] [--weights]

1. SciFact training claims (Wadden et al. 2020, "Fact or Fiction: Verifying Scientific Claims",
   allenai/scifact; CC BY 4.0 / ODC-By 1.0), from ../shared/benchmarks/scifact/. Every
   (claim, cited abstract) pair is labelled: SUPPORT rationale -> positive; a claim with no
   evidence at all (not enough info) -> negative; CONTRADICT -> scored separately, as the
   negation blind spot (a judge without inference scores a contradicted claim like a
   supported one). For the pairs: ROC AUC of the judge's score (W_SIM x best-sentence cosine +
   W_OVERLAP x content-word overlap; pairs failing a hard number/name check ranked last), of
   the cosine alone and of the overlap alone; the threshold maximising F1 and the one
   maximising Youden's J. With --weights, the AUC over a grid of W_SIM (W_OVERLAP = 1 - W_SIM).
2. evals/judge_cases.jsonl (labelled sentences against seed abstracts): precision, recall, F1
   of `supported` at the current THRESHOLD and at the SciFact-chosen ones, accuracy per kind.

Only the training split is used. The figures it printed last are in evals/README.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import unicodedata
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEFAULT_DATA = ROOT.parent / "shared" / "benchmarks" / "scifact"


def roc_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Probability that a random positive outranks a random negative (ties count half)."""
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    sorted_scores = scores[order]
    i = 0
    while i < len(scores):  # average ranks over ties
        j = i
        while j + 1 < len(scores) and sorted_scores[j + 1] == sorted_scores[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    pos = labels.astype(bool)
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def best_thresholds(scores: np.ndarray, gate: np.ndarray, labels: np.ndarray) -> dict[str, tuple[float, float]]:
    """Threshold -> (F1, J) over candidate cut points; predicted = gate & score >= t."""
    out: dict[str, tuple[float, float]] = {}
    best_f1 = best_j = (-1.0, 0.0)
    for t in np.round(np.arange(0.20, 0.90, 0.01), 2):
        pred = gate & (scores >= t)
        tp = int((pred & labels).sum())
        fp = int((pred & ~labels).sum())
        fn = int((~pred & labels).sum())
        tn = int((~pred & ~labels).sum())
        f1 = 2 * tp / (2 * tp + fp + fn) if tp else 0.0
        j = tp / (tp + fn) - fp / (fp + tn)
        best_f1 = max(best_f1, (f1, float(t)))
        best_j = max(best_j, (j, float(t)))
    out["f1"] = (best_f1[1], best_f1[0])
    out["youden"] = (best_j[1], best_j[0])
    return out


def scifact_pairs(data: Path) -> list[tuple[str, str, str, str]]:
    """(label, claim, title, abstract) for each cited document of each training claim."""
    corpus = {}
    with (data / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            corpus[str(d["_id"])] = (d.get("title") or "", d["text"])
    pairs = []
    with (data / "claims_train.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            c = json.loads(line)
            evidence = c["evidence"]
            for doc in c["cited_doc_ids"]:
                ev = evidence.get(str(doc))
                if ev:
                    label = "pos" if ev[0]["label"] == "SUPPORT" else "contradict"
                elif not evidence:
                    label = "neg"
                else:
                    continue  # cited but its evidence is in another document: ambiguous
                title, text = corpus[str(doc)]
                pairs.append((label, c["claim"], title, text))
    return pairs


def features(judge, pairs):  # type: ignore[no-untyped-def]
    """Per pair: best-sentence cosine, overlap, judge score, hard checks passed."""
    from rag.corpus.words import content_words
    from rag.judge import W_OVERLAP, W_SIM

    claims = [p[1] for p in pairs]
    vectors = judge.embedder.embed(claims)
    rows = []
    for (_, claim, title, abstract), vec in zip(pairs, vectors, strict=True):
        _, vecs = judge.sentences(abstract)
        if title:  # the judge scores the record's header as one more sentence
            vecs = np.vstack([vecs, judge.sentences(title)[1]])
        cos = float(np.max(vecs @ vec))
        words = content_words(claim)
        text = unicodedata.normalize("NFKC", f"{title} {abstract}")
        overlap = len(words & content_words(text)) / len(words) if words else 0.0
        s = judge.score_one(claim, vec, abstract, title, whole=True)  # threshold -inf: reasons = hard checks
        assert abs(s.score - round(W_SIM * cos + W_OVERLAP * overlap, 4)) < 1e-3
        rows.append((cos, overlap, not s.reasons, [r.split(":")[0] for r in s.reasons]))
    return (np.array([r[0] for r in rows]), np.array([r[1] for r in rows]),
            np.array([r[2] for r in rows]), [r[3] for r in rows])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--cases", type=Path, default=ROOT / "evals" / "judge_cases.jsonl")
    ap.add_argument("--seeds", type=Path, default=ROOT / "seeds")
    ap.add_argument("--weights", action="store_true", help="also scan W_SIM in 0..1")
    args = ap.parse_args(argv)

    from rag.config import Settings
    from rag.embed import get_embedder
    from rag.eval.report import judge_cases, judge_summary, load_judge_cases
    from rag.eval.run import known_names, seed_papers
    from rag.judge import THRESHOLD, W_OVERLAP, W_SIM, Judge

    settings = Settings()
    embedder = get_embedder(settings.model_cache, settings.embed_threads, precision=settings.embed_precision)
    papers = seed_papers(args.seeds)
    names = known_names(papers)
    raw = Judge(embedder, threshold=-1e9, known_names=names)
    raw.verifier_off = True  # the similarity judge's own score, which THRESHOLD bounds

    print("SciFact training claims (Wadden et al. 2020), pairs (claim, cited abstract)")
    pairs = scifact_pairs(args.data)
    labels_all = np.array([p[0] for p in pairs])
    cos, ovl, gate, reasons = features(raw, pairs)
    keep = labels_all != "contradict"
    y = labels_all[keep] == "pos"
    print(f"  {int(y.sum())} SUPPORT (positive), {int((~y).sum())} not-enough-info (negative), "
          f"{int((~keep).sum())} CONTRADICT (reported apart)")
    score = W_SIM * cos + W_OVERLAP * ovl
    judged = np.where(gate, score, score - 2.0)  # a failed hard check ranks below every pass
    print(f"  hard checks (numbers, names) pass: {gate[keep][y].mean():.3f} of positives, "
          f"{gate[keep][~y].mean():.3f} of negatives")
    for label, name in (("pos", "SUPPORT"), ("neg", "NEI"), ("contradict", "CONTRADICT")):
        failed = Counter(r for lab, rs in zip(labels_all, reasons, strict=True) if lab == label for r in rs)
        print(f"    {name} pairs failing each hard check: "
              + (", ".join(f"{k} {v}" for k, v in failed.most_common()) or "none"))
    print(f"  ROC AUC  judge (W_SIM={W_SIM}, W_OVERLAP={W_OVERLAP}, hard checks): "
          f"{roc_auc(judged[keep], y):.3f}")
    print(f"  ROC AUC  judge score without the hard checks:            {roc_auc(score[keep], y):.3f}")
    print(f"  ROC AUC  embedding cosine alone (best abstract sentence): {roc_auc(cos[keep], y):.3f}")
    print(f"  ROC AUC  lexical overlap alone (claim content words):     {roc_auc(ovl[keep], y):.3f}")
    contra = ~keep
    neg = labels_all == "neg"
    print(f"  negation blind spot: AUC CONTRADICT-vs-NEI {roc_auc(judged[contra | neg], contra[contra | neg]):.3f} "
          "(0.5 = cannot tell a contradicted claim from an unrelated one; higher = scored like support)")
    if args.weights:
        print("  W_SIM scan (W_OVERLAP = 1 - W_SIM): " + ", ".join(
            f"{w:.1f}:{roc_auc(np.where(gate, w * cos + (1 - w) * ovl, w * cos + (1 - w) * ovl - 2)[keep], y):.3f}"
            for w in np.arange(0.0, 1.01, 0.1)))
    chosen = best_thresholds(score[keep], gate[keep], y)
    for crit, (t, value) in chosen.items():
        pred = gate & (score >= t)
        print(f"  best {crit:>6}: threshold {t:.2f} ({crit} {value:.3f}); at it, "
              f"{pred[keep][y].mean():.3f} of SUPPORT, {pred[neg].mean():.3f} of NEI and "
              f"{pred[contra].mean():.3f} of CONTRADICT pairs are judged supported")

    print(f"\nevals/judge_cases.jsonl ({args.cases}), sentences vs seed abstracts")
    cases = load_judge_cases(args.cases)
    for t in sorted({THRESHOLD, *(t for t, _ in chosen.values())}):
        swept = Judge(embedder, threshold=t, known_names=names)
        swept.verifier_off = True
        res = judge_cases(swept, cases, papers)
        s = judge_summary(res)
        tag = " (rag/judge/core.py THRESHOLD)" if t == THRESHOLD else ""
        print(f"  threshold {t:.2f}{tag}: precision {s['precision']:.3f} recall {s['recall']:.3f} "
              f"F1 {s['f1']:.3f} accuracy {s['accuracy']:.3f}")
        print("    per kind: " + ", ".join(f"{k} {v['accuracy']:.2f} (n={v['n']})"
                                           for k, v in s["by_kind"].items()))
        if t == THRESHOLD:
            for r in res:
                if r["predicted"] != r["supported"]:
                    print(f"    wrong: {r['id']} {r['kind']:<14} score {r['score']:.2f} "
                          f"{'; '.join(r['reasons']) or 'judged supported'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
