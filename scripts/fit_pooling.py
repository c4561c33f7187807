"""Fit how chunk vectors are pooled from the title's and sentences' token states
(rag/embed/pooling.json: the title's weight and the correction vector).

    nice -n 10 .venv/bin/python scripts/fit_pooling.py [--write]

A pooled chunk vector (RAG_CHUNK_VECTORS=sentences, rag.embed.pooling) is the mean of the
content tokens' states of its title and sentences, each sentence counted by the share of its
characters the chunk holds, made a unit vector, plus a correction vector, made one again. Two
numbers decide it, so they are fitted here:

- the correction vector, for each candidate title weight: the mean difference between the
  vector of the model reading a chunk ("title. chunk text", what RAG_CHUNK_VECTORS=model
  stores) and the pooled mean, over every chunk of the fit corpora;
- the title's weight (the model reading "title. chunk" lets every token see the title, which
  may count for more than its tokens): the candidate whose pooled vectors rank the `fit`
  questions of the fit corpora best, by dense retrieval alone (the part pooling changes;
  papers by their best chunk, nDCG@10 against the question's papers, each corpus weighing
  the same).

    evals/questions.yaml             seeds/                            fact, list, metadata
    evals/pubmedqa/questions.yaml    500 PubMedQA abstracts            own question; MeSH lists
    evals/scifact/questions.yaml     SciFact's 5,183 abstracts         claim -> cited abstracts

Both are fitted on seeds/ and PubMedQA. SciFact is left out of the fit entirely and reported
as the corpus it never saw, as are every corpus's `heldout` questions; the title weight each
pair of corpora would choose is printed too (leave one corpus out). The figures printed beside
each weight: dense nDCG@10 (fit / held-out) and the mean cosine of the pooled vectors to the
model's own chunk vectors. `--write` puts the choice, with these figures, in pooling.json.
The model is the one rag uses (RAG_EMBED_PRECISION, default int8). About 8 min on 2 cores
(SciFact's chunks and sentences are embedded once each).

Data: seeds/; PubMedQA (Jin et al. 2019, MIT licence) and SciFact (Wadden et al. 2020, claims
CC BY 4.0, abstracts ODC-By 1.0) from ../shared/benchmarks/.
"""

from __future__ import annotations

import argparse
import json
import math
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
GRID = (0.5, 1.0, 1.5, 2.0, 3.0, 4.0)
PARAMS = ROOT / "rag" / "embed" / "pooling.json"


def ndcg10(ranked: list[str], relevant: set[str]) -> float:
    dcg = sum(1 / math.log2(i + 2) for i, d in enumerate(ranked[:10]) if d in relevant)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(10, len(relevant))))
    return dcg / ideal if ideal else 0.0


def corpus_data(name: str, settings, embedder) -> dict:  # type: ignore[no-untyped-def]
    """Papers whose chunks can be pooled, with their weights (title weight 1), the parts'
    token sums and counts, the model's chunk vectors, and the questions with papers."""
    from rag.corpus import expand_paths, merge_papers, read_file
    from rag.corpus.text import split_sentences
    from rag.embed.pooling import chunk_weights
    from rag.eval.sets import load_set, resolve_refs
    from rag.ingest import _splitter, embed_text, make_chunks

    source, set_path = CORPORA[name]
    papers = merge_papers([p for f in expand_paths([source]) for p in read_file(f).papers])
    splitter = _splitter(settings)
    rows, chunk_texts = [], []
    for p in papers:
        chunks = make_chunks(p, splitter)
        sents = split_sentences(p.abstract) or [p.abstract]
        w = chunk_weights(p.abstract, p.title, [c.text for c in chunks], sents, title_weight=1.0)
        if w is not None:
            rows.append((p, sents, w))
            chunk_texts += [embed_text(p, c) for c in chunks]
    t = time.perf_counter()
    parts = [t for p, ss, _ in rows for t in [p.title or "", *ss]]
    _, sums, counts = embedder.embed_sums(parts)
    model = embedder.embed(chunk_texts)
    questions = [q for q in load_set(set_path) if q.papers and q.kind != "followup"]
    refs = resolve_refs(questions, papers, set_path, name)
    qvecs = embedder.embed([q.turns[-1] for q in questions])
    print(f"{name}: {len(rows)} papers, {len(parts) - len(rows)} sentences, {len(model)} chunks, "
          f"{len(questions)} questions embedded in {time.perf_counter() - t:.0f} s", flush=True)
    return {"rows": rows, "sums": sums, "counts": counts, "model": model, "questions": questions,
            "relevant": [{refs[r] for r in q.papers} for q in questions], "qvecs": qvecs}


