"""Would int8 embeddings be worth it? Speed of a dynamically quantised copy of the ONNX model
against the full-precision one on the same texts, and what it does to SciFact retrieval
(nDCG@10, training claims). Prints tables; not a test; changes nothing in rag.

    .venv/bin/python benchmarks/quantised_embeddings.py [--scifact-home /tmp/rag-scifact]

The int8 model is made with onnxruntime.quantization.quantize_dynamic (weights int8, activations
quantised per batch) in a temporary directory. Speed: both models embed seeds/' ingest texts
(chunks and sentences), alternating, median of --runs. Quality: the chunks of the SciFact index
(built by benchmarks/scifact_retrieval.py; reused, only read) are embedded again with the int8
model, exactly as ingest embeds them (title + chunk text); the stored full-precision vectors are
the baseline. For both, per claim: dense = exact cosine search over all chunks, papers by their
best chunk; hybrid = rag's fusion (reciprocal rank of the dense top 200 and the BM25 top 200 of
the index's own snapshot, then papers in fused order), as Retriever.search does without names
and filters. The issue's rule: quantised embeddings only if nDCG@10 stays within 0.005.

Data: SciFact (Wadden et al. 2020, "Fact or Fiction: Verifying Scientific Claims"; claims
CC BY 4.0, abstracts ODC-By 1.0), training split, from ../shared/benchmarks/scifact/.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

from _bench import ROOT, SCIFACT, load, table, temp_home

sys.path.insert(0, str(ROOT))


def ndcg10(ranked: list[str], rel: dict[str, int]) -> float:
    dcg = sum(rel.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:10]))
    ideal = sum(g / math.log2(i + 2) for i, g in enumerate(sorted(rel.values(), reverse=True)[:10]))
    return dcg / ideal if ideal else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scifact-home", type=Path, default=Path("/tmp/rag-scifact"))
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()

    import numpy as np
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from rag.config import Settings, get_settings
    from rag.corpus import expand_paths, merge_papers, read_file
    from rag.corpus.text import split_sentences
    from rag.embed import MAX_TOKENS, MODEL_NAME, Embedder, get_embedder
    from rag.ingest import _splitter, embed_text, make_chunks
    from rag.retrieve import DENSE_POOL, _fuse, load_snapshot
    from rag.store import Store

    settings = get_settings()
    fp32 = get_embedder(settings.model_cache, settings.embed_threads)
    raw = settings.model_cache / f"{MODEL_NAME}-{MAX_TOKENS}.onnx"
    print(f"{load()}", flush=True)
    with temp_home("rag-bench-int8-") as tmp:
        q8_path = tmp / "int8.onnx"
        t = time.perf_counter()
        quantize_dynamic(str(raw), str(q8_path), weight_type=QuantType.QInt8)
        made = time.perf_counter() - t
        int8 = Embedder(settings.model_cache, settings.embed_threads)
        options = ort.SessionOptions()
        options.log_severity_level = 3
        if settings.embed_threads:
            options.intra_op_num_threads = settings.embed_threads
        int8.session = ort.InferenceSession(str(q8_path), options, providers=["CPUExecutionProvider"])
        size = (raw.stat().st_size, q8_path.stat().st_size)

        papers = merge_papers([p for f in expand_paths([ROOT / "seeds"]) for p in read_file(f).papers])
        splitter = _splitter(settings)
        texts = [embed_text(p, c) for p in papers for c in make_chunks(p, splitter)]
        texts += [s for p in papers for s in (split_sentences(p.abstract) or [p.abstract])]
        walls: dict[str, list[float]] = {"fp32": [], "int8": []}
        cpus: dict[str, list[float]] = {"fp32": [], "int8": []}
        vecs = {}
        for _ in range(args.runs):
            for name, emb in (("fp32", fp32), ("int8", int8)):
                w, c = time.perf_counter(), time.process_time()
                vecs[name] = emb.embed(texts, settings.embed_batch)
                walls[name].append(time.perf_counter() - w)
                cpus[name].append(time.process_time() - c)
        cos = (vecs["fp32"] * vecs["int8"]).sum(1)
        print(f"speed measured; {load()}", flush=True)

        # -- SciFact quality ---------------------------------------------------------------
        sci = Settings(home=args.scifact_home, index="scifact", llm="none")
        store = Store(sci)
        snap = load_snapshot(store, sci)
        ids, base_vecs = [], []
        total, offset = store.count(), 0
        while offset < total:
            page = store.collection.get(include=["embeddings"], limit=5000, offset=offset)
            ids += page["ids"]
            base_vecs.append(np.asarray(page["embeddings"], dtype=np.float32))
            offset += len(page["ids"])
        m32 = np.concatenate(base_vecs)
        chunk_texts = []
        for cid in ids:
            paper = snap.papers[snap.chunk_paper[cid]]
            title = paper.title
            chunk_texts.append(f"{title}. {snap.chunk_text[cid]}" if title else snap.chunk_text[cid])
        t = time.perf_counter()
        m8 = int8.embed(chunk_texts, settings.embed_batch)
        int8_corpus_s = time.perf_counter() - t
        store.close()
        print(f"SciFact chunks embedded with int8 in {int8_corpus_s:.0f} s; {load()}", flush=True)

    queries: dict[str, str] = {}
    for line in (SCIFACT / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        obj = json.loads(line)
        queries[str(obj["_id"])] = obj["text"]
    qrels: dict[str, dict[str, int]] = {}
    lines = (SCIFACT / "qrels" / "train.tsv").read_text(encoding="utf-8").splitlines()[1:]
    for line in lines:
        qid, did, score = line.split("\t")
        if int(score) > 0:
            qrels.setdefault(qid, {})[did] = int(score)
    queries = {q: t for q, t in queries.items() if q in qrels}
    qtexts = list(queries.values())
    qv = {"fp32": fp32.embed(qtexts), "int8": int8.embed(qtexts)}
    mats = {"fp32": m32, "int8": m8}
    scores: dict[str, dict[str, list[float]]] = {n: {"dense": [], "hybrid": []} for n in mats}
    for qi, (qid, text) in enumerate(queries.items()):
        bm25 = [cid for cid, _ in snap.bm25_ranking(text, DENSE_POOL * 4)][:DENSE_POOL]
        for name, m in mats.items():
            sims = m @ qv[name][qi]
            top = np.argsort(-sims)[:DENSE_POOL * 2]
            dense_papers: list[str] = []
            for j in top:
                pid = snap.chunk_paper[ids[j]]
                if pid not in dense_papers:
                    dense_papers.append(pid)
            scores[name]["dense"].append(ndcg10(dense_papers, qrels[qid]))
            fused = _fuse([[ids[j] for j in top[:DENSE_POOL]], bm25])
            hybrid: list[str] = []
            for cid, _ in sorted(fused.items(), key=lambda kv: -kv[1]):
                pid = snap.chunk_paper.get(cid)
                if pid and pid not in hybrid:
                    hybrid.append(pid)
            scores[name]["hybrid"].append(ndcg10(hybrid, qrels[qid]))

    med = {n: (statistics.median(walls[n]), statistics.median(cpus[n])) for n in walls}
    mean = {n: {k: sum(v) / len(v) for k, v in s.items()} for n, s in scores.items()}
    print(f"\nint8 model made in {made:.1f} s: {size[1] / 1e6:.0f} MB (fp32 {size[0] / 1e6:.0f} MB); "
          f"{load()}\n")
    print(table(["model", f"seeds/ texts ({len(texts)}) wall s", "CPU s", "speed-up (wall)",
                 "cosine to fp32 (min / mean)"],
                [["fp32 (shipped)", f"{med['fp32'][0]:.2f}", f"{med['fp32'][1]:.2f}", "1.00", "1 / 1"],
                 ["int8 dynamic", f"{med['int8'][0]:.2f}", f"{med['int8'][1]:.2f}",
                  f"{med['fp32'][0] / med['int8'][0]:.2f}", f"{cos.min():.4f} / {cos.mean():.4f}"]]))
    print(f"\nSciFact training claims ({len(queries)}), {len(ids)} chunks, exact search:\n")
    rows = []
    for kind in ("dense", "hybrid"):
        d = mean["int8"][kind] - mean["fp32"][kind]
        rows.append([kind, f"{mean['fp32'][kind]:.4f}", f"{mean['int8'][kind]:.4f}", f"{d:+.4f}",
                     "within 0.005" if abs(d) <= 0.005 else "NOT within 0.005"])
    print(table(["ranker", "nDCG@10 fp32", "nDCG@10 int8", "difference", "rule"], rows))


if __name__ == "__main__":
    main()
