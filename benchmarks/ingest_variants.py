"""Which embedding work can ingest drop? The four ways of making an index's vectors, side by
side on SciFact: model time, tokens the model reads, and retrieval quality. Prints a table;
not a test; changes nothing in rag.

    .venv/bin/python benchmarks/ingest_variants.py [--scifact-home /tmp/rag-scifact]
    .venv/bin/python benchmarks/ingest_variants.py --speed 300    # fp32 vs int8 speed only

Variants (RAG_EMBED_PRECISION / RAG_CHUNK_VECTORS):
  fp32/model       the model (full precision) reads every chunk ("title. chunk") and every
                   sentence: what rag did before int8 and pooled chunk vectors
  int8/model       the same texts through the dynamically quantised model
  fp32/sentences   the model reads each title and sentence once; a chunk's vector is the
                   mean of its title's and sentences' token states, corrected
                   (rag.embed.pooling; title weight and correction fitted by
                   scripts/fit_pooling.py on seeds/ and PubMedQA, never on SciFact)
  int8/sentences   both (RAG_CHUNK_VECTORS=sentences; rag's default is int8/model)

The chunks, their texts and the BM25 snapshot come from a SciFact index built by
benchmarks/scifact_retrieval.py (any variant: chunk texts do not depend on it; only read).
Each variant embeds what ingest would embed, timed (model seconds on 2 cores; the same texts
in the same process for all four, so load elsewhere hits all alike), then every training claim
is ranked as rag ranks it, with exact search instead of HNSW: dense = chunks by cosine, papers
by their best chunk; hybrid = reciprocal-rank fusion of the dense top 200 and the BM25 top 200
(Retriever.search without names and filters). Queries go through the variant's own model.
The rule: a variant is kept only if hybrid nDCG@10 stays within 0.005 of fp32/model.

Data: SciFact (Wadden et al. 2020, "Fact or Fiction: Verifying Scientific Claims"; claims
CC BY 4.0, abstracts ODC-By 1.0), training split, from ../shared/benchmarks/scifact/.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

from _bench import ROOT, SCIFACT, load, table

sys.path.insert(0, str(ROOT))


def ndcg10(ranked: list[str], rel: dict[str, int]) -> float:
    dcg = sum(rel.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:10]))
    ideal = sum(g / math.log2(i + 2) for i, g in enumerate(sorted(rel.values(), reverse=True)[:10]))
    return dcg / ideal if ideal else 0.0


def claims() -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    queries: dict[str, str] = {}
    for line in (SCIFACT / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        obj = json.loads(line)
        queries[str(obj["_id"])] = obj["text"]
    qrels: dict[str, dict[str, int]] = {}
    for line in (SCIFACT / "qrels" / "train.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        qid, did, score = line.split("\t")
        if int(score) > 0:
            qrels.setdefault(qid, {})[did] = int(score)
    return {q: t for q, t in queries.items() if q in qrels}, qrels


def speed(n: int, rounds: int = 3) -> None:
    """fp32 against int8 on the same texts, alternating in one process, so that load from
    elsewhere hits both alike: the sentences of the first n SciFact abstracts, then their
    "title. abstract" texts (as a chunk is read)."""
    import numpy as np

    from rag.config import Settings
    from rag.corpus.text import split_sentences
    from rag.embed import get_embedder

    s = Settings()
    docs = [json.loads(line) for line in (SCIFACT / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[:n]]
    models = {p: get_embedder(s.model_cache, s.embed_threads, precision=p) for p in ("fp32", "int8")}
    rows = []
    for name, texts in (("sentences", [x for d in docs for x in split_sentences(d["text"])]),
                        ("title. abstract", [f"{d['title']}. {d['text']}" for d in docs])):
        times: dict[str, list[float]] = {p: [] for p in models}
        for m in models.values():
            m.embed(texts[:16])
        for _ in range(rounds):
            for p, m in models.items():
                t = time.perf_counter()
                m.embed(texts, s.embed_batch)
                times[p].append(time.perf_counter() - t)
        f, i = (float(np.median(times[p])) for p in ("fp32", "int8"))
        rows.append([f"{name} of {n} abstracts", len(texts), f"{f:.1f}", f"{i:.1f}", f"{f / i:.2f}"])
    print(f"\nfp32 against int8, alternating, median of {rounds}; {load()}\n")
    print(table(["texts", "n", "fp32 s", "int8 s", "speed-up"], rows))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scifact-home", type=Path, default=Path("/tmp/rag-scifact"))
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--title-weights", default="{shipped}", help="pooled variants with these "
                    "title weights (rag/embed/pooling.json's is rag's)")
    ap.add_argument("--speed", type=int, metavar="N", help="only time fp32 against int8 on N "
                    "SciFact abstracts' texts, alternating (no index needed)")
    args = ap.parse_args()
    if args.speed:
        speed(args.speed)
        return

    import numpy as np

    from rag.config import Settings
    from rag.corpus.text import split_sentences
    from rag.embed import get_embedder, pooling
    from rag.embed.pooling import chunk_weights, pooled
    from rag.retrieve.hybrid import DENSE_POOL, _fuse, load_snapshot
    from rag.store import Store

    sci = Settings(home=args.scifact_home, index="scifact", llm="none")
    store = Store(sci)
    snap = load_snapshot(store, sci)
    ids = store._get_all(["documents"])["ids"]
    store.close()
    by_paper: dict[str, list[str]] = {}
    for cid in sorted(ids, key=lambda c: (snap.chunk_paper[c], int(c.rsplit("#", 1)[1]))):
        by_paper.setdefault(snap.chunk_paper[cid], []).append(cid)
    pids = list(by_paper)
    chunk_ids = [c for p in pids for c in by_paper[p]]
    papers = [snap.papers[p] for p in pids]
    sentences = [split_sentences(p.abstract) or [p.abstract] for p in papers]
    chunk_texts = [f"{p.title}. {snap.chunk_text[c]}" if p.title else snap.chunk_text[c]
                   for p in papers for c in by_paper[p.paper_id]]
    shipped = pooling.params()[0]
    title_weights = sorted({float(x.format(shipped=shipped)) for x in args.title_weights.split(",")})
    weights = [chunk_weights(p.abstract, p.title, [snap.chunk_text[c] for c in by_paper[p.paper_id]], s)
               for p, s in zip(papers, sentences, strict=True)]
    titles = [p.title or "" for p in papers]
    flat_sents = [s for ss in sentences for s in ss]
    queries, qrels = claims()
    qtexts = list(queries.values())
    print(f"{len(papers)} abstracts, {len(chunk_ids)} chunks, {len(flat_sents)} sentences, "
          f"{sum(w is None for w in weights)} abstracts whose chunks the model must read; {load()}",
          flush=True)

    results: dict[str, dict[str, float]] = {}
    for precision in ("fp32", "int8"):
        emb = get_embedder(sci.model_cache, sci.embed_threads, precision=precision)

        def count(texts: list[str], tok=emb.tokenizer) -> int:  # type: ignore[no-untyped-def]
            return sum(len(e.ids) for e in tok.encode_batch(texts))

        emb.embed(flat_sents[:64])  # warm-up
        t = time.perf_counter()
        sent_vecs, sent_sums, sent_counts = emb.embed_sums(flat_sents, sci.embed_batch)
        sent_s = time.perf_counter() - t
        t = time.perf_counter()
        model_chunks = emb.embed(chunk_texts, sci.embed_batch)
        chunk_s = time.perf_counter() - t
        t = time.perf_counter()
        _, title_sums, title_counts = emb.embed_sums(titles, sci.embed_batch)
        title_s = time.perf_counter() - t
        qv = emb.embed(qtexts, sci.embed_batch)
        print(f"{precision}: sentences {sent_s:.0f} s, chunks {chunk_s:.0f} s, titles {title_s:.0f} s; "
              f"{load()}", flush=True)
        starts = np.cumsum([0] + [len(by_paper[q]) for q in pids])
        mats = {"model": model_chunks}
        texts_read = {"model": (chunk_texts, chunk_s)}
        for tw in title_weights:
            pooled_chunks = []
            at = 0
            for i, w in enumerate(weights):
                n = len(sentences[i])
                if w is None:
                    pooled_chunks.append(model_chunks[starts[i] : starts[i + 1]])
                else:
                    w = w.copy()
                    w[:, 0] *= tw / shipped  # chunk_weights applied rag's weight
                    pooled_chunks.append(pooled(
                        w, np.concatenate([title_sums[i : i + 1], sent_sums[at : at + n]]),
                        np.concatenate([title_counts[i : i + 1], sent_counts[at : at + n]])))
                at += n
            name = f"sentences, title x{tw:g}" + (" (rag's)" if tw == shipped else "")
            mats[name] = np.concatenate(pooled_chunks)
            texts_read[name] = (titles, title_s)
        for how, m in mats.items():
            extra, extra_s = texts_read[how]
            dense_scores, hybrid_scores = [], []
            for qi, (qid, text) in enumerate(queries.items()):
                sims = m @ qv[qi]
                top = np.argsort(-sims)[: DENSE_POOL]
                dense: list[str] = []
                for j in top:
                    pid = snap.chunk_paper[chunk_ids[j]]
                    if pid not in dense:
                        dense.append(pid)
                dense_scores.append(ndcg10(dense, qrels[qid]))
                bm25 = [cid for cid, _ in snap.bm25_ranking(text, DENSE_POOL * 4)][:DENSE_POOL]
                fused = _fuse([[chunk_ids[j] for j in top], bm25])
                hybrid: list[str] = []
                for cid, _ in sorted(fused.items(), key=lambda kv: -kv[1]):
                    pid = snap.chunk_paper.get(cid)
                    if pid and pid not in hybrid:
                        hybrid.append(pid)
                hybrid_scores.append(ndcg10(hybrid, qrels[qid]))
            results[f"{precision}/{how}"] = {
                "texts": len(flat_sents) + len(extra), "tokens": count(flat_sents) + count(extra),
                "model_s": sent_s + extra_s, "dense": float(np.mean(dense_scores)),
                "hybrid": float(np.mean(hybrid_scores)),
            }

    base = results["fp32/model"]
    rows = []
    for name, r in results.items():
        d = r["hybrid"] - base["hybrid"]
        rows.append([name, r["texts"],
                     f"{r['tokens'] / len(papers):.0f}", f"{r['model_s']:.0f}",
                     f"{base['model_s'] / r['model_s']:.2f}", f"{r['dense']:.4f}", f"{r['hybrid']:.4f}",
                     f"{d:+.4f}", "kept" if abs(d) <= 0.005 or d > 0 else "NOT within 0.005"])
    print(f"\nSciFact: {len(papers)} abstracts, {len(queries)} training claims; {load()}\n")
    print(table(["vectors", "texts the model reads", "tokens per abstract", "model s",
                 "speed-up", "nDCG@10 dense", "nDCG@10 hybrid", "hybrid vs fp32/model", "rule"], rows))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