def means(data: dict, title_weight: float) -> tuple[np.ndarray, list[str]]:
    """Every chunk's pooled mean as a unit vector, before the correction, and its paper."""
    from rag.embed.pooling import unit

    mats, owners, at = [], [], 0
    for p, sents, w in data["rows"]:
        w = w.copy()
        w[:, 0] *= title_weight
        n = 1 + len(sents)
        sums, counts = data["sums"][at : at + n], data["counts"][at : at + n]
        at += n
        mats.append(unit((w @ sums) / np.clip(w @ counts, 1e-9, None)[:, None]))
        owners += [p.paper_id] * len(w)
    return np.concatenate(mats), owners


def scores(data: dict, matrix: np.ndarray, owners: list[str]) -> dict[str, float]:
    """Mean dense nDCG@10 per split over these chunk vectors, and their cosine to the model's."""
    by_split: dict[str, list[float]] = {}
    for q, rel, qv in zip(data["questions"], data["relevant"], data["qvecs"], strict=True):
        ranked: list[str] = []
        for j in np.argsort(-(matrix @ qv))[:400]:
            if owners[j] not in ranked:
                ranked.append(owners[j])
        by_split.setdefault(q.split or "heldout", []).append(ndcg10(ranked, rel))
    out = {split: float(np.mean(v)) for split, v in by_split.items()}
    out["cosine"] = float(np.mean(np.sum(matrix * data["model"], axis=1)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help=f"write the fit into {PARAMS.relative_to(ROOT)}")
    args = ap.parse_args()

    from rag.config import Settings
    from rag.embed import get_embedder
    from rag.embed.pooling import unit

    settings = Settings()
    embedder = get_embedder(settings.model_cache, settings.embed_threads, precision=settings.embed_precision)
    data = {name: corpus_data(name, settings, embedder) for name in CORPORA}
    table: dict[str, dict[float, dict[str, float]]] = {name: {} for name in CORPORA}
    biases: dict[tuple[tuple[str, ...], float], np.ndarray] = {}

    def bias(on: tuple[str, ...], tw: float) -> np.ndarray:
        if (on, tw) not in biases:
            diffs = [data[c]["model"] - means(data[c], tw)[0] for c in on]
            biases[on, tw] = np.concatenate(diffs).mean(axis=0).astype(np.float32)
        return biases[on, tw]

    def table_for(on: tuple[str, ...]) -> dict[str, dict[float, dict[str, float]]]:
        out: dict[str, dict[float, dict[str, float]]] = {name: {} for name in CORPORA}
        for tw in GRID:
            b = bias(on, tw)
            for name, d in data.items():
                m, owners = means(d, tw)
                out[name][tw] = scores(d, unit(m + b), owners)
        return out

    def choose(tab: dict[str, dict[float, dict[str, float]]], on: tuple[str, ...]) -> float:
        return max(GRID, key=lambda tw: (np.mean([tab[c][tw]["fit"] for c in on]), -abs(tw - 1)))

    table = table_for(FIT_ON)
    chosen = choose(table, FIT_ON)
    print(f"\ndense nDCG@10 (fit / held-out) and cosine to the model's chunk vectors, by the title's "
          f"weight; correction fitted on {' + '.join(FIT_ON)} ({settings.embed_precision} model):\n")
    print("| title weight | " + " | ".join(CORPORA) + " |")
    print("|---|" + "---|" * len(CORPORA))
    for tw in GRID:
        mark = " (chosen)" if tw == chosen else ""
        print(f"| {tw:g}{mark} | " + " | ".join(
            f"{table[c][tw]['fit']:.4f} / {table[c][tw]['heldout']:.4f}, cos {table[c][tw]['cosine']:.3f}"
            for c in CORPORA) + " |")
    own = {name: scores(d, d["model"], means(d, 1.0)[1]) for name, d in data.items()}
    print("| the model reading each chunk | " + " | ".join(
        f"{own[c]['fit']:.4f} / {own[c]['heldout']:.4f}" for c in CORPORA) + " |")
    plain = {name: {tw: scores(d, *means(d, tw)) for tw in (chosen,)} for name, d in data.items()}
    print(f"\nwithout the correction, at {chosen:g}: " + "; ".join(
        f"{c} {plain[c][chosen]['fit']:.4f} / {plain[c][chosen]['heldout']:.4f}, cos "
        f"{plain[c][chosen]['cosine']:.3f}" for c in CORPORA))
    for left in CORPORA:
        on = tuple(c for c in CORPORA if c != left)
        tab = table_for(on)
        tw = choose(tab, on)
        print(f"leave {left} out: fit on {' + '.join(on)} chooses {tw:g}; {left} held-out "
              f"{tab[left][tw]['heldout']:.4f} (cos {tab[left][tw]['cosine']:.3f})")
    if args.write:
        figures = {c: {k: round(v, 4) for k, v in table[c][chosen].items()} for c in CORPORA}
        PARAMS.write_text(json.dumps({
            "recipe": f"tokens-v1/title-x{chosen:g}",
            "title_weight": chosen,
            "fitted_on": list(FIT_ON),
            "figures": figures,
            "model": settings.embed_precision,
            "bias": [round(float(x), 6) for x in bias(FIT_ON, chosen)],
        }, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {PARAMS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
