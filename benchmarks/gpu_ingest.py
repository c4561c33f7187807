"""GPU ingest: scale_100k's synthetic corpus ingested with RAG_DEVICE=cuda, a group of shards
per fresh process into one growing index, until the corpus is done or a time budget is spent
(a lent GPU machine has minutes, not hours); prints each group's abstracts/s and where its time
went, and the whole run's. Not a test; needs CUDA torch, sentence-transformers and a GPU.

    python3 benchmarks/gpu_ingest.py --n 100000 --home /tmp/rag-gpu --budget 420

A later run with the same --home (and --n, --seed) goes on where the last stopped: the groups
it ingested are listed in --home/gpu-runs.json and skipped (rag would skip their papers too,
after reading them).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from _bench import ROOT, bench_env, table
from scale_100k import INDEX, generate

EMBED = "embedding (Embedder.embed)"
WRITES = "store writes (Chroma)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--shard", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--group", type=int, default=10, help="shards per ingest process")
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--budget", type=float, default=420.0,
                    help="seconds: no group is started after this (a group takes ~1 min)")
    args = ap.parse_args()
    started = time.perf_counter()
    corpus = args.home / "corpus"
    if not corpus.exists():
        stats = generate(args.n, corpus, args.shard, args.seed)
        print(f"generated {args.n} abstracts in {time.perf_counter() - started:.0f} s "
              f"({stats['sentences_per_abstract']:.1f} sentences each)", flush=True)
    shards = sorted(corpus.glob("*.jsonl"))
    env = bench_env(args.home, RAG_INDEX=INDEX, RAG_DEVICE=os.environ.get("RAG_DEVICE", "cuda"),
                    RAG_SEEDS=str(args.home / "no-seeds"))
    done_file = args.home / "gpu-runs.json"  # groups ingested by earlier runs: not read again
    earlier = json.loads(done_file.read_text()) if done_file.exists() else []
    done = {r["first_shard"] for r in earlier}
    runs = []
    for g in range(0, len(shards), args.group):
        if g in done:
            continue
        if time.perf_counter() - started > args.budget:
            print(f"budget of {args.budget:.0f} s spent: stopping before shard {g}", flush=True)
            break
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "ingest_speed.py"),
                               "--worker", "phases", *map(str, shards[g : g + args.group])],
                              env=env, cwd=ROOT, capture_output=True, text=True)
        if proc.returncode:
            raise SystemExit(f"ingest of shards {g}.. failed:\n{proc.stderr[-3000:]}")
        run = {**json.loads(proc.stdout.strip().splitlines()[-1]), "wall": time.perf_counter() - t,
               "first_shard": g}
        runs.append(run)
        done_file.write_text(json.dumps(earlier + runs))
        print(json.dumps(run), flush=True)
    if not runs:
        return
    rows = []
    for r in runs:
        ph = r["phases"]
        rows.append([f"{r['first_shard'] * args.shard:,}..", r["new"], f"{r['wall']:.0f}",
                     f"{r['new'] / r['wall']:.1f}", f"{ph.get(EMBED, 0):.1f}",
                     f"{ph.get(WRITES, 0):.1f}", f"{r['peak_rss_mb']:.0f}"])
    new = sum(r["new"] for r in runs)
    wall = sum(r["wall"] for r in runs)
    emb = sum(r["phases"].get(EMBED, 0) for r in runs)
    writes = sum(r["phases"].get(WRITES, 0) for r in runs)
    rows.append(["all", new, f"{wall:.0f}", f"{new / wall:.1f}", f"{emb:.1f}", f"{writes:.1f}",
                 f"{max(r['peak_rss_mb'] for r in runs):.0f}"])
    print(f"\nGPU ingest (RAG_DEVICE={env['RAG_DEVICE']}) of {new:,} of {args.n:,} synthetic abstracts, "
          f"{len(runs)} processes of {args.group} shards:\n")
    print(table(["abstracts from", "new", "wall s", "abstracts/s", "embedding s",
                 "Chroma writes s", "peak RSS MB"], rows))
    print(f"\nembedding is {emb / wall:.0%} of the wall time, Chroma writes {writes / wall:.0%}; "
          f"texts embedded per second of embedding: {sum(r['texts'] for r in runs) / emb:,.0f}")


if __name__ == "__main__":
    main()
