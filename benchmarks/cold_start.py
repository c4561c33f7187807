"""Cold-start wall time of `rag ask` / `rag search` in fresh processes, against baselines
measured in the same run. Prints medians of several runs; not a test.

    .venv/bin/python benchmarks/cold_start.py [--runs 7] [--wait-quiet 600]

A seeds/ index is built in a temporary RAG_HOME first (not timed), each command is run once
untimed (page cache, the BM25 snapshot's disk cache), then the commands are run round-robin
`--runs` times each, so that a burst of load elsewhere hits all of them alike. Rows:

  python -c pass                        the interpreter alone
  import sentence_transformers          the naive stack (what this is compared against)
  ONNX floor                            start + rag.embed model load + one query embedding
  rag search/ask                        the real commands, local index
  thin client                           the same with RAG_SERVER_URL -> a running `rag serve`
  import click, httpx                   the floor of the thin client

and which heavy modules the thin client imports (from `python -X importtime`).
Ollama is pointed at a closed port, so nothing waits for a model.
"""

from __future__ import annotations

import argparse
import json
import subprocess

from _bench import (
    PY,
    RAG,
    ROOT,
    bench_env,
    load,
    median,
    run,
    serve,
    table,
    temp_home,
    verdict,
    wait_for_quiet,
)

Q = "which systems target long-sequence training?"
HEAVY = ("chromadb", "onnxruntime", "numpy", "bm25s", "scipy", "pydantic", "pydantic_settings",
         "llama_index", "tokenizers", "torch", "rag.retrieve", "rag.store", "rag.config", "rag.answering")


def imported_modules(cmd: list[str], env: dict[str, str]) -> set[str]:
    proc = subprocess.run([PY, "-X", "importtime", *cmd], env=env, cwd=ROOT, capture_output=True,
                          text=True, check=True)
    mods = set()
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            mods.add(line.rsplit("|", 1)[1].strip())
    return mods


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--wait-quiet", type=float, default=0.0, metavar="SECONDS",
                    help="first wait up to this long for the 1-minute load to drop below 1.5")
    args = ap.parse_args()
    wait_for_quiet(timeout=args.wait_quiet)

    floor = ("from rag.config import get_settings; from rag.embed import get_embedder;"
             "s = get_settings(); get_embedder(s.model_cache, s.embed_threads).embed(['q'])")
    with temp_home() as home:
        env = bench_env(home)
        run([RAG, "ingest", "-q"], env)
        with serve(env) as server:
            remote = bench_env(home, RAG_SERVER_URL=server.url)
            commands: list[tuple[str, list[str], dict[str, str]]] = [
                ("python -c pass (interpreter)", [PY, "-c", "pass"], env),
                ("python -c 'import sentence_transformers' (naive stack)",
                 [PY, "-c", "import sentence_transformers"], env),
                ("ONNX floor: start + model load + 1 query embedding", [PY, "-c", floor], env),
                ("rag search --json Q", [RAG, "search", Q, "--json"], env),
                ("rag ask --llm none --json Q", [RAG, "ask", Q, "--llm", "none", "--json"], env),
                ("python -c 'import click, httpx' (thin-client floor)",
                 [PY, "-c", "import click, httpx"], env),
                ("RAG_SERVER_URL=… rag search --json Q (thin client)",
                 [RAG, "search", Q, "--json"], remote),
                ("RAG_SERVER_URL=… rag ask --llm none --json Q (thin client)",
                 [RAG, "ask", Q, "--llm", "none", "--json"], remote),
            ]
            for _, cmd, e in commands:  # untimed warm-up
                run(cmd, e)
            before = load()
            times: dict[str, list[float]] = {name: [] for name, _, _ in commands}
            for _ in range(args.runs):
                for name, cmd, e in commands:
                    times[name].append(run(cmd, e))
            after = load()
            # Where an ask's time goes: the pipeline's own timer vs the process around it.
            out = subprocess.run([RAG, "ask", Q, "--llm", "none", "--json"], env=env, cwd=ROOT,
                                 capture_output=True, text=True, check=True).stdout
            answer_ms = json.loads(out)["timings_ms"]["total"]
            thin_mods = imported_modules([RAG, "ask", Q, "--llm", "none", "--json"], remote)
            server_side = json.loads(subprocess.run(
                [RAG, "ask", Q, "--llm", "none", "--json"], env=remote, cwd=ROOT,
                capture_output=True, text=True, check=True).stdout)["timings_ms"]["total"]

    med = {name: median(ts) for name, ts in times.items()}
    naive = med[commands[1][0]]
    targets = {commands[4][0]: 2.5, commands[7][0]: 0.5}
    rows = []
    for name, _, _ in commands:
        target = targets.get(name)
        rows.append([name, f"{med[name]:.2f}", f"{min(times[name]):.2f}", f"{max(times[name]):.2f}",
                     f"{med[name] / naive:.2f}",
                     f"<= {target} s: {verdict(med[name], target)}" if target else ""])
    print(f"\nCold start: median of {args.runs} fresh processes each (round-robin), seeds/ index "
          f"built\n{before} before, {after} after\n")
    print(table(["command", "median s", "min s", "max s", "x naive", "target"], rows))
    print(f"\nrag ask (local): the pipeline's own timings_ms.total is {answer_ms:.0f} ms of the "
          f"{med[commands[4][0]] * 1000:.0f} ms; the rest is interpreter start, imports, "
          "opening Chroma and loading the model.")
    print(f"thin client: the server spends {server_side:.0f} ms on the answer; "
          f"{len(thin_mods)} modules imported; heavy ones present: "
          + (", ".join(m for m in HEAVY if m in thin_mods) or "none"))


if __name__ == "__main__":
    main()
