"""Ingest speed: seeds/ end to end from a cold process, and ingest throughput against the
bare embedding model on the same texts, measured in the same run. Prints tables; not a test.

    .venv/bin/python benchmarks/ingest_speed.py [--runs 3] [--scifact 1000|all|0] [--st]
        [--baseline OLD_CHECKOUT/.venv/bin/rag]

For each corpus (seeds/, and the first N SciFact abstracts written to a temporary JSONL file):

  rag ingest -q           a fresh process into a fresh RAG_HOME: wall time (what a user waits),
                          and the `ingest()` time it reports (the same minus interpreter start
                          and the CLI's imports)
  bare model              a fresh process that computes exactly the texts ingest gives the
                          model (titles and sentences; chunk texts with their titles where
                          chunk vectors are not pooled), loads the model, and times only
                          `Embedder.embed` on them; with the tokens it read and the GFLOP that
                          costs, against a matrix-product peak measured in the same run
  --baseline RAG          another build's cold `rag ingest -q` on the same files, alternating
                          with this build's: the speed-up of one over the other
  phases                  one more ingest in a fresh process with timers around each step
                          (exclusive times: parse, open Chroma, llama-index import + splitter,
                          chunking, sentence split, model load, embedding, store writes)

Throughput ratio = bare-model seconds / ingest seconds on the same texts (1.00 = ingest costs
nothing beyond the model). Runs alternate ingest and bare model so load elsewhere hits both.
With --st, sentence-transformers' encode() on the same seeds/ texts is timed too (the naive
stack, for orientation). The ONNX model cache is the user's (~/.cache/rag), as for `rag`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from _bench import (
    PY,
    RAG,
    ROOT,
    SCIFACT,
    bench_env,
    load,
    median,
    table,
    temp_home,
    verdict,
    wait_for_quiet,
)

HERE = Path(__file__).resolve()


# -- worker modes (run in fresh processes) -----------------------------------------------------


def _texts(paths: list[Path]) -> list[str]:
    """The texts `rag.ingest.ingest` gives the model for these files, under the current
    settings (RAG_CHUNK_VECTORS=sentences: titles and sentences, chunks pooled from them)."""
    from rag.config import get_settings
    from rag.corpus import merge_papers
    from rag.corpus.text import split_sentences
    from rag.embed.pooling import chunk_weights
    from rag.ingest import _splitter, embed_text, make_chunks, read_all

    settings = get_settings()
    results, _ = read_all(paths, skip_bad=False)
    papers = merge_papers([p for r in results for p in r.papers])
    splitter = _splitter(settings)
    texts: list[str] = []
    for p in papers:
        chunks = make_chunks(p, splitter)
        sents = split_sentences(p.abstract) or [p.abstract]
        w = chunk_weights(p.abstract, p.title, [c.text for c in chunks], sents) \
            if settings.chunk_vectors == "sentences" else None
        if w is None:
            texts += [embed_text(p, c) for c in chunks]
        elif p.title:
            texts.append(p.title)
        texts += sents
    return texts


def gflop(tokens: list[int]) -> float:
    """The model's arithmetic for texts of these token counts: per layer and token, the
    Q, K, V and output projections (4 x 2d^2) and the feed-forward (2 x 2 x d x 4d), plus
    attention's two n x n x d products; 6 layers, d = 384 (embeddings and pooling are noise)."""
    d, layers = 384, 6
    return sum(layers * (24 * d * d * n + 4 * n * n * d) for n in tokens) / 1e9


