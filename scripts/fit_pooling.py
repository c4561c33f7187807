"""Fit the title's weight in pooled chunk vectors (rag.embed.pooling.TITLE_WEIGHT).

    nice -n 10 .venv/bin/python scripts/fit_pooling.py [--write]

A pooled chunk vector (RAG_CHUNK_VECTORS=sentences) is the mean of its title's and sentences'
vectors, each weighted by the characters it gives "title. chunk text". The model reading that
text lets every token see the title, which counts for more than its share of characters; how
much more is a number, so it is fitted here, on dense retrieval alone (the part pooling
changes): for each candidate multiplier of the title's weight, every question with papers of
three sets is ranked by cosine over the pooled chunk vectors (papers by their best chunk) and
scored by nDCG@10 against its papers:

    evals/questions.yaml             seeds/                            fact, list, metadata
    evals/pubmedqa/questions.yaml    500 PubMedQA abstracts            own question; MeSH lists
    evals/scifact/questions.yaml     SciFact's 5,183 abstracts         claim -> cited abstracts

The weight is chosen on the `fit` questions of seeds/ and PubMedQA only, by their mean nDCG@10
(each corpus weighs the same). SciFact is left out of the choice entirely and reported as the
corpus the weight never saw, as are every corpus's `heldout` questions; the weight each pair of
corpora would choose is printed too (leave one corpus out), so a weight that only suits one
corpus shows. The model is the one rag uses (RAG_EMBED_PRECISION, default int8). `--write`
puts the chosen weight in rag/embed/pooling.py.

Data: seeds/; PubMedQA (Jin et al. 2019, MIT licence) and SciFact (Wadden et al. 2020, claims
CC BY 4.0, abstracts ODC-By 1.0) from ../shared/benchmarks/.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared" / "benchmarks"
CORPORA = {  # name: (corpus, question set)
    "seeds": (ROOT / "seeds", ROOT / "evals" / "questions.yaml"),
    "pubmedqa": (SHARED / "pubmedqa" / "corpus.jsonl", ROOT / "evals" / "pubmedqa" / "questions.yaml"),
    "scifact": (SHARED / "scifact" / "corpus.jsonl", ROOT / "evals" / "scifact" / "questions.yaml"),
}
FIT_ON = ("seeds", "pubmedqa")
GRID = (1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0)
POOLING = ROOT / "rag" / "embed" / "pooling.py"


def ndcg10(ranked: list[str], relevant: set[str]) -> float:
    dcg = sum(1 / math.log2(i + 2) for i, d in enumerate(ranked[:10]) if d in relevant)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(10, len(relevant))))
    return dcg / ideal if ideal else 0.0


def corpus_data(name: str, settings, embedder) -> dict:  # type: ignore[no-untyped-def]
    """Papers, their chunks' weights, title and sentence vectors, and the questions with papers."""
    from rag.corpus import expand_paths, merge_papers, read_file
    from rag.corpus.text import split_sentences
    from rag.embed.pooling import chunk_weights
    from rag.eval.sets import load_set, resolve_refs
    from rag.ingest import _splitter, make_chunks

    source, set_path = CORPORA[name]
    papers = merge_papers([p for f in expand_paths([source]) for p in read_file(f).papers])
    splitter = _splitter(settings)
    rows = []
    for p in papers:
        chunks = [c.text for c in make_chunks(p, splitter)]
        sents = split_sentences(p.abstract) or [p.abstract]
        w = chunk_weights(p.abstract, p.title, chunks, sents)
        if w is not None:
            rows.append((p, sents, w))
    t = time.perf_counter()
    titles = embedder.embed([p.title or "" for p, _, _ in rows])
    sent_vecs = embedder.embed([s for _, ss, _ in rows for s in ss])
    questions = [q for q in load_set(set_path) if q.papers and q.kind != "followup"]
    refs = resolve_refs(questions, papers, set_path, name)
    qvecs = embedder.embed([q.turns[-1] for q in questions])
    print(f"{name}: {len(rows)} papers, {len(sent_vecs)} sentences, {len(questions)} questions "
          f"embedded in {time.perf_counter() - t:.0f} s", flush=True)
    return {"rows": rows, "titles": titles, "sents": sent_vecs, "questions": questions,
            "relevant": [{refs[r] for r in q.papers} for q in questions], "qvecs": qvecs}


def scores(data: dict, multiplier: float) -> dict[str, float]:
    """Mean dense nDCG@10 per split with the title's weight multiplied."""
    from rag.embed.pooling import pooled

    mats, owners, at = [], [], 0
    for i, (p, sents, w) in enumerate(data["rows"]):
        w = w.copy()
        w[:, 0] *= multiplier
        vecs = np.concatenate([data["titles"][i : i + 1], data["sents"][at : at + len(sents)]])
        at += len(sents)
        mats.append(pooled(w, vecs))
        owners += [p.paper_id] * len(w)
    matrix = np.concatenate(mats)
    by_split: dict[str, list[float]] = {}
    for q, rel, qv in zip(data["questions"], data["relevant"], data["qvecs"], strict=True):
        ranked: list[str] = []
        for j in np.argsort(-(matrix @ qv))[:400]:
            if owners[j] not in ranked:
                ranked.append(owners[j])
        by_split.setdefault(q.split or "heldout", []).append(ndcg10(ranked, rel))
    return {split: float(np.mean(v)) for split, v in by_split.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help=f"write the weight into {POOLING.relative_to(ROOT)}")
    args = ap.parse_args()

    from rag.config import Settings
    from rag.embed import get_embedder

    settings = Settings()
    embedder = get_embedder(settings.model_cache, settings.embed_threads, precision=settings.embed_precision)
    data = {name: corpus_data(name, settings, embedder) for name in CORPORA}
    table = {name: {m: scores(d, m) for m in GRID} for name, d in data.items()}

    def choose(on: tuple[str, ...]) -> float:
        return max(GRID, key=lambda m: (np.mean([table[c][m]["fit"] for c in on]), -m))

    chosen = choose(FIT_ON)
    print(f"\ndense nDCG@10 by the title's weight multiplier ({settings.embed_precision} model; "
          f"fit / held-out):\n")
    print("| multiplier | " + " | ".join(CORPORA) + " |")
    print("|---|" + "---|" * len(CORPORA))
    for m in GRID:
        mark = " (chosen)" if m == chosen else ""
        print(f"| {m:g}{mark} | " + " | ".join(
            f"{table[c][m]['fit']:.4f} / {table[c][m]['heldout']:.4f}" for c in CORPORA) + " |")
    print(f"\nchosen on {' + '.join(FIT_ON)} (fit questions): {chosen:g}; "
          f"SciFact, never seen by the choice: {table['scifact'][1.0]['fit']:.4f} / "
          f"{table['scifact'][1.0]['heldout']:.4f} at 1 -> {table['scifact'][chosen]['fit']:.4f} / "
          f"{table['scifact'][chosen]['heldout']:.4f}")
    for left in CORPORA:
        on = tuple(c for c in CORPORA if c != left)
        m = choose(on)
        print(f"leave {left} out: fit on {' + '.join(on)} chooses {m:g}; {left} held-out "
              f"{table[left][1.0]['heldout']:.4f} at 1 -> {table[left][m]['heldout']:.4f}")
    if args.write:
        text = POOLING.read_text(encoding="utf-8")
        new = re.sub(r"^TITLE_WEIGHT = [\d.]+", f"TITLE_WEIGHT = {chosen:g}", text, count=1, flags=re.M)
        POOLING.write_text(new, encoding="utf-8")
        print(f"wrote TITLE_WEIGHT = {chosen:g} into {POOLING.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
