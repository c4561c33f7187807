"""Scale: a synthetic corpus of N abstracts (default 100,000) recombined from SciFact sentences,
ingested into its own RAG_HOME; ingest time, abstracts/s, disk size, GET /search latency and
HNSW recall@10 against exact search. Prints tables; not a test.

    .venv/bin/python benchmarks/scale_100k.py --n 10000 --hnsw-vectors 210000   # ~17 min, 2 cores
    .venv/bin/python benchmarks/scale_100k.py --n 10000 --home /tmp/rag-scale --keep
    .venv/bin/python benchmarks/scale_100k.py --home /tmp/rag-scale --skip-ingest   # measure again
    .venv/bin/python benchmarks/scale_100k.py --home /tmp/rag-scale --keep --resume  # go on after a stop

Corpus: SciFact's 5,183 abstracts as sentence lists (Wadden et al. 2020, "Fact or Fiction:
Verifying Scientific Claims"; ODC-By 1.0), from ../shared/benchmarks/scifact/. Each synthetic
abstract takes the sentence count of a random SciFact abstract (capped at 25), keeps about half
of that abstract's sentences in order and fills the rest with random sentences from the whole
corpus; its title is that abstract's title with a serial number. A seeded RNG makes the corpus
the same on every run; it is written as JSON Lines shards of --shard abstracts, so ingest writes
(and could resume) one shard at a time, as it would for a real dump.

Measured:
  ingest      `ingest()` in a fresh process with per-phase timers (as benchmarks/ingest_speed.py)
  disk        bytes under RAG_HOME (Chroma's SQLite, HNSW segments, the BM25 snapshot cache)
  /search     a `rag serve` on the index: start-up time, then GET /search p50/p95 over
              --queries SciFact claims, one at a time, after a warm-up; and its VmRSS
  questions   `rag ask --llm none` from a cold process (a fact and a list question, median of
              3), and --questions fact and list questions in one warm process with exclusive
              timers around the parts of the question path that grow with the index (BM25
              snapshot load, relevance statistics, sentence reads, list pools, retrieval)
  recall@10   the dense half alone: Chroma's HNSW top 10 against exact cosine search (numpy,
              every chunk vector) for the same claims, ties counted as hits (ann-benchmarks);
              at the collection's ef_search, as rag asks (n_results=200, its dense pool, then
              the first 10), and for an ef_search sweep (Chroma's default is 100; rag creates
              chunk collections with 200); with --hnsw-vectors N, the same on an HNSW-only
              index of N vectors (the chunk count of 100k abstracts without embedding them)
and an extrapolation to 100,000 abstracts, labelled as such, from the measured rates.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from _bench import (
    PY,
    RAG,
    ROOT,
    SCIFACT,
    bench_env,
    load,
    median,
    pct,
    rss_mb,
    run,
    serve,
    table,
    verdict,
)

HERE = Path(__file__).resolve()
INDEX = "scale"
PROXY_INDEX = "hnswproxy"
MAX_SENTENCES = 25
VENUES = ["Nature", "Science", "Cell", "Lancet", "NEJM", "JAMA", "BMJ", "PLoS One"]


# -- the corpus -------------------------------------------------------------------------------


def generate(n: int, out: Path, shard: int, seed: int) -> dict[str, float]:
    """Write n synthetic abstracts as JSONL shards under out/; returns corpus statistics."""
    docs = [json.loads(line) for line in
            (SCIFACT / "corpus_sentences.jsonl").read_text(encoding="utf-8").splitlines()]
    pool = [s.strip() for d in docs for s in d["abstract"] if s.strip()]
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    seen: set[int] = set()
    sentences = chars = 0
    fh = None
    for i in range(n):
        if i % shard == 0:
            if fh:
                fh.close()
            fh = (out / f"synthetic-{i // shard:05d}.jsonl").open("w", encoding="utf-8")
        while True:
            base = docs[rng.randrange(len(docs))]
            own = [s.strip() for s in base["abstract"] if s.strip()][:MAX_SENTENCES]
            k = len(own)
            picked = [s if rng.random() < 0.5 else pool[rng.randrange(len(pool))] for s in own]
            abstract = " ".join(picked)
            h = hash(abstract)
            if h not in seen:
                seen.add(h)
                break
        sentences += k
        chars += len(abstract)
        record = {"id": f"syn{i:07d}", "title": f"{base['title'].rstrip('.')} ({i})",
                  "abstract": abstract, "year": 2000 + rng.randrange(25),
                  "venue": VENUES[rng.randrange(len(VENUES))]}
        assert fh is not None
        fh.write(json.dumps(record, ensure_ascii=False) + "\n")
    if fh:
        fh.close()
    return {"abstracts": n, "sentences_per_abstract": sentences / n, "chars_per_abstract": chars / n}


def claims(limit: int) -> list[str]:
    lines = (SCIFACT / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["text"] for line in lines][:limit]


# -- workers (fresh processes) ----------------------------------------------------------------


def worker_set_ef(ef: int) -> dict[str, object]:
    """Set the chunk collection's ef_search (persisted; a process that has the index open keeps
    the value it loaded, so recall is measured in the next fresh process)."""
    from rag.config import get_settings
    from rag.store import Store

    store = Store(get_settings())
    store.collection.modify(configuration={"hnsw": {"ef_search": ef}})
    store.close()
    return {"ef_search": ef}


def _all_vectors(coll, total: int):  # type: ignore[no-untyped-def]
    import numpy as np

    ids: list[str] = []
    vecs = []
    offset = 0
    while offset < total:
        page = coll.get(include=["embeddings"], limit=5000, offset=offset)
        if not page["ids"]:
            break
        ids += page["ids"]
        vecs.append(np.asarray(page["embeddings"], dtype=np.float32))
        offset += len(page["ids"])
    return ids, np.concatenate(vecs)


def worker_recall(n_queries: int, cache: Path) -> dict[str, object]:
    """Recall@10 of Chroma's HNSW against exact cosine search over every chunk vector, counted
    as ann-benchmarks does: a returned vector is a hit when it is at least as similar as the
    exact 10th (minus 1e-4), so that equally distant duplicates (the synthetic abstracts reuse
    SciFact sentences) are not counted as misses. The exact 10th similarities are computed
    once and kept in `cache` for the next (ef_search) workers."""
    import numpy as np

    from rag.config import get_settings
    from rag.retrieve import DENSE_POOL
    from rag.store import Store

    settings = get_settings()
    store = Store(settings)
    coll = store.collection
    if cache.exists():
        saved = np.load(cache, allow_pickle=True).item()
        qv, kth, exact_ms, n_ids = saved["qv"], saved["kth"], saved["exact_ms"], saved["n"]
    else:
        from rag.embed import get_embedder

        ids, matrix = _all_vectors(coll, store.count())
        qv = get_embedder(settings.model_cache, settings.embed_threads).embed(claims(n_queries))
        t = time.perf_counter()
        kth = np.array([np.sort(matrix @ q)[-10] for q in qv])
        exact_ms = (time.perf_counter() - t) / len(qv) * 1000
        n_ids = len(ids)
        np.save(cache, {"qv": qv, "kth": kth, "exact_ms": exact_ms, "n": n_ids}, allow_pickle=True)

    def recall(n_results: int) -> tuple[float, float]:
        hits, times = 0, []
        for q, bound in zip(qv, kth, strict=True):
            start = time.perf_counter()
            res = coll.query(query_embeddings=[q.tolist()], n_results=n_results, include=["distances"])
            times.append((time.perf_counter() - start) * 1000)
            hits += sum(1 for d in res["distances"][0][:10] if 1.0 - d >= bound - 1e-4)
        return hits / (10 * len(qv)), median(times)

    out = {"chunks": n_ids, "exact_ms": exact_ms, "configured": coll.configuration_json["hnsw"],
           "rag": recall(DENSE_POOL), "k10": recall(10)}
    store.close()
    return out


def worker_proxy(n: int, seed: int) -> dict[str, object]:
    """Fill a new index (rag's own chunk-collection configuration) with n vectors: every real
    MiniLM vector of the scale index (its chunks, then its sentences), then normalised mixtures
    of two of them (a + w*b, w in [0.2, 0.8]) until n. Times the inserts."""
    import numpy as np

    from rag.config import get_settings
    from rag.store import Store

    settings = get_settings()
    src = Store(settings)
    _, chunks = _all_vectors(src.collection, src.count())
    papers = src.sentences_collection.get(include=[])["ids"]  # one record per paper
    sents = np.concatenate([v for _, v in src.sentences(papers).values()])
    src.close()
    real = np.concatenate([chunks, sents])[:n]
    rng = np.random.default_rng(seed)
    proxy = Store(settings.model_copy(update={"index": PROXY_INDEX}))
    coll = proxy.collection
    if coll.count() == n:  # built by an earlier run (--keep): measured again as it is
        proxy.close()
        return {"vectors": n, "real": int(min(n, len(real))), "insert_s": float("nan")}
    if coll.count():
        raise SystemExit(f"index {PROXY_INDEX} holds {coll.count()} vectors, not {n}")
    t = time.perf_counter()
    for start in range(0, n, 2000):
        end = min(n, start + 2000)
        if end <= len(real):
            block = real[start:end]
        else:
            lo = max(start, len(real))
            a = real[rng.integers(0, len(real), end - lo)]
            b = real[rng.integers(0, len(real), end - lo)]
            mix = a + rng.uniform(0.2, 0.8, (end - lo, 1)).astype(np.float32) * b
            mix /= np.linalg.norm(mix, axis=1, keepdims=True)
            block = mix if start >= len(real) else np.concatenate([real[start:], mix])
        coll.add(ids=[f"v{i}" for i in range(start, end)], embeddings=block,
                 metadatas=[{"paper_id": f"v{i}"} for i in range(start, end)])
    took = time.perf_counter() - t
    proxy.close()
    return {"vectors": n, "real": int(len(real)), "insert_s": took}


FACT = "{claim}"
LIST = "Which papers report that {claim}?"


def questions(n: int) -> dict[str, list[str]]:
    """Fact and list questions from SciFact claims (not the ones /search is timed with)."""
    picked = claims(n * 2 + 240)[240:]
    lower = [c[0].lower() + c[1:].rstrip(".") for c in picked[n:]]
    return {"fact": [FACT.format(claim=c) for c in picked[:n]],
            "list": [LIST.format(claim=c) for c in lower]}


def worker_ask(n: int) -> dict[str, object]:
    """Offline answers (`rag ask --llm none`) in one warm process, as `rag serve` gives them:
    a first question, which loads what depends on the index (BM25 snapshot, relevance
    statistics), then n fact and n list questions, with exclusive timers around each part of
    the question path that grows with the index."""
    sys.path.insert(0, str(HERE.parent))
    from ingest_speed import _Timers

    import rag.answering.sources
    import rag.embed
    import rag.relevance.stats
    import rag.retrieve.hybrid
    import rag.store
    from rag.answering.pipeline import Pipeline
    from rag.config import get_settings
    from rag.schema import AskOptions

    timers = _Timers()
    timers.wrap(rag.retrieve.hybrid, "load_snapshot", "BM25 snapshot load")
    timers.wrap(rag.relevance.stats, "compute", "relevance statistics")
    timers.wrap(rag.store.Store, "sentences", "sentence reads (Store.sentences)")
    timers.wrap(rag.answering.sources.SourceChooser, "list_members", "list pool (list_members)")
    timers.wrap(rag.retrieve.hybrid.Retriever, "search", "retrieval (dense + BM25 + fusion)")
    timers.wrap(rag.embed.Embedder, "embed", "embedding questions and texts")
    pipeline = Pipeline(get_settings())
    opts = AskOptions(llm="none")
    asked = questions(n)
    t = time.perf_counter()
    pipeline.answer(claims(1)[0], opts)
    first = {"seconds": time.perf_counter() - t, "parts": dict(timers.total)}
    out: dict[str, object] = {"first": first}
    for kind, qs in asked.items():
        timers.total.clear()
        times, sizes = [], []
        for q in qs:
            t = time.perf_counter()
            sizes.append(len(pipeline.answer(q, opts).sources))
            times.append(time.perf_counter() - t)
        out[kind] = {"median_s": median(times), "p95_s": pct(times, 95),
                     "by_size": sorted(zip(sizes, times, strict=True)),
                     "parts_s": {k: v / len(qs) for k, v in timers.total.items()}}
    return out


def cli_ask(env: dict[str, str], runs: int) -> dict[str, float]:
    """Wall time of a cold `rag ask --llm none` (a fresh process, as a user types it)."""
    out = {}
    for kind, qs in questions(1).items():
        walls = []
        for _ in range(runs):
            walls.append(run([RAG, "ask", "--llm", "none", qs[0]], env))
        out[kind] = median(walls)
    return out


def _worker(mode: str, env: dict[str, str], *args: str) -> dict:
    proc = subprocess.run([PY, str(HERE), "--worker", mode, *args], env=env, cwd=ROOT,
                          capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"worker {mode} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def measure_recall(env: dict[str, str], cache: Path, queries: int,
                   sweep_arg: str) -> tuple[dict, list[tuple[int, float, float, float]]]:
    """Recall at the collection's own ef_search, then at each ef_search of the sweep (each in a
    fresh process after setting it), then the original value restored."""
    rec = _worker("recall", env, "--queries", str(queries), "--cache", str(cache))
    configured = rec["configured"]["ef_search"]
    sweep = []
    for ef in [int(x) for x in sweep_arg.split(",") if x]:
        _worker("set-ef", env, "--ef", str(ef))
        r = _worker("recall", env, "--queries", str(queries), "--cache", str(cache))
        sweep.append((ef, r["k10"][0], r["k10"][1], r["rag"][0]))
    _worker("set-ef", env, "--ef", str(configured))
    return rec, sweep


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000, help="abstracts to generate and ingest")
    ap.add_argument("--shard", type=int, default=1000, help="abstracts per JSONL file")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--home", type=Path, help="RAG_HOME to build in (default: a temp dir, removed)")
    ap.add_argument("--keep", action="store_true", help="keep --home (and the corpus) afterwards")
    ap.add_argument("--skip-ingest", action="store_true", help="measure an index built before")
    ap.add_argument("--resume", action="store_true",
                    help="go on with a stopped ingest into --home (stored papers are skipped)")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--questions", type=int, default=20,
                    help="fact and list questions each, answered offline in one warm process")
    ap.add_argument("--sweep", default="10,50,100,200,400", help="ef_search values to try")
    ap.add_argument("--standin", action="store_true",
                    help="embed with benchmarks/standin_embedder.py's stand-in model (a seeded "
                         "token table: costs, never quality) in every process, so that 100,000 "
                         "abstracts ingest in minutes; the real model's rate is measured without it")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--ef", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--cache", help=argparse.SUPPRESS)
    ap.add_argument("--hnsw-vectors", type=int, default=0, metavar="N",
                    help="also build an HNSW-only index of N vectors (real ones of the scale "
                         "index, then mixtures of them) and measure its recall: the chunk count "
                         "of 100k abstracts (~210,000) without embedding them")
    args = ap.parse_args()
    if args.worker:
        sys.path.insert(0, str(ROOT))
        if args.worker == "recall":
            out = worker_recall(args.queries, Path(args.cache))
        elif args.worker == "ask":
            out = worker_ask(args.questions)
        elif args.worker == "proxy":
            out = worker_proxy(args.hnsw_vectors, args.seed)
        else:
            out = worker_set_ef(args.ef)
        print(json.dumps(out))
        return

    started = time.perf_counter()
    temp = args.home is None
    home = Path(tempfile.mkdtemp(prefix="rag-scale-")) if temp else args.home
    corpus = home / "corpus"
    env = bench_env(home, RAG_INDEX=INDEX, RAG_SEEDS=str(home / "no-seeds"))
    if args.standin:
        from standin_embedder import write as write_standin

        env["RAG_MODEL_CACHE"] = str(write_standin(home / "standin-model"))
    print(f"RAG_HOME {home}, index '{INDEX}'; {load()}", flush=True)
    try:
        ingest: dict = {}
        stats: dict = {}
        runs_file = home / "ingest-runs.json"  # one entry per ingest run (a resumed one adds)
        if not args.skip_ingest:
            if (home / "chroma").exists() and not args.resume:
                raise SystemExit(f"{home} already holds an index: use --skip-ingest or --resume, "
                                 "or remove it")
            if not (args.resume and corpus.exists()):
                t = time.perf_counter()
                stats = generate(args.n, corpus, args.shard, args.seed)
                print(f"generated {args.n} abstracts in {time.perf_counter() - t:.1f} s "
                      f"({stats['sentences_per_abstract']:.1f} sentences, "
                      f"{stats['chars_per_abstract']:.0f} characters each)", flush=True)
            print(f"ingesting ...; {load()}", flush=True)
            t = time.perf_counter()
            proc = subprocess.run([PY, str(ROOT / "benchmarks" / "ingest_speed.py"), "--worker",
                                   "phases", str(corpus)], env=env, cwd=ROOT, capture_output=True,
                                  text=True)
            wall = time.perf_counter() - t
            if proc.returncode:
                raise SystemExit(f"ingest failed:\n{proc.stderr[-3000:]}")
            ingest = json.loads(proc.stdout.strip().splitlines()[-1])
            ingest["wall"] = wall
            earlier = json.loads(runs_file.read_text()) if runs_file.exists() else []
            runs_file.write_text(json.dumps(earlier + [ingest]))
            print(f"ingested in {wall:.0f} s; {load()}", flush=True)
        if runs_file.exists():  # the whole ingest, over every run that built this index
            runs = json.loads(runs_file.read_text())
            ingest = {**runs[-1], "runs": len(runs), "wall": sum(r["wall"] for r in runs),
                      "sentences": sum(r["sentences"] for r in runs),
                      "texts": sum(r["texts"] for r in runs),
                      "new": sum(r.get("new", 0) for r in runs),
                      "peak_rss_mb": max(r.get("peak_rss_mb", 0) for r in runs),
                      "phases": {k: sum(r["phases"].get(k, 0) for r in runs) for k in runs[-1]["phases"]},
                      "ingest_seconds": sum(r["ingest_seconds"] for r in runs)}
        disk = du(home / "chroma")
        disk_cache = du(home / "cache") if (home / "cache").exists() else 0

        queries = claims(args.queries + 20)
        t = time.perf_counter()
        with serve(env, timeout=1800) as server, httpx.Client(base_url=server.url, timeout=120) as c:
            up = time.perf_counter() - t
            health = c.get("/health").json()
            for q in queries[:20]:
                c.get("/search", params={"q": q})
            lat = []
            for q in queries[20:]:
                s = time.perf_counter()
                r = c.get("/search", params={"q": q})
                lat.append((time.perf_counter() - s) * 1000)
                r.raise_for_status()
            rss, hwm = rss_mb(server.pid)
        disk_cache = du(home / "cache") if (home / "cache").exists() else 0
        print(f"/search measured; {load()}", flush=True)
        asked = _worker("ask", env, "--questions", str(args.questions))
        cli = cli_ask(env, 3)
        print(f"questions measured; {load()}", flush=True)
        rec, sweep = measure_recall(env, home / "exact-scale.npy", args.queries, args.sweep)
        print(f"recall measured; {load()}", flush=True)
        proxy = None
        if args.hnsw_vectors:
            info = _worker("proxy", env, "--hnsw-vectors", str(args.hnsw_vectors), "--seed",
                           str(args.seed))
            penv = {**env, "RAG_INDEX": PROXY_INDEX}
            prec, psweep = measure_recall(penv, home / "exact-proxy.npy", args.queries, args.sweep)
            proxy = (info, prec, psweep)
            print(f"HNSW proxy measured; {load()}", flush=True)
        after = load()
    finally:
        if temp or not args.keep:
            shutil.rmtree(home, ignore_errors=True)
        elif corpus.exists() and not args.keep:
            shutil.rmtree(corpus, ignore_errors=True)

    papers, chunks = health["papers"], health["chunks"]
    rows: list[list[object]] = [["abstracts in the index", papers, ""], ["chunks", chunks, ""]]
    if ingest:
        rate = ingest["new"] / ingest["wall"] if ingest.get("new") else ingest["papers"] / ingest["wall"]
        rows += [
            ["sentences (vectors stored)", ingest["sentences"], ""],
            ["ingest wall (fresh process" + (f"es: {ingest['runs']} runs, resumed)" if
                                             ingest.get("runs", 1) > 1 else ")"),
             f"{ingest['wall']:.0f} s", ""],
            ["abstracts/s", f"{rate:.2f}", ""],
            ["vectors written/s", f"{ingest['texts'] / ingest['wall']:.1f}", ""],
            ["ingest peak RSS", f"{ingest.get('peak_rss_mb', 0):.0f} MB", ""],
        ]
    rows += [
        ["disk: Chroma (SQLite + HNSW)", f"{disk / 1e6:.0f} MB ({disk / max(papers, 1) / 1e3:.1f} kB/abstract)", ""],
        ["disk: BM25 snapshot cache", f"{disk_cache / 1e6:.0f} MB", ""],
        ["rag serve start-up (open, BM25 snapshot, model)", f"{up:.1f} s", ""],
        ["GET /search p50", f"{pct(lat, 50):.1f} ms", ""],
        ["GET /search p95", f"{pct(lat, 95):.1f} ms", ""],
        ["rag serve VmRSS / peak", f"{rss:.0f} / {hwm:.0f} MB", ""],
        ["rag ask --llm none, fact question (cold process, median of 3)", f"{cli['fact']:.1f} s", ""],
        ["rag ask --llm none, list question (cold process, median of 3)", f"{cli['list']:.1f} s", ""],
        ["warm first question (loads snapshot and statistics)", f"{asked['first']['seconds']:.1f} s", ""],
        [f"warm fact question, median / p95 of {args.questions}",
         f"{asked['fact']['median_s'] * 1000:.0f} / {asked['fact']['p95_s'] * 1000:.0f} ms", ""],
        [f"warm list question, median / p95 of {args.questions}",
         f"{asked['list']['median_s'] * 1000:.0f} / {asked['list']['p95_s'] * 1000:.0f} ms", ""],
        [f"HNSW recall@10, rag's query (n_results=200), ef_search {rec['configured']['ef_search']}",
         f"{rec['rag'][0]:.4f}", f">= 0.98: {verdict(rec['rag'][0], 0.98, True)}"],
        [f"HNSW recall@10, n_results=10, ef_search {rec['configured']['ef_search']}",
         f"{rec['k10'][0]:.4f}", f">= 0.98: {verdict(rec['k10'][0], 0.98, True)}"],
    ]
    print(f"\nScale benchmark: {papers} synthetic abstracts from SciFact sentences; "
          f"total {time.perf_counter() - started:.0f} s; {after} at the end\n")
    print(table(["what", "measured", "target"], rows))
    print(f"\nHNSW ef_search sweep ({args.queries} SciFact claims; exact search = numpy over "
          f"all {rec['chunks']} chunk vectors, {rec['exact_ms']:.1f} ms/query):\n")
    print(table(["ef_search", "recall@10 (n_results=10)", "Chroma query median ms",
                 "recall@10 of rag's n_results=200 query"],
                [[ef, f"{r:.4f}", f"{ms:.2f}", f"{rr:.4f}"] for ef, r, ms, rr in sweep]))
    if proxy:
        info, prec, psweep = proxy
        print(f"\nHNSW at {info['vectors']:,} vectors (the chunk count of ~100k abstracts): "
              f"{info['real']:,} real MiniLM vectors of this index (chunks and sentences), the "
              f"rest normalised mixtures of two of them; rag's chunk-collection configuration "
              f"{prec['configured']}; "
              + (f"inserted at {info['vectors'] / info['insert_s']:.0f} vectors/s "
                 f"({info['insert_s']:.0f} s)" if info["insert_s"] == info["insert_s"]
                 else "built by an earlier run") + ":\n")
        print(table(["ef_search", "recall@10 (n_results=10)", "Chroma query median ms",
                     "recall@10 of rag's n_results=200 query"],
                    [[ef, f"{r:.4f}", f"{ms:.2f}", f"{rr:.4f}"] for ef, r, ms, rr in psweep]))
        print(f"at the configured ef_search {prec['configured']['ef_search']}: recall@10 "
              f"{prec['k10'][0]:.4f} with n_results=10, {prec['rag'][0]:.4f} as rag queries "
              f"(target >= 0.98: {verdict(prec['rag'][0], 0.98, True)})")
    parts = sorted({k for kind in ("fact", "list") for k in asked[kind]["parts_s"]}
                   | set(asked["first"]["parts"]))
    print(f"\nThe question path at {papers} abstracts: exclusive ms per question (warm process; "
          "the first question also loads the index's BM25 snapshot and relevance statistics):\n")
    print(table(["part", "first question", "fact question", "list question"],
                [[k, f"{asked['first']['parts'].get(k, 0) * 1000:.0f}",
                  f"{asked['fact']['parts_s'].get(k, 0) * 1000:.1f}",
                  f"{asked['list']['parts_s'].get(k, 0) * 1000:.1f}"] for k in parts]))
    print("\nWarm list questions by the papers they list (one warm process, in the order asked):\n")
    print(table(["papers listed", "seconds"],
                [[n, f"{sec:.2f}"] for n, sec in asked["list"]["by_size"]]))
    if ingest:
        ph = ingest["phases"]
        print("\nWhere ingest time goes (exclusive seconds):\n")
        print(table(["phase", "seconds", "share"],
                    [[k, f"{v:.1f}", f"{v / ingest['ingest_seconds']:.0%}"]
                     for k, v in sorted(ph.items(), key=lambda kv: -kv[1])]))
        f = 100_000 / papers
        emb = ph.get("embedding (Embedder.embed)", 0.0)
        print(f"\nEXTRAPOLATION to 100,000 abstracts (x{f:.1f}, linear in abstracts; not measured): "
              f"ingest ~{ingest['wall'] * f / 3600:.1f} h on these 2 cores "
              f"(embedding ~{emb * f / 3600:.1f} h of it), Chroma ~{disk * f / 1e9:.1f} GB on disk, "
              f"~{chunks * f / 1000:.0f}k chunks and ~{ingest['sentences'] * f / 1e6:.1f} M "
              "sentence vectors. /search grows with the BM25 half (scores every chunk) and the "
              "HNSW query (logarithmic); see docs/speed.md for the measured SciFact/scale points.")


if __name__ == "__main__":
    main()
