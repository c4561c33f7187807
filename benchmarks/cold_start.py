"""Cold start and the question path, each figure against the import floor measured in the same
run (`python -c "import onnxruntime, tokenizers, numpy"`: what any local answer must load).
Medians of fresh processes run round-robin, so that a burst of load elsewhere hits all rows
alike; prints Markdown tables; not a test.

    .venv/bin/python benchmarks/cold_start.py [--runs 9]                      # seeds/
    .venv/bin/python benchmarks/cold_start.py --home DIR --index scale [--runs 5]

seeds/ (default): the index is built in a temporary RAG_HOME (not timed), each command is run
once untimed (page cache, the index's snapshot), then `--runs` times each:

  floor                                 import onnxruntime, tokenizers, numpy
  python -c pass                        the interpreter alone
  ONNX floor                            start + rag.embed model load + one query embedding
  rag ask / rag search                  the real commands, local index (a fact question, a
                                        list question and a search)
  thin client                           the same with RAG_SERVER_URL -> a running `rag serve`,
                                        and its floor, `import click, httpx`

--home DIR (an index built before, e.g. by benchmarks/scale_100k.py --keep; RAG_INDEX from
--index): the floor; cold `rag ask --llm none` of a fact and a list question (the list's
length beside it) and `rag search` of the fact question; `rag mcp`'s first `ask` (from
starting the process to the answer, through the MCP SDK's client); the same questions warm,
in one process (`--questions` each after a first one, medians; the list lengths); the
resident memory of a `rag serve` after it answered both kinds and searched; and where a cold
question's time goes (exclusive timers around the parts that could grow with the index, one
fresh process per kind). The questions default to those of benchmarks/scale_100k.py (SciFact
claims, a fact and "Which papers report that ...?"). Ollama is pointed at a closed port, so
nothing waits for a model. Bytecode is written as an installed rag has it (bench_env).

--baseline RAG (another build's `rag`, e.g. an older checkout's .venv/bin/rag) adds its cold
`rag ask`/`rag search` rows, its `rag mcp` first call and its `rag serve` memory, run
round-robin with this build's: before and after in one run. On seeds/ it gets a temporary
home of its own; with --home give it --baseline-home, a RAG_HOME whose `chroma` is a symlink
to the same index (each build keeps its own caches beside it).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
from _bench import (
    PY,
    RAG,
    ROOT,
    bench_env,
    load,
    median,
    rss_mb,
    run,
    serve,
    table,
    temp_home,
    verdict,
    wait_for_quiet,
)

HERE = Path(__file__).resolve()
FLOOR = "python -c 'import onnxruntime, tokenizers, numpy' (floor)"
FACT = "What speedup does Skrull report over DeepSpeed?"
LIST = "Which papers study long-context training?"
SEARCH = "which systems target long-sequence training?"
HEAVY = ("chromadb", "onnxruntime", "numpy", "bm25s", "scipy", "pydantic", "pydantic_settings",
         "llama_index", "tokenizers", "torch", "rag.retrieve", "rag.store", "rag.config", "rag.answering")
SEEDS_TARGET = (0.6, 4.0)  # cold `rag ask --llm none` on seeds/: seconds, and times the floor
HOME_TARGETS = {"fact": 1.5, "list": 3.0, "warm list": 1.0, "serve MB": 1000.0}


def imported_modules(cmd: list[str], env: dict[str, str]) -> set[str]:
    proc = subprocess.run([PY, "-X", "importtime", *cmd], env=env, cwd=ROOT, capture_output=True,
                          text=True, check=True)
    return {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines()
            if line.startswith("import time:") and "|" in line}


def round_robin(commands: list[tuple[str, list[str], dict[str, str]]], runs: int) -> dict[str, list[float]]:
    for _, cmd, env in commands:  # untimed: the page cache, the index's snapshot
        run(cmd, env)
    times: dict[str, list[float]] = {name: [] for name, _, _ in commands}
    for _ in range(runs):
        for name, cmd, env in commands:
            times[name].append(run(cmd, env))
    return times


def rows_against_floor(times: dict[str, list[float]], targets: dict[str, str]) -> list[list[object]]:
    floor = median(times[FLOOR])
    return [[name, f"{median(ts):.2f}", f"{min(ts):.2f}", f"{max(ts):.2f}",
             f"{median(ts) / floor:.1f}", targets.get(name, "")] for name, ts in times.items()]


def answered(cmd: list[str], env: dict[str, str]) -> dict[str, Any]:
    out = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return json.loads(out)  # type: ignore[no-any-return]


# -- seeds/ ------------------------------------------------------------------------------------


def seeds(runs: int, baseline: str | None) -> None:
    floor_embed = ("from rag.config import get_settings; from rag.embed import get_embedder;"
                   "s = get_settings(); get_embedder(s.model_cache, s.embed_threads).embed(['q'])")
    ask = "rag ask --llm none --json (fact question)"
    with temp_home() as home, temp_home() as other:
        env = bench_env(home)
        run([RAG, "ingest", "-q"], env)
        base_env = bench_env(other)
        if baseline:
            run([baseline, "ingest", "-q"], base_env)
        with serve(env) as server:
            remote = bench_env(home, RAG_SERVER_URL=server.url)
            commands = [
                (FLOOR, [PY, "-c", "import onnxruntime, tokenizers, numpy"], env),
                ("python -c pass (interpreter)", [PY, "-c", "pass"], env),
                ("ONNX floor: start + model load + 1 query embedding", [PY, "-c", floor_embed], env),
                (ask, [RAG, "ask", FACT, "--llm", "none", "--json"], env),
                ("rag ask --llm none --json (list question)", [RAG, "ask", LIST, "--llm", "none", "--json"], env),
                ("rag search --json", [RAG, "search", SEARCH, "--json"], env),
                ("python -c 'import click, httpx' (thin-client floor)", [PY, "-c", "import click, httpx"], env),
                ("RAG_SERVER_URL=… rag search --json (thin client)", [RAG, "search", SEARCH, "--json"], remote),
                ("RAG_SERVER_URL=… rag ask --llm none --json (thin client)",
                 [RAG, "ask", FACT, "--llm", "none", "--json"], remote),
            ]
            if baseline:
                commands += [
                    (f"baseline {ask}", [baseline, "ask", FACT, "--llm", "none", "--json"], base_env),
                    ("baseline rag search --json", [baseline, "search", SEARCH, "--json"], base_env),
                ]
            before = load()
            times = round_robin(commands, runs)
            after = load()
            answer_ms = answered([RAG, "ask", FACT, "--llm", "none", "--json"], env)["timings_ms"]["total"]
            thin = imported_modules([RAG, "ask", FACT, "--llm", "none", "--json"], remote)
    floor, cold = median(times[FLOOR]), median(times[ask])
    seconds, factor = SEEDS_TARGET
    targets = {ask: f"<= {seconds} s: {verdict(cold, seconds)}; <= {factor:g}x floor: "
                    f"{verdict(cold / floor, factor)}"}
    print(f"\nCold start on seeds/: median of {runs} fresh processes each (round-robin)\n"
          f"{before} before, {after} after\n")
    print(table(["command", "median s", "min s", "max s", "x floor", "target"],
                rows_against_floor(times, targets)))
    print(f"\nrag ask (local): the pipeline's own timings_ms.total is {answer_ms:.0f} ms of the "
          f"{cold * 1000:.0f} ms; the rest is interpreter start, imports, opening Chroma and "
          f"loading the model. Thin client: heavy modules imported: "
          + (", ".join(m for m in HEAVY if m in thin) or "none"))


# -- an index built before ----------------------------------------------------------------------


def scale_questions(n: int) -> dict[str, list[str]]:
    sys.path.insert(0, str(HERE.parent))
    from scale_100k import questions

    return questions(n)


def worker_warm(n: int) -> dict[str, Any]:
    """In this process: a first question (it reads what depends on the index), then n fact and n
    list questions, each timed."""
    sys.path.insert(0, str(ROOT))
    from rag.answering import Pipeline
    from rag.config import get_settings
    from rag.schema import AskOptions

    asked = scale_questions(n)
    pipeline = Pipeline(get_settings())
    opts = AskOptions(llm="none")
    t = time.perf_counter()
    pipeline.answer(asked["fact"][0], opts)
    out: dict[str, Any] = {"first": time.perf_counter() - t}
    for kind, qs in asked.items():
        times, lengths = [], []
        for q in qs:
            t = time.perf_counter()
            answer = pipeline.answer(q, opts)
            times.append(time.perf_counter() - t)
            lengths.append(len(answer.sources))
        out[kind] = {"median_s": median(times), "max_s": max(times), "sources": median(lengths)}
    return out


def worker_phases(question: str) -> dict[str, Any]:
    """In this (fresh) process: one question, with exclusive timers around the parts that
    could grow with the index."""
    t = time.perf_counter()
    sys.path.insert(0, str(HERE.parent))
    sys.path.insert(0, str(ROOT))
    from ingest_speed import _Timers

    import rag.embed
    import rag.relevance.stats
    import rag.retrieve.hybrid
    import rag.retrieve.snapshot
    import rag.store
    import rag.store.collection
    from rag.answering import Pipeline
    from rag.config import get_settings
    from rag.schema import AskOptions

    timers = _Timers()
    timers.wrap(rag.store.collection, "import_chromadb", "import chromadb")
    timers.wrap(rag.store.Store, "__init__", "open Chroma (client, collections)")
    timers.wrap(rag.store.Store, "count", "Chroma count")
    timers.wrap(rag.store.Store, "query_ids", "dense query (the first loads the HNSW graph)")
    timers.wrap(rag.store.Store, "sentences", "stored sentences (Chroma get)")
    timers.wrap(rag.retrieve.hybrid, "load_snapshot", "the index's snapshot (open)")
    timers.wrap(rag.retrieve.snapshot.Snapshot, "bm25_ranking", "BM25 ranking")
    timers.wrap(rag.relevance.stats, "cached", "relevance statistics (read)")
    timers.wrap(rag.relevance.stats, "cached_probes", "relevance probes (read)")
    timers.wrap(rag.embed.Embedder, "__init__", "model load")
    timers.wrap(rag.embed.Embedder, "embed", "embedding")
    imports = time.perf_counter() - t
    t = time.perf_counter()
    answer = Pipeline(get_settings()).answer(question, AskOptions(llm="none"))
    took = time.perf_counter() - t
    parts = dict(timers.total)
    parts["the rest of the answer"] = took - sum(parts.values())
    return {"imports": imports, "answer": took, "parts": parts, "sources": len(answer.sources)}


def mcp_first_call(env: dict[str, str], question: str, rag: str = RAG) -> float:
    """From starting `rag mcp` to its first `ask` answered."""
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=rag, args=["mcp", "--llm", "none"], env=env, cwd=str(ROOT))

    async def main() -> float:
        start = time.perf_counter()
        async with Client(params) as client:
            result = await client.call_tool("ask", {"question": question})
            took = time.perf_counter() - start
            if result.is_error:
                raise SystemExit(f"rag mcp: {result.content[0].text}")
        return took

    return anyio.run(main)


def serve_memory(env: dict[str, str], asked: dict[str, list[str]], rag: str = RAG) -> tuple[float, float]:
    with serve(env, rag=rag, timeout=1800) as server, httpx.Client(base_url=server.url, timeout=300) as c:
        for kind in ("fact", "list"):
            c.post("/ask", json={"question": asked[kind][0], "llm": "none"}).raise_for_status()
        for q in asked["fact"][:3]:
            c.get("/search", params={"q": q}).raise_for_status()
        return rss_mb(server.pid)


def home(path: Path, index: str, runs: int, n: int, baseline: str | None = None,
         baseline_home: Path | None = None) -> None:
    env = bench_env(path, RAG_INDEX=index, RAG_SEEDS=str(path / "no-seeds"))
    other = baseline_home or path
    base_env = bench_env(other, RAG_INDEX=index, RAG_SEEDS=str(other / "no-seeds"))
    asked = scale_questions(max(n, 1))
    fact, listq = asked["fact"][0], asked["list"][0]
    ask = [RAG, "ask", "--llm", "none", "--json"]
    names = {"fact": "rag ask --llm none --json (fact question)",
             "list": "rag ask --llm none --json (list question)"}
    commands = [
        (FLOOR, [PY, "-c", "import onnxruntime, tokenizers, numpy"], env),
        (names["fact"], [*ask, fact], env),
        (names["list"], [*ask, listq], env),
        ("rag search --json (the fact question)", [RAG, "search", fact, "--json"], env),
    ]
    if baseline:
        bask = [baseline, "ask", "--llm", "none", "--json"]
        commands += [(f"baseline {names['fact']}", [*bask, fact], base_env),
                     (f"baseline {names['list']}", [*bask, listq], base_env),
                     ("baseline rag search --json (the fact question)",
                      [baseline, "search", fact, "--json"], base_env)]
    before = load()
    times = round_robin(commands, runs)
    mcp = "rag mcp: start to first `ask` answered"
    times[mcp], base_mcp = [], []
    for _ in range(runs):
        times[mcp].append(mcp_first_call(env, fact))
        if baseline:
            base_mcp.append(mcp_first_call(base_env, fact, baseline))
    if baseline:
        times[f"baseline {mcp}"] = base_mcp
    length = len(answered([*ask, listq], env)["citations"])
    proc = subprocess.run([PY, str(HERE), "--worker", "--questions", str(n)], env=env, cwd=ROOT,
                          capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"warm worker failed:\n{proc.stderr[-3000:]}")
    warm = json.loads(proc.stdout.strip().splitlines()[-1])
    phases = {}
    for kind, q in (("fact", fact), ("list", listq)):
        proc = subprocess.run([PY, str(HERE), "--phases", q], env=env, cwd=ROOT, capture_output=True,
                              text=True)
        if proc.returncode:
            raise SystemExit(f"phases worker failed:\n{proc.stderr[-3000:]}")
        phases[kind] = json.loads(proc.stdout.strip().splitlines()[-1])
    rss, hwm = serve_memory(env, asked)
    base_rss = serve_memory(base_env, asked, baseline) if baseline else None
    after = load()
    floor = median(times[FLOOR])
    targets = {names["fact"]: f"<= {HOME_TARGETS['fact']} s: {verdict(median(times[names['fact']]), HOME_TARGETS['fact'])}",
               names["list"]: f"<= {HOME_TARGETS['list']} s: {verdict(median(times[names['list']]), HOME_TARGETS['list'])}"}
    rows = rows_against_floor(times, targets)
    rows[2][0] = f"{names['list']}; lists {length} papers"
    if baseline:
        base_length = len(answered([*bask, listq], base_env)["citations"])
        rows = [[f"{r[0]}; lists {base_length} papers" if r[0] == f"baseline {names['list']}" else r[0],
                 *r[1:]] for r in rows]
    wl = warm["list"]["median_s"]
    rows += [
        ["warm: first question of a process", f"{warm['first']:.2f}", "", "", f"{warm['first'] / floor:.1f}", ""],
        [f"warm fact question (median of {n}; max {warm['fact']['max_s']:.2f} s)",
         f"{warm['fact']['median_s']:.2f}", "", "", f"{warm['fact']['median_s'] / floor:.1f}", ""],
        [f"warm list question (median of {n}; max {warm['list']['max_s']:.2f} s; median "
         f"{warm['list']['sources']:g} papers listed)", f"{wl:.2f}", "", "", f"{wl / floor:.1f}",
         f"<= {HOME_TARGETS['warm list']} s: {verdict(wl, HOME_TARGETS['warm list'])}"],
        ["rag serve resident memory after a fact and a list answer and 3 searches (VmRSS / peak MB)",
         f"{rss:.0f} / {hwm:.0f}", "", "", "",
         f"<= {HOME_TARGETS['serve MB']:.0f} MB: {verdict(rss, HOME_TARGETS['serve MB'])}"],
    ]
    if base_rss:
        rows.append(["baseline rag serve resident memory, the same (VmRSS / peak MB)",
                     f"{base_rss[0]:.0f} / {base_rss[1]:.0f}", "", "", "", ""])
    print(f"\nThe question path on {path} (index '{index}'): cold rows are medians of {runs} fresh "
          f"processes each (round-robin); {before} before, {after} after\n")
    print(table(["what", "median s", "min s", "max s", "x floor", "target"], rows))
    print(f"\nfact question: {fact!r}\nlist question: {listq!r}")
    labels = sorted({k for p in phases.values() for k in p["parts"]},
                    key=lambda k: -phases["list"]["parts"].get(k, 0.0))
    print(f"\nWhere a cold question's time goes (one fresh process each; exclusive ms; imports "
          f"before the pipeline: fact {phases['fact']['imports'] * 1000:.0f} ms, list "
          f"{phases['list']['imports'] * 1000:.0f} ms):\n")
    print(table(["part", "fact question", "list question"],
                [[k, *(f"{phases[kind]['parts'].get(k, 0.0) * 1000:.0f}" for kind in ("fact", "list"))]
                 for k in labels]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--home", type=Path, help="measure this RAG_HOME's index instead of seeds/")
    ap.add_argument("--index", default="default", help="the index under --home (RAG_INDEX)")
    ap.add_argument("--questions", type=int, default=10, help="warm fact and list questions each")
    ap.add_argument("--wait-quiet", type=float, default=0.0, metavar="SECONDS",
                    help="first wait up to this long for the 1-minute load to drop below 1.5")
    ap.add_argument("--baseline", metavar="RAG", help="another build's `rag`, timed alongside")
    ap.add_argument("--baseline-home", type=Path, metavar="DIR",
                    help="with --home: the baseline's RAG_HOME (its `chroma` a symlink to --home's)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--phases", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.phases:
        print(json.dumps(worker_phases(args.phases)))
        return
    if args.worker:
        print(json.dumps(worker_warm(args.questions)))
        return
    wait_for_quiet(timeout=args.wait_quiet)
    if args.home:
        home(args.home, args.index, args.runs, args.questions, args.baseline, args.baseline_home)
    else:
        seeds(args.runs, args.baseline)


if __name__ == "__main__":
    main()