def peak_gflops() -> dict[str, float]:
    """What a matrix product of the model's shapes reaches on this machine, in this run: fp32
    through numpy (OpenBLAS) and int8 through onnxruntime's MatMulInteger (the op the
    quantised model runs), [4096 x 384] x [384 x 1536]."""
    import numpy as np
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    m, k, n = 4096, 384, 1536
    a = np.random.default_rng(0).standard_normal((m, k), dtype=np.float32)
    b = np.random.default_rng(1).standard_normal((k, n), dtype=np.float32)
    out = {}
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t)
    out["fp32"] = 2 * m * k * n / best / 1e9
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["a", "b"], ["y"])], "peak",
        [helper.make_tensor_value_info("a", TensorProto.UINT8, [m, k])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [m, n])],
        [numpy_helper.from_array(np.random.default_rng(2).integers(-127, 127, (k, n), dtype=np.int8), "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    au8 = np.random.default_rng(3).integers(0, 255, (m, k), dtype=np.uint8)
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        sess.run(None, {"a": au8})
        best = min(best, time.perf_counter() - t)
    out["int8"] = 2 * m * k * n / best / 1e9
    return out


def worker_bare(paths: list[Path], st: bool) -> dict[str, float]:
    from rag.config import get_settings
    from rag.embed import get_embedder

    texts = _texts(paths)
    s = get_settings()
    emb = get_embedder(s.model_cache, s.embed_threads, precision=s.embed_precision)
    tokens = [len(e.ids) for e in emb.tokenizer.encode_batch(texts)]
    emb.embed(texts[:8], s.embed_batch)  # warm-up
    t = time.perf_counter()
    emb.embed(texts, s.embed_batch)
    out = {"texts": len(texts), "seconds": time.perf_counter() - t, "tokens": sum(tokens),
           "gflop": gflop(tokens), "precision": s.embed_precision}
    if st:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        from rag.embed import MAX_TOKENS, model_path

        model = SentenceTransformer(str(model_path()), device="cpu")
        model.max_seq_length = MAX_TOKENS
        model.encode(texts[:8])
        t = time.perf_counter()
        model.encode(texts, batch_size=s.embed_batch)
        out["st_seconds"] = time.perf_counter() - t
    return out


class _Timers:
    """Exclusive wall time per label; nested timed calls are charged to the inner label."""

    def __init__(self) -> None:
        self.total: dict[str, float] = {}
        self.stack: list[list] = []

    def wrap(self, owner: object, attr: str, label: str) -> None:
        fn = getattr(owner, attr, None)
        if fn is None:
            return
        timers = self

        def timed(*a, **kw):  # type: ignore[no-untyped-def]
            now = time.perf_counter()
            if timers.stack:
                outer = timers.stack[-1]
                timers.total[outer[0]] = timers.total.get(outer[0], 0.0) + now - outer[1]
            timers.stack.append([label, now])
            try:
                return fn(*a, **kw)
            finally:
                end = time.perf_counter()
                lab, start = timers.stack.pop()
                timers.total[lab] = timers.total.get(lab, 0.0) + end - start
                if timers.stack:
                    timers.stack[-1][1] = end

        setattr(owner, attr, timed)


def worker_phases(paths: list[Path]) -> dict[str, object]:
    t_start = time.perf_counter()
    import rag.embed
    import rag.embed.gpu  # imports no torch
    import rag.ingest
    import rag.store
    from rag.config import get_settings

    timers = _Timers()
    timers.wrap(rag.ingest, "read_all", "parse files")
    timers.wrap(rag.store.Store, "__init__", "open Chroma (import chromadb)")
    timers.wrap(rag.store.Store, "paper_states", "read stored paper states")
    timers.wrap(rag.ingest, "_splitter", "llama-index import + splitter")
    timers.wrap(rag.ingest, "make_chunks", "chunking (SentenceSplitter; nltk on first use)")
    timers.wrap(rag.ingest, "split_sentences", "sentence split")
    timers.wrap(rag.embed.Embedder, "__init__", "model load (onnxruntime session)")
    timers.wrap(rag.embed.Embedder, "embed", "embedding (Embedder.embed)")
    # the GPU path (RAG_DEVICE=auto or cuda where CUDA torch sees a GPU) under the same labels
    timers.wrap(rag.embed.gpu.TorchEmbedder, "__init__", "model load (sentence-transformers, CUDA)")
    timers.wrap(rag.embed.gpu.TorchEmbedder, "embed", "embedding (Embedder.embed)")
    timers.wrap(rag.store.Store, "write", "store writes (Chroma)")
    settings = get_settings()
    t_imports = time.perf_counter() - t_start
    report = rag.ingest.ingest(paths, settings, show_progress=False)
    import resource

    return {"ingest_seconds": report.seconds, "imports_before": t_imports,
            "phases": timers.total, "texts": report.chunks + report.sentences,
            "papers": report.papers, "new": report.new, "chunks": report.chunks,
            "sentences": report.sentences,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


# -- driver ------------------------------------------------------------------------------------


def _worker(mode: str, paths: list[Path], home: Path, *extra: str) -> tuple[dict, float]:
    env = bench_env(home)
    start = time.perf_counter()
    proc = subprocess.run([PY, str(HERE), "--worker", mode, *extra, *map(str, paths)], env=env,
                          cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit(f"worker {mode} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1]), wall


def _cli_ingest(paths: list[Path], home: Path, rag: str = RAG) -> tuple[float, float, int]:
    """(wall s, ingest() s as reported, vectors written) of a cold `rag ingest -q`."""
    env = bench_env(home)
    start = time.perf_counter()
    proc = subprocess.run([rag, "ingest", "-q", *map(str, paths)], env=env, cwd=ROOT,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit(f"rag ingest failed:\n{proc.stderr[-3000:]}")
    m = re.search(r"(\d+) chunks and (\d+) sentences embedded in ([\d.]+) s", proc.stdout)
    if not m:
        raise SystemExit(f"unexpected rag ingest output: {proc.stdout!r}")
    return wall, float(m.group(3)), int(m.group(1)) + int(m.group(2))


def measure(name: str, paths: list[Path], runs: int, st: bool, baseline: str | None = None
            ) -> dict[str, object]:
    walls, inner, bares, st_secs, base_walls = [], [], [], [], []
    texts = 0
    for _ in range(runs):
        with temp_home() as home:
            wall, secs, texts = _cli_ingest(paths, home)
        walls.append(wall)
        inner.append(secs)
        if baseline:  # the other build, right after, on the same files
            with temp_home() as home:
                base_walls.append(_cli_ingest(paths, home, baseline)[0])
        with temp_home() as home:
            bare, _ = _worker("bare", paths, home, *(["--st"] if st else []))
        bares.append(bare["seconds"])
        if "st_seconds" in bare:
            st_secs.append(bare["st_seconds"])
    with temp_home() as home:
        phases, phase_wall = _worker("phases", paths, home)
    return {"name": name, "texts": texts, "papers": phases["papers"], "wall": median(walls),
            "walls": walls, "inner": median(inner), "bare": median(bares), "bares": bares,
            "model_texts": bare["texts"], "tokens": bare["tokens"], "gflop": bare["gflop"],
            "precision": bare["precision"], "base_wall": median(base_walls) if base_walls else None,
            "base_walls": base_walls,
            "st": median(st_secs) if st_secs else None, "phases": phases, "phase_wall": phase_wall}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="runs per corpus (median)")
    ap.add_argument("--scifact", default="1000",
                    help="SciFact abstracts to ingest too: a number, 'all' (5,183), or 0 for none")
    ap.add_argument("--scifact-runs", type=int, default=1)
    ap.add_argument("--st", action="store_true", help="also time sentence-transformers on seeds/")
    ap.add_argument("--wait-quiet", type=float, default=0.0, metavar="SECONDS")
    ap.add_argument("--baseline", metavar="RAG", help="another build's `rag` executable (an older "
                    "checkout's .venv/bin/rag): its cold `rag ingest -q` timed on the same files, "
                    "alternating with this build's")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("paths", nargs="*", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        sys.path.insert(0, str(ROOT))
        out = worker_bare(args.paths, args.st) if args.worker == "bare" else worker_phases(args.paths)
        print(json.dumps(out))
        return

    wait_for_quiet(timeout=args.wait_quiet)
    before = load()
    results = [measure("seeds/", [ROOT / "seeds"], args.runs, args.st, args.baseline)]
    with temp_home("rag-bench-scifact-") as tmp:
        if args.scifact not in ("0", ""):
            lines = (SCIFACT / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
            n = len(lines) if args.scifact == "all" else min(int(args.scifact), len(lines))
            subset = tmp / f"scifact-{n}.jsonl"
            subset.write_text("\n".join(lines[:n]) + "\n", encoding="utf-8")
            results.append(measure(f"SciFact, {n} abstracts", [subset], args.scifact_runs, False,
                                   args.baseline))
    peak = peak_gflops()
    after = load()

    print(f"\nIngest speed ({before} before, {after} after)\n")
    rows = []
    for r in results:
        ratio_wall = r["bare"] / r["wall"]
        ratio_inner = r["bare"] / r["inner"]
        rows.append([r["name"], r["papers"], r["texts"], f"{r['wall']:.1f}", f"{r['inner']:.1f}",
                     f"{r['bare']:.1f}", f"{ratio_wall:.2f}", f"{ratio_inner:.2f}",
                     f"{r['papers'] / r['wall']:.1f}", f"{r['texts'] / r['wall']:.0f}"])
    print(table(["corpus", "papers", "texts", "rag ingest wall s", "ingest() s", "bare model s",
                 "throughput ratio (wall)", "ratio (ingest())", "abstracts/s (wall)",
                 "texts/s (wall)"], rows))
    print(f"\nThe model's work ({results[0]['precision']} weights; matrix-product peak measured now: "
          f"fp32 {peak['fp32']:.0f} GFLOP/s (numpy), int8 {peak['int8']:.0f} GFLOP/s "
          f"(onnxruntime MatMulInteger))\n")
    rows = []
    for r in results:
        achieved = r["gflop"] / r["bare"]
        top = peak["int8" if r["precision"] == "int8" else "fp32"]
        rows.append([r["name"], r["model_texts"], f"{r['tokens'] / r['papers']:.0f}",
                     f"{r['gflop'] / r['papers']:.2f}", f"{achieved:.0f}", f"{achieved / top:.0%}"])
    print(table(["corpus", "texts the model reads", "model tokens per abstract",
                 "GFLOP per abstract", "achieved GFLOP/s (bare model)", "of the peak"], rows))
    if args.baseline:
        print(f"\nAgainst {args.baseline} (cold `rag ingest -q`, same files, alternating):\n")
        rows = [[r["name"], f"{r['base_wall']:.1f}", f"{r['wall']:.1f}",
                 f"{r['papers'] / r['base_wall']:.1f}", f"{r['papers'] / r['wall']:.1f}",
                 f"{r['base_wall'] / r['wall']:.2f}"] for r in results]
        print(table(["corpus", "baseline wall s", "this build wall s", "baseline abstracts/s",
                     "this build abstracts/s", "speed-up"], rows))
    seeds = results[0]
    print(f"\nseeds/ from a cold process: median {seeds['wall']:.1f} s of "
          f"{[round(w, 1) for w in seeds['walls']]} (target <= 15 s: {verdict(seeds['wall'], 15)})")
    for r in results:
        print(f"{r['name']}: throughput ratio {r['bare'] / r['wall']:.2f} end to end "
              f"(target >= 0.85: {verdict(r['bare'] / r['wall'], 0.85, True)}), "
              f"{r['bare'] / r['inner']:.2f} for ingest() alone")
    if seeds["st"]:
        print(f"sentence-transformers encode() on the same seeds/ texts: {seeds['st']:.1f} s "
              f"(x{seeds['st'] / seeds['bare']:.2f} the ONNX model's time)")
    for r in results:
        ph = r["phases"]
        total = sum(ph["phases"].values())
        print(f"\nWhere the time goes, {r['name']} (one more ingest in a fresh process: "
              f"{r['phase_wall']:.1f} s wall, ingest() {ph['ingest_seconds']:.1f} s, "
              f"imports before ingest() {ph['imports_before']:.2f} s):\n")
        prow = [[k, f"{v:.2f}", f"{v / ph['ingest_seconds']:.0%}"]
                for k, v in sorted(ph["phases"].items(), key=lambda kv: -kv[1])]
        prow.append(["(untimed rest of ingest())", f"{ph['ingest_seconds'] - total:.2f}",
                     f"{(ph['ingest_seconds'] - total) / ph['ingest_seconds']:.0%}"])
        print(table(["phase", "seconds", "share of ingest()"], prow))


if __name__ == "__main__":
    main()
