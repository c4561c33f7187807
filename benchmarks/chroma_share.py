"""Chroma's share of an ingest on the CPU: the first N SciFact abstracts ingested into a fresh
RAG_HOME by `ingest()` in a fresh process, with the wall time of every call into Chroma
(upserts of chunk and sentence records, version bumps, reads) and of the model; optionally the
same for another checkout's code, alternating, so that load elsewhere hits both alike. Prints a
table; not a test.

    .venv/bin/python benchmarks/chroma_share.py [--n 1000] [--runs 1] [--baseline-code OLD_CHECKOUT]

Store writes run in a second thread while the model embeds the next group (rag.ingest), so
their share is of the wall time they overlap with, not time added to it one for one.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from _bench import PY, ROOT, SCIFACT, bench_env, load, median, table

HERE = Path(__file__).resolve()
CALLS = ("upsert", "add", "get", "delete", "modify", "query", "count")


def worker(code: Path, n: int) -> dict[str, Any]:
    sys.path.insert(0, str(code))
    import rag.embed
    import rag.ingest
    import rag.store.collection as collection
    from rag.config import Settings

    totals: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    lock = threading.Lock()

    def timed(key: str, fn: Any) -> Any:
        def call(*a: Any, **k: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                with lock:
                    totals[key] += time.perf_counter() - t
                    counts[key] += 1
        return call

    guarded = collection._Guarded.__getattr__

    def chroma_call(self: Any, name: str) -> Any:
        attr = guarded(self, name)
        if not callable(attr) or name not in CALLS:
            return attr
        target = getattr(self._target, "name", None)
        kind = "client" if target is None else "sentence records" if target.endswith("sentences") \
            else "chunks"
        return timed(f"Chroma {kind}: {name}", attr)

    collection._Guarded.__getattr__ = chroma_call  # type: ignore[method-assign]
    collection.Store.write = timed("store writes (all)", collection.Store.write)  # type: ignore[method-assign]
    rag.embed.Embedder.embed = timed("the model (Embedder.embed)", rag.embed.Embedder.embed)  # type: ignore[method-assign]
    tmp = Path(tempfile.mkdtemp(prefix="rag-chroma-share-"))
    try:
        lines = (SCIFACT / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[:n]
        (tmp / "corpus.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        settings = Settings(home=tmp / "home", seeds=tmp / "no-seeds", llm="none")
        t = time.perf_counter()
        report = rag.ingest.ingest([tmp / "corpus.jsonl"], settings, show_progress=False)
        wall = time.perf_counter() - t
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {"wall": wall, "papers": report.papers, "totals": dict(totals), "counts": dict(counts)}


def measure(code: Path, n: int) -> dict[str, Any]:
    proc = subprocess.run([PY, str(HERE), "--worker", str(code), "--n", str(n)], env=bench_env(),
                          cwd=ROOT, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"worker ({code}) failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000, help="SciFact abstracts to ingest")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--baseline-code", type=Path, metavar="DIR", help="another checkout's root")
    ap.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.n)))
        return
    builds = {"this build": ROOT, **({"baseline": args.baseline_code} if args.baseline_code else {})}
    before = load()
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in builds}
    for i in range(args.runs):  # each round in the other order: neither build always goes first
        for name, code in list(builds.items())[:: 1 if i % 2 == 0 else -1]:
            results[name].append(measure(code, args.n))
    after = load()
    print(f"\nChroma's share of ingesting {args.n} SciFact abstracts on the CPU (median of "
          f"{args.runs} fresh process(es) per build, alternating, each round in the other order; {before} before, {after} after)\n")
    keys = sorted({k for runs in results.values() for r in runs for k in r["totals"]})
    rows = [["ingest() wall", *(f"{median([r['wall'] for r in runs]):.1f} s" for runs in results.values())]]
    for key in keys:
        cells = []
        for runs in results.values():
            secs = median([r["totals"].get(key, 0.0) for r in runs])
            share = median([r["totals"].get(key, 0.0) / r["wall"] for r in runs])
            calls = median([r["counts"].get(key, 0) for r in runs])
            cells.append(f"{secs:.1f} s ({share:.1%}; {calls:g} calls)")
        rows.append([key, *cells])
    print(table(["what", *builds], rows))


if __name__ == "__main__":
    main()
