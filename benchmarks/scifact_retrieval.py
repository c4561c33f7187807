"""SciFact retrieval benchmark (not CI): BM25 alone, dense alone, and rag's hybrid.

Data: SciFact, Wadden et al. 2020, "Fact or Fiction: Verifying Scientific Claims"
(allenai/scifact; claims CC BY 4.0, abstracts ODC-By 1.0), training split only, from
../shared/benchmarks/scifact/ (BEIR layout: corpus.jsonl, queries.jsonl, qrels/train.tsv).

    .venv/bin/python benchmarks/scifact_retrieval.py [--data DIR] [--home DIR] [--limit N]

The corpus is ingested with rag's own `ingest()` into its own index (RAG_INDEX=scifact) under
its own data directory (default /tmp/rag-scifact, or RAG_HOME), reused when already built. Each
training claim is then run through three rankers, chunk scores aggregated to documents by max:
  bm25    Snapshot.bm25_ranking (the BM25 half of the hybrid)
  dense   Store.query (the dense half: cosine over the chunk embeddings)
  hybrid  Retriever.search (both fused by reciprocal rank, as `rag search` does)
and nDCG@10, recall@100 and MRR@10 are printed. Nothing here is tuned: the figures describe
the retriever as shipped. Published nDCG@10 on the BEIR *test* split, for orientation only:
BM25 0.665, all-MiniLM-L6-v2 0.645.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DEFAULT_DATA = ROOT.parent / "shared" / "benchmarks" / "scifact"
CITATION = ('Wadden et al. 2020, "Fact or Fiction: Verifying Scientific Claims" (SciFact), '
            "training split; CC BY 4.0 / ODC-By 1.0")


def load_queries(data: Path) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    queries = {}
    with (data / "queries.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            obj = json.loads(line)
            queries[str(obj["_id"])] = obj["text"]
    qrels: dict[str, dict[str, int]] = {}
    with (data / "qrels" / "train.tsv").open(encoding="utf-8") as fh:
        next(fh)  # header
        for line in fh:
            qid, did, score = line.rstrip("\n").split("\t")
            if int(score) > 0:
                qrels.setdefault(qid, {})[did] = int(score)
    return {q: t for q, t in queries.items() if q in qrels}, qrels


def ndcg_at(ranked: list[str], rel: dict[str, int], k: int) -> float:
    dcg = sum(rel.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted(rel.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at(ranked: list[str], rel: dict[str, int], k: int) -> float:
    return len(set(ranked[:k]) & set(rel)) / len(rel)


def mrr_at(ranked: list[str], rel: dict[str, int], k: int) -> float:
    for i, d in enumerate(ranked[:k]):
        if d in rel:
            return 1.0 / (i + 1)
    return 0.0


def by_max(pairs: list[tuple[str, float]], paper_of: dict[str, str]) -> list[str]:
    """Chunk (id, score) pairs -> document ids ranked by their best chunk."""
    best: dict[str, float] = {}
    for cid, score in pairs:
        pid = paper_of.get(cid)
        if pid is not None and score > best.get(pid, -math.inf):
            best[pid] = score
    return [p for p, _ in sorted(best.items(), key=lambda kv: -kv[1])]


def build(settings, data: Path) -> tuple[float, int]:  # type: ignore[no-untyped-def]
    from rag.ingest import ingest
    from rag.store import Store

    store = Store(settings)
    have = store.count()
    if have:
        print(f"reusing the index '{settings.index}' in {settings.home} ({have} chunks)", flush=True)
        return 0.0, 0
    print(f"ingesting {data / 'corpus.jsonl'} into '{settings.index}' in {settings.home} ...",
          flush=True)
    report = ingest([data / "corpus.jsonl"], settings, show_progress=sys.stderr.isatty())
    print(report.summary(), flush=True)
    return report.seconds, report.papers


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--home", type=Path, default=Path(os.environ.get("RAG_HOME", "/tmp/rag-scifact")))
    ap.add_argument("--limit", type=int, default=0, help="only the first N training queries")
    ap.add_argument("--json", type=Path, help="also write the figures to this file")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from rag.config import Settings
    from rag.retrieve import Retriever

    settings = Settings(home=args.home, index="scifact", llm="none")
    seconds, n_papers = build(settings, args.data)
    queries, qrels = load_queries(args.data)
    if args.limit:
        queries = dict(list(queries.items())[: args.limit])

    retriever = Retriever(settings)
    snap = retriever.snapshot()
    paper_of = snap.chunk_paper
    n_chunks = len(snap.chunk_ids)
    # Enough chunks that 100 distinct documents survive aggregation.
    pool = max(400, 4 * 100 * max(1, round(n_chunks / max(1, len(snap.papers)))))

    runs: dict[str, dict[str, list[float]]] = {m: {"ndcg@10": [], "recall@100": [], "mrr@10": []}
                                                for m in ("bm25", "dense", "hybrid")}
    started = time.perf_counter()
    for qid, text in queries.items():
        rel = qrels[qid]
        vec = retriever.embed_query(text)
        rankings = {
            "bm25": by_max(snap.bm25_ranking(text, pool), paper_of),
            "dense": by_max(retriever.store.query_ids(vec, pool),
                            paper_of),
            "hybrid": [h.paper.paper_id for h in retriever.search(text, 100)],
        }
        for name, ranked in rankings.items():
            runs[name]["ndcg@10"].append(ndcg_at(ranked, rel, 10))
            runs[name]["recall@100"].append(recall_at(ranked, rel, 100))
            runs[name]["mrr@10"].append(mrr_at(ranked, rel, 10))
    elapsed = time.perf_counter() - started

    table = {m: {k: sum(v) / len(v) for k, v in ms.items()} for m, ms in runs.items()}
    print(f"\nSciFact training split: {len(queries)} claims, {len(snap.papers)} abstracts, "
          f"{n_chunks} chunks ({CITATION})")
    if seconds:
        print(f"ingest: {n_papers} abstracts in {seconds:.0f} s = {n_papers / seconds:.1f} abstracts/s")
    print(f"queries: {elapsed:.0f} s for 3 rankers = {len(queries) / elapsed:.1f} claims/s\n")
    print("| ranker | nDCG@10 | recall@100 | MRR@10 |")
    print("|---|---|---|---|")
    for name, ms in table.items():
        print(f"| {name} | {ms['ndcg@10']:.3f} | {ms['recall@100']:.3f} | {ms['mrr@10']:.3f} |")
    print("\nPublished nDCG@10 on the BEIR test split (orientation only): BM25 0.665, "
          "all-MiniLM-L6-v2 0.645.")
    if args.json:
        args.json.write_text(json.dumps({"queries": len(queries), "abstracts": len(snap.papers),
                                         "ingest_seconds": seconds, "table": table}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
